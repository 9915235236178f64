"""What the server tells its pages, through environment variables: explorer.serve sets them from
its command line, explorer.state reads them. Here, so that neither imports the other (the server
warms the app, whose pages read the state)."""

# the models the person running the server named (--model), a JSON list
SERVED_MODELS = "EXPLORER_MODELS"
# whether the sidebar may open a model by name or folder: "1" for a server on localhost, "0" for
# one started for others
OPEN_BY_NAME = "EXPLORER_OPEN_BY_NAME"
