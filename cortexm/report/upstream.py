"""What `cortexm upstream-tests` prints of upstream's own sessions (cortexm.testing.upstream)."""

from __future__ import annotations

import click

from cortexm.report import table

COLUMNS = ["core", "passed", "failed", "errors", "xfailed", "xpassed", "skipped", "programs run", "wall",
           "lowering+python / simulation / runner builds"]


def print_runs(runs: dict[str, dict], rows: list[list], title: str) -> None:
    """The table of the sessions, each core's runner, and how upstream's xfail marks hold here."""
    table(COLUMNS, rows, title=title)
    for core, run in runs.items():
        stats = run["stats"]
        if stats.get("runner"):
            click.echo(f"{core} runner: {stats['runner']} ({len(stats.get('ops', []))} operators)")
        xfails = stats.get("xfail", [])
        if xfails:
            # Upstream's xfail marks, as they hold here: the ones that pass are stale on this core.
            passing = [x for x in xfails if x["outcome"] == "xpassed"]
            click.echo(f"{core}: {len(xfails)} tests marked xfail upstream: {len(xfails) - len(passing)} fail here "
                       f"as marked, {len(passing)} pass here (each in the JSON report with why)")
            for x in passing:
                click.echo(f"  passes here: {x['test']} (upstream's reason: {x['reason']})")
