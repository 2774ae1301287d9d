"""ExecuTorch's program loader, offline: what `Program::load` and `load_method` would refuse.

cortexm's runner loads a program with `Program::load(&loader)` (the default,
`Verification::Minimal`: no flatbuffer verifier), its method 0's meta, one buffer per
planned size, and `Program::load_method`. This module walks a program read by
`cortexm.pte.load(path, check=False)` in that order and reports, one line each,
every problem the runtime checks for (the source each mirrors is named at the check):

- runtime/executor/program.cpp       Program::load, method_meta, get_constant_buffer_data,
                                     load_mutable_subsegment_into
- runtime/executor/method_meta.cpp   memory_planned_buffer_size
- runtime/executor/method.cpp        Method::init, parse_values, resolve_operator,
                                     gen_instruction_arguments
- runtime/executor/tensor_parser_portable.cpp, tensor_parser_exec_aten.cpp, tensor_parser.h
                                     parseTensor, getTensorDataPtr, getMemPlannedPtr,
                                     parseTensorList, parseListOptionalType
- runtime/core/hierarchical_allocator.h  get_offset_address
- runtime/core/portable_type/tensor_impl.cpp, runtime/core/exec_aten/util/dim_order_util.h
                                     compute_numel, dim_order_to_stride (int32 strides)
- runtime/kernel/operator_registry.cpp   make_kernel_key_string
- kernels/runner/runner.cpp          at most 512 planned buffers

Where the host's 64-bit runtime and a Cortex-M's 32-bit one differ, the Cortex-M is
checked (a tensor of 4 GiB or more, an element count past 2^31-1, a planned offset past
4 GiB, a planned buffer over 2 GiB). A few checks are stricter than the loader, each because the program would fail
or misbehave when it runs (said at the check). Operator registration is
`cortexm.checking.verify.check_schema`'s (MISSING lines).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from cortexm.pte.program import (
    SCALAR_TYPES,
    BadInstruction,
    BadValue,
    DelegateCall,
    ExecutionPlan,
    KernelCall,
    ListValue,
    OtherInstruction,
    Program,
    TensorValue,
)

# kernels/runner/runner.cpp's kMaxPlannedBuffers.
RUNNER_MAX_PLANNED_BUFFERS = 512
# A planned buffer larger than this cannot be placed on a Cortex-M (and its size_t is 32 bits).
MAX_PLANNED_BUFFER = 2 << 30
# runtime/core/exec_aten/util/tensor_dimension_limit.h
TENSOR_DIMENSION_LIMIT = 16
# method.cpp resolve_operator: kTempBufferSizeForName, the name and its NUL.
OPERATOR_NAME_LIMIT = 100
# operator_registry.h kKernelKeyBufSize, its NUL included.
KERNEL_KEY_LIMIT = 659
# The target's ssize_t and size_t (Cortex-M: 32 bits).
_SSIZE_MAX = (1 << 31) - 1
_INT32_MAX = (1 << 31) - 1  # TensorImpl's StridesType (runtime/core/portable_type/tensor_impl.h)
_SIZE_MAX = (1 << 32) - 1
_EXTERNAL = 1  # TensorDataLocation.EXTERNAL
_DYNAMIC_UNBOUND = 2  # TensorShapeDynamism.DYNAMIC_UNBOUND


@dataclass(frozen=True)
class Problem:
    status: str  # INVALID (the program is malformed), FAIL (well formed, but cortexm's runner cannot load it)
    text: str
    # The reader's own users (inspect, run, ...) would trip over it: parse() refuses it by default.
    structural: bool = False


def problems(program: Program) -> list[Problem]:
    """Everything ExecuTorch's loader would refuse in `program` (method 0, as the runner loads it)."""
    found = list(_program_problems(program))
    if not program.plans:
        found.append(Problem("INVALID", "the program has no method (execution_plan is absent or empty)"))
        return found
    return found + list(_method_problems(program, program.plans[0]))


def reference_problems(plan: ExecutionPlan) -> Iterator[str]:
    """The problems of `plan` its readers would trip over: bad indices, values or instructions
    of unknown type, planned tensors outside their buffer."""
    return (p.text for p in _method_problems(None, plan) if p.structural)


def _invalid(text: str, structural: bool = False) -> Problem:
    return Problem("INVALID", text, structural)


def _program_problems(program: Program) -> Iterator[Problem]:
    """program.cpp Program::load, past the header and the flatbuffer (cortexm.pte.program's)."""
    segments = None if "segments" in program.absent else program.segments
    if program.named_data is not None and segments is None:
        yield _invalid(f"the program has {program.named_data} named data entries and no segments field")
    constant = program.constant_segment
    if constant is not None and constant.offsets is not None and len(constant.offsets) > 1:
        if program.constant_buffers:
            yield _invalid(f"constant data in both constant_buffer ({program.constant_buffers} entries) and "
                           f"constant_segment ({len(constant.offsets)} offsets)")
        if segments is None:
            yield _invalid("the constant segment is used and the program has no segments field")
        elif constant.segment_index >= len(segments):
            yield _invalid(f"the constant segment is segment {constant.segment_index}, the program has {len(segments)}")


def _method_problems(program: Program | None, plan: ExecutionPlan) -> Iterator[Problem]:
    """Program::method_meta, the runner's planned buffers, then Method::init in its order.
    Without `program`, only what needs the plan alone."""
    method = f"method {plan.name!r}" if "name" not in plan.absent else "method 0"
    if program is not None:
        # program.cpp get_method_name / method_meta: fields whose accessors are not checked later.
        for name in ("name", "non_const_buffer_sizes", "inputs", "outputs"):
            if name in plan.absent:
                yield _invalid(f"{method} has no {name} field")
        yield from _buffer_problems(plan)
    n_values = len(plan.values)
    for where, indices in (("input", plan.inputs), ("output", plan.outputs)):
        for k, i in enumerate(indices):
            if not 0 <= i < n_values:
                # Not checked at load: set_input / get_output refuse it (method_meta.cpp input_tag).
                yield _invalid(f"{where} {k} refers to value {i}, the program has {n_values}", True)
    if program is not None and "values" in plan.absent:
        yield _invalid(f"{method} has no values field")
    for i, value in enumerate(plan.values):
        yield from _value_problems(program, plan, i, value)
    if program is not None:
        if "delegates" in plan.absent:
            yield _invalid(f"{method} has no delegates field")
        for k, _ in enumerate(plan.delegates):
            if f"delegates[{k}].id" in plan.absent:
                yield _invalid(f"delegate {k} has no backend id")
        if "chains" in plan.absent or not plan.chain_lengths:
            yield _invalid(f"{method} has no chains")
        for c, _ in enumerate(plan.chain_lengths):
            if f"chains[{c}].instructions" in plan.absent:
                yield _invalid(f"chain {c} has no instructions field")
    reported_operators: set[int] = set()
    for n, ins in enumerate(plan.instructions):
        yield from _instruction_problems(program, plan, n, ins, reported_operators)


def _buffer_problems(plan: ExecutionPlan) -> Iterator[Problem]:
    sizes = plan.non_const_buffer_sizes
    count = max(len(sizes) - 1, 0)
    if count > RUNNER_MAX_PLANNED_BUFFERS:
        yield Problem("FAIL", f"the program plans {count} memory buffers, cortexm's runner handles {RUNNER_MAX_PLANNED_BUFFERS}")
    for memory_id in range(1, len(sizes)):
        size = sizes[memory_id]
        if size < 0:
            # method_meta.cpp memory_planned_buffer_size: a negative size is an error (the runner aborts).
            yield _invalid(f"memory buffer {memory_id} has a negative size ({size} B)")
        elif size > _SIZE_MAX:
            # Not a loader check: a Cortex-M's 32-bit size_t reads it as size % 4 GiB (4 GiB as 0,
            # and the load then fails naming `allocator size (0)`); the runner refuses it.
            yield Problem("FAIL", f"memory buffer {memory_id} is {size} B, more than a Cortex-M's 32-bit "
                                  f"size_t holds (it would read {size & _SIZE_MAX} B)")
        elif size > MAX_PLANNED_BUFFER:
            yield Problem("FAIL", f"memory buffer {memory_id} is {size} B, more than a Cortex-M can place (2 GiB)")


def _value_problems(program: Program | None, plan: ExecutionPlan, i: int, value) -> Iterator[Problem]:
    """method.cpp parse_values for value `i` (values are parsed in order: a list can only
    refer to values before it)."""
    n_values = len(plan.values)
    if isinstance(value, BadValue):
        yield _invalid(f"value {i}: {value.reason}", True)
    elif isinstance(value, TensorValue):
        yield from _tensor_problems(program, plan, i, value)
    elif isinstance(value, ListValue):
        kind = {"int_list": "IntList", "tensor_list": "TensorList", "optional_tensor_list": "OptionalTensorList"}[value.kind]
        for j, k in enumerate(value.items):
            if value.kind == "optional_tensor_list" and k == -1:
                continue  # parseListOptionalType: -1 is None
            if not 0 <= k < n_values:
                yield _invalid(f"value {i}: {kind} item {j} refers to value {k}, the program has {n_values}", True)
                continue
            if program is None:
                continue
            item = plan.values[k]
            if value.kind == "int_list":
                # Not checked at load: the kernel reading the list aborts (BoxedEvalueList::get, toInt).
                if type(item) is not int:
                    yield _invalid(f"value {i}: IntList item {j} is value {k}, {_kind(item)}, not an Int")
            elif k >= i:
                # tensor_parser: values[k] is read before parse_values has made it.
                yield _invalid(f"value {i}: {kind} item {j} refers to value {k}, which comes after it")
            elif not (isinstance(item, TensorValue) or (value.kind == "optional_tensor_list" and item is None)):
                # tryToTensor / tryToOptional<Tensor>
                yield _invalid(f"value {i}: {kind} item {j} is value {k}, {_kind(item)}, not a Tensor")


def _kind(value) -> str:
    if value is None:
        return "None"
    if isinstance(value, BadValue):
        return "an invalid value"
    if isinstance(value, TensorValue):
        return "a Tensor"
    if isinstance(value, ListValue):
        return {"int_list": "an IntList", "tensor_list": "a TensorList"}.get(value.kind, "an OptionalTensorList")
    return {bool: "a Bool", int: "an Int", float: "a Double", str: "a String"}.get(type(value), "a list")


def _tensor_problems(program: Program | None, plan: ExecutionPlan, i: int, t: TensorValue) -> Iterator[Problem]:
    """tensor_parser_portable.cpp parseTensor, then tensor_parser_exec_aten.cpp getTensorDataPtr."""
    where = f"value {i}"
    if any(s < 0 for s in t.sizes):
        yield _invalid(f"{where}: tensor with negative size {list(t.sizes)}", True)
    if t.allocation is not None:
        memory_id, offset = t.allocation
        sizes = plan.non_const_buffer_sizes
        if not 0 < memory_id < len(sizes):
            # getMemPlannedPtr takes memory_id - 1 (uint32_t): 0 and past the last have no buffer.
            yield _invalid(f"{where}: tensor placed in memory buffer {memory_id}, the program plans "
                           f"{_buffer_range(sizes)}", True)
        elif offset + t.nbytes > sizes[memory_id]:
            yield _invalid(f"{where}: tensor at [{offset}, {offset + t.nbytes}) overruns memory buffer {memory_id} "
                           f"of {sizes[memory_id]} B", True)
    if program is None:
        return
    if t.location == _EXTERNAL:
        # method.cpp parse_external_constants / getTensorDataPtr: external data needs a data map,
        # and the runner passes none.
        if t.external_name is None:
            yield _invalid(f"{where}: external tensor without a name")
        else:
            yield Problem("FAIL", f"{where}: tensor data is external ({t.external_name!r}), cortexm's runner loads no .ptd")
    if t.storage_offset != 0:
        yield _invalid(f"{where}: tensor storage_offset {t.storage_offset} (the runtime supports 0)")
    if t.scalar_type not in SCALAR_TYPES:
        yield _invalid(f"{where}: scalar type {t.scalar_type} is out of range (ExecuTorch knows 0..{max(SCALAR_TYPES)})")
    if t.shape_dynamism == _DYNAMIC_UNBOUND:
        yield _invalid(f"{where}: a fully dynamic (DYNAMIC_UNBOUND) tensor, which the runtime does not support")
    if "sizes" in t.absent:
        yield _invalid(f"{where}: tensor without sizes")
    rank = len(t.sizes)
    if rank > TENSOR_DIMENSION_LIMIT:
        yield _invalid(f"{where}: tensor of rank {rank}, the runtime's limit is {TENSOR_DIMENSION_LIMIT}")
    if "dim_order" in t.absent:
        yield _invalid(f"{where}: tensor without dim_order")
    elif len(t.dim_order) != rank:
        yield _invalid(f"{where}: dim_order {list(t.dim_order)} has {len(t.dim_order)} entries, the tensor has rank {rank}")
    elif sorted(t.dim_order) != list(range(rank)):
        yield _invalid(f"{where}: dim_order {list(t.dim_order)} is not a permutation of 0..{rank - 1}")
    if any(s < 0 for s in t.sizes):
        return  # said above
    overflow = _size_overflow(t)
    if overflow:
        yield _invalid(f"{where}: tensor {list(t.sizes)}: {overflow}")
        return
    if t.location == _EXTERNAL:
        return
    if t.allocation is not None:
        yield from _planned_problems(plan, where, t)
        if t.data_buffer_idx > 0:
            yield from _mutable_problems(program, where, t)
    elif t.data_buffer_idx > 0:
        yield from _constant_problems(program, where, t)


def _size_overflow(t: TensorValue) -> str | None:
    """Which of the runtime's size computations for `t` (sizes not negative) overflows, as
    TensorImpl does them on a Cortex-M: the element count (compute_numel: a running product in
    ssize_t, 32 bits), the byte count (size_t), or a stride (dim_order_to_stride_nocheck: int32
    products of the sizes after each dim in dim order, size 0 counting as 1, so a tensor with
    no elements can still overflow). The host's UBSan stops at the last two."""
    numel = 1
    for size in t.sizes:
        numel *= size
        if numel > _SSIZE_MAX:
            return "its element count passes a Cortex-M's 32-bit ssize_t"
    if numel * t.element_size > _SIZE_MAX:
        return f"its {numel * t.element_size} B pass a Cortex-M's 32-bit size_t"
    if sorted(t.dim_order) == list(range(len(t.sizes))):  # else dim_order_to_stride refuses it first
        stride = 1
        for d in t.dim_order[1:]:
            stride *= t.sizes[d] or 1
        if stride > _INT32_MAX:
            return f"its stride along dimension {t.dim_order[0]} ({stride}) passes an int32"
    return None


def _planned_problems(plan: ExecutionPlan, where: str, t: TensorValue) -> Iterator[Problem]:
    """getMemPlannedPtr and HierarchicalAllocator::get_offset_address, with the runner's buffers
    (one per planned size, the reserved entry 0 left out)."""
    if t.allocation is None:
        return
    memory_id, offset = t.allocation
    if 0 < memory_id < len(plan.non_const_buffer_sizes) and offset > _SIZE_MAX:
        yield _invalid(f"{where}: tensor placed at offset {offset} of memory buffer {memory_id}, past a 32-bit size_t")


def _buffer_range(sizes: tuple[int, ...]) -> str:
    return "no buffers" if len(sizes) <= 1 else "buffer 1" if len(sizes) == 2 else f"buffers 1..{len(sizes) - 1}"


def _constant_problems(program: Program, where: str, t: TensorValue) -> Iterator[Problem]:
    """program.cpp get_constant_buffer_data: the constant segment when Program::load loaded one
    (more than one offset), else the flatbuffer's constant_buffer."""
    index, nbytes = t.data_buffer_idx, t.nbytes
    constant = program.constant_segment
    if constant is not None and constant.offsets is not None and len(constant.offsets) > 1 \
            and constant.segment_index < len(program.segments):
        offsets = constant.offsets
        if index >= len(offsets):
            yield _invalid(f"{where}: constant data index {index}, the constant segment has {len(offsets)} entries")
            return
        size = program.segments[constant.segment_index][1]
        if offsets[index] > size or nbytes > size - offsets[index]:
            yield _invalid(f"{where}: constant data at [{offsets[index]}, {offsets[index] + nbytes}) overruns the "
                           f"constant segment of {size} B")
        return
    buffers = program.constant_buffer_sizes
    if index >= len(buffers):
        yield _invalid(f"{where}: constant buffer index {index}, the program has {len(buffers)} constant buffers")
    elif nbytes > buffers[index]:
        yield _invalid(f"{where}: tensor of {nbytes} B, its constant buffer {index} holds {buffers[index]} B")


def _mutable_problems(program: Program, where: str, t: TensorValue) -> Iterator[Problem]:
    """program.cpp load_mutable_subsegment_into(0, data_buffer_idx, nbytes): a planned tensor with initial data."""
    index, nbytes = t.data_buffer_idx, t.nbytes
    mutable = program.mutable_data_segments
    if program.segment_base_offset == 0:
        yield _invalid(f"{where}: planned tensor with initial data {index}, and the program has no data segments")
    elif not mutable:
        yield _invalid(f"{where}: planned tensor with initial data {index}, and the program has no mutable data segments")
    elif mutable[0].offsets is None or index >= len(mutable[0].offsets):
        have = 0 if mutable[0].offsets is None else len(mutable[0].offsets)
        yield _invalid(f"{where}: initial data index {index}, the mutable data segment has {have} entries")
    elif mutable[0].segment_index >= len(program.segments):
        yield _invalid(f"{where}: the mutable data segment is segment {mutable[0].segment_index}, the program has "
                       f"{len(program.segments)}")
    else:
        offset = mutable[0].offsets[index]
        size = program.segments[mutable[0].segment_index][1]
        if offset + nbytes > size:
            yield _invalid(f"{where}: initial data at [{offset}, {offset + nbytes}) overruns its segment of {size} B")


def _instruction_problems(program: Program | None, plan: ExecutionPlan, n: int, ins, reported: set[int]) -> Iterator[Problem]:
    """method.cpp Method::init, the chains: gen_instruction_arguments, resolve_operator and
    the value indices of moves, jumps and frees."""
    where = plan.where(n)
    n_values = len(plan.values)
    if isinstance(ins, BadInstruction):
        yield _invalid(f"{where}: {ins.reason}", True)
        return
    if isinstance(ins, (KernelCall, DelegateCall)):
        for j, k in enumerate(ins.args):
            if not 0 <= k < n_values:
                yield _invalid(f"{where}: argument {j} refers to value {k}, the program has {n_values}", True)
    if isinstance(ins, OtherInstruction):
        for k in ins.values:
            if not 0 <= k < n_values:
                yield _invalid(f"{where} ({ins.kind}) refers to value {k}, the program has {n_values}", True)
    if isinstance(ins, DelegateCall) and not 0 <= ins.delegate_index < len(plan.delegates):
        # Checked when it executes (Method::execute_instruction); the load takes it.
        yield _invalid(f"{where} calls delegate {ins.delegate_index}, the program lists {len(plan.delegates)}", True)
    if not isinstance(ins, KernelCall):
        return
    if not 0 <= ins.op_index < len(plan.operators):
        # resolve_operator's error is only kept when no later call resolves (its delayed_error is
        # overwritten): such a program may load and then run an instruction with no kernel.
        yield _invalid(f"{where} calls operator {ins.op_index}, the program lists {len(plan.operators)}", True)
        return
    if program is None:
        return
    if ins.op_index not in reported:
        reported.add(ins.op_index)
        yield from _operator_problems(plan, ins.op_index)
    values = [plan.values[k] for k in ins.args if 0 <= k < n_values]
    tensors = [v for v in values if isinstance(v, TensorValue)]
    key = len(_kernel_key(tensors))
    if key >= KERNEL_KEY_LIMIT:
        yield _invalid(f"{where}: its {len(tensors)} tensors make a kernel key of {key} characters, "
                       f"the runtime's limit is {KERNEL_KEY_LIMIT - 1}")


def _operator_problems(plan: ExecutionPlan, index: int) -> Iterator[Problem]:
    """method.cpp populate_operator_name: "name.overload" in a 100-byte buffer, read as C strings."""
    op = plan.operators[index]
    if f"operators[{index}].name" in plan.absent:
        yield _invalid(f"operator {index} has no name")
        return
    for part, text in (("name", op.name), ("overload", op.overload)):
        if "\0" in text:
            # The runtime reads the C string, up to the NUL: another name than the file's.
            yield _invalid(f"operator {index}: its {part} {text!r} holds a NUL byte")
    length = len(op.qualified_name.encode("utf-8", errors="surrogateescape"))
    if length >= OPERATOR_NAME_LIMIT:
        yield _invalid(f"operator {index}: its name is {length} bytes, the runtime's limit is {OPERATOR_NAME_LIMIT - 1}")


def _kernel_key(tensors: list[TensorValue]) -> str:
    """operator_registry.cpp make_kernel_key_string: "v1/" then dtype;dim,order per tensor, '|'-separated."""
    if not tensors:
        return ""
    return "v1/" + "|".join(f"{t.scalar_type};" + ",".join(str(d) for d in t.dim_order) for t in tensors)
