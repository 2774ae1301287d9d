"""Flash and RAM of a runner ELF, broken down by the component each byte came from.

The ELF (pyelftools) says which sections take flash (code, read-only data, the
initial values of .data) and which RAM (.data, .bss, heap, stack); the linker map
says which object or archive member every input section of them came from, and
the archive names the component (kernels/CMakeLists.txt builds one library per
component). A model loaded at run time is not in the ELF: given its .pte, its
size is shown as the flash it would take embedded and the RAM its planned
buffers take.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from cortexm.base.errors import CortexmError
from cortexm.pte import load

# First match wins: (pattern on the object file a section came from, component).
COMPONENTS = (
    (re.compile(r"libexecutorch_core\.a\("), "ExecuTorch core"),
    (re.compile(r"/kernel_registration\.dir/"), "kernel registration"),
    (re.compile(r"libportable_kernels\.a\("), "portable kernels"),
    (re.compile(r"libcortex_m_kernels\.a\("), "cortex_m kernels"),
    (re.compile(r"libcmsis-nn\.a\("), "CMSIS-NN"),
    (re.compile(r"/executor_runner\.dir/"), "runner"),
    (re.compile(r"/board\.dir/"), "board support"),
    (re.compile(r"(lib(c|g|m|rdimon|nosys|stdc\+\+|supc\+\+|gcc)(_nano)?\.a\()|(crt\w*\.o$)"), "libc, libstdc++"),
)
RESERVED = {".heap": "heap and stack", ".stack": "heap and stack"}
OTHER = "other (alignment, linker)"


@dataclass
class Component:
    name: str
    flash: int = 0
    ram: int = 0


@dataclass
class Footprint:
    elf: Path
    components: list[Component]
    arena: int  # RAM left for models at run time (board's ARENA region)
    model: Component | None = None
    model_file: Path | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def flash(self) -> int:
        return sum(c.flash for c in self.components)

    @property
    def ram(self) -> int:
        return sum(c.ram for c in self.components)

    def as_dict(self) -> dict:
        return {
            "elf": str(self.elf),
            "flash": self.flash,
            "ram": self.ram,
            "arena": self.arena,
            "components": [asdict(c) for c in self.components],
            "model": asdict(self.model) if self.model else None,
            "model_file": str(self.model_file) if self.model_file else None,
        }


def component_of(object_file: str) -> str:
    for pattern, name in COMPONENTS:
        if pattern.search(object_file):
            return name
    return OTHER


def footprint(elf: Path, map_file: Path, model: Path | None = None) -> Footprint:
    try:
        contributions = parse_map(Path(map_file).read_text(errors="replace"))
    except OSError:
        raise CortexmError(f"{map_file}: no linker map beside the runner (rebuild it with `cortexm build --fresh`)") from None
    flash: dict[str, int] = defaultdict(int)
    ram: dict[str, int] = defaultdict(int)
    with open(elf, "rb") as f:
        image = ELFFile(f)
        for section in image.iter_sections():
            if not section["sh_flags"] & SH_FLAGS.SHF_ALLOC or section["sh_size"] == 0:
                continue
            in_flash = section["sh_type"] != "SHT_NOBITS"
            in_ram = bool(section["sh_flags"] & SH_FLAGS.SHF_WRITE)
            for name, size in _attribute(section.name, section["sh_size"], contributions.get(section.name, {})).items():
                if in_flash:
                    flash[name] += size
                if in_ram:
                    ram[name] += size
        arena = _arena_size(image)
    order = [name for _, name in COMPONENTS] + ["heap and stack", OTHER]
    components = [Component(n, flash[n], ram[n]) for n in order if flash[n] or ram[n]]
    result = Footprint(Path(elf), components, arena)
    if model is not None:
        program = load(model)
        planned = sum(sum(p.non_const_buffer_sizes[1:]) for p in program.plans)
        result.model = Component("model", program.file_size, planned)
        result.model_file = Path(model)
        result.notes.append("the model is loaded at run time: its flash is what it would take embedded, "
                            "its RAM the planned buffers (in the arena)")
    return result


def _attribute(section: str, size: int, pieces: dict[str, int]) -> dict[str, int]:
    """Bytes of one output section per component; what no input section explains is 'other'."""
    if section in RESERVED:
        return {RESERVED[section]: size}
    shares: dict[str, int] = defaultdict(int)
    listed = sum(pieces.values())
    if listed > size:
        # The map lists mergeable constants (strings) before the linker merged the
        # duplicates: share what is left in proportion.
        for name, n in pieces.items():
            shares[name] += n * size // listed
    else:
        shares.update(pieces)
    rest = size - sum(shares.values())
    if rest > 0:
        shares[OTHER] += rest
    return shares


def _arena_size(image: ELFFile) -> int:
    symbols = image.get_section_by_name(".symtab")
    if not isinstance(symbols, SymbolTableSection):
        return 0
    found = {s.name: s["st_value"] for s in symbols.iter_symbols() if s.name in ("__arena_start", "__arena_end")}
    return max(0, found.get("__arena_end", 0) - found.get("__arena_start", 0))


_OUTPUT_SECTION = re.compile(r"^(\.\S+)")
_INPUT_SECTION = re.compile(r"^ (\S+)\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s*(.*)$")
_WRAPPED_NAME = re.compile(r"^ ([.\w][^\s]*)$")
_WRAPPED_REST = re.compile(r"^\s{2,}0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(\S.*)$")


def parse_map(text: str) -> dict[str, dict[str, int]]:
    """GNU ld map -> {output section: {component: bytes}} from its input sections."""
    start = text.find("Linker script and memory map")
    if start < 0:
        raise CortexmError("not a GNU ld map file (no 'Linker script and memory map')")
    result: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    current = None
    wrapped = None
    for line in text[start:].splitlines():
        m = _OUTPUT_SECTION.match(line)
        if m:
            current, wrapped = m.group(1), None
            continue
        if current is None:
            continue
        m = _INPUT_SECTION.match(line)
        if m:
            wrapped = None
            name, size, source = m.group(1), int(m.group(3), 16), m.group(4).strip()
            if size and name != "*fill*" and not name.startswith("*("):
                result[current][component_of(source)] += size
            continue
        m = _WRAPPED_REST.match(line)
        if m and wrapped:
            result[current][component_of(m.group(3).strip())] += int(m.group(2), 16)
            wrapped = None
            continue
        m = _WRAPPED_NAME.match(line)
        wrapped = m.group(1) if m and not line.strip().startswith(("*", "KEEP")) else None
    return result
