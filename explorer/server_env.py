"""What the server tells its pages, through environment variables: explorer.serve sets them from
its command line, explorer.state reads them. Here, so that neither imports the other (the server
warms the app, whose pages read the state)."""

import json
import os

# the models the person running the server named (--model), a JSON list
SERVED_MODELS = "EXPLORER_MODELS"
# whether the sidebar may open a model by name or folder: "1" for a server on localhost, "0" for
# one started for others
OPEN_BY_NAME = "EXPLORER_OPEN_BY_NAME"


def served_models() -> list[str]:
    """The folders or Hugging Face names the server was started with (--model), in order."""
    try:
        names = json.loads(os.environ.get(SERVED_MODELS, "[]"))
    except ValueError:
        return []
    return [n for n in names if isinstance(n, str) and n] if isinstance(names, list) else []
