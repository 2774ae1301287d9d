"""Which lines, functions and branches of the cortex_m kernels and of CMSIS-NN a run executed.

The package's face: the names callers use, from the module that holds them (`analysis`).
"""

from cortexm.firmware.coverage.analysis import (
    CHOICES,
    COUNTER_TAGS,
    NEVER,
    RUNS,
    SCOPE_ONLY,
    TOTAL,
    VALUE_KINDS,
    VALUE_SITES,
    VALUES,
    WANTED,
    FileCoverage,
    ValueSite,
    absorb,
    attribute,
    collect,
    never_taken,
    reset,
    totals,
    values,
)

__all__ = ["CHOICES", "COUNTER_TAGS", "NEVER", "RUNS", "SCOPE_ONLY", "TOTAL", "VALUES", "VALUE_KINDS", "VALUE_SITES",
           "WANTED", "FileCoverage", "ValueSite", "absorb", "attribute", "collect", "never_taken", "reset", "totals",
           "values"]
