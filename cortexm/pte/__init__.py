"""Reading ExecuTorch programs (.pte) without torch.

What enters: a .pte file. What leaves: the program as plain data (program.py, over the
flatbuffer reader flatbuffer.py), and what ExecuTorch's loader would refuse in it
(loader.py); read.py puts the two together (`load`, `parse`)."""

from cortexm.pte.program import (  # noqa: F401
    ExecutionPlan,
    KernelCall,
    Operator,
    Program,
    PteError,
    TensorValue,
)
from cortexm.pte.read import load, parse  # noqa: F401
