"""Pure figure functions: NumPy arrays and token lists in, plotly Figures out.

No Streamlit and no TensorFlow here: every function can be unit-tested and used in a notebook.
Each module covers one view; shapes are validated with errors naming the sizes received.
"""
