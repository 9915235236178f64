import os

# Quiet TensorFlow's start-up logging and keep the suite deterministic on 2 CPU cores.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
