"""python -m transformer.train: training's command line (transformer.training.fit)."""

import sys

from transformer.training.fit import main

if __name__ == "__main__":
    sys.exit(main())
