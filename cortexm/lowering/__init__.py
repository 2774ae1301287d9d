"""Lowering: from a model to a .pte for one Cortex-M core, with everything needed to check it.

What enters: a MODEL (a built-in case, FILE.py:FACTORY; modelsource), a core, and the
choice of which backends/cortex_m Python lowers (the installed wheel's or an ExecuTorch
tree's; cortexm.sources.backend_source). What leaves: the program, its sidecar (inputs, the
reference outputs of the integer reference, cortexm.oracle.reference), and the lowered
graph as canonical text for golden files (dialect).
"""
