"""`python -m explorer.serve [streamlit run options]`: the app's server (`streamlit run
app.py`), with the default model prepared while it starts (explorer.warm)."""

from __future__ import annotations

import sys
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app.py"


def main(argv: list[str] | None = None) -> None:
    from streamlit.web import cli

    from . import warm

    warm.start()  # waits for the runtime the command below creates
    sys.argv = ["streamlit", "run", str(APP), *(sys.argv[1:] if argv is None else argv)]
    cli.main()


if __name__ == "__main__":
    main()
