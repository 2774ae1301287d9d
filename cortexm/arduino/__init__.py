"""The ExecuTorch Arduino library, generated from the pinned trees (`cortexm arduino-lib`).

upstream.py reads upstream's generator (examples/arduino of the ExecuTorch
tree); assemble.py lays the library out as that generator does, over the
registration and schema headers of kernels/codegen; generate.py checks the
example models and writes it; provenance.py records what it came from; lint.py
checks it against the Library Manager's rules; examples.py reads the inputs the
examples ship; compile.py cross-compiles it as the Arduino builder would.
"""
