"""The one function that turns a verdict by a known defect (cortexm.cases.defects.judge), as the
test app's cases, the dialect goldens and upstream's own tests use it."""

from __future__ import annotations

from cortexm.cases import defects
from cortexm.report.results import CaseResult, Status
from cortexm.testing.checks import expect

SCRATCH = defects.KnownDefect("scratch defect", "the scratch is sized for the wrong variant", stage=("run",),
                              signature=r"scratch buffer size incorrect")


def test_a_failure_the_defect_explains_is_an_expected_failure():
    judged = defects.judge((SCRATCH,), [("run", "E quantized_conv2d_out: scratch buffer size incorrect")], {"run"})
    assert (judged.status, judged.defect) == ("XFAIL", SCRATCH)
    assert judged.reason == "scratch defect: the scratch is sized for the wrong variant"


def test_any_other_failure_fails_naming_the_defect_it_is_not():
    failures = [("run", "E scratch buffer size incorrect"), ("compare", "output 0: 3 LSB")]
    judged = defects.judge((SCRATCH,), failures, {"run", "compare"})
    assert judged.status == "FAIL"
    assert judged.reason == "fails differently from scratch defect (compare): output 0: 3 LSB"
    assert defects.judge((SCRATCH,), [("verify", "E scratch buffer size incorrect")], {"verify"}).status == "FAIL"


def test_a_pass_that_could_have_shown_the_defect_is_unexpected():
    assert defects.judge((SCRATCH,), [], {"export", "run"}).status == "XPASS"
    assert defects.judge((SCRATCH,), [], {"export"}) is None  # never ran: it could not show
    assert defects.judge((), [("run", "anything")], {"run"}) is None


def test_the_test_app_takes_the_judgement():
    failed = CaseResult("c", "cortex-m7", Status.FAIL, failures=[("run", "E scratch buffer size incorrect")])
    expect(failed, (SCRATCH,))
    assert (failed.status, failed.reason) == (Status.XFAIL, "scratch defect: the scratch is sized for the wrong variant")
    passed = CaseResult("c", "cortex-m7", Status.PASS)
    passed.stages.append("run")
    expect(passed, (SCRATCH,))
    assert passed.status == Status.XPASS
    error = CaseResult("c", "cortex-m7", Status.ERROR, failures=[("run", "E scratch buffer size incorrect")])
    expect(error, (SCRATCH,))
    assert error.status == Status.ERROR  # cortexm's own failure is never excused


def test_upstream_tests_take_the_first_defect_that_applies_and_explains():
    other = defects.KnownDefect("other", "another", stage=("upstream-test",), signature="nothing like it", cores=("cortex-m7",))
    upstream = defects.KnownDefect("upstream", "upstream's test", stage=("upstream-test",), signature="status -3",
                                   cores=("cortex-m55",))
    line = "test_conv[cortex-m55]: status -3"
    assert defects.explaining((other, upstream), "cortex-m55", "upstream-test", line, {}) is upstream
    assert defects.explaining((other, upstream), "cortex-m7", "upstream-test", line, {}) is None
