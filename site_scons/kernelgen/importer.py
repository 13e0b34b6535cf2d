"""Workloads from a model: the convolutions and linear layers a PyTorch network runs.

    scons workloads MODEL=resnet50 BATCH=256          # kernel_specs/workloads/resnet50_b256.txt
    scons workloads MODEL=mypkg.nets:make_net INPUT=3x512x512 NAME=mynet
    scons workloads MODEL=resnet50 BATCH=256 REPLACE=1   # writes resnet50_b256.txt again

    python -m kernelgen.importer --model resnet50 --batch 256 --sets-dir kernel_specs/workloads

Two halves. The PyTorch half (``record_model``) builds the model, a torchvision model by
name (never with weights) or ``package.module:factory`` (a callable returning an
``nn.Module``), runs one forward pass on a BATCH x INPUT tensor on the ``meta`` device
(shapes only, no arithmetic; on the GPU or the CPU only when the model cannot run on ``meta``), and
records every convolution and linear call it makes through a TorchFunctionMode, functional
calls included, as ``Call``s. The plain-Python half (``plan_workloads``, ``workload_text``)
turns recorded calls into a workload file: every distinct 2-D convolution on an NCHW input as a
``conv2d_fprop`` line (grouped and depthwise ones with ``groups=``), every linear layer as a
``gemm`` line, in the order the network first runs them, each with ``count=`` and ``dtype=``;
every call the tool cannot profile (1-D, 3-D, transposed, ...) as a comment with its count; and
the share of the recorded calls' FLOPs the lines cover. The
file is written whole, atomically, and only when it is complete; a file already there only with
REPLACE=1 (a set's results were measured for the workloads its file lists).

A factory is the user's code: whatever it raises, SystemExit and KeyboardInterrupt included, is
one line naming MODEL=, a ``breakpoint()`` in it raises rather than stopping at a debugger's
prompt, and what is plainly no model factory (Python's own modules, a class that is no
``nn.Module``) is refused without being called. The process exits 0 only once the file is written.
"""

import argparse
from collections import Counter
import contextlib
import difflib
import importlib
import inspect
import math
import os
import re
import sys
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import inputs
from .errors import KernelgenError, shorten
from .folds import per_channel, permutation
from .fusion import fusible_part
from .ops.common import ACTIVATIONS, INT_MAX, ascii_integer
from .render import write_generated
from .vocab import DATA_TYPES
from .workloads import Conv2dProblem, GemmProblem, parse_workloads

DEFAULT_INPUT = "3x224x224"
DEFAULT_DTYPE = "f16"
DTYPES = ("f16", "bf16")  # what a network's layers may be profiled as
DEFAULT_RESULTS = "profile_results"  # where a set's results are, relative to where scons runs
CONV_OPS = ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
ATTENTION = "attention"  # an attention's batched matrix products (Q K^T, then by V), listed, not profiled
MATMUL = "matmul"  # a matrix product outside a linear layer (matmul, @, bmm, einsum, ...), listed, not profiled
UNSEEN = "unseen_attention"  # a call of a module named as an attention that ran no product the recorder sees
OPS = CONV_OPS + ("linear", ATTENTION, MATMUL, UNSEEN)
_ATTENTION_MODULE = re.compile(r"attention|attn", re.IGNORECASE)  # a module's class name that says it is one
TORCH_DTYPES = {"float16": "f16", "bfloat16": "bf16"}  # torch dtype name -> workload dtype

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_FACTORY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*):([A-Za-z_][A-Za-z0-9_]*)\Z")
HOW_TO_NAME = "name a torchvision model (e.g. MODEL=resnet50) or your own as MODEL=package.module:factory"
_OWN_PACKAGE = __name__.partition(".")[0]  # kernelgen: its functions build no model


class ModelError(KernelgenError):
    """A model, its input or the workload file it should become is wrong; names the variable."""


class NoTorchError(ModelError):
    pass


# ---- the request ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Request:
    model: str  # a torchvision name or package.module:factory
    batch: int
    input: tuple | None  # (C, H, W); None: the model's own (``with_model_input``)
    dtype: str  # what the layers are profiled as
    name: str  # the workload set's name
    replace: bool = False  # whether an existing NAME.txt may be written again
    epilogues: bool = False  # whether the lines say the epilogues the network runs (EPILOGUES=1)
    pad: bool = False  # whether channel counts no multiple of 8 between two convolutions are padded (PAD=1)

    @property
    def factory(self):
        """(module, callable name) for MODEL=package.module:factory, else None."""
        match = _FACTORY.match(self.model)
        return (match.group(1), match.group(2)) if match else None

    def command(self) -> str:
        """The scons command that makes this request (what the file's header says wrote it)."""
        words = ["scons", "workloads", f"MODEL={self.model}", f"BATCH={self.batch}"]
        if self.input_text != DEFAULT_INPUT:
            words.append(f"INPUT={self.input_text}")
        if self.dtype != DEFAULT_DTYPE:
            words.append(f"DTYPE={self.dtype}")
        if self.name != default_name(self.model, self.batch):
            words.append(f"NAME={self.name}")
        if self.epilogues:
            words.append("EPILOGUES=1")
        if self.pad:
            words.append("PAD=1")
        return " ".join(words)

    @property
    def input_text(self) -> str:
        return "" if self.input is None else "x".join(map(str, self.input))


def _positive(variable: str, text: str) -> int:
    value = ascii_integer(text.strip())
    if value < 1:
        raise ModelError(f"{variable}={shorten(text)!r}: expected a positive integer")
    if value > INT_MAX:
        raise ModelError(f"{variable}={shorten(text)!r}: must be at most {INT_MAX} (a C++ int)")
    return value


# What INPUT's dimensions are, by their number: a sequence, an image (the default), a video.
INPUT_FORMS = {2: "CxL", 3: "CxHxW", 4: "CxTxHxW"}


def parse_input(text: str) -> tuple:
    """INPUT=CxHxW (or CxTxHxW for a video model, CxL for a sequence) -> its dimensions, each a
    positive integer of at most INT_MAX."""
    values = [ascii_integer(p) for p in text.strip().lower().split("x")]
    if len(values) not in INPUT_FORMS or min(values) < 1:
        raise ModelError(f"INPUT={shorten(text)!r}: expected CxHxW, three positive integers (e.g. INPUT=3x224x224; "
                         "CxTxHxW for a video model, CxL for a sequence)")
    if max(values) > INT_MAX:
        *first, last = INPUT_FORMS[len(values)].split("x")
        raise ModelError(f"INPUT={shorten(text)!r}: {', '.join(first)} and {last} must each be at most {INT_MAX} (a C++ int)")
    return tuple(values)


def parse_replace(value, variable: str = "REPLACE", meaning: str = "write NAME.txt again") -> bool:
    """REPLACE=1 lets an existing set file be written again; empty or 0 (the default) keeps it
    (and so for another 0-or-1 ``variable``)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip()
    if text not in ("", "0", "1"):
        raise ModelError(f"{variable}={shorten(value)!r}: expected 1 ({meaning}) or 0")
    return text == "1"


def check_factory_module(model: str, module: str) -> None:
    """Refuse, before importing it, a module that is not the user's: Python's standard library
    (builtins included: its functions exit, start a debugger or run shell commands) or kernelgen."""
    top = module.partition(".")[0]
    if top in sys.stdlib_module_names:
        whose = "Python's standard library"
    elif top in (_OWN_PACKAGE, "__main__"):
        whose = "kernelgen itself"
    else:
        return
    raise ModelError(f"MODEL={model}: '{module}' is {whose}, not a module of yours; {HOW_TO_NAME}")


def default_name(model: str, batch: int) -> str:
    """<model>_b<batch>; for package.module:factory the factory's name stands for the model."""
    return f"{model.rpartition(':')[2]}_b{batch}"


def parse_request(model, batch, input=DEFAULT_INPUT, dtype=DEFAULT_DTYPE, name="", replace="",
                  epilogues="", pad="") -> Request:
    """Validate the variables of `scons workloads` (no PyTorch needed)."""
    model = (model or "").strip()
    if not model:
        raise ModelError(f"MODEL is not set: {HOW_TO_NAME}")
    factory = _FACTORY.match(model)
    if not _IDENTIFIER.match(model) and not factory:
        raise ModelError(f"MODEL={shorten(model)!r}: not a model name; {HOW_TO_NAME}")
    if factory:
        check_factory_module(model, factory.group(1))
    batch = _positive("BATCH", str(batch))
    shape = None if not str(input).strip() else parse_input(str(input))  # empty: the model's own
    if dtype not in DTYPES:
        raise ModelError(f"DTYPE={shorten(dtype)!r}: expected one of {', '.join(DTYPES)}")
    name = name or default_name(model, batch)
    if not _IDENTIFIER.match(name):
        raise ModelError(f"NAME={shorten(name)!r}: a workload set's name must be a plain identifier "
                         "(letters, digits and _, not starting with a digit)")
    return Request(model=model, batch=batch, input=shape, dtype=dtype, name=name, replace=parse_replace(replace),
                   epilogues=parse_replace(epilogues, "EPILOGUES", "write each layer's epilogue= into its line"),
                   pad=parse_replace(pad, "PAD", "pad channel counts no multiple of 8 between two convolutions"))


# ---- recorded calls -> workloads (plain Python) ---------------------------------------------------

@dataclass(frozen=True)
class Call:
    """One convolution or linear call the forward pass made, as PyTorch saw it.

    ``input`` and ``weight`` are shapes (NCHW-style for convolutions, PyTorch's weight layout:
    out x in/groups x spatial..., out x in for linear); ``stride``, ``dilation`` one int per
    spatial dimension; ``padding`` one int per spatial dimension, or PyTorch's "same" or
    "valid"; ``dtype`` the input's torch dtype name ("float32"); ``epilogue`` the steps the forward
    pass ran on the output that a kernel could fuse (``Chains``), as ``epilogue=`` writes them."""

    op: str
    input: tuple
    weight: tuple
    stride: tuple = ()
    padding: object = ()
    dilation: tuple = ()
    groups: int = 1
    dtype: str = "float32"
    epilogue: str = ""  # what the forward pass ran on its output and could be fused (record_calls)
    module: str = ""  # an UNSEEN call's module class
    fed_by: int = -1  # a convolution whose input is, and only is, call fed_by's output after its chain
    padded_out: int = 0  # the output channels before pad_channels padded them; 0: not padded
    padded_in: int = 0  # the input channels before pad_channels padded them; 0: not padded


def resolve_padding(padding, kernel: tuple, dilation: tuple) -> tuple:
    """(before, after) per spatial dimension. "same" pads dilation*(kernel-1) in total, the odd
    one after (on the right and bottom), as PyTorch does; "valid" pads nothing."""
    if padding == "valid":
        return tuple((0, 0) for _ in kernel)
    if padding == "same":
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return tuple((t // 2, t - t // 2) for t in total)
    if isinstance(padding, str):
        raise ModelError(f"padding {padding!r} is neither 'same', 'valid' nor numbers")
    return tuple((p, p) for p in padding)


def why_not_profiled(call: Call) -> str:
    """Empty when the tool can profile ``call``; otherwise why it cannot."""
    if call.op == "linear":
        return ""
    if call.op == ATTENTION:
        return "attention's batched matrix products (Q K^T and its product with V)"
    if call.op == MATMUL:
        return "matrix products outside a linear layer (matmul, @, bmm, einsum)"
    if call.op == UNSEEN:
        return ("attention modules that ran no matrix product the recorder sees (if they compute one, a fused or "
                "compiled kernel does, and its FLOPs are not in this file)")
    if call.op.startswith("conv_transpose"):
        return "transposed convolution"
    if call.op != "conv2d":
        return f"{call.op[-2]}-D convolution"
    if len(call.input) != 4:
        return f"conv2d on a {len(call.input)}-D input (the tool profiles NCHW batches)"
    return ""


def _fusion_of(call: Call, dtype: str) -> tuple:
    """``fusion.fusible_part``'s arguments for ``call``: its epilogue, groups, channels in and out."""
    channels = tuple(reversed(call.weight)) if call.op == "linear" else (call.input[1], call.weight[0])
    return call.epilogue, call.groups, channels, dtype


def to_problem(call: Call, dtype: str, epilogues: bool = False):
    """The workload a profilable call is: Conv2dProblem or GemmProblem, in ``dtype``; with
    ``epilogues``, of what of the call's epilogue a fused kernel computes (``fusion.fusible_part``)."""
    epilogue = fusible_part(*_fusion_of(call, dtype))[0] if epilogues else ""
    if call.op == "linear":
        out_features, in_features = call.weight
        return GemmProblem(m=math.prod(call.input[:-1]), n=out_features, k=in_features, dtype=dtype,
                           epilogue=epilogue)
    n, c, h, w = call.input
    k, _, r, s = call.weight
    (top, bottom), (left, right) = resolve_padding(call.padding, (r, s), call.dilation)
    # An uneven "same" padding is the extra row/column padded onto the input, then even padding.
    return Conv2dProblem(n=n, h=h + bottom - top, w=w + right - left, c=c, k=k, r=r, s=s, pad_h=top,
                         pad_w=left, stride_h=call.stride[0], stride_w=call.stride[1],
                         dilation_h=call.dilation[0], dilation_w=call.dilation[1], groups=call.groups, dtype=dtype,
                         epilogue=epilogue)


def as_conv2d(call: Call):
    """A 3-D convolution that is a 2-D one on the same memory (NDHWC), as that conv2d call; else
    None. A filter of 1 x R x S (no stride or padding along T) runs over the N*T frames, each an
    H x W image; one of R x 1 x 1 (none along H and W) over the N images of T x (H*W) pixels, its
    stride, padding and dilation along T the 2-D ones along H: the factorized (2+1)-D convolutions
    of video networks (R(2+1)D, S3D). A "same" or "valid" padding is not mapped."""
    view = conv3d_view(call)
    if view is None:
        return None
    n, c, t, h, w = call.input
    k, per_group, r_t, r_h, r_w = call.weight
    (s_t, s_h, s_w), (p_t, p_h, p_w), (d_t, d_h, d_w) = call.stride, call.padding, call.dilation
    if view == "frames":
        return replace(call, op="conv2d", input=(n * t, c, h, w), weight=(k, per_group, r_h, r_w), stride=(s_h, s_w),
                       padding=(p_h, p_w), dilation=(d_h, d_w))
    return replace(call, op="conv2d", input=(n, c, t, h * w), weight=(k, per_group, r_t, 1), stride=(s_t, 1),
                   padding=(p_t, 0), dilation=(d_t, 1))


def conv3d_view(call: Call) -> str | None:
    """Which 2-D view of its memory a 3-D convolution is (``as_conv2d``): "frames" (a 1 x R x S
    filter), "time" (R x 1 x 1), or None."""
    if call.op != "conv3d" or isinstance(call.padding, str) or len(call.input) != 5:
        return None
    _, _, r_t, r_h, r_w = call.weight
    (s_t, s_h, s_w), (p_t, p_h, p_w) = call.stride, call.padding
    if r_t == 1 and s_t == 1 and p_t == 0:
        return "frames"
    if r_h == r_w == 1 and s_h == s_w == 1 and p_h == p_w == 0:
        return "time"
    return None


def conv3d_key(call: Call) -> str:
    """The workload line's ``conv3d=`` of a 3-D convolution that is a 2-D one (``as_conv2d``):
    ``frames:T`` or ``time:H`` (ops/conv2d_fprop.py), from which compare makes its conv3d call;
    "" for any other call."""
    view = conv3d_view(call)
    if view is None:
        return ""
    _, _, t, h, _ = call.input
    return f"frames:{t}" if view == "frames" else f"time:{h}"


def describe(call: Call) -> str:
    """A one-line account of a call, for the comments listing what is not profiled."""
    shape = lambda t: "x".join(map(str, t))  # noqa: E731
    if call.op == ATTENTION:
        (batch_heads, length, dim), source = call.input, call.weight[0]
        return f"attention of {batch_heads} batch x head pairs, L {length}, S {source}, head dim {dim} {call.dtype}"
    if call.op == MATMUL:
        (batch, m, k), n = call.input, call.weight[1]
        return f"{batch} product(s) of {m}x{k} by {k}x{n} {call.dtype}"
    if call.op == UNSEEN:
        return call.module
    text = f"{call.op} input {shape(call.input)} weight {shape(call.weight)}"
    if call.op != "linear":
        padding = call.padding if isinstance(call.padding, str) else shape(call.padding)
        text += (f" stride {shape(call.stride)} padding {padding} dilation {shape(call.dilation)}"
                 f" groups {call.groups}")
    return f"{text} {call.dtype}"


@dataclass
class Plan:
    """Distinct workloads in order of first use, and what the tool cannot profile, with counts."""

    problems: list  # Conv2dProblem / GemmProblem, count set
    skipped: list  # (reason, description, count)
    conv_calls: int
    linear_calls: int
    dtypes: list  # the torch dtypes the profiled calls ran in, sorted
    skipped_flops: list = field(default_factory=list)  # call_flops of each skipped call
    epilogues: dict = field(default_factory=dict)  # epilogue -> profiled calls that run it (record_calls)
    written: bool = False  # whether the lines say their epilogues (EPILOGUES=1)
    unfused: dict = field(default_factory=dict)  # (epilogue, why) -> calls whose epilogue is left unfused, in part
    as_2d: int = 0  # the 3-D convolution calls the lines run as 2-D ones (as_conv2d)
    padded: dict = field(default_factory=dict)  # (channels, padded to) -> pairs of calls (pad_channels)


PAD_TO = 8  # channels: the 16-byte accesses of fp16 kernels (and their fused epilogues) along C and K


def padded_to(channels: int) -> int:
    """``channels`` rounded up to a multiple of PAD_TO."""
    return -(-channels // PAD_TO) * PAD_TO


def _paddable(call: Call) -> bool:
    return call.groups == 1 and (call.op == "conv2d" or conv3d_view(call) is not None)


def pad_channels(calls: list) -> list:
    """``calls`` with each channel count no multiple of PAD_TO between two convolutions (the first's
    output, through its chain of no residual add, read by the second alone: ``fed_by``; neither
    grouped) rounded up to one: the first's filters and the second's input channels grow, the new
    filters zero, and the second's weights for the new channels zero: whatever the chain makes of
    them, the network's output is the same. A padded call's ``padded_out``, ``padded_in`` say its channels before.
    examples/torch_extension/swap.py pads the same pairs where the header has their kernels."""
    out = list(calls)
    for j, second in enumerate(calls):
        i = second.fed_by
        if i < 0 or not _paddable(second) or not _paddable(calls[i]):
            continue
        first, channels = out[i], calls[i].weight[0]
        if channels % PAD_TO == 0 or second.input[1] != channels or "add" in calls[i].epilogue.split("+"):
            continue
        wide = padded_to(channels)
        out[i] = replace(first, weight=(wide, *first.weight[1:]), padded_out=channels)
        out[j] = replace(out[j], input=(out[j].input[0], wide, *out[j].input[2:]),
                         weight=(out[j].weight[0], wide, *out[j].weight[2:]), padded_in=channels)
    return out


def plan_workloads(calls: list, dtype: str = DEFAULT_DTYPE, epilogues: bool = False) -> Plan:
    """Group the calls: one workload per distinct problem (with ``epilogues``, of its epilogue too),
    one comment per distinct skipped call."""
    if dtype not in DATA_TYPES:
        raise ModelError(f"DTYPE={dtype!r}: expected one of {', '.join(DTYPES)}")
    counts, first = {}, {}
    skipped_counts, skipped_first = {}, {}
    dtypes, skipped_flops, chains, unfused = set(), [], {}, {}
    as_2d = 0
    padded = Counter((call.padded_in, call.input[1]) for call in calls if call.padded_in)  # pairs' second calls
    for call in calls:
        if call.op not in OPS:
            raise ModelError(f"recorded call of unknown operation {call.op!r}")
        mapped, view = as_conv2d(call), conv3d_key(call)
        if mapped is not None:
            call, as_2d = mapped, as_2d + 1
        reason = why_not_profiled(call)
        if reason:
            key = (reason, describe(call))
            skipped_counts[key] = skipped_counts.get(key, 0) + 1
            skipped_flops.append(call_flops(call))
            continue
        problem = to_problem(call, dtype, epilogues)
        if mapped is not None:
            problem = replace(problem, conv3d=view)
        chains[call.epilogue] = chains.get(call.epilogue, 0) + 1
        why = fusible_part(*_fusion_of(call, dtype))[1]
        if why:
            unfused[(call.epilogue, why)] = unfused.get((call.epilogue, why), 0) + 1
        if problem.op == "conv2d_fprop" and (problem.p < 1 or problem.q < 1):
            raise ModelError(f"recorded {describe(call)} has no output")
        counts[problem.name] = counts.get(problem.name, 0) + 1
        first.setdefault(problem.name, problem)
        dtypes.add(call.dtype)
    problems = [replace(p, count=counts[p.name]) for p in first.values()]
    skipped = [(reason, text, n) for (reason, text), n in skipped_counts.items()]
    conv_calls = sum(1 for c in calls if c.op in CONV_OPS)
    linear_calls = sum(1 for c in calls if c.op == "linear")
    return Plan(problems, skipped, conv_calls, linear_calls, sorted(dtypes), skipped_flops, chains, epilogues, unfused,
                as_2d, padded)


def workload_line(problem) -> str:
    if problem.op == "gemm":
        words = [f"gemm m={problem.m} n={problem.n} k={problem.k}"]
    else:
        p = problem
        words = [f"conv2d_fprop n={p.n} h={p.h} w={p.w} c={p.c} k={p.k} r={p.r} s={p.s}"]
        for key, (a, b), default in (("pad", (p.pad_h, p.pad_w), None), ("stride", (p.stride_h, p.stride_w), None),
                                     ("dilation", (p.dilation_h, p.dilation_w), 1)):
            if a == b and a != default:
                words.append(f"{key}={a}")
            elif a != b:
                words.append(f"{key}_h={a} {key}_w={b}")
        if p.groups > 1:
            words.append(f"groups={p.groups}")
    if problem.epilogue:
        words.append(f"epilogue={problem.epilogue}")
    words.append(f"count={problem.count} dtype={problem.dtype}")
    if getattr(problem, "conv3d", ""):
        words.append(f"conv3d={problem.conv3d}")
    return " ".join(words)


def check_plan(plan: Plan, request: Request) -> None:
    """A network without a convolution or a linear layer the tool can profile is refused (nothing
    to write); one of linear layers alone (a transformer of tokens, a video model's classifier
    after 3-D convolutions) is written."""
    if plan.problems:
        return
    if plan.conv_calls == 0:
        raise ModelError(f"MODEL={request.model}: the forward pass runs no convolution and no linear layer, so there "
                         "is nothing to profile")
    raise ModelError(f"MODEL={request.model}: none of its {plan.conv_calls} convolution call(s) can be profiled "
                     f"({'; '.join(sorted({reason for reason, _, _ in plan.skipped}))}), and it runs no linear layer")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def workload_text(plan: Plan, request: Request, versions: str) -> str:
    """The workload file: a header comment, the workloads, then what is not profiled, as comments."""
    check_plan(plan, request)
    convs = [p for p in plan.problems if p.op == "conv2d_fprop"]
    gemms = [p for p in plan.problems if p.op == "gemm"]
    listed = lambda op: sum(n for reason, _, n in plan.skipped if reason == why_not_profiled(Call(op, (), ())))  # noqa: E731
    attention_calls_, products, unseen = listed(ATTENTION), listed(MATMUL), listed(UNSEEN)
    skipped_calls = plan.conv_calls - sum(p.count for p in convs)
    source = (f"your factory {request.model}" if request.factory
              else f"torchvision's {request.model} (weights=None: shapes only)")
    ran = ", ".join(plan.dtypes) or "?"
    lines = [
        f"# {request.name}: the convolutions and linear layers of {source}, batch {request.batch}, "
        f"input {request.input_text} ({INPUT_FORMS[len(request.input)]}), one forward pass in eval mode.",
        f"# Written by `{request.command()}` ({versions}); run it again rather than edit this file.",
        f"# The model runs in {ran}; its layers are profiled in {request.dtype} (dtype={request.dtype}), NHWC"
        + (f": the kernels compute in f16 or bf16, so a {ran} model is profiled as {request.dtype}."
           if ran != _torch_name(request.dtype) else "."),
        f"# The forward pass makes {_plural(plan.conv_calls, 'convolution call')}: "
        f"{sum(p.count for p in convs)} in {_plural(len(convs), 'distinct conv2d_fprop line')} below, "
        f"{skipped_calls} the tool cannot profile" + (" (listed at the end)" if skipped_calls else "")
        + f"; and {_plural(plan.linear_calls, 'linear call')} in {_plural(len(gemms), 'distinct gemm line')}"
        + (f"; {_plural(attention_calls_, 'attention')} (their batched matrix products: listed at the end, not profiled)"
           if attention_calls_ else "")
        + (f"; {_plural(products, 'matrix product')} outside linear layers (listed at the end, not profiled)"
           if products else "")
        + (f"; {_plural(unseen, 'call')} of attention modules whose products it cannot see (listed at the end)."
           if unseen else "."),
        "# count= is how many times the forward pass runs a line's problem; lines are in the order the "
        "network first runs them.",
        *(["# Channels padded (PAD=1) between a convolution and the next, which alone reads its output: "
           + ", ".join(f"{a} -> {b} ({_plural(n, 'pair')})" for (a, b), n in sorted(plan.padded.items()))
           + "; the first's new filters and the second's weights for the new channels are zero (the same output), "
           "and the lines are of the padded convolutions."] if plan.padded else []),
        *([f"# {plan.as_2d} of the convolution calls are 3-D ones of 1xRxS or Rx1x1 filters, run as the 2-D ones of "
           "the same memory (NDHWC): over the N*T frames (n=N*T, conv3d=frames:T), or over N images of T x (H*W) pixels "
           "(h=T, w=H*W, conv3d=time:H); scons compare times PyTorch's conv3d for them."]
          if plan.as_2d else []),
        f"# The lines cover {coverage(plan):.1%} of the FLOPs of the recorded convolution and linear calls"
        + (" and matrix products." if attention_calls_ or products else "."),
    ]
    fused = sorted(((e, n) for e, n in plan.epilogues.items() if e), key=lambda t: (-t[1], t[0]))
    if fused:
        said = "the lines say them (epilogue=)" if plan.written else "EPILOGUES=1 writes them into the lines"
        lines.append(f"# What the forward pass runs on the outputs of these layers, that a kernel could fuse ({said}; "
                     "a batch norm in eval mode is a bias): "
                     + ", ".join(f"{e} {n}" for e, n in fused)
                     + (f", none {plan.epilogues['']}" if plan.epilogues.get("") else "") + " call(s).")
        if plan.unfused:
            lines.append("# Left unfused (PyTorch runs these steps after the kernel"
                         + (", and the lines leave them out" if plan.written else "") + "): "
                         + "; ".join(f"{why}: " + ", ".join(f"{e} {n}" for (e, w), n in sorted(plan.unfused.items())
                                                              if w == why)
                                     for why in sorted({w for _, w in plan.unfused})) + " call(s).")
    lines += [workload_line(p) for p in plan.problems]
    if plan.skipped:
        lines.append("# Not profiled (the tool profiles 2-D convolutions on NCHW batches, grouped and depthwise "
                     "included, and linear layers, an attention's projections included; a product the recorder "
                     "sees inside another function is that function's):")
        lines += [f"# {reason}: {text} count={n}" for reason, text, n in plan.skipped]
    text = "\n".join(lines) + "\n"
    parse_workloads(text, f"{request.name}.txt")  # what is written must load as a workload set
    return text


def call_flops(call) -> float:
    """A call's multiply-adds times 2, about: every weight element meets every output position of
    the input's size over the stride (a transposed or 3-D convolution included)."""
    if call.op == "linear":
        return 2.0 * math.prod(call.input[:-1]) * math.prod(call.weight)
    if call.op == ATTENTION:  # input (batch x heads, L, head dim), weight (S, head dim): two products
        return 4.0 * math.prod(call.input) * call.weight[0]
    if call.op == MATMUL:  # input (batch, M, K), weight (K, N)
        return 2.0 * math.prod(call.input) * call.weight[1]
    if call.op == UNSEEN:  # what it computes is not known
        return 0.0
    spatial = call.input[2:] if len(call.input) > 2 else (1,)
    strides = call.stride if call.stride else (1,) * len(spatial)
    positions = math.prod(max(1, -(-d // s)) for d, s in zip(spatial, strides))
    return 2.0 * call.input[0] * positions * math.prod(call.weight)


def coverage(plan: Plan) -> float:
    """The share of the recorded calls' FLOPs that the plan's workload lines cover."""
    covered = sum(p.flops * p.count for p in plan.problems)
    total = covered + sum(flops for flops in plan.skipped_flops)
    return covered / total if total else 1.0


def _torch_name(dtype: str) -> str:
    return {v: k for k, v in TORCH_DTYPES.items()}[dtype]


def console_report(plan: Plan, path) -> list:
    """What the console says after a file is written: totals and every call left out."""
    convs = [p for p in plan.problems if p.op == "conv2d_fprop"]
    gemms = [p for p in plan.problems if p.op == "gemm"]
    lines = [f"{path}: {_plural(len(convs), 'distinct convolution')} "
             f"({_plural(sum(p.count for p in convs), 'call')}) and {_plural(len(gemms), 'distinct linear layer')} "
             f"({_plural(sum(p.count for p in gemms), 'call')}), {coverage(plan):.1%} of the recorded calls' FLOPs"]
    if plan.skipped:
        lines.append(f"{sum(n for _, _, n in plan.skipped)} call(s) the tool cannot profile, listed in the file "
                     "as comments:")
        lines += [f"  {reason}: {text} (x{n})" for reason, text, n in plan.skipped]
    return lines


# ---- the PyTorch half ----------------------------------------------------------------------------

def import_torch(request: Request):
    """(torch, torchvision or None); torchvision is needed for a model named by torchvision only."""
    needed = "PyTorch" if request.factory else "PyTorch and torchvision"
    hint = "pip install torch" if request.factory else "pip install torch torchvision"
    try:
        import torch
    except ImportError:
        raise NoTorchError(f"scons workloads needs {needed} ({hint}), which is not installed here; "
                           "it is needed for this target only") from None
    if request.factory:
        return torch, None
    try:
        import torchvision
    except ImportError:
        raise NoTorchError(f"scons workloads needs {needed} ({hint}); torchvision is not installed here; "
                           "it is needed for this target only") from None
    return torch, torchvision


def _one_line(e: BaseException) -> str:
    try:
        text = shorten(" ".join(str(e).split()))
    except BaseException:  # the user's exception: its __str__ may raise too
        text = ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _no_breakpoint(*args, **kwargs):
    raise RuntimeError("breakpoint() called; scons workloads runs the model without a debugger")


@contextlib.contextmanager
def _users_code():
    """While the user's factory and model run: breakpoint() raises instead of stopping the build at
    a debugger's prompt (whatever PYTHONBREAKPOINT says)."""
    previous, sys.breakpointhook = sys.breakpointhook, _no_breakpoint
    try:
        yield
    finally:
        sys.breakpointhook = previous


def _run(request: Request, what: str, call):
    """``call()``, the user's code: whatever it raises, SystemExit and KeyboardInterrupt included,
    is a ModelError naming MODEL= (``what`` says what failed)."""
    try:
        return call()
    except BaseException as e:
        raise ModelError(f"MODEL={request.model}: {what} {_one_line(e)}") from None


def check_torchvision_name(request: Request, torchvision) -> None:
    known = torchvision.models.list_models()
    if request.model not in known:
        close = difflib.get_close_matches(request.model, known, n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise ModelError(f"MODEL={request.model}: torchvision has no such model; {hint}{HOW_TO_NAME} "
                         "(torchvision.models.list_models() lists the names)")


def _python_own(make) -> str:
    """``module.name`` when ``make`` is a function or class of Python's standard library (builtins
    included) that the user's module merely imports, else empty."""
    if not (inspect.isroutine(make) or inspect.isclass(make)):
        return ""
    module = getattr(make, "__module__", None) or ""
    if module.partition(".")[0] not in sys.stdlib_module_names:
        return ""
    return f"{module}.{getattr(make, '__qualname__', '?')}"


def factory_of(request: Request, torch):
    """The callable MODEL=package.module:factory names, imported from where scons runs; refused
    without being called when it plainly builds no nn.Module."""
    module_name, attr = request.factory
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # the user's package, relative to where scons runs
    make = _run(request, f"module '{module_name}' does not import:",
                lambda: getattr(importlib.import_module(module_name), attr, None))
    where = f"MODEL={request.model}: module '{module_name}'"
    if not callable(make):
        what = "has no attribute" if make is None else "has a non-callable"
        raise ModelError(f"{where} {what} '{attr}' (expected a callable returning an nn.Module)")
    own = _python_own(make)
    if own:
        raise ModelError(f"{where}: '{attr}' is {own} of Python's standard library, not a model factory")
    if inspect.isclass(make) and not issubclass(make, torch.nn.Module):
        raise ModelError(f"{where}: '{attr}' is a class that is not a torch.nn.Module subclass "
                         "(expected a callable returning an nn.Module)")
    return make


def no_weights(torchvision, model: str) -> dict:
    """The keyword arguments that build torchvision's ``model`` without downloading anything: no
    weights, and for a segmentation or detection model no backbone weights either (their default
    is ImageNet's)."""
    import inspect

    builder = torchvision.models.get_model_builder(model)
    parameters = inspect.signature(builder).parameters
    return {"weights": None, **({"weights_backbone": None} if "weights_backbone" in parameters else {})}


def model_builder(request: Request, torch, torchvision):
    """A function that builds the model as an nn.Module (weights never downloaded), on whatever
    device is current; whatever the factory raises is a ModelError."""
    if request.factory is None:
        check_torchvision_name(request, torchvision)
        return lambda: _run(request, "torchvision could not build it:",
                            lambda: torchvision.models.get_model(request.model, **no_weights(torchvision, request.model)))
    make = factory_of(request, torch)

    def build():
        model = _run(request, "the factory raised", make)
        if not isinstance(model, torch.nn.Module):
            raise ModelError(f"MODEL={request.model}: the factory returned {type(model).__name__}, "
                             "not a torch.nn.Module")
        return model
    return build


def _spatial(value, dims: int) -> tuple:
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return (value,) * dims
    value = tuple(int(v) for v in value)
    return value * dims if len(value) == 1 else value


# Positional parameters after (input, weight, bias) of each recorded function.
_PARAMETERS = {
    "conv": ("stride", "padding", "dilation", "groups"),
    "conv_transpose": ("stride", "padding", "output_padding", "groups", "dilation"),
    "linear": (),
}


def call_of(op: str, args: tuple, kwargs: dict) -> Call:
    """The Call a function call of ``op`` (one of OPS) made, from its arguments."""
    kind = "linear" if op == "linear" else "conv_transpose" if op.startswith("conv_transpose") else "conv"
    names = ("input", "weight", "bias") + _PARAMETERS[kind]
    values = dict(zip(names, args))
    values.update(kwargs)
    x, weight = values["input"], values["weight"]
    dtype = str(x.dtype).rpartition(".")[2]
    if op == "linear":
        return Call(op, tuple(x.shape), tuple(weight.shape), dtype=dtype)
    dims = weight.dim() - 2
    return Call(op, tuple(x.shape), tuple(weight.shape), stride=_spatial(values.get("stride", 1), dims),
                padding=_spatial(values.get("padding", 0), dims), dilation=_spatial(values.get("dilation", 1), dims),
                groups=int(values.get("groups", 1)), dtype=dtype)


# The matrix products the recorder lists (torch function or Tensor method -> how its operands are
# passed): "ab" the two factors first, "ba" reversed (x @ self), "_ab" after an added input,
# "einsum" an equation and its operands, "sdpa" query, key, value.
PRODUCTS = {
    ("torch", "matmul"): "ab", ("torch", "mm"): "ab", ("torch", "bmm"): "ab",
    ("Tensor", "matmul"): "ab", ("Tensor", "mm"): "ab", ("Tensor", "bmm"): "ab", ("Tensor", "__matmul__"): "ab",
    ("Tensor", "__rmatmul__"): "ba",
    ("torch", "addmm"): "_ab", ("torch", "baddbmm"): "_ab", ("Tensor", "addmm"): "_ab", ("Tensor", "baddbmm"): "_ab",
    ("torch", "einsum"): "einsum",
    ("F", "scaled_dot_product_attention"): "sdpa",
}


def product_call(how: str, args: tuple, kwargs: dict):
    """The Call of a matrix product the forward pass made outside a linear layer (``PRODUCTS``):
    ``matmul`` of (batch, M, K) by (K, N), the batch the factors' leading dimensions broadcast (a
    vector one row or column), or for scaled-dot-product attention an ``attention`` call as
    ``attention_calls`` makes it; an einsum of two operands as the product it contracts (letters
    of both and the output: batch; of one and the output: M or N; of both only: K). None where
    it is none of those (an einsum of one or three operands, or with an ellipsis)."""
    if how == "sdpa":
        q = args[0] if args else kwargs["query"]
        k = args[1] if len(args) > 1 else kwargs["key"]
        dtype = str(q.dtype).rpartition(".")[2]
        *batch, length, dim = q.shape
        return Call(ATTENTION, (math.prod(batch), length, dim), (k.shape[-2], dim), dtype=dtype)
    if how == "einsum":
        return _einsum_call(args[0], tuple(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple))
                            else tuple(args[1:]))
    a, b = {"ab": args[:2], "ba": args[1::-1], "_ab": args[1:3]}[how]
    dtype = str(a.dtype).rpartition(".")[2]
    sa, sb = tuple(a.shape), tuple(b.shape)
    sa = (1,) + sa if len(sa) == 1 else sa
    sb = sb + (1,) if len(sb) == 1 else sb
    lead_a, lead_b = sa[:-2], sb[:-2]
    width = max(len(lead_a), len(lead_b))
    lead_a, lead_b = (1,) * (width - len(lead_a)) + lead_a, (1,) * (width - len(lead_b)) + lead_b
    batch = math.prod(max(x, y) for x, y in zip(lead_a, lead_b))
    return Call(MATMUL, (batch, sa[-2], sa[-1]), (sb[-2], sb[-1]), dtype=dtype)


def _einsum_call(equation, operands: tuple):
    """``product_call`` of an einsum."""
    if not isinstance(equation, str) or len(operands) != 2 or "..." in equation or "->" not in equation:
        return None
    inputs, out = equation.replace(" ", "").split("->")
    terms = inputs.split(",")
    if len(terms) != 2 or any(len(t) != len(o.shape) for t, o in zip(terms, operands)):
        return None
    size = {}
    for term, operand in zip(terms, operands):
        size.update(zip(term, operand.shape))
    first, second = set(terms[0]), set(terms[1])
    extent = lambda letters: math.prod(size[c] for c in letters)  # noqa: E731
    batch = extent(first & second & set(out))
    m, n = extent((first - second) & set(out)), extent((second - first) & set(out))
    k = extent((first & second) - set(out))
    dtype = str(operands[0].dtype).rpartition(".")[2]
    return Call(MATMUL, (batch, m, k), (k, n), dtype=dtype)


_MHA_PARAMETERS = ("query", "key", "value", "embed_dim_to_check", "num_heads", "in_proj_weight", "in_proj_bias",
                   "bias_k", "bias_v", "add_zero_attn", "dropout_p", "out_proj_weight", "out_proj_bias", "training",
                   "key_padding_mask", "need_weights", "attn_mask", "use_separate_proj_weight", "q_proj_weight",
                   "k_proj_weight", "v_proj_weight")
_NATIVE_MHA_PARAMETERS = ("query", "key", "value", "embed_dim", "num_head", "qkv_weight", "qkv_bias", "proj_weight",
                          "proj_bias")


def attention_calls(args: tuple, kwargs: dict, native: bool = False) -> list:
    """The linear calls and the attention of one ``torch.nn.functional.multi_head_attention_forward``
    call (query L x N x E, key and value S x N x E; ``nn.MultiheadAttention`` makes it, its batch
    first or not) or of ``torch._native_multi_head_attention`` (its fast path: N x L x E, batch
    first): the input projections as the function makes them (one of 3E outputs when query, key
    and value are one tensor, one of E and one of 2E when key and value are, else three of E), the
    output projection, and Q K^T and its product with V as one ``attention`` call. A projection
    with a bias has the epilogue ``bias`` (the output projection's chain goes on in ``Chains``)."""
    values = dict(zip(_NATIVE_MHA_PARAMETERS if native else _MHA_PARAMETERS, args))
    values.update(kwargs)
    q, k, v = values["query"], values["key"], values["value"]
    dtype = str(q.dtype).rpartition(".")[2]
    if native:
        (n, length, embed), source = q.shape, k.shape[1]
        heads, weight, out = int(values["num_head"]), values["qkv_weight"], values["proj_weight"]
        separate = None
    else:
        (length, n, embed), source = q.shape, k.shape[0]
        heads, weight, out = int(values["num_heads"]), values["in_proj_weight"], values["out_proj_weight"]
        separate = values.get("use_separate_proj_weight")
    rows, source_rows = (n * length, embed), (n * source, embed)
    if separate:
        projections = [(rows, (embed, embed)), (source_rows, (embed, embed)), (source_rows, (embed, embed))]
    elif q is k and k is v:
        projections = [(rows, tuple(weight.shape))]
    elif k is v:
        projections = [(rows, (embed, embed)), (source_rows, (2 * embed, embed))]
    else:
        projections = [(rows, (embed, embed)), (source_rows, (embed, embed)), (source_rows, (embed, embed))]
    in_bias, out_bias = (values.get("qkv_bias"), values.get("proj_bias")) if native else \
        (values.get("in_proj_bias"), values.get("out_proj_bias"))
    calls = [Call("linear", shape, w, dtype=dtype, epilogue="" if in_bias is None else "bias") for shape, w in projections]
    calls.append(Call(ATTENTION, (n * heads, length, embed // heads), (source, embed // heads), dtype=dtype))
    calls.append(Call("linear", rows, tuple(out.shape), dtype=dtype, epilogue="" if out_bias is None else "bias"))
    return calls


class _Stage:
    """A tensor a convolution or linear call's output became by steps a kernel could fuse; a linear
    call's (``axis`` not None: its channels' dimension) also by permutations and a per-channel scale,
    which fold into the layer's weight and bias."""

    def __init__(self, call: int, steps: tuple, tensor, axis=None):
        # the tensor is referred to weakly (a forward pass on the CPU would otherwise keep every
        # layer's output alive): ``tensor`` is None once it is gone, and an id it held that another
        # tensor takes is not its stage (Chains._stage)
        self.call, self.steps, self._tensor = call, steps, _reference(tensor)
        self.shape = tuple(tensor.shape) if hasattr(tensor, "shape") else ()
        self.uses, self.next, self.axis = 0, None, axis

    @property
    def tensor(self):
        return self._tensor()


def _reference(value):
    """A weak reference to ``value`` where it takes one (a tensor does), else a strong one."""
    try:
        return weakref.ref(value)
    except TypeError:
        return lambda: value


class Chains:
    """What the forward pass runs on each convolution's and linear layer's output that a kernel's
    epilogue could compute (``ops.common.EPILOGUE_STEPS``): a batch norm in eval mode or the
    layer's own bias (a bias), then an activation and a residual add (of a tensor of the output's
    shape, another layer's output or not), in the order it runs them, a dropout in eval mode passed
    over (a transformer's MLP: linear, dropout, the residual's add). A step is fused only where
    the tensor before it has no other use: a value another op reads must be written. Fed every
    function the recorder sees."""

    def __init__(self, torch):
        F, T = torch.nn.functional, getattr(torch, "Tensor", None)
        where = {"relu": ((F, "relu"), (torch, "relu"), (T, "relu")), "silu": ((F, "silu"),),
                 "gelu": ((F, "gelu"),), "hardswish": ((F, "hardswish"),),
                 "sigmoid": ((torch, "sigmoid"), (T, "sigmoid"), (F, "sigmoid")),
                 "add": ((torch, "add"), (T, "add"), (T, "add_"), (T, "__add__"), (T, "__iadd__"), (T, "__radd__")),
                 "batch_norm": ((F, "batch_norm"),), "dropout": ((F, "dropout"),),
                 "permute": ((torch, "permute"), (T, "permute")), "transpose": ((torch, "transpose"), (T, "transpose")),
                 "scale": ((torch, "mul"), (T, "mul"), (T, "mul_"), (T, "__mul__"), (T, "__imul__"), (T, "__rmul__"))}
        nn = getattr(torch, "nn", None)
        self.parameter_type = getattr(nn, "Parameter", None) if nn is not None else None
        self.steps = {}  # function -> the step it is (a model's torch may lack some, or be a stand-in)
        for step, places in where.items():
            for owner, name in places:
                function = getattr(owner, name, None) if owner is not None else None
                if function is not None and self._hashable(function):
                    self.steps[function] = step
        self.tensor_type = T if isinstance(T, type) else type(None)  # no tensors: no chains
        self.stages, self.roots = {}, {}  # id(tensor) -> its _Stage; call index -> its first _Stage

    @staticmethod
    def _hashable(func) -> bool:
        try:
            hash(func)
        except TypeError:
            return False
        return True

    def stage_of(self, value):
        """The chain stage ``value`` is, or None."""
        stage = self.stages.get(id(value))
        return stage if stage is not None and stage.tensor is value else None

    def used(self, args: tuple, kwargs: dict) -> list:
        """The stages a call's arguments are (asked before it runs: an in-place step makes its
        tensor the next stage)."""
        found = []
        for value in (*args, *kwargs.values()):
            for item in value if isinstance(value, (list, tuple)) else (value,):
                stage = self.stage_of(item)
                if stage is not None:
                    found.append(stage)
        return found

    def count(self, stages: list, result) -> None:
        """A call that made a tensor of ``stages`` used each; one that asked a tensor for its shape
        or dimensions (a number, not a tensor) read no value of it."""
        items = result if isinstance(result, (list, tuple)) else (result,)
        if any(isinstance(item, self.tensor_type) for item in items):
            for stage in stages:
                stage.uses += 1

    def output(self, call: int, result, bias, linear: bool = False) -> None:
        """A convolution or linear call's output: the chain's start."""
        axis = len(result.shape) - 1 if linear and hasattr(result, "shape") else None
        stage = _Stage(call, ("bias",) if bias is not None else (), result, axis)
        self.stages[id(result)], self.roots[call] = stage, stage

    def ran(self, func, args: tuple, kwargs: dict, result) -> None:
        """``func`` ran on ``args`` giving ``result``: a step of a chain, if it is one."""
        if not args or not isinstance(result, self.tensor_type) or not self._hashable(func):
            return
        step, stage, steps, axis = self.steps.get(func), self.stage_of(args[0]), None, None
        if step == "batch_norm":
            training = kwargs.get("training", args[5] if len(args) > 5 else False)
            if stage is not None and not training and stage.steps in ((), ("bias",)):
                steps = ("bias",)
        elif step == "dropout":  # in eval mode it passes its input on: the chain goes on through it
            if stage is not None and not kwargs.get("training", args[2] if len(args) > 2 else True):
                steps = stage.steps
        elif step in ACTIVATIONS:
            if stage is not None and not any(s in ACTIVATIONS for s in stage.steps):
                steps = stage.steps + (step,)
        elif step == "add" and len(args) >= 2 and kwargs.get("alpha", 1) == 1:
            # an operand that is a chain's goes on (the first whose value nothing else has read, else
            # the first); the other, the residual, is read (and so written)
            chained = self._chained(args)
            stage, other = next((p for p in chained if p[0].uses == 1), chained[0] if chained else (None, None))
            if (stage is not None and "add" not in stage.steps and isinstance(other, self.tensor_type)
                    and tuple(other.shape) == stage.shape and other is not stage.tensor):
                steps = stage.steps + ("add",)
        elif step in ("permute", "transpose") and stage is not None and stage.axis is not None \
                and stage.steps in ((), ("bias",)):
            rank = len(stage.shape)
            if step == "permute":
                dims = permutation(args[1:], kwargs, rank)
            else:
                swapped = [d % rank if isinstance(d, int) and -rank <= d < rank else None for d in args[1:3]]
                dims = list(range(rank))
                if len(swapped) == 2 and None not in swapped:
                    dims[swapped[0]], dims[swapped[1]] = swapped[1], swapped[0]
                else:
                    dims = None
            if dims is not None:
                steps, axis = stage.steps, dims.index(stage.axis)
        elif step == "scale" and len(args) == 2 and not kwargs:
            stage, other = next(iter(self._chained(args)), (None, None))
            if stage is not None and stage.axis is not None and stage.steps in ((), ("bias",)) \
                    and self._per_channel(other, stage):
                steps = stage.steps
        if steps is not None and stage is not None:
            stage.next = _Stage(stage.call, steps, result, stage.axis if axis is None else axis)
            self.stages[id(result)] = stage.next

    def _chained(self, args: tuple) -> list:
        """(stage, other operand) for each of a binary op's two operands that is a chain's stage."""
        pairs = [(self.stage_of(a), b) for a, b in ((args[0], args[1]), (args[1], args[0]))]
        return [(stage, other) for stage, other in pairs if stage is not None]

    def _per_channel(self, factor, stage) -> bool:
        """Whether ``factor`` is a parameter that varies along ``stage``'s channels only (a scale
        the layer's weight and bias take: ConvNeXt's layer scale)."""
        if self.parameter_type is None or not isinstance(factor, self.parameter_type):
            return False
        return per_channel(stage.shape, tuple(factor.shape), stage.axis)

    def epilogue(self, call: int) -> str:
        """The steps of ``call``'s chain a kernel could fuse, '+'-joined ("" for none)."""
        stage = self.roots.get(call)
        if stage is None:
            return ""
        while stage.next is not None and stage.uses == 1:
            stage = stage.next
        return "+".join(stage.steps)


def record_calls(torch, model, example) -> list:
    """Every recorded call of one forward pass of ``model`` on ``example``, in order, each with the
    epilogue the pass ran on its output (``Chains``). A function the recorder sees runs without
    it, so the linear calls inside an attention are recorded from its arguments
    (``attention_calls``), their biases with them, and the output projection's chain from the
    attention's output on."""
    F = torch.nn.functional
    functions = {getattr(F, op): op for op in OPS if hasattr(F, op)}
    attentions = {f: native for f, native in ((getattr(F, "multi_head_attention_forward", None), False),
                                              (getattr(torch, "_native_multi_head_attention", None), True))
                  if f is not None}
    owners = {"torch": torch, "Tensor": getattr(torch, "Tensor", None), "F": F}  # a stand-in torch may lack some
    products = {getattr(owners[owner], name): how for (owner, name), how in PRODUCTS.items()
                if owners[owner] is not None and hasattr(owners[owner], name)}
    by_name = {name: how for (owner, name), how in PRODUCTS.items() if owner == "Tensor"}
    calls, chains, fed, weights = [], Chains(torch), {}, {}

    class Recorder(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            used = chains.used(args, kwargs)
            op = functions.get(func)
            if op is not None:
                calls.append(call_of(op, args, kwargs))
                if op in CONV_OPS and len(args) > 1:
                    weights[len(calls) - 1] = id(args[1])
                    if (stage := chains.stage_of(args[0])) is not None:
                        fed[len(calls) - 1] = stage
            elif func in attentions:
                calls.extend(attention_calls(args, kwargs, attentions[func]))
            elif func in products or getattr(func, "__name__", None) in by_name:
                # a Tensor method may reach the mode as its C binding (TensorBase's), not as Tensor's attribute
                how = products.get(func) or by_name[func.__name__]
                product = product_call(how, args, kwargs)
                if product is not None:
                    calls.append(product)
            result = func(*args, **kwargs)
            chains.count(used, result)
            if func in attentions and isinstance(result, (tuple, list)) and result:  # the output projection's
                chains.output(len(calls) - 1, result[0], "bias" if calls[-1].epilogue else None, linear=True)
            elif op is not None:
                chains.output(len(calls) - 1, result, kwargs.get("bias", args[2] if len(args) > 2 else None),
                              linear=op == "linear")
            else:
                chains.ran(func, args, kwargs, result)
            return result

    model.eval()
    hooks = _watch_attention_modules(model, calls)
    try:
        with torch.no_grad(), Recorder():
            model(example)
    finally:
        for hook in hooks:
            hook.remove()
    calls = [replace(c, epilogue=chains.epilogue(i))
             if (c.op in ("conv2d", "linear") or conv3d_view(c) is not None) and i in chains.roots else c
             for i, c in enumerate(calls)]
    # a convolution that alone reads another's output at its chain's end (what pad_channels may pad),
    # of a weight no other call uses (padding its input channels would change the other call's)
    shared = Counter(weights.values())
    return [replace(c, fed_by=stage.call) if (stage := fed.get(i)) is not None and stage.uses == 1
            and stage.next is None and shared[weights[i]] == 1 else c for i, c in enumerate(calls)]


def _watch_attention_modules(model, calls: list) -> list:
    """Hooks on each module whose class name says it is an attention (``_ATTENTION_MODULE``): a call
    of one that ran no product the recorder sees (an ``ATTENTION`` or ``MATMUL`` call), nor an
    attention already reported so inside it, adds an ``UNSEEN`` call naming its class (a fused or
    compiled kernel, or a C++ extension, computes what the file cannot count), and saying whether it
    ran recorded convolutions or linear layers. The hooks' handles."""
    named = getattr(model, "named_modules", None)
    if named is None:
        return []
    starts, hooks = {}, []

    def before(module, args):
        starts.setdefault(id(module), []).append(len(calls))

    def after(module, args, result):
        start = starts[id(module)].pop()
        if not any(c.op in (ATTENTION, MATMUL, UNSEEN) for c in calls[start:]):
            # one that ran convolutions or linear layers (ResNeSt's SplitAttn: its attention is a
            # softmax over their outputs) says so: those are lines of the file
            layers = any(c.op in CONV_OPS or c.op == "linear" for c in calls[start:])
            calls.append(Call(UNSEEN, (), (), module=type(module).__name__
                              + (" (its convolutions and linear layers are in the lines above)" if layers else "")))

    for _, module in named():
        if not _ATTENTION_MODULE.search(type(module).__name__):
            continue
        pair = []
        try:
            pair.append(module.register_forward_pre_hook(before))
            pair.append(module.register_forward_hook(after))
        except Exception:  # a module that takes no hooks (a scripted one): not watched
            for hook in pair:
                hook.remove()
            continue
        hooks += pair
    return hooks


def _example(torch, model, shape, device):
    """A zero input of ``shape`` in the dtype of the model's first floating-point parameter."""
    dtype = next((q.dtype for q in model.parameters() if q.is_floating_point()), torch.float32)
    return torch.zeros(shape, dtype=dtype, device=device)


def with_model_input(request: Request, log=print) -> Request:
    """``request`` with its input: the one given, or the model's own where it names one (a timm
    model's ``pretrained_cfg["input_size"]``, built on the meta device to read it: several assert
    it, as BEiT, Swin and EfficientNet-B3 do; a torchvision video model's clip, video_clip), else
    DEFAULT_INPUT (a torchvision model's)."""
    if request.input is not None:
        return request
    own = None
    if request.factory is None:
        whose = "a torchvision video model's clip: frames x its weights' crop size"
        try:
            own = video_clip(import_torch(request)[1], request.model)
        except NoTorchError:  # recording the model says what is missing
            own = None
    else:
        whose = "the model's own input size (its pretrained_cfg)"
        torch, torchvision = import_torch(request)
        try:
            with _users_code(), torch.device("meta"):
                model = model_builder(request, torch, torchvision)()
            own = model_input(model)
        except Exception:  # a model that cannot be built on meta: the forward pass says why, below
            own = None
    if own is None:
        return replace(request, input=parse_input(DEFAULT_INPUT))
    log(f"INPUT={'x'.join(map(str, own))}: {whose}")
    return replace(request, input=own)


VIDEO_FRAMES = 16  # torchvision's video models are trained and evaluated on clips of 16 frames


def video_clip(torchvision, name: str) -> tuple | None:
    """A torchvision video model's input, C x T x H x W: 3 channels, VIDEO_FRAMES frames (or the
    weights' ``min_temporal_size`` where more) at its weights' crop size, read from the weights'
    enum (nothing downloaded); None for any other model, which 3x224x224 serves whatever its
    weights were trained at (a model built without weights takes the builder's default size)."""
    try:
        weights = next(iter(torchvision.models.get_model_weights(name)))
        transforms, meta = weights.transforms, weights.meta
        if getattr(getattr(transforms, "func", None), "__name__", "") != "VideoClassification":
            return None
        crop = tuple(int(v) for v in transforms.keywords["crop_size"])
        frames = max(VIDEO_FRAMES, int(meta.get("min_temporal_size", 0)))
    except Exception:  # no weights registered under that name, or a form this does not know
        return None
    if len(crop) != 2 or min(crop) < 1:
        return None
    return (3, frames, *crop)


def model_input(model) -> tuple | None:
    """The input size ``model`` names (timm's ``pretrained_cfg`` or ``default_cfg``: ``input_size``,
    C x H x W), or None."""
    for attribute in ("pretrained_cfg", "default_cfg"):
        cfg = getattr(model, attribute, None)
        size = cfg.get("input_size") if isinstance(cfg, dict) else None
        if isinstance(size, (tuple, list)) and len(size) in INPUT_FORMS and all(
                isinstance(v, int) and 0 < v <= INT_MAX for v in size):
            return tuple(size)
    return None


def record_model(request: Request, log=print) -> list:
    """Build the model and record one forward pass. On the meta device (shapes only): built
    there, or, when its constructor cannot run there, built on the CPU and moved; only when the
    forward pass cannot run on meta, on the GPU where PyTorch sees one, else (or where it fails
    there) on the CPU, each of which computes the whole pass."""
    torch, torchvision = import_torch(request)
    with _users_code():
        return _record(request, torch, model_builder(request, torch, torchvision), log)


def _has_gpu(torch) -> bool:
    """Whether PyTorch sees a CUDA device: where a model that cannot run on meta runs its forward
    pass (a detection network's batch of 32 takes minutes on the CPU)."""
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # a CUDA runtime that cannot start: no GPU to run on
        return False


def _record(request: Request, torch, build, log) -> list:
    shape = (request.batch, *request.input)
    try:
        with torch.device("meta"):
            model = build()
        return record_calls(torch, model, _example(torch, model, shape, "meta"))
    except BaseException:  # anything a model may raise on meta; tried again below, where errors count
        pass
    model = build()
    try:
        model = model.to("meta")
        return record_calls(torch, model, _example(torch, model, shape, "meta"))
    except BaseException as e:
        gpu = _has_gpu(torch)
        log(f"the model does not run on the meta device ({_one_line(e)}); running it on the {'GPU' if gpu else 'CPU'}, "
            "which computes the whole forward pass")
    if gpu:
        try:
            model = build().to("cuda")
            return record_calls(torch, model, _example(torch, model, shape, "cuda"))
        except Exception as e:  # out of memory, an op of no CUDA kernel, ...: the CPU may still run it
            log(f"the model does not run on the GPU ({_one_line(e)}); running it on the CPU")
        finally:
            model = None
            with contextlib.suppress(Exception):
                torch.cuda.empty_cache()
    model = build()
    try:
        return record_calls(torch, model, _example(torch, model, shape, "cpu"))
    except BaseException as e:
        raise ModelError(f"MODEL={request.model}: the forward pass on a {'x'.join(map(str, shape))} input "
                         f"(BATCH x INPUT=) failed: {_one_line(e)}") from None


def torch_versions() -> str:
    import torch
    text = f"PyTorch {torch.__version__.split('+')[0]}"
    try:
        import torchvision
        text += f", torchvision {torchvision.__version__.split('+')[0]}"
    except ImportError:
        pass
    return text


def _shown(path: Path):
    """``path`` as the console names it: relative to where scons runs, when inside it."""
    resolved = Path(path).resolve()
    return resolved.relative_to(Path.cwd()) if resolved.is_relative_to(Path.cwd()) else path


def destination(request: Request, sets_dir, results_root=DEFAULT_RESULTS) -> Path:
    """SETS_DIR/NAME.txt, checked before the model is built: a file already there is written again
    only with REPLACE=1 (the set's results were measured for the workloads it lists), and what is
    there but is no file, never."""
    path = Path(sets_dir) / f"{request.name}.txt"
    if not os.path.lexists(path):
        return path
    kind = inputs.file_kind(path)
    if kind not in (None, "missing"):  # "missing": a symbolic link to nothing, which is replaced as a file
        raise ModelError(f"NAME={request.name}: {_shown(path)} is {kind}, not a workload file; choose another NAME=")
    if request.replace:
        return path
    results = Path(results_root) / request.name
    measured = any(results.glob("*/*.csv"))
    held = f", and {_shown(results)}/ holds results measured for the workloads it lists" if measured else ""
    raise ModelError(f"NAME={request.name}: {_shown(path)} already exists{held}; give REPLACE=1 to replace it, "
                     "or choose another NAME=")


def import_workloads(request: Request, sets_dir, log=print, results_root=DEFAULT_RESULTS) -> Path:
    """Record the model, write SETS_DIR/NAME.txt (atomically, only when complete), report."""
    path = destination(request, sets_dir, results_root)
    request = with_model_input(request, log)
    calls = record_model(request, log)
    if request.pad:
        calls = pad_channels(calls)
    plan = plan_workloads(calls, request.dtype, request.epilogues)
    text = workload_text(plan, request, torch_versions())
    try:
        write_generated(path, text)
    except OSError as e:
        raise ModelError(f"{_shown(path)}: cannot write ({e.strerror or e}); the file is as it was") from None
    for line in console_report(plan, _shown(path)):
        log(line)
    return path


def main(argv=None) -> int:
    """Exits 0 only once the file is written: every failure, the model's included, is one line."""
    parser = argparse.ArgumentParser(prog="python -m kernelgen.importer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="torchvision model name or package.module:factory")
    parser.add_argument("--batch", default="1")
    parser.add_argument("--input", default="", help="CxHxW (CxTxHxW for a video model, CxL for a sequence); "
                                                     "default: the model's own input size (a torchvision video "
                                                     f"model's: a clip, CxTxHxW), else {DEFAULT_INPUT}")
    parser.add_argument("--dtype", default=DEFAULT_DTYPE, help=" or ".join(DTYPES))
    parser.add_argument("--name", default="", help="the workload set's name (default <model>_b<batch>)")
    parser.add_argument("--sets-dir", required=True, help="where NAME.txt is written")
    parser.add_argument("--replace", action="store_true", help="write NAME.txt even when it exists")
    parser.add_argument("--epilogues", default="0", help="1: write each layer's epilogue= into its line")
    parser.add_argument("--pad", default="0", help="1: pad channel counts no multiple of 8 between two convolutions")
    parser.add_argument("--results", default=DEFAULT_RESULTS, help="the results root (named when NAME has results)")
    args = parser.parse_args(argv)
    try:
        request = parse_request(args.model, args.batch, args.input, args.dtype, args.name, args.replace,
                                args.epilogues, args.pad)
        import_workloads(request, args.sets_dir, log=lambda m: print(m, flush=True), results_root=args.results)
    except NoTorchError as e:
        print(f"scons workloads: {e}", file=sys.stderr)
        return 2
    except KernelgenError as e:
        print(f"scons workloads: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
