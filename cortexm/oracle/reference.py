"""The Python reference of a .pte program exported elsewhere: its kernel calls, in
order, run with ExecuTorch's and torch's Python implementations of the operators.

An export by cortexm carries its reference (the lowered graph's outputs, in the
sidecar). A program that comes as a file only (upstream's Arduino examples)
has no graph to run, but the program itself is one: each value a tensor of its
recorded shape, dtype and dim order (constants filled from the program's data),
each instruction a call of the operator it names. The cortex_m operators'
Python implementations (backends/cortex_m/ops/operators.py) are integer
implementations of what CMSIS-NN computes, so this is the same reference
`cortexm export` records, for a program whose graph is not at hand.

    outputs = evaluate("model.pte", [x])        # x: numpy arrays in logical layout

Needs torch and executorch (imported on first use).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from cortexm.base.errors import CortexmError
from cortexm.pte.program import SCALAR_TYPES
from cortexm.sources import backend_source


def evaluate(pte: str | Path | bytes, inputs: list[np.ndarray], method: str = "forward",
             kernels: dict | None = None, observe=None, trace=None) -> list[np.ndarray]:
    """The outputs of `method` for `inputs` (logical layout), as numpy arrays in logical layout.

    `kernels` (e.g. cortexm.oracle.KERNELS) replaces the Python implementation of the
    operators it names; the others run as torch and ExecuTorch implement them.
    `observe(name, args, out, result)` sees every call made through `kernels`;
    `trace(n, name, index, value)` every instruction's returned value (its value index, and
    the value in logical layout, a copy)."""
    import torch

    where = _named(pte)
    plan, constants = _program(pte, method)
    # The planned buffers, shared as on the device: the emitter lowers view_copy and
    # the like to tensors that alias their input's memory.
    memory = [torch.zeros(size, dtype=torch.uint8) for size in plan.non_const_buffer_sizes]
    values: list = [_value(v.val, constants, memory, torch) for v in plan.values]
    if len(inputs) != len(plan.inputs):
        raise CortexmError(f"{where}: the program takes {len(plan.inputs)} inputs, {len(inputs)} given")
    for k, (data, index) in enumerate(zip(inputs, plan.inputs, strict=True)):
        target = values[index]
        given = torch.from_numpy(np.array(data, copy=True))
        if tuple(given.shape) != tuple(target.shape) or given.dtype != target.dtype:
            raise CortexmError(f"{where}: input {k} is {target.dtype}{list(target.shape)}, "
                               f"given {given.dtype}{list(given.shape)}")
        target.copy_(given)
    for n, instruction in enumerate(_instructions(plan)):
        args = getattr(instruction.instr_args, "args", None)
        op_index = getattr(instruction.instr_args, "op_index", None)
        if args is None or op_index is None:
            raise CortexmError(f"{where}: instruction {n} is not a kernel call; only straight-line programs are evaluated")
        operator = plan.operators[op_index]
        operands = [values[i] for i in args]
        if kernels and operator.name in kernels:
            orders = [_dim_order(plan.values[i].val) for i in args]
            _call_kernel(kernels[operator.name], operator.name, operator.overload, operands, orders, values, torch,
                         observe)
        else:
            _call(operator.name, operator.overload, operands, values, torch)
        if trace is not None and isinstance(values[args[-1]], torch.Tensor):  # the call's returned value
            trace(n, operator.name, args[-1], values[args[-1]].contiguous().numpy().copy())
    return [values[i].contiguous().numpy().copy() for i in plan.outputs]


def integer_reference(pte: str | Path | bytes, inputs: list[np.ndarray], backend: str,
                      compare_upstream: bool = False, trace=None,
                      helium: bool = True) -> tuple[list[np.ndarray], list[dict]]:
    """The program's outputs with every cortex_m operator computed by cortexm's integer
    reference for CMSIS-NN variant `backend` ("DSP", "MVE", "SCALAR"), and, with
    `compare_upstream`, how ExecuTorch's Python reference (operators.py) differs from it,
    call by call, on the same arguments (cortexm.oracle.upstream). `trace` as `evaluate`
    takes it; `helium=False` leaves ExecuTorch's own Helium loops out (cortexm.oracle.backends)."""
    from cortexm.oracle import upstream
    from cortexm.oracle.backends import kernels_for

    kernels = kernels_for(backend, helium=helium)
    scalar_loops = kernels_for(backend, helium=False)  # what operators.py implements
    differences: list[dict] = []
    calls = [0]

    def observe(name, args, out, result):
        calls[0] += 1
        ours = result if scalar_loops[name] is kernels[name] else scalar_loops[name](args, out)
        try:
            theirs = operators_py(name, args)
        except Exception as e:  # operators.py raises whatever torch raises
            theirs = e
        diff = upstream.compare_call(name, args, ours, theirs)
        if diff is not None:
            differences.append({"call": calls[0], **diff.as_dict()})

    outputs = evaluate(pte, inputs, kernels=kernels, observe=observe if compare_upstream else None, trace=trace)
    return outputs, differences


def operators_py(name: str, args: dict) -> np.ndarray:
    """ExecuTorch's Python implementation of a cortex_m operator (its functional form, from
    ops/operators.py) on arguments in cortexm.oracle's form; the result in logical layout."""
    import torch

    from cortexm.oracle import Tensor
    from cortexm.oracle.tensor import CHANNELS_LAST

    _program_operators()

    def to_torch(value):
        if isinstance(value, Tensor):
            t = torch.from_numpy(value.data.copy())
            return t.to(memory_format=torch.channels_last) if value.dim_order == CHANNELS_LAST else t
        return getattr(torch, value) if isinstance(value, str) else value

    op = getattr(torch.ops.cortex_m, name.split("::")[1])
    return op(**{k: to_torch(v) for k, v in args.items()}).contiguous().numpy()


def _dim_order(val) -> tuple[int, ...] | None:
    if type(val).__name__ != "Tensor":
        return None
    return tuple(val.dim_order) or tuple(range(len(val.sizes)))


def _call_kernel(kernel, name: str, overload: str, given: list, orders: list, values: list, torch, observe=None) -> None:
    """One call through a numpy kernel (cortexm.oracle's interface): arguments by schema
    name, tensors with their program dim order, the result copied into `out`."""
    from cortexm.oracle import Tensor

    schema = getattr(getattr(torch.ops, name.split("::")[0]), name.split("::")[1]).__getattr__(overload or "default")._schema
    arguments = list(schema.arguments)
    if len(given) != len(arguments) + 1:  # ExecuTorch passes the schema arguments, then one return value
        raise CortexmError(f"{name}.{overload}: the program passes {len(given)} values, "
                           f"the installed schema takes {len(arguments) + 1}")
    args, out = {}, None
    for argument, value, order in zip(arguments, given, orders, strict=False):
        value = _resolve(value, values)
        if isinstance(value, torch.Tensor):
            value = Tensor(value.numpy().copy(), order)
        elif isinstance(value, int) and ("ScalarType" in str(argument.type) or argument.name == "dtype"):
            value = SCALAR_TYPES[value][0]  # torch's schema types a ScalarType as int
        if argument.alias_info is not None and argument.alias_info.is_write:
            out = (given[arguments.index(argument)], value)
        else:
            args[argument.name] = value
    if out is None:
        raise CortexmError(f"{name}.{overload}: no out argument to write")
    target, view = out
    try:
        result = kernel(args, view)
    except ValueError as e:
        raise CortexmError(f"{name}: the integer reference refuses the call: {e}") from None
    if observe is not None:
        observe(name, args, view, result)
    target.copy_(torch.from_numpy(np.ascontiguousarray(result)))


def _program_operators() -> None:
    """Registers the cortex_m operators with their Python implementations (the pass
    manager imports them in the order their module needs), and dim_order_ops."""
    from cortexm.sources.backend_source import quiet_lowering_imports

    quiet_lowering_imports()
    backend_source.probe()  # a backend that cannot be imported: one line naming its tree
    import executorch.exir.passes.dim_order_ops_registry  # noqa: F401
    from executorch.backends.cortex_m.passes.cortex_m_pass_manager import CortexMPassManager  # noqa: F401


def _program(pte: str | Path | bytes, method: str):
    program = _deserialized(pte if isinstance(pte, bytes) else Path(pte).read_bytes())
    for plan in program.execution_plan:
        if plan.name == method:
            return plan, program.constant_buffer
    raise CortexmError(f"{_named(pte)}: no method {method!r}")


def _named(pte: str | Path | bytes) -> str:
    """The program as a message names it: its path, or "the program" for its bytes."""
    return "the program" if isinstance(pte, bytes) else str(pte)


@lru_cache(maxsize=4)
def _deserialized(data: bytes):
    """The program in `data` as ExecuTorch's Python schema has it: read once for the many
    evaluations of one program (the accuracy measure's inputs); nothing changes it."""
    _program_operators()
    from executorch.exir._serialize._program import deserialize_pte_binary

    program = deserialize_pte_binary(data)
    return getattr(program, "program", program)


def _instructions(plan):
    return [instruction for chain in plan.chains for instruction in chain.instructions]


def _value(val, constants, memory, torch):
    kind = type(val).__name__
    if kind == "Tensor":
        dtype = getattr(torch, SCALAR_TYPES.get(int(val.scalar_type), ("",))[0], None)
        if dtype is None:
            raise CortexmError(f"tensor of scalar type {val.scalar_type}: not evaluated")
        sizes, order = list(val.sizes), list(val.dim_order) or list(range(len(val.sizes)))
        strides = [0] * len(sizes)
        step = 1
        for dim in reversed(order):  # the dim order lists dims outermost first
            strides[dim] = step
            step *= max(sizes[dim], 1)
        where = val.allocation_info
        if where is not None:
            offset = where.memory_offset_low | (where.memory_offset_high << 32)
            nbytes = step * torch.tensor([], dtype=dtype).element_size()
            placed = memory[where.memory_id][offset: offset + nbytes].view(dtype)
            return placed.as_strided(sizes, strides)
        tensor = torch.empty_strided(sizes, strides, dtype=dtype).zero_()
        if val.data_buffer_idx > 0:
            raw = bytes(constants[val.data_buffer_idx].storage)
            stored = torch.frombuffer(bytearray(raw), dtype=dtype)[: tensor.numel()]
            # The buffer holds the elements in dim order: view it as the permuted shape.
            tensor.permute(order).copy_(stored.reshape([sizes[d] for d in order]))
        return tensor
    if kind == "Double":
        # ExecuTorch's schema holds an infinite double as the string "inf" or "-inf" (a causal
        # mask's -inf): as a string, the operator taking it refuses it.
        return float(val.double_val)
    if kind in ("Int", "Bool", "String"):
        return val.int_val if kind == "Int" else val.bool_val if kind == "Bool" else val.string_val
    if kind == "Null":
        return None
    if kind in ("IntList", "TensorList", "OptionalTensorList"):
        return _Refs(val.items)
    if kind in ("DoubleList", "BoolList"):
        return list(val.items)
    raise CortexmError(f"program value of kind {kind}: not evaluated")


class _Refs(tuple):
    """A list value: the indices of the values it holds (-1: none), resolved at the call."""


def _resolve(value, values):
    if isinstance(value, _Refs):
        return [None if i < 0 else _resolve(values[i], values) for i in value]
    return value


def _call(name: str, overload: str, given: list, values: list, torch) -> None:
    namespace, op_name = name.split("::", 1)
    packet = getattr(getattr(torch.ops, namespace), op_name)
    out_op = getattr(packet, overload or "default")
    schema = out_op._schema
    arguments = list(schema.arguments)
    # A kernel call passes every schema argument, then the returned value.
    if len(given) != len(arguments) + 1:  # ExecuTorch passes the schema arguments, then one return value
        raise CortexmError(f"{name}.{overload}: the program passes {len(given)} values, "
                           f"the installed schema takes {len(arguments) + 1}")
    args, kwargs, outs = [], {}, {}
    for argument, value in zip(arguments, given, strict=False):
        value = _typed(argument, _resolve(value, values), torch)
        if argument.alias_info is not None and argument.alias_info.is_write:
            outs[argument.name] = value
        elif argument.kwarg_only:
            kwargs[argument.name] = value
        else:
            args.append(value)
    try:
        out_op(*args, **kwargs, **outs)
        return
    except (NotImplementedError, RuntimeError) as e:
        if "kernel" not in str(e).lower() and "implement" not in str(e).lower():
            raise CortexmError(f"{name}.{overload}: {str(e).splitlines()[0]}") from None
    # No kernel for the out variant (cortex_m defines Python implementations of the functional one).
    result = packet.default(*args, **kwargs)
    results = result if isinstance(result, (tuple, list)) else [result]
    for out, value in zip(outs.values(), results, strict=False):
        out.copy_(value)


def _typed(argument, value, torch):
    """Program values as the operator takes them: ScalarType codes as dtypes."""
    if value is not None and "ScalarType" in str(argument.type) and isinstance(value, int):
        return getattr(torch, SCALAR_TYPES[value][0])
    return value


def output_scales(pte: str | Path, method: str = "forward") -> list[float | None]:
    """Each output's quantization step, where a dequantize_per_tensor call writes it
    (to compare outputs in LSB), else None."""
    from cortexm.pte import load

    plan = load(pte).plan(method)
    writer = {call.args[-1]: (op, call) for _, op, call in plan.kernel_calls() if call.args}
    scales: list[float | None] = []
    for index in plan.outputs:
        op, call = writer.get(index, (None, None))
        scale = (plan.values[call.args[1]] if op is not None and call is not None
                 and "dequantize_per_tensor" in op.name else None)
        scales.append(float(scale) if isinstance(scale, float) else None)
    return scales
