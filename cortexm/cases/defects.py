"""Known upstream defects: where each lives, how to recognise the code that has it, and
how its failure looks.

A case that hits one is an expected failure (XFAIL) only while two things hold:
the code that has the defect is what runs (the files it lives in still have a
content hash known to carry it, whatever tree, archive or commit they come
from), and the case fails the way the defect fails (the stage and a pattern of
the failure line: its signature). A case that fails any other way is a plain
FAIL, "fails differently from <defect>"; a case that passes while the defect
applies is XPASS and fails the run, so a fix, upstream or local, turns the
suite green exactly when it lands and a record never outlives its defect.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from cortexm.base import syntax

# Stages a failure is reported at (cortexm.report.results.CaseResult.failures).
STAGES = ("export", "verify", "lowering", "constants", "dialect", "semantic", "accuracy", "run", "memory", "compare",
          "upstream-reference", "cross-core",
          "upstream-test")
# Where a component's files are found: component -> (path relative to its tree -> file, or None if unknown).
Locator = Callable[[str], "Path | None"]


@dataclass(frozen=True)
class KnownDefect:
    name: str  # short, for one-line messages: "CMSIS-NN #230"
    reason: str  # what fails, the evidence, the upstream reference and fix
    # "cmsis-nn" (the runner's CMSIS-NN tree), "executorch-runtime" (the runner's ExecuTorch
    # tree) or "lowering" (the Python that lowers); None: a user's note, always applies.
    component: str | None = None
    # (path in the component's tree, sha256 of versions of that file known to have the defect).
    # A Python file's versions are listed twice: the sha256 of their bytes, then of their syntax
    # tree (syntax_sha256), so that a comment or blank line added keeps the defect recognised, as
    # it keeps the export key (ast.dump's text is that of the Python the digests were taken with).
    # "FILE.py::f,g" names the functions or classes of FILE.py the defect lives in: only their
    # syntax trees count (symbols_sha256), so an edit elsewhere in the file keeps it recognised.
    files: tuple[tuple[str, tuple[str, ...]], ...] = ()
    stage: str | tuple[str, ...] = "any"  # the stage(s) the failure shows at; "any" for a user's note
    signature: str = ""  # regex the failure line at that stage matches ("": any line)
    cores: tuple[str, ...] = ()  # empty: every core

    def applies(self, core: str, locate: dict[str, Locator]) -> bool:
        """The defect is in the code under test: its files still carry a known-broken hash.
        A file that cannot be found counts as broken: expect the failure rather than call
        a pass a surprise."""
        if self.cores and core not in self.cores:
            return False
        if self.component is None:
            return True
        find = locate.get(self.component)
        for path, broken in self.files:
            path, _, symbols = path.partition("::")
            file = find(path) if find else None
            if file is None:
                return True
            if symbols:
                if symbols_sha256(file, symbols) in broken:
                    return True
            elif file_sha256(file) in broken or syntax_sha256(file) in broken:
                return True
        return not self.files

    @property
    def stages(self) -> tuple[str, ...]:
        return (self.stage,) if isinstance(self.stage, str) else self.stage

    def explains(self, stage: str, line: str) -> bool:
        """A failure at `stage` saying `line` is this defect's."""
        if "any" not in self.stages and stage not in self.stages:
            return False
        return not self.signature or re.search(self.signature, line) is not None

    def observable(self, stages_reached: set[str]) -> bool:
        """Whether a run that reached these stages could have shown the defect."""
        return "any" in self.stages or bool(set(self.stages) & stages_reached)


@dataclass(frozen=True)
class Judgement:
    """What known defects make of a run: XFAIL (every failure is theirs), XPASS (a run that could
    have shown one passed), or FAIL (a failure none of them explains)."""

    status: str  # "XFAIL", "XPASS" or "FAIL" (cortexm.report.results.Status values)
    reason: str
    defect: KnownDefect


def judge(known: tuple[KnownDefect, ...], failures: list[tuple[str, str]], reached: set[str]) -> Judgement | None:
    """The verdict of the defects `known` to apply here on a run that failed with `failures`
    ((stage, line), first first) having reached the stages `reached`; None when they change
    nothing (no defect applies, or the run passed where none could show). The one place a known
    defect turns a verdict: the test app's cases, the dialect goldens, upstream's own tests."""
    if not known:
        return None
    if failures:
        unexplained = [(stage, line) for stage, line in failures if not any(d.explains(stage, line) for d in known)]
        if unexplained:
            stage, line = unexplained[0]
            return Judgement("FAIL", f"fails differently from {known[0].name} ({stage}): {line}", known[0])
        explaining = next(d for d in known if d.explains(*failures[0]))
        reason = explaining.reason if explaining.name == explaining.reason else f"{explaining.name}: {explaining.reason}"
        return Judgement("XFAIL", reason, explaining)
    if any(d.observable(reached) for d in known):
        return Judgement("XPASS", f"expected to fail ({known[0].name}) but passed: the defect looks fixed here, update its "
                                  "record in cortexm/cases/defects.py or the case", known[0])
    return None


def explaining(candidates: tuple[KnownDefect, ...], core: str, stage: str, line: str,
               locate: dict[str, Locator]) -> KnownDefect | None:
    """The first of `candidates` that applies on `core` and explains a failure at `stage`."""
    return next((d for d in candidates if d.applies(core, locate) and d.explains(stage, line)), None)


@cache
def file_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


@cache
def syntax_sha256(path: Path) -> str | None:
    """A Python file's syntax tree, as the export key counts it (None: not Python, or unreadable;
    read once per process, as file_sha256)."""
    from cortexm.sources.backend_source import lowering_content

    if Path(path).suffix != ".py":
        return None
    try:
        return hashlib.sha256(lowering_content(Path(path))).hexdigest()
    except OSError:
        return None


@cache
def symbols_sha256(path: Path, symbols: str) -> str | None:
    """The syntax trees of the top-level functions or classes `symbols` ("f,g") of a Python file,
    in that order, as syntax_sha256 counts a file (None: unreadable, or one of them missing)."""
    import ast

    try:
        tree = syntax.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None
    defined = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    wanted = symbols.split(",")
    if any(name not in defined for name in wanted):
        return None
    return hashlib.sha256("\n".join(ast.dump(defined[name]) for name in wanted).encode()).hexdigest()


def _written_past(operator: str, argument: str) -> str:
    """The memory oracle's line for a call of `operator` that wrote past the end of its
    `argument`: the guard on a core, or AddressSanitizer on the host."""
    return (rf"{operator}\S* \(instruction \d+\):? (wrote \d+ bytes|write of \d+ B \d+ B) past the end "
            rf"of its (\w+ / )*{argument}")


_TRANSPOSE_CONV_S8 = "Source/ConvolutionFunctions/arm_transpose_conv_s8.c"
_TRANSPOSE_CONV_BUFFER = "Source/ConvolutionFunctions/arm_transpose_conv_get_buffer_sizes_s8.c"

CMSIS_NN_TRANSPOSE_CONV_ROWS = KnownDefect(
    "CMSIS-NN #230",
    "CMSIS-NN arm_transpose_conv_s8 misaligns output rows when pad_h % stride_h != 0 "
    "(ARM-software/CMSIS-NN issue #230, fixed by PR #233, commit 4a8f5b5d, after the pinned dbf45dbf)",
    component="cmsis-nn",
    files=((_TRANSPOSE_CONV_S8, ("9301deed2141f2903c498cd7f8b4a5d62b06af0996d4c27346eb01304cc2ce52",)),),  # dbf45dbf
    # Misaligned rows leave others unwritten: they hold whatever the buffer held before.
    stage=("compare", "memory"),
    signature=r"LSB|outputs change with what fills the planned buffers",
)

CMSIS_NN_TRANSPOSE_CONV_SCRATCH = KnownDefect(
    "CMSIS-NN PR #243",
    "CMSIS-NN arm_transpose_conv_s8_get_buffer_size (and its MVE twin) sizes the scratch with stride.h where "
    "arm_transpose_conv_s8 uses stride.w: when stride_w > max(kernel_w, stride_h) the buffer is too small "
    "(input [1,4,5,4], filter 4x1, stride (1,2): 576 B sized, 640 B written) and the kernel writes into what "
    "the memory plan put next (fixed upstream by ARM-software/CMSIS-NN PR #243, merged 2026-09-10, after "
    "dbf45dbf and 4a8f5b5d; ExecuTorch PR #22720 follows it)",
    component="cmsis-nn",
    files=((_TRANSPOSE_CONV_BUFFER,
            ("4e16d2e9e448adfb839c5aaff67463de8309629629d61603484fad638628458d",)),),  # dbf45dbf, 4a8f5b5d
    stage=("memory", "compare"),
    # The guard on a core, AddressSanitizer on the host, or (without either) the damage.
    signature=_written_past("quantized_transpose_conv2d", "scratch") + "|LSB",
)

EXECUTORCH_MATMUL_CONSTANT = KnownDefect(
    "ExecuTorch MatmulToBmmPass",
    "ExecuTorch MatmulToBmmPass calls .to_tensor() on a constant matmul operand during CortexMQuantizer "
    "annotation (AttributeError); in executorch 1.5.1 and main cff6f4dd, no upstream fix yet",
    component="lowering",
    files=(("backends/cortex_m/passes/matmul_to_bmm_pass.py",
            ("4a67573bc2a75f768924a0c17d087a4e6da5d0de1cfd8b594e33f8b8287cb4f9",
             "5d4ad825a24b6046c8d7715b52b12e833a2b7067fc7446f4801d11270e00de6e",)),),  # 1.5.1, cff6f4dd
    stage="export",
    signature=r"AttributeError: .*to_tensor",
)

EXECUTORCH_DIM_ORDER_SIZE_ONE = KnownDefect(
    "ExecuTorch #22520",
    "ExecuTorch exir/tensor.py dim_order_from_stride gives channels_last tensors with size-1 dims the "
    "non-standard dim order (0,2,1,3); the portable clamp after a quantized_mul on [1,1,1,2] then rejects the "
    "program at execute (pytorch/executorch issue #22520, fix PR #22745 open; reproducible without cortex_m)",
    component="lowering",
    files=(("exir/tensor.py",
            ("e75b37d4ffd8adfb55e720808be41f1611bd2fa63a9c8d88fafe87b7eef44b8b",
             "a43f05edcba0c043b7ce919c798cda583f63ba4ff20d69331214167b1d17f3a2",  # 1.5.1
             "a9ceeb2c164bb614924d8925a721297f97b997e5b3957c6d7d926cfe65d795df",
             "53f5a4f2ee755feecd86f0eef87c37256f71190b486b6a40c6680ae6d2aecff7")),),  # cff6f4dd
    stage="run",
    signature=r"dim.order",
)


EXECUTORCH_MINMAX_OUTPUT_LAYOUT = KnownDefect(
    "cortex_m minimum/maximum output layout",
    "ExecuTorch's cortex_m minimum and maximum scramble channels_last activations: their fake kernels "
    "(ops/operators.py minimum_meta, maximum_meta) plan the output contiguous (torch.empty of the broadcast "
    "shape) whatever the inputs' layout, and op_minimum.cpp / op_maximum.cpp call arm_minimum_s8 / "
    "arm_maximum_s8 on the raw memory without checking that the output's dim order is the inputs', so the "
    "NHWC result is read back as NCHW: torch.minimum of two [1,4,5,5] channels_last activations comes out "
    "with 96 of 100 elements wrong, by up to 199 LSB, on every core (the C code as cortexm's integer "
    "reference models it agrees with the device; ExecuTorch's Python reference, torch.minimum, is right). "
    "In 1.5.1 and main cff6f4dd; not reported upstream as far as its issue tracker shows (PR #21752 fixed "
    "the same class of bug in quantized_conv2d)",
    component="lowering",
    files=(("backends/cortex_m/ops/operators.py",
            ("7e4835819b317c66307bbed76188ab7339319f60a94510aae883c58ec27c14a5",
             "4c34007e05502509ded45fe4f10b7186a7275325fcf2bec1042a412b1de08ded",  # 1.5.1
             "ddf8384df5a8b2ca3fc38694327ec9cc7a29e110d98c3d7ed1b0771d05aee504",
             "9e5425131a92a27626195f58a5e6bd514406977f6285a9c2334af4dc4248326d")),),  # cff6f4dd
    # ExecuTorch's Python reference and the quantized model both see it: the output's dim order
    # is not the model's, and the values read back are not its minimum/maximum.
    # And the float model: the values read back are not its minimum/maximum.
    stage=("upstream-reference", "semantic", "accuracy"),
    signature=r"cortex_m::(minimum|maximum) \(call \d+\) departs from the integer reference|^SQNR against the float model|"
              r"^call \d+ cortex_m::(minimum|maximum) .* departs from the quantized model: .*; it is the model's "
              r"value laid out channels-last and read as contiguous$|"
              r"^output \d+ has dim order \(0, 1, 2, 3\), the model's output \(0, 2, 3, 1\)",
)


def user_note(reason: str, cores: tuple[str, ...] = ()) -> KnownDefect:
    """A user's own expected failure (`register(known_failures={core: reason})`)."""
    return KnownDefect(reason, reason, cores=cores)


def default_locators() -> dict[str, Locator]:
    """Where each component's files are when no runner says otherwise: the Python that
    lowers, and the trees a runner would be built from (cortexm.sources)."""
    from cortexm import sources
    from cortexm.sources import backend_source

    def in_tree(kind: sources.SourceKind) -> Locator:
        root = sources.locate(kind).path
        return lambda rel: (root / rel) if root is not None else None

    return {"lowering": backend_source.lowering_file, "cmsis-nn": in_tree(sources.CMSIS_NN),
            "executorch-runtime": in_tree(sources.EXECUTORCH)}


CMSIS_NN_TRANSPOSE_CONV_ROW_OVERRUN = KnownDefect(
    "CMSIS-NN transposed-conv row overrun",
    "CMSIS-NN arm_transpose_conv_s8 flushes stride_h rows per input row whatever the output height, so when "
    "pad_h > kernel_h - stride_h (with pad_h % stride_h == 0, apart from #230) it writes rows past the end of "
    "the output: into whatever follows it, and with a batch of 2 into the second image (bench/repro/"
    "transpose_conv_row_overrun.c: 35 bytes past a 5x9x4 output; 167 of 180 elements of the second image "
    "changed); present in dbf45dbf and in 4a8f5b5d, after #233; not reported upstream as far as its issue "
    "tracker shows",
    component="cmsis-nn",
    files=((_TRANSPOSE_CONV_S8, ("9301deed2141f2903c498cd7f8b4a5d62b06af0996d4c27346eb01304cc2ce52",  # dbf45dbf
                                 "5d88b65735252c1a53c6d8b2eb1d66eda878ce5de5e4b722e5cbd6d43638d683")),),  # 4a8f5b5d
    # The guard on a core; on the host AddressSanitizer, also in the normal plan's run (its
    # arena is one allocation, so the call's arguments share a buffer).
    stage=("memory", "compare", "run"),
    signature=_written_past("quantized_transpose_conv2d", r"out\b") + "|LSB",
)

_DEPTHWISE_CONV_S8_OPT = "Source/ConvolutionFunctions/arm_depthwise_conv_s8_opt.c"

CMSIS_NN_DEPTHWISE_PADDED_ROWS = KnownDefect(
    "CMSIS-NN depthwise padded rows",
    "CMSIS-NN arm_depthwise_conv_s8_opt, the DSP path (ARM_MATH_DSP without MVE: the M4, M7, M33), fills its "
    "im2col scratch with ker_y_start rows of zeros above the input and kernel_y - ker_y_end below it without "
    "clamping either to the kernel's height: an output row whose window lies wholly in the vertical padding "
    "(padding.h > kernel_h, dilation 1, one channel per input channel, batch 1) writes "
    "(padding.h - kernel_h) * kernel_w * C * 2 bytes past the kernel_w * kernel_h * C * 2 its "
    "get_buffer_size asks for (ExecuTorch sizes the scratch that way): 4 bytes past 2 for 1 channel, 1x1, "
    "padding (3, 0); 12 past 12 for 3 channels, 2x1, padding (4, 0), on the M7 and the M4, into whatever "
    "the memory plan put next. The MVE path clamps per element. In the pinned dbf45dbf and in CMSIS-NN main "
    "99f736a6 (2026-07-15); not reported upstream as far as its issue tracker shows. Found by cortexm sweep",
    component="cmsis-nn",
    files=((_DEPTHWISE_CONV_S8_OPT,
            ("c2a642c34a1d3b5471e5a21448f79942b65342732367cd167e49ce5e7e54b601",)),),  # dbf45dbf, 99f736a6
    stage="memory",
    signature=_written_past("quantized_depthwise_conv2d", "scratch"),
    cores=("cortex-m4", "cortex-m7", "cortex-m33"),
)

_QUANTIZE_CPP = "backends/cortex_m/ops/op_quantize_per_tensor.cpp"
_QUANTIZE_CPP_HASHES = ("b183eca344f814e12023d39d7faf381eaae8dbb10d8860020aeea0a648b176cf",)  # cff6f4dd

EXECUTORCH_QUANTIZE_MVE_ROUNDING = KnownDefect(
    "quantize_per_tensor rounds differently on MVE",
    "ExecuTorch's cortex_m quantize_per_tensor is not bit-exact across cores: its Helium loop (M55) rounds "
    "x * inv_scale once, inside a fused multiply-add with a magic number, where the scalar loop (every other "
    "core, and the M55's remainder) rounds the product to float32 and then again in nearbyint; inputs within "
    "one float32 step of a rounding tie quantize to neighbouring integers (op_quantize_per_tensor.cpp; not "
    "reported upstream as far as its issue tracker shows)",
    component="executorch-runtime",
    files=((_QUANTIZE_CPP, _QUANTIZE_CPP_HASHES),),
    stage="cross-core",
    # Only when the M55's integer reference with the scalar loop's rounding agrees with the other cores.
    signature=r"each core as its own integer reference predicts: .*; the cores agree without ExecuTorch's Helium loops",
    cores=("cortex-m55",),
)

EXECUTORCH_QUANTIZE_MVE_WRAP = KnownDefect(
    "quantize_per_tensor wraps on MVE",
    "ExecuTorch's cortex_m quantize_per_tensor Helium loop (M55) narrows the int32 result to int16 by "
    "truncation (vmovnbq_s32) before it clamps to [quant_min, quant_max], so an input more than 32767 "
    "quantization steps from the zero point wraps instead of saturating (e.g. -400.0 at a step of 0.0078 "
    "becomes 127 instead of -128); the scalar loop of the other cores saturates (op_quantize_per_tensor.cpp; "
    "not reported upstream as far as its issue tracker shows)",
    component="executorch-runtime",
    files=((_QUANTIZE_CPP, _QUANTIZE_CPP_HASHES),),
    stage=("compare", "cross-core"),
    signature=r"LSB|each core",
    cores=("cortex-m55",),
)

EXECUTORCH_DEPTHWISE_ONE_CHANNEL_SCRATCH = KnownDefect(
    "cortex_m depthwise scratch, one input channel",
    "ExecuTorch's cortex_m lowering sizes a depthwise conv's scratch with the filter dims [C_OUT, H, W, 1] "
    "(passes/scratch_buffer_sizes.py) where the kernel and CMSIS-NN use [1, H, W, C_OUT]; on MVE CMSIS-NN "
    "runs a depthwise conv of one input channel and more than one output channel (GCC's threshold; 8 with "
    "armclang) as a regular conv whose filter dims it takes from those, so for a 1x1 kernel without padding "
    "the lowering's size is 64 B larger (66 B sized, 2 B needed for 2 output channels: CMSIS-NN's own "
    "arm_depthwise_conv_wrapper_s8_get_buffer_size_mve with each filter layout) and a runtime with "
    "CORTEX_M_ENABLE_RUNTIME_CHECKS refuses the call (Error::Internal); without the checks the buffer is "
    "only too large. In executorch 1.5.1 and main cff6f4dd; not reported upstream as far as its issue "
    "tracker shows. Found by the exhaustive scope: conv2d 1 -> 2..9 channels, 1x1, on the M55",
    component="lowering",
    files=(("backends/cortex_m/passes/scratch_buffer_sizes.py",
            ("06cacfc36779b83cadd23d9daabb8f4c13b07f17fa679c22fa1acc64008decfc",
             "f08de4a5de74e45b0a52bc551e788b6efb236cccf2c33aee82a0eecb9959121f",  # 1.5.1
             "5b75c921e0d8aeca1be9176e8bc02c4838469a414284b040cde744559c78fe87",
             "b1073abd3083b6c9b9545093b70de9df7074ff1c9f6c9b548d2a709025d3c172")),),  # cff6f4dd
    stage="run",
    signature=r"quantized_depthwise_conv2d_out: scratch buffer size incorrect",
    cores=("cortex-m55", "cortex-m85"),
)

EXECUTORCH_DEAD_WEIGHTS = KnownDefect(
    "cortex_m dead weights",
    "ExecuTorch's cortex_m passes give every convolution a copy of its weight in the kernel's layout "
    "(passes/aten_to_cortex_m_pass.py, create_constant_placeholder of `<node>_weight_nhwc`) and leave the "
    "original int8 weight (convert_pt2e's `_frozen_paramN`) and its per-channel scales and zero points "
    "(`_scale_N`, `_zero_point_N`) in the graph with no user; no pass removes unused buffers (exir's "
    "remove_unused_parameters_pass runs before to_edge, and only on parameters), and the emitter writes "
    "every constant the signature lists: a program carries each convolution's weight twice, half of a "
    "ResNet-8's constant bytes (77,808 of 159,240). On MVE cores every linear's int32 bias stays the same "
    "way beside the kernel_sum that replaces it (the autoencoder's ten biases, 6,688 B). In executorch 1.5.1 "
    "and main cff6f4dd; not reported upstream as far as its issue tracker shows",
    component="lowering",
    # The replacements that make the kernel-layout copies (and, on MVE, the kernel sum): an edit
    # elsewhere in the file (another operator's replacement, the pass's own code) keeps the defect.
    files=(("backends/cortex_m/passes/aten_to_cortex_m_pass.py::"
            "_get_convolution_replacement,_get_transpose_conv2d_replacement,_get_linear_replacement",
            ("4c6169b6ce5c4f70daa52550cceb5e05ecee88dc9cdaa76cfa4edefa9884959f",  # 1.5.1
             "f0f0d71cc7a4b429acb1a09353a1f542cdaf1687229eeb3dc554d21d0f56a445")),),  # cff6f4dd
    stage="constants",
    # The constants it leaves: the folded weights and their per-channel quantization parameters.
    signature=r"^(_frozen_param|_scale_|_zero_point_)\d+$",
)

EXECUTORCH_CONSTANT_MUL = KnownDefect(
    "cortex_m multiply by a constant",
    "ExecuTorch's cortex_m backend leaves a multiply by a constant (an attention's scale, `scores * d ** -0.5`) "
    "in float: before annotating, the quantizer's ScalarsToAttributePass makes the Python scalar a one-element "
    "tensor attribute, and its pattern check (quantizer/pattern_checkers.py, CortexMAddMulCheck) refuses a "
    "multiply whose two operands differ in shape unless it is a channel broadcast (QuantizerReporter: 'Tried "
    "annotating unsupported configuration of operators'); the multiply is not annotated, and computes in float "
    "between the bmm's dequantize and the softmax's quantize. The scale as a tensor of the scores' shape "
    "(a registered buffer) is annotated and lowered. The class of ExecuTorch #21943 (a transformer's bmm, mul "
    "and softmax left unquantized); in 1.5.1 and main cff6f4dd",
    component="lowering",
    files=(("backends/cortex_m/quantizer/pattern_checkers.py",
            ("13377471e59824ccac6986ad3c0cea60517f02fea0bf5ee39a9decb0567c5d27",
             "f19cc159574f54507466fa5a369f7aa0dbc442c7b0f604e9f7611c58c13a573e",  # 1.5.1
             "f9e830fc07fb3dc2de01c8d5b5581e13dc43e72fda8a755499bbe35415108c78",
             "7d268b66e82da0bedc5c89e2031324288e06f71efe97820b03d4b385fd976ece")),),  # cff6f4dd
    stage="lowering",
    signature=r"aten::mul\.out",
)

EXECUTORCH_SPATIAL_MEAN = KnownDefect(
    "cortex_m spatial mean",
    "ExecuTorch main cff6f4dd's cortex_m lowering leaves a mean over H and W (`x.mean((2, 3))`, the other "
    "spelling of nn.AdaptiveAvgPool2d(1)) in float: no quantizer pattern has aten.mean.dim, and "
    "DecomposeMeanPass (passes/decompose_mean_pass.py, run before annotation) rewrites only "
    "adaptive_avg_pool2d into the average pool CMSIS-NN runs, so the mean is not annotated and computes in "
    "float between the input's quantize and the output's. Fixed upstream by PR #22154 (merged after cff6f4dd; "
    "the 1.5.1 wheel has it, and lowers the mean as cortex_m::quantized_avg_pool2d): DecomposeMeanPass "
    "rewrites a 4-D mean over both spatial dimensions as avg_pool2d. Case mean_hw",
    component="lowering",
    files=(("backends/cortex_m/passes/decompose_mean_pass.py",
            ("29226499176bdc6a0bcd88f09d270dc62e7f95cf313505e46e8396f35fce860a",
             "123ec274800356621d718b77db3a59a6fed9fda88b79e17cea69b01a0ffde4d2")),),  # cff6f4dd
    # The mean left in float, and so the lowered graph the 1.5.1 golden does not have.
    stage=("lowering", "dialect"),
    signature=r"aten::mean\.out|^lowered graph differs from .*mean_hw\.txt$",
)

EXECUTORCH_BMM_OF_LINEAR = KnownDefect(
    "cortex_m bmm of a linear's output",
    "ExecuTorch's cortex_m passes fail on a bmm whose second operand is a linear's output (an attention's "
    "value projection, `torch.bmm(attn, self.v(x))`): the bmm is rebuilt with a quantized first operand and "
    "the linear's int32 result as its second, and torch refuses it (`expected scalar type torch.int8 but found "
    "torch.int32`, raised while ReplaceScalarWithTensorArgPass re-traces the graph). Proved by reduction: "
    "bmm(a, linear(x)) fails, bmm(a, linear(x).transpose(1, 2)) and bmm(a, x) lower; which pass leaves the "
    "int32 operand was not established. In 1.5.1 and main cff6f4dd; not reported upstream as far as its "
    "issue tracker shows",
    component="lowering",
    stage="export",
    signature=r"expected scalar type torch\.int8 but found torch\.int32",
)

# The calls beside which cortex_m dead weights leaves constants no call reads: every
# convolution's original weight, and on MVE every linear's bias. A program without them cannot
# show the defect, whether it is fixed or not.
DEAD_WEIGHTS_CALLS = ("cortex_m::quantized_conv2d", "cortex_m::quantized_depthwise_conv2d",
                      "cortex_m::quantized_transpose_conv2d")
DEAD_WEIGHTS_CALLS_MVE = (*DEAD_WEIGHTS_CALLS, "cortex_m::quantized_linear")


def shows_dead_weights(operators, backend: str) -> bool:
    """Whether a program calling `operators` (qualified names) on a core of CMSIS-NN `backend`
    would carry EXECUTORCH_DEAD_WEIGHTS's constants if the code under test has it."""
    wanted = DEAD_WEIGHTS_CALLS_MVE if backend == "MVE" else DEAD_WEIGHTS_CALLS
    return any(op.split(".", 1)[0] in wanted for op in operators)


NCHW_INPUT = KnownDefect(
    "an NCHW input",
    "a model given contiguous (NCHW) inputs: the cortex_m quantizer takes convolutions only in channels_last, "
    "so the legacy lowering leaves them in float, and the average pool it does lower then refuses the NCHW "
    "tensor when it runs (`tensors must use channels_last dimension order`); cortexm names the layout at "
    "stage `lowering`, before anything runs",
    stage=("lowering", "run"),
    signature=r"contiguous \(NCHW\)|channels_last",
)

# Differences between cores that each core's own integer reference predicts.
CROSS_CORE_FINDINGS = (EXECUTORCH_QUANTIZE_MVE_ROUNDING,)


# --- defects of ExecuTorch's own test suite, as `cortexm upstream-tests` runs it --------------

EXECUTORCH_MODEL_TESTS_LOWER_FOR_M55 = KnownDefect(
    "upstream's model tests lower for the M55",
    "backends/cortex_m/test/models/test_*.py build CortexMTester without the cortex_m_target fixture, so they "
    "lower for the M55 (MVE) whatever --cortex-m-target says; on another core the programs carry MVE scratch "
    "sizes and MVE linear layouts: the runtime's scratch check stops them, or a linear gives wrong outputs "
    "with no error at all (deep_autoencoder); upstream's FVP is an M55, so this never shows there",
    component="lowering",
    files=(("backends/cortex_m/test/models/test_deep_autoencoder.py",
            ("a094981dfbbfcb8570d5486f3d01a136ac53a62b32ba5f12a32a1f916b40c6fc",
             "9212b6c4336595b40931ae6917c8dd41786f596c8db2f3cae79f279ee2777ed4",)),),  # 1.5.1, cff6f4dd
    stage="upstream-test",
    signature=r"^models/test_\w+::test_implementation_\w+.*(lowered for another CMSIS-NN variant|scratch|"
              r"does not match reference output)",
    cores=("cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "host"),
)

# The same CMSIS-NN defect, as upstream's transposed-conv tests meet it: kernel 3, stride 2,
# padding 1 (pad_h % stride_h != 0), on every core; they pass with CMSIS-NN 4a8f5b5d.
CMSIS_NN_TRANSPOSE_CONV_ROWS_UPSTREAM_TESTS = replace(
    CMSIS_NN_TRANSPOSE_CONV_ROWS,
    stage="upstream-test",
    signature=r"^ops/test_conv_transpose::test_implementation_conv_transpose2d\[[\w-]+-conv_transpose2d_(relu|hardtanh)\]"
              r".*does not match reference output",
)

UPSTREAM_TEST_DEFECTS = (EXECUTORCH_MODEL_TESTS_LOWER_FOR_M55, CMSIS_NN_TRANSPOSE_CONV_ROWS_UPSTREAM_TESTS)
