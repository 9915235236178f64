"""python -m transformer.convert: the importers' command line (transformer.importers.cli)."""

import sys

from transformer.importers.cli import main

if __name__ == "__main__":
    sys.exit(main())
