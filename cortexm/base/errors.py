"""The one error type users see: a message that fits on one line."""

import errno


class CortexmError(Exception):
    """A problem with the user's input or environment, said in one line.

    The CLI prints `error: <message>` and exits with status 2; anything else
    that escapes is a bug in cortexm.
    """


class StorageError(CortexmError):
    """A place cortexm must write to cannot take it: a full disk, a read-only or forbidden folder.
    Never a verdict about the code under test: the run stops, and the line names the place."""


# What an OSError says when the disk, not the input, is the problem.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG, errno.EIO})


def storage_error(error: BaseException) -> StorageError | None:
    """The StorageError an OSError is (naming its file), or None for any other error."""
    if isinstance(error, StorageError):
        return error
    if isinstance(error, OSError) and error.errno in STORAGE_ERRNOS:
        where = error.filename if error.filename is not None else "a file cortexm writes"
        return StorageError(f"{where}: {error.strerror or error}")
    return None


class InputsChanged(CortexmError):
    """What a result is keyed by (a source tree, a case file) changed while the result was made:
    it is not cached under either content, and the run stops. Never a verdict about the code."""
