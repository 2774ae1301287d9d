"""A case's result: one record per stage, written and read back as the report's flat rows."""

from __future__ import annotations

import pytest

from cortexm.report.results import RECORDS, ROW_KEYS, CaseResult, Compare, Run


def test_a_report_row_reads_back_as_the_same_result():
    result = CaseResult("conv2d", "cortex-m7", run=Run(sim="ok", instructions=1234), compare=Compare(max_lsb=0.0))
    row = result.row()
    assert tuple(row) == ROW_KEYS and row["instructions"] == 1234 and row["max_lsb"] == 0.0
    again = CaseResult.from_row(row)
    assert again.row() == row and again.run == result.run and again.memory is None


def test_the_flat_names_of_tests_written_before_the_records_still_read():
    # What a user's test reads of the pytest fixture's result (cortexm.testing.pytest_plugin).
    result = CaseResult("conv2d", "cortex-m7")
    assert result.instructions is None and result.max_lsb is None  # the stage did not run
    result.run = Run(instructions=99)
    assert result.instructions == 99 == result.run.instructions
    assert result.memory is None and "memory" in RECORDS  # a stage's own name is its record
    with pytest.raises(AttributeError):
        result.no_such_key  # noqa: B018
