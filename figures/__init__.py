"""Pure figure functions: NumPy arrays and token lists in, plotly Figures out.

No Streamlit and no TensorFlow here: every function can be unit-tested and used in a notebook.
Each module covers one view; shapes are validated with errors naming the sizes received.
Token axes put cells at positions and tick them with the tokens as they are (common.token_axis);
the attention kinds, head labels and head masks come from transformer.core.kinds; the blocked score
is received from the caller (transformer.core.masking.BLOCKED_SCORE), never imported here.
"""
