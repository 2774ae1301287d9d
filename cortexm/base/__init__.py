"""What every stage stands on: the one error type users see, path checks before a file is
opened, child processes that die with cortexm, progress display, manifests of the files
cortexm wrote, and the table of Cortex-M cores.

Nothing here imports another cortexm package.
"""
