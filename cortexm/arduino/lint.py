"""The checks of `arduino-lint --library-manager submit` that need neither the tool,
the Library Manager index nor the network: library.properties fields, name rules,
folder layout, example sketches.

Rule IDs, briefs and levels are arduino-lint's (internal/rule/ruleconfiguration)
at "specification" compliance in submission mode; patterns are its schemas'
(etc/schemas). Left out, because they need what is not here: LP017 duplicate name
and LP048 depends not in index (the index), LP042 dead URL (the network), LP022
tag mismatch (the publishing repository's tags), LP033/LP035 spell checks (its
misspellings list), LD001 readme (a file of the publishing repository, not generated).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from cortexm.arduino.upstream import read_properties

ERROR, WARNING = "ERROR", "WARNING"
FIELDS = ("name", "version", "author", "maintainer", "sentence", "paragraph", "category", "url", "architectures",
          "depends", "dot_a_linkage", "includes", "precompiled", "ldflags", "email")
NAME = re.compile(r"^(([a-zA-Z][a-zA-Z0-9 _.\-]*)|([0-9][a-zA-Z0-9 _.\-]*[a-zA-Z][a-zA-Z0-9 _.\-]*))*$")
# semver.org's regex; relaxed: MINOR and PATCH optional.
RELAXED_SEMVER = re.compile(r"^(0|[1-9]\d*)(\.(0|[1-9]\d*))?(\.(0|[1-9]\d*))?"
                            r"(-((0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
                            r"(\+([0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*))?$")
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                    r"(-((0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
                    r"(\+([0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*))?$")
_DEP_NAME = r"((([a-zA-Z][a-zA-Z0-9 _.\-]*)|([0-9][a-zA-Z0-9 _.\-]*[a-zA-Z][a-zA-Z0-9 _.\-]*))+( \(.*\) *)?)"
DEPENDS = re.compile(rf"^(({_DEP_NAME}, *)*{_DEP_NAME})?$")
CATEGORIES = ("Display", "Communication", "Signal Input/Output", "Sensors", "Device Control", "Timing",
              "Data Storage", "Data Processing", "Other")
FOLDER_NAME = re.compile(r"^[a-zA-Z0-9_][a-zA-Z0-9_.-]*$")
ARDUINO_H_CASE = re.compile(r'^\s*#\s*include\s*["<](a((?i:rduino))|(ARDUINO))\.[hH][">]', re.M)
SKETCH_EXTENSIONS = (".ino", ".pde")
SOURCE_EXTENSIONS = (".ino", ".pde", ".h", ".hpp", ".hh", ".c", ".cpp", ".cxx", ".cc", ".S")


@dataclass(frozen=True)
class Problem:
    rule: str
    level: str
    text: str

    def line(self) -> str:
        return f"{self.level} {self.rule} {self.text}"


def check(folder: Path) -> list[Problem]:
    """Every problem found in the library at `folder`, errors first."""
    found: list[Problem] = []

    def fail(rule: str, level: str, text: str) -> None:
        found.append(Problem(rule, level, text))

    properties = folder / "library.properties"
    if not properties.is_file():
        fail("LP001", ERROR, "no library.properties")
        return found
    _layout(folder, fail)
    _properties(folder, read_properties(properties), properties.read_text(encoding="utf-8"), fail)
    _sources(folder, fail)
    _examples(folder, fail)
    return sorted(found, key=lambda p: (p.level != ERROR, p.rule))


def _layout(folder: Path, fail) -> None:
    src = folder / "src"
    if not (src.is_dir() and any(p.suffix in (".h", ".hpp", ".hh") for p in src.iterdir())):
        fail("LS001", ERROR, "no header file in src/: not a valid library")
    names = {p.name for p in folder.iterdir()}
    for correct, rule in (("src", "LS009"), ("extras", "LS012"), ("examples", "LD006"), ("library.properties", "LP003")):
        for name in names:
            if name != correct and name.lower() == correct.lower() and correct not in names:
                fail(rule, ERROR, f"{name}: should be {correct}")
    if "extra" in {n.lower() for n in names}:
        fail("LS011", WARNING, "extra/: the folder is named extras")
    if (folder / "utility").exists():
        fail("LS010", ERROR, "a utility/ folder beside src/")
    if (src / "library.properties").exists():
        fail("LP004", ERROR, "src/library.properties: redundant copy")
    if (folder / ".gitmodules").is_file():
        fail("LS004", WARNING, ".gitmodules: submodules are empty in Library Manager installations")
    if not any(n.split(".")[0].upper() in ("LICENSE", "LICENCE", "COPYING") for n in names):
        fail("LD002", WARNING, "no licence file at the root")
    if (folder / ".development").is_file():
        fail("LS006", ERROR, ".development flag file")
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            fail("LS005", ERROR, f"{rel}: symlink")
        elif path.suffix == ".exe":
            fail("LS007", ERROR, f"{rel}: .exe file")
        elif path.is_dir() and rel.split("/", 1)[0] not in ("examples", "extras") and _is_sketch(path):
            fail("LD003", ERROR, f"{rel}: sketch outside examples/ and extras/")


def _properties(folder: Path, props: dict[str, str], text: str, fail) -> None:
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#") and "=" not in line:
            fail("LP005", ERROR, f"library.properties line {n}: not key=value")
    for key in props:
        if key not in FIELDS and any(_close(key, f) for f in FIELDS):
            fail("LP006", WARNING, f"{key}: misspelled field?")

    name = props.get("name")
    if name is None:
        fail("LP007", ERROR, "no name field")
    else:
        if not name:
            fail("LP008", ERROR, "name is empty")
        if len(name) > 63:
            fail("LP009", ERROR, f"name {name!r} is longer than 63 characters")
        elif len(name) > 32:
            fail("LP010", WARNING, f"name {name!r} is longer than the recommended 32 characters")
        if not NAME.match(name):
            fail("LP011", ERROR, f"name {name!r}: only letters, digits, spaces, _ . - and not starting with one of _ . -")
        if name.lower().startswith("arduino"):
            fail("LP012", ERROR, f"name {name!r} starts with Arduino: reserved for official libraries")
        elif "arduino" in name.lower():
            fail("LP014", WARNING, f"name {name!r} contains Arduino")
        if " " in name:
            fail("LP015", WARNING, f"name {name!r} contains spaces")
        if "library" in name.lower():
            fail("LP016", WARNING, f"name {name!r} contains 'library'")
        header = re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".h"
        if not (folder / "src" / header).is_file():
            fail("LS008", WARNING, f"no src/{header} named after the library")
        folder_name = re.sub(r"[^A-Za-z0-9_.-]", "_", name)  # Library Manager installs it under this name
        if len(folder_name) > 63:
            fail("LS002", ERROR, f"installation folder {folder_name!r} is longer than 63 characters")
        if not FOLDER_NAME.match(folder_name):
            fail("LS003", ERROR, f"installation folder {folder_name!r} has prohibited characters")

    version = props.get("version")
    if version is None:
        fail("LP019", ERROR, "no version field")
    elif not RELAXED_SEMVER.match(version):
        fail("LP020", ERROR, f"version {version!r} is not (relaxed) semver")
    elif not SEMVER.match(version):
        fail("LP021", WARNING, f"version {version!r} is not semver")

    for key, missing_rule, short_rule in (("author", "LP023", "LP024"), ("maintainer", "LP025", "LP026"),
                                          ("sentence", "LP031", "LP032"), ("url", "LP040", "LP056")):
        if key not in props:
            if not (key == "maintainer" and "email" in props):
                fail(missing_rule, ERROR, f"no {key} field")
        elif not props[key]:
            fail(short_rule, ERROR, f"{key} is empty")
    maintainer = props.get("maintainer", props.get("email", ""))
    if "maintainer" not in props and "email" in props:
        fail("LP028", ERROR, "email used in place of maintainer")
    if maintainer.lower().startswith("arduino"):
        fail("LP027", ERROR, "maintainer starts with Arduino")
    if "paragraph" not in props:
        fail("LP034", ERROR, "no paragraph field")
    elif props.get("sentence") and props["paragraph"].startswith(props["sentence"]):
        fail("LP036", WARNING, "paragraph repeats the sentence")
    category = props.get("category")
    if category is None:
        fail("LP037", WARNING, "no category field")
    elif category == "Uncategorized":
        fail("LP039", WARNING, "category Uncategorized")
    elif category not in CATEGORIES:
        fail("LP038", ERROR, f"category {category!r} is not one of {', '.join(CATEGORIES)}")
    url = props.get("url")
    if url:
        parsed = urlparse(url)
        if not (parsed.scheme and (parsed.netloc or parsed.path)):
            fail("LP041", ERROR, f"url {url!r} is not a URL")
    architectures = props.get("architectures")
    if architectures is None:
        fail("LP043", WARNING, "no architectures field")
    elif not architectures.strip():
        fail("LP044", ERROR, "architectures is empty")
    depends = props.get("depends")
    if depends is not None:
        if not DEPENDS.match(depends):
            fail("LP047", ERROR, f"depends {depends!r}: not a comma-separated list of library names")
    for key, values, rule in (("dot_a_linkage", ("true", "false"), "LP049"), ("precompiled", ("true", "full", "false"), "LP053")):
        if key in props and props[key] not in values:
            fail(rule, ERROR, f"{key}={props[key]}: one of {', '.join(values)}")
    includes = props.get("includes")
    if includes is not None:
        if not includes:
            fail("LP051", ERROR, "includes is empty")
        headers = {p.name for p in (folder / "src").iterdir()} if (folder / "src").is_dir() else set()
        for include in (i.strip() for i in includes.split(",")):
            if include and include not in headers:
                fail("LP052", ERROR, f"includes {include}, which src/ does not have")
    if "ldflags" in props and len(props["ldflags"]) < 3:
        fail("LP055", ERROR, "ldflags shorter than a -l option")


def _sources(folder: Path, fail) -> None:
    for path in sorted(folder.rglob("*")):
        if path.suffix in SOURCE_EXTENSIONS and path.is_file():
            if ARDUINO_H_CASE.search(path.read_text(errors="replace")):
                fail("LC001", WARNING, f"{path.relative_to(folder).as_posix()}: #include of Arduino.h in the wrong case")


def _examples(folder: Path, fail) -> None:
    examples = folder / "examples"
    sketches = [p for p in sorted(examples.rglob("*")) if p.is_dir() and _is_sketch(p)] if examples.is_dir() else []
    if not sketches:
        fail("LD004", WARNING, "no example sketches")
    for sketch in sketches:
        rel = sketch.relative_to(folder).as_posix()
        primaries = [p for p in sketch.iterdir() if p.suffix in SKETCH_EXTENSIONS]
        if not any(p.stem == sketch.name for p in primaries):
            fail("SS001", ERROR, f"{rel}: no {sketch.name}.ino (the primary file is named after the folder)")
        for path in sketch.iterdir():
            if not FOLDER_NAME.match(path.name):
                fail("SS002", ERROR, f"{rel}/{path.name}: prohibited character in the name")
            if len(path.name) > 63:
                fail("SS003", ERROR, f"{rel}/{path.name}: name longer than 63 characters")
            if path.suffix == ".pde":
                fail("SS004", WARNING, f"{rel}/{path.name}: .pde extension")
            if path.is_dir() and path.name != "src" and path.name.lower() == "src":
                fail("SS005", ERROR, f"{rel}/{path.name}: should be src")


def _is_sketch(folder: Path) -> bool:
    return any(p.suffix in SKETCH_EXTENSIONS and p.is_file() for p in folder.iterdir())


def _close(a: str, b: str) -> bool:
    """One edit apart (a misspelled field name)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return (sum(x != y for x, y in zip(a, b, strict=True)) == 1
                or any(a[:i] + a[i + 1] + a[i] + a[i + 2:] == b for i in range(len(a) - 1)))
    short, long_ = sorted((a, b), key=len)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))
