"""The second judge: what the model means, independent of every cortex_m pass.

The integer reference (cortexm.oracle) evaluates the lowered program with the arguments the
lowering wrote, so it judges the C++ and CMSIS-NN, not the lowering: a pass that writes
self-consistent but wrong arguments gives a program the runner and the oracle agree on.
This stage compares that program with the PT2E quantized model it was lowered from
(after convert_pt2e: quantize/dequantize around float operators, before any cortex_m
pass), run in torch on the same inputs, as upstream's CortexMTester does, and does it
point by point so that a failure names the call at fault:

- `model.compare` runs the quantized model node by node. At every activation quantize
  (a value the program must hold as an integer tensor too) it finds the program call that
  computed that tensor by provenance (`mapping`: the call made from the point's own
  operators, or for a view no call computes, the viewed point's call put through the same
  view), records how far the two differ in LSB, and carries on
  from the program's value (teacher forcing): each point then measures the operators
  between two points alone, so an error is charged to the call that made it and drift does
  not pile up. The outputs are compared the same way, and once more without forcing (the
  drift of the whole program), and with the float model (how much quantization costs).
- `judge` holds the tolerance of every cortex_m operator, each with why CMSIS-NN's
  integer arithmetic may differ from float between quantize and dequantize by that much,
  and turns the recorded points into verdict lines.
- `accuracy` measures the program against the float model over inputs drawn like the
  calibration data (what a quantizer that makes a self-consistent but less accurate model
  changes, which the other judges cannot see), holds it to a floor, and compares it with a
  baseline's; `realinputs` measures it on the inputs the model will see (its example inputs,
  an evaluation set the user gives, read by `evalset`), with the saturation of every
  quantization point (`saturation`), and fails a calibration that does not cover them.

What enters: the program (.pte bytes), its inputs, the core's CMSIS-NN variant, the
quantized model and the float model as torch.export programs. What leaves: a plain dict
for the sidecar (points, outputs, drift), and one line per departure.
"""
