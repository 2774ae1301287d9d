"""Reading ExecuTorch programs (.pte) without torch."""

from cortexm.pte.program import (  # noqa: F401
    ExecutionPlan,
    KernelCall,
    Operator,
    Program,
    PteError,
    TensorValue,
)
from cortexm.pte.read import load, parse  # noqa: F401
