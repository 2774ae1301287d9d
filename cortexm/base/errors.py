"""The one error type users see: a message that fits on one line."""


class CortexmError(Exception):
    """A problem with the user's input or environment, said in one line.

    The CLI prints `error: <message>` and exits with status 2; anything else
    that escapes is a bug in cortexm.
    """
