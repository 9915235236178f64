"""A quiet terminal: TensorFlow's native start-up lines ("Could not find cuda drivers on your
machine", "failed call to cuInit", the CPU instructions this build does not use, "All log
messages before absl::InitializeLog() ...") kept off it (issue 38: `make run` printed a dozen
of them before the URL). explorer's import brings TensorFlow in inside native_stderr_quiet, with
TF_CPP_MIN_LOG_LEVEL 2 unless set (no INFO or WARNING lines later; errors still print)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile


@contextlib.contextmanager
def native_stderr_quiet():
    """TensorFlow's native start-up lines ("Could not find cuda drivers", "failed call to
    cuInit", the CPU instructions it was not built for) go to a temporary file instead of the
    terminal; shown after all when what runs inside raises."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            caught.seek(0)
            sys.stderr.write(caught.read().decode("utf-8", "replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
