"""`cortexm pins`, `sources`, `targets`: the pin file, the source trees in use, the cores."""

from __future__ import annotations

import click

from cortexm.base.text import json_dumps
from cortexm.cli.options import EXIT_PROBLEMS, say, source_options


@click.command()
@click.option("--executorch-src", help="ExecuTorch tree whose CMSIS_NN_VERSION to compare with the pin.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def pins(executorch_src: str | None, as_json: bool) -> int:
    """Show the pin file and check what can be checked here."""
    from cortexm import sources
    from cortexm.firmware import tools
    from cortexm.sources import pins as pinmod

    data = pinmod.load()
    checks = [pinmod.check_installed_executorch(data), *pinmod.check_installed_wheel_versions(data),
              *pinmod.check_wheel_files(data), pinmod.check_toolchain(data, tools.toolchain_prefix() + "gcc")]
    tree = sources.locate(sources.EXECUTORCH, executorch_src)
    if tree.path is not None:
        checks.append(pinmod.check_cmsis_nn_pin_in_tree(data, tree.path))
    else:
        checks.append(pinmod.Check("CMSIS_NN_VERSION in executorch tree", None, "no ExecuTorch tree given or found"))
    if as_json:
        click.echo(json_dumps({"file": str(pinmod.pins_path()), "pins": data,
                               "checks": [c.__dict__ for c in checks]}, indent=2))
    else:
        et, nn = data["executorch"], data["cmsis-nn"]
        tc, fvp = data["toolchain"], data["fvp"]["corstone-300"]
        click.echo(f"pin file    {pinmod.pins_path()}")
        click.echo(f"executorch  {et['version']} at {et['rev']}  nar "
                   f"{et['nar_hash'] or '(not established here, see its provenance)'}")
        click.echo(f"cmsis-nn    {nn['rev']}  nar {nn['nar_hash']}")
        click.echo(f"toolchain   {tc['name']} {tc['version']} for {', '.join(sorted(tc['files']))}")
        click.echo(f"fvp         corstone-300 {fvp['version']} for {', '.join(sorted(fvp['files']))} (sha256 "
                   f"{'pinned' if all(f['sha256'] for f in fvp['files'].values()) else 'not established, md5 only'})")
        click.echo("wheels      " + ", ".join(f"{n} {w['version']} ({len(w['files'])} files)" for n, w in data["wheels"].items()))
        click.echo("checks:")
        for c in checks:
            mark = {True: "ok  ", False: "FAIL", None: "--  "}[c.ok]
            click.echo(f"  {mark}  {c.what}: {c.detail}")
    return EXIT_PROBLEMS if any(c.ok is False for c in checks) else 0


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def targets(as_json: bool) -> None:
    """List the cores, their CMSIS-NN backend (as ExecuTorch resolves it) and simulators."""
    from cortexm.base.targets import CORES
    from cortexm.sources.backend_source import upstream_backend

    rows, shown = [], []
    for c in CORES:
        try:
            backend = upstream_backend(c) or c.backend
        except Exception:  # executorch not installed: show what this project expects
            backend = c.backend
        rows.append({"target": c.name, "backend": backend, "backend_expected": c.backend,
                     "gcc_flags": " ".join(c.gcc_flags), "qemu_machine": c.qemu_machine, "fvp_model": c.fvp_model})
        shown.append([c.name, backend + ("" if backend == c.backend else f" (expected {c.backend})"),
                      " ".join(c.gcc_flags), c.qemu_machine or "-", c.fvp_model or "-"])
    if as_json:
        click.echo(json_dumps(rows, indent=2))
        return
    from cortexm.report import table

    table(["target", "CMSIS-NN", "GCC flags", "QEMU -M", "FVP"], shown)


@click.command()
@source_options
@click.option("--fetch", is_flag=True, help="Download the pinned trees missing from the default location, checking their hash.")
@click.option("--hash", "content", is_flag=True,
              help="Compute the NAR hash of git checkouts too, to compare content with the pin.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def sources(executorch_src: str | None, cmsis_nn_src: str | None, fetch: bool, content: bool, as_json: bool) -> int:
    """Which ExecuTorch and CMSIS-NN trees builds use, and whether they match pins.toml."""
    from cortexm import sources as src
    from cortexm.sources import pins, trees

    data = pins.load()
    given = {src.EXECUTORCH: executorch_src, src.CMSIS_NN: cmsis_nn_src}
    if fetch:
        from cortexm.base.progress import Progress

        with Progress() as progress:
            for kind, explicit in given.items():
                if src.locate(kind, explicit).path is None:
                    path, verified = trees.fetch(kind, data, progress)
                    say(f"fetched {kind.name} into {path}: {verified}")
    found = [trees.status(kind, data, explicit, content) for kind, explicit in given.items()]
    if as_json:
        click.echo(json_dumps([s.as_dict() for s in found], indent=2))
    else:
        for s in found:
            _print_tree(s)
        et = found[0]
        if et.path is not None:
            check = pins.check_cmsis_nn_pin_in_tree(data, et.path)
            click.echo(f"{'':12}{check.what}: {check.detail}")
        from cortexm.sources import backend_source

        click.echo(f"{'lowering':12}{backend_source.describe(et.path)}")
    return 0 if all(s.matches for s in found) else EXIT_PROBLEMS


def _print_tree(s) -> None:
    from cortexm import sources as src

    if s.path is None:
        click.echo(f"{s.kind.name:12}not found: {src.missing_message(s.kind)}")
        return
    where = {"flag": s.kind.flag, "env": f"${s.kind.env}", "default": "default location"}[s.origin]
    click.echo(f"{s.kind.name:12}{s.path} ({where})")
    if s.rev:
        state = f", uncommitted changes {s.changes}" if s.changes else ", clean"
        click.echo(f"{'':12}git {s.rev}{state}")
    if s.nar_hash:
        click.echo(f"{'':12}content {s.nar_hash}")
    verdict = {True: "matches the pin", False: "differs from the pin", None: "cannot be compared with the pin"}[s.matches]
    pin = s.pin_rev + (f", {s.pin_nar_hash}" if s.pin_nar_hash else "")
    click.echo(f"{'':12}{verdict} ({pin})")
