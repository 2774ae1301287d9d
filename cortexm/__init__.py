"""cortexm: a reproducible toolchain and tester for ExecuTorch's Cortex-M backend."""

__version__ = "0.1.0"
