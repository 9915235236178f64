"""`python -m explorer.serve [--model NAME_OR_DIR ...] [--open-by-name | --no-open-by-name]
[streamlit run options]`: the app's server (`streamlit run app.py`), with the first model
prepared while it starts (explorer.warm).

--model NAME_OR_DIR (repeatable): a Hugging Face model's folder or its name on the hub (the
local cache first, else downloaded: transformer.importers.hf.hub), opened with this machine's
budgets (transformer.core.limits.named_budgets); the named models are in the sidebar's picker,
the first one active. The sidebar's "Open a model by name or folder" is on for a server bound to
localhost (`make run` binds it there) and off for one started for others (any other
--server.address, or Streamlit's default of every interface); --open-by-name or
--no-open-by-name says it outright. Every other argument goes to Streamlit.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

from .server_env import OPEN_BY_NAME, SERVED_MODELS  # what the pages are told

APP = Path(__file__).resolve().parent.parent / "app.py"
LOCAL_ADDRESSES = ("localhost", "127.0.0.1", "::1")


def parse(argv: list[str]) -> tuple[list[str], bool, list[str]]:
    """(the models named with --model, in order; whether opening by name is on; the arguments
    left for Streamlit)."""
    models, rest, forced = [], [], None
    address = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--model" or arg.startswith("--model="):
            value = arg.partition("=")[2] if "=" in arg else (
                argv[i + 1] if i + 1 < len(argv) else "")
            if not value.strip():
                raise SystemExit("--model needs a folder or a Hugging Face name.")
            models.append(value.strip())
            i += 1 if "=" in arg else 2
            continue
        if arg in ("--open-by-name", "--no-open-by-name"):
            forced = arg == "--open-by-name"
            i += 1
            continue
        if arg == "--server.address" and i + 1 < len(argv):
            address = argv[i + 1]
        elif arg.startswith("--server.address="):
            address = arg.partition("=")[2]
        rest.append(arg)
        i += 1
    local = address is not None and address.strip("[]") in LOCAL_ADDRESSES
    return models, (local if forced is None else forced), rest


# Streamlit's warning for a thread that calls it outside a page's run ("missing
# ScriptRunContext! This warning can be ignored when running in bare mode"): the warm start and
# the model preparations do so on purpose (explorer.warm), so theirs are not printed.
OUR_THREADS = ("warm-start", "prepare-model", "translation")
QUIET_STREAMLIT = ("--logger.level", "error")  # no "Uvicorn server started" lines (overridable)


class _OurThreads(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.args and isinstance(record.args, tuple)
                    and record.args[0] in OUR_THREADS)


def quiet_start() -> None:
    """Drop Streamlit's warnings about our own threads: `make run` prints Streamlit's few
    lines with the URL, and whatever goes wrong later. (TensorFlow comes in quietly in the
    warm-up thread, explorer.runtime, while the server starts.)"""
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(
        _OurThreads())


def main(argv: list[str] | None = None) -> None:
    quiet_start()
    from streamlit.web import cli

    from . import warm

    models, open_by_name, rest = parse(sys.argv[1:] if argv is None else argv)
    os.environ[SERVED_MODELS] = json.dumps(models)
    os.environ[OPEN_BY_NAME] = "1" if open_by_name else "0"
    if models:
        print(f"Models named: {', '.join(models)} (the first opens while the server starts)",
              file=sys.stderr, flush=True)
    warm.start()  # waits for the runtime the command below creates
    quiet = [] if any(arg.startswith("--logger.level") for arg in rest) else list(QUIET_STREAMLIT)
    sys.argv = ["streamlit", "run", str(APP), *quiet, *rest]
    cli.main()


if __name__ == "__main__":
    main()
