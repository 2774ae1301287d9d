"""Which lines, functions and branches of the cortex_m kernels and of CMSIS-NN a run executed.

What enters: runners built with gcov counters (BuildOptions(coverage=True)) after the
runs. What leaves: per core, per file, lines, functions and branches executed, as a table,
as Cobertura XML and lcov files that CI tools read, and the branches never taken (`NEVER`,
with the source line). CMSIS-NN's Include/ counts too: the requantize and its rounding
divide are inline functions there, compiled into each kernel (their counts are summed).

On a Cortex-M core the runner writes its counters at the end of each run into the
run's folder (kernels/runner/coverage.c, one file of records); `absorb` turns them into
.gcda files and merges them into the runner's total with the toolchain's gcov-tool. On
the host, libgcov accumulates them beside the objects itself, so hosted runs of one runner
must not overlap; on a core, runs overlap and `absorb` takes one run of a runner at a time.
The toolchain's gcov (its JSON output) gives the counts.

A runner built with value counters also writes them (kernels/runner/value_counters.h: per
call site of CMSIS-NN's requantize, MVE clamps, MAX and MIN, the values, the exact half steps
met and the values a clamp or MAX/MIN changed, per lane for MVE), where a branch count says
nothing; `absorb` sums them and `values` lists them per site.

A core's runs are also kept one by one (the files each run executed, with its program's
name and size), so `attribute` can say which branch arcs only the exhaustive scope's
programs take, and the smallest program that takes each: the case to add to a quick suite.

The package by job: `records` (a run's records absorbed into the runner's build folder),
`analysis` (the counts read back with gcov, per file, branch and call site) and `writers`
(lcov and Cobertura). The names callers use are here.
"""

from cortexm.firmware.coverage.analysis import (
    CHOICES,
    NEVER,
    SCOPE_ONLY,
    VALUE_KINDS,
    VALUE_SITES,
    WANTED,
    FileCoverage,
    ValueSite,
    attribute,
    collect,
    never_taken,
    totals,
    values,
)
from cortexm.firmware.coverage.records import COUNTER_TAGS, RUNS, TOTAL, VALUES, absorb, reset

__all__ = ["CHOICES", "COUNTER_TAGS", "NEVER", "RUNS", "SCOPE_ONLY", "TOTAL", "VALUES", "VALUE_KINDS", "VALUE_SITES",
           "WANTED", "FileCoverage", "ValueSite", "absorb", "attribute", "collect", "never_taken", "reset", "totals",
           "values"]
