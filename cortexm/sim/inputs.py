"""What a user gives `cortexm run`: input files, and labels for its classes.

    raw = read_input("mfcc_yes.h", value, 0)       # a C array, as upstream's Arduino examples ship
    raw = read_input("x.npy", value, 0)            # numpy, in the logical shape (e.g. NCHW)
    raw = read_input("x.bin", value, 0)            # raw bytes, already in the program's dim order
    labels = read_labels("KeywordSpotting.ino")    # a string array in C, or one label per line

A .npy or a header holds values, which are cast to the input's dtype and laid out in the
program's dim order. A cast that would change a value is refused (1.5 or 300 into int8; floats
into an int8 input, which wants quantized values), as is a count or shape that differs. A
header with more than one array is read as FILE.h:NAME.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cortexm.base import files
from cortexm.base.errors import CortexmError
from cortexm.pte.program import TensorValue
from cortexm.pte.tensors import DTYPES, read_npy, to_raw

# Inputs of a microcontroller model are small; a text header is ~10 B per value.
MAX_INPUT_FILE = 256 << 20
HEADER_SUFFIXES = (".h", ".hpp", ".c", ".cc", ".cpp", ".ino")

_C_TYPES = {
    "float": np.float32, "double": np.float64,
    "int8_t": np.int8, "signed char": np.int8, "char": np.int8, "q7_t": np.int8,
    "uint8_t": np.uint8, "unsigned char": np.uint8,
    "int16_t": np.int16, "short": np.int16, "q15_t": np.int16, "uint16_t": np.uint16,
    "int32_t": np.int32, "int": np.int32, "q31_t": np.int32, "uint32_t": np.uint32,
    "int64_t": np.int64, "long long": np.int64,
}
_NUMBER = re.compile(r"^[-+]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)[fFuUlL]*$")
_QUALIFIERS = {"static", "const", "constexpr", "volatile", "extern", "inline", "alignas", "signed"}


def read_input(spec: str | Path, value, index: int) -> bytes:
    """The bytes the runner reads for input `index` (`value`: the program's), from a file."""
    path, array_name = split_spec(spec)
    files.regular(path, "input file", MAX_INPUT_FILE)
    what = f"input {index}"
    if path.suffix == ".npy":
        return _layout(read_npy(path, str(path)), value, f"{what}: {path}")
    if path.suffix in HEADER_SUFFIXES:
        return _layout(c_array(path, array_name), value, f"{what}: {path}" + (f":{array_name}" if array_name else ""))
    data = path.read_bytes()
    expected = value.nbytes if isinstance(value, TensorValue) else None
    if expected is not None and len(data) != expected:
        raise CortexmError(f"{what}: {path} has {len(data)} B, the program's input {index} is {value.describe()} = {expected} B "
                           f"(raw bytes in its dim order; a .npy or a C header holds values)")
    return data


def split_spec(spec: str | Path) -> tuple[Path, str | None]:
    """FILE, or FILE.h:ARRAY -> (file, array name)."""
    text = str(spec)
    if not Path(text).exists() and ":" in text:
        head, name = text.rsplit(":", 1)
        if Path(head).suffix in HEADER_SUFFIXES and re.fullmatch(r"[A-Za-z_]\w*", name):
            return Path(head), name
    return Path(text), None


# C source as tokens, in one pass from left to right. No alternative can match what another
# one matched, and every repetition is possessive, so nothing is tried twice: any input,
# however long its lines, reads in linear time (a backtracking pattern took minutes on a
# 100 KB line).
_TOKENS = re.compile(r"""
    (?P<pre>^[ \t]*+\#[^\n]*+)                    # a preprocessor line
  | (?P<str>"(?:[^"\\\n]|\\.)*+"?+)              # a string (one left open ends at the line's end)
  | '(?:[^'\\\n]|\\.)*+'?+                       # a character
  | //[^\n]*+ | /\*(?:[^*]|\*(?!/))*+(?:\*/)?+      # comments (one left open ends at the end)
  | (?<![\w.])(?P<word>[A-Za-z_]\w*+)             # a word (not a number's exponent or suffix)
  | (?P<punct>[][=;{}()*&])
""", re.M | re.X)


@dataclass
class CArray:
    """`TYPE NAME[...] = {...};` in C source."""

    ctype: str  # the element type, without qualifiers (static, const, ...)
    name: str
    body: str  # the initialiser between its outer braces, without comments and strings
    strings: list[str]  # the string literals in it, as written (escapes kept)
    # Inside #if/#ifdef/#else ...: which branch the compiler takes is the preprocessor's to say
    # (an include guard, #ifndef X followed by #define X, is not such a condition).
    conditional: bool = False


def c_arrays(text: str) -> Iterator[CArray]:
    """Every array initialised in C/C++ source `text`, in order: words, `[...]` once or more,
    `=`, a braced initialiser, `;`."""
    words: deque[str] = deque(maxlen=8)  # the declaration so far: qualifiers, type, name
    state, name, ctype, depth, pieces, strings, last = "decl", "", "", 0, [], [], 0
    conditions: list[bool] = []  # per open #if: whether it is a real condition (not an include guard)
    guard: str | None = None  # the macro of an #ifndef just seen, if the next line may define it
    conditional = False  # the array being read started or ran inside a real condition
    for m in _TOKENS.finditer(text):
        word, punct, string = m["word"], m["punct"], m["str"]
        if m["pre"] is not None:
            if state == "body":  # a directive inside an initialiser: not its text, and a condition on it
                pieces.append(text[last:m.start()])
                last = m.end()
            directive = m["pre"].strip()[1:].split()
            keyword = directive[0] if directive else ""
            opened = keyword in ("if", "ifdef", "ifndef")
            if opened:
                conditions.append(True)
            elif keyword == "define" and guard is not None and directive[1:2] == [guard] and conditions:
                conditions[-1] = False  # #ifndef X / #define X: an include guard
            elif keyword in ("else", "elif", "elifdef", "elifndef") and conditions:
                conditions[-1] = True
            elif keyword == "endif" and conditions:
                conditions.pop()
            guard = directive[1] if keyword == "ifndef" and len(directive) > 1 else None
            if state == "body" and (opened or keyword != "define"):
                conditional = True
            continue
        if word is not None or punct is not None:
            guard = None
        if state == "decl" and punct in (";", "{", "}"):
            conditional = False  # a declaration ends here: the next one starts clean
        if any(conditions) and state != "body":
            conditional = True
        if state == "body":  # the initialiser's text, without comments; its strings apart
            pieces.append(text[last:m.start()])
            last = m.end()
            depth += (punct == "{") - (punct == "}")
            if depth == 0 or punct == ";":
                state = "close" if depth == 0 else "decl"
            elif string is not None:
                strings.append(string[1:-1] if len(string) > 1 and string.endswith('"') else string[1:])
            elif word is not None or punct is not None:
                pieces.append(m.group())
            else:
                pieces.append(" ")
            continue
        if word is None and punct is None and string is None and m["pre"] is None:
            continue  # a comment or a character constant
        if state == "dims":  # inside [...]: a size
            if punct == "]":
                state = "after"
            elif word is None:
                state = "decl"
                words.clear()
            continue
        if state == "after" and punct in ("[", "="):
            state = "dims" if punct == "[" else "eq"
            continue
        if state == "eq" and punct == "{":
            state, depth, pieces, strings, last = "body", 1, [], [], m.end()
            continue
        if state == "close" and punct == ";":
            yield CArray(ctype, name, "".join(pieces), strings, conditional or any(conditions))
            conditional = False
        state = "decl"
        if word is not None:
            words.append(word)
        elif punct == "[" and words:
            name, ctype = words[-1], " ".join(w for w in list(words)[:-1] if w not in _QUALIFIERS)
            state = "dims"
            words.clear()
        else:
            words.clear()


def c_array(path: Path, name: str | None = None) -> np.ndarray:
    """The numbers of one array initialised in a C/C++ file (the only one, or `name`), flat."""
    arrays: dict[str, tuple[type | None, str]] = {}
    conditional: set[str] = set()
    for array in c_arrays(path.read_text(errors="replace")):
        if (array.ctype in _C_TYPES or array.ctype.startswith("unsigned")) and not array.strings:
            arrays.setdefault(array.name, (_C_TYPES.get(array.ctype), array.body))
            if array.conditional:
                conditional.add(array.name)
    if not arrays:
        raise CortexmError(f"{path}: no numeric array initialiser (TYPE NAME[] = {{...}};) in it")
    if name is None and len(arrays) > 1:
        raise CortexmError(f"{path} holds {len(arrays)} arrays ({', '.join(arrays)}): name one, as {path}:{next(iter(arrays))}")
    chosen = name or next(iter(arrays))
    if chosen not in arrays:
        raise CortexmError(f"{path}: no numeric array '{chosen}' (it has {', '.join(arrays)})")
    if chosen in conditional:
        raise CortexmError(f"{path}:{chosen}: it sits inside #if/#ifdef/#else, whose branch only the preprocessor can "
                           "choose (cortexm does not run it): give the array outside any condition, or as .npy")
    dtype, body = arrays[chosen]
    if dtype is None:
        raise CortexmError(f"{path}:{chosen}: its element type is not one cortexm knows")
    tokens = [t.strip() for t in body.replace("{", ",").replace("}", ",").split(",") if t.strip()]
    bad = next((t for t in tokens if not _NUMBER.match(t)), None)
    if bad is not None:
        raise CortexmError(f"{path}:{chosen}: '{bad[:30]}' is not a number literal (macros and expressions are not evaluated)")
    values = [_literal(t) for t in tokens]
    return np.array(values, dtype=np.float64 if dtype in (np.float32, np.float64) else np.int64).astype(dtype)


def _literal(token: str) -> float | int:
    if re.match(r"[-+]?0[xX]", token):
        return int(token.rstrip("uUlL"), 16)
    core = token.rstrip("fFuUlL")
    return float(core) if any(c in core for c in ".eE") else int(core)


def _layout(values: np.ndarray, value, what: str) -> bytes:
    """`values` (logical order) as the input's dtype, in its dim order; refused when that changes them."""
    if not isinstance(value, TensorValue):
        raise CortexmError(f"{what}: the program's input is a {type(value).__name__} scalar: give it as raw bytes")
    sizes = [int(s) for s in value.sizes]
    if values.size != int(np.prod(sizes)):
        raise CortexmError(f"{what}: {values.size} values {list(values.shape)}, the input is {value.describe()} "
                           f"({int(np.prod(sizes))} values)")
    if values.ndim > 1 and [s for s in values.shape if s != 1] != [s for s in sizes if s != 1]:
        raise CortexmError(f"{what}: shape {list(values.shape)}, the input is {value.describe()}")
    target = DTYPES.get(value.dtype)
    if target is None:
        raise CortexmError(f"{what}: the input's dtype {value.dtype} has no numpy type")
    if values.dtype.kind not in "biuf":
        raise CortexmError(f"{what}: holds {values.dtype} values, not numbers")
    cast = values.astype(target)
    if np.dtype(target).kind != "f":
        changed = cast.astype(np.float64) != values.astype(np.float64)
        if changed.any():
            first = values.flat[int(np.argmax(changed))]
            wants_quantized = values.dtype.kind == "f" and value.dtype in ("int8", "uint8", "int16")
            hint = " (it wants quantized values)" if wants_quantized else ""
            raise CortexmError(f"{what}: {first!r} does not fit the input's {value.dtype}{hint}")
    return to_raw(cast.reshape(sizes), list(value.dim_order))


def read_labels(path: str | Path) -> list[str]:
    """Class names: the first array of strings in a C/C++/.ino file (upstream's kLabels), else
    one per line of a text file."""
    path = files.regular(path, "labels file", 16 << 20)
    text = path.read_text(errors="replace")
    if path.suffix in HEADER_SUFFIXES:
        labels = next((a.strings for a in c_arrays(text) if a.strings and not a.body.strip(", \t\r\n")), None)
        if labels is None:
            raise CortexmError(f"{path}: no array of strings (NAME[] = {{\"a\", \"b\"}}) in it")
        return labels
    return [line.strip() for line in text.splitlines() if line.strip()]


def top_classes(values: np.ndarray, k: int) -> list[tuple[int, float]] | None:
    """(class index, score) of the `k` highest scores, when `values` looks like a classifier's
    output (one dimension of 2 or more, the others 1), else None."""
    if values.size < 2 or sum(s > 1 for s in values.shape) != 1 or k <= 0:
        return None
    flat = values.astype(np.float64).reshape(-1)
    order = np.argsort(-flat, kind="stable")[:k]
    return [(int(i), float(flat[i])) for i in order]
