"""The checks of one case on one core, as stages over the case's opened bundle.

What enters: a case, a core, its exported bundle (or why there is none) and the run's options.
What leaves: the case's CaseResult (cortexm.report.results). The bundle is opened once and its
program parsed once (cortexm.pte.bundle); each stage is one module, a function of it, the case
and what earlier stages found (context.py); pipeline.py lists them in order and turns failures
that known defects explain into XFAIL (and passes they should have prevented into XPASS).
"""

from cortexm.testing.checks.given import given_program
from cortexm.testing.checks.pipeline import STAGES, check, expect
from cortexm.testing.checks.run import call_costs

__all__ = ["STAGES", "call_costs", "check", "expect", "given_program"]
