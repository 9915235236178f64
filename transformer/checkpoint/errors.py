"""The one error of every reader of user files, in a message a user understands."""


class CheckpointError(ValueError):
    """Any reason a checkpoint cannot be loaded, in an error message a user understands."""
