"""Checks of a .pte that need no simulator.

What enters: a program (cortexm.pte), a kernel library's registration, a core. What
leaves: one line per problem (verify): arguments a kernel wrapper would refuse
(library), scratch sized for another CMSIS-NN variant (scratch), the layout a core
expects, compute operators left in float and why (lowering); constant bytes no call reads
(constants); the plain-data view `cortexm inspect` prints (inspect); and the guard-region
memory plan the memory-safety oracle watches (memory_plan).
"""
