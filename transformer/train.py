"""python -m transformer.train: training's command line (transformer.training.train)."""

import sys

from transformer.training.train import main

if __name__ == "__main__":
    sys.exit(main())
