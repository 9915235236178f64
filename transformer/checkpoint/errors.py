"""The one error of every reader of user files: a sentence a user understands."""


class CheckpointError(ValueError):
    """Any reason a checkpoint cannot be loaded, in a sentence a user understands."""
