"""Text that reaches a terminal shows what it holds: control characters are escaped.

An operator name, a failure reason, a folder name or a case name can come from a file of
someone else's; a terminal obeys the escape sequences in them (erase a line, move the cursor,
rewrite an `OK`). What cortexm prints goes through `visible`: every C0 and C1 control
character but newline and tab, DEL, and the Unicode controls that reorder or hide text
(bidirectional overrides and isolates, zero-width joiners) are shown as \\xNN or \\uNNNN.

    sys.stdout = EscapingStream(sys.stdout)      # what click and print write
    console = Console(file=raw(sys.stdout))      # rich writes its own styling codes through
"""

from __future__ import annotations

import io
import re

_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def visible(text: str) -> str:
    """`text` with its control characters escaped (newline and tab kept)."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                         text)


class EscapingStream(io.TextIOBase):
    """A text stream whose writes are `visible`. It offers no `buffer`: writers (click) that
    find one write bytes past the escaping."""

    def __init__(self, stream) -> None:
        super().__init__()
        self.raw_stream = stream

    def write(self, text: str) -> int:
        self.raw_stream.write(visible(text))
        return len(text)

    def flush(self) -> None:
        self.raw_stream.flush()

    def isatty(self) -> bool:
        return self.raw_stream.isatty()

    def fileno(self) -> int:
        return self.raw_stream.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]  # TextIOBase declares it an attribute
        return getattr(self.raw_stream, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]  # TextIOBase declares it an attribute
        return getattr(self.raw_stream, "errors", None)


def raw(stream):
    """The stream under an EscapingStream (rich writes its own escape codes there, and escapes
    the text it is given itself: cortexm.report)."""
    return getattr(stream, "raw_stream", stream)


# Characters XML 1.0 cannot hold at all (not even as a character reference).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: str) -> str:
    """`text` as XML 1.0 can hold it: characters it cannot are shown as \\xNN."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                        text)


def json_dumps(data, **kwargs) -> str:
    """Strict JSON: a float without a finite value (NaN, an infinity) is null, never the bare
    NaN that Python writes and other JSON readers refuse."""
    import json
    import math

    def finite(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: finite(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [finite(v) for v in value]
        return value

    return json.dumps(finite(data), allow_nan=False, **kwargs)
