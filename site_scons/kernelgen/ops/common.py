"""What the ops' workload-line parsers share: integer values, size limits, shorthands."""

import functools
import math
import re

from ..errors import WorkloadError
from ..vocab import DATA_TYPES

INT_MAX = 2**31 - 1


def ascii_integer(text: str) -> int:
    """``text`` in ASCII digits as an integer, -1 when it is none, and INT_MAX + 1 when it has
    more digits than INT_MAX: they are counted before int() reads them (int() refuses more than
    4300, with a traceback)."""
    if not re.fullmatch(r"[0-9]+", text):
        return -1
    digits = text.lstrip("0") or "0"
    return int(digits) if len(digits) <= len(str(INT_MAX)) else INT_MAX + 1
_INTEGER = re.compile(r"^[+-]?[0-9]+$")  # ASCII digits only: int() would also take "١٢" and "1_0"


# What a layer's output goes through after the product (``epilogue=``, '+'-joined, in the order the
# network applies them): a per-channel bias (the layer's own, or a batch norm in eval mode folded
# into it) first, then an activation and a residual add, in either order, each at most once.
ACTIVATIONS = ("relu", "silu", "gelu", "hardswish", "sigmoid")
EPILOGUE_STEPS = ("bias", "add", *ACTIVATIONS)


def parse_epilogue(path, lineno, text: str) -> str:
    """``epilogue=`` as its canonical text ('' for none), or WorkloadError naming the line."""
    if text == "none":
        return ""
    steps = text.split("+")
    for step in steps:
        if step not in EPILOGUE_STEPS:
            raise WorkloadError(path, f"epilogue step '{step[:40]}' is not one of {', '.join(EPILOGUE_STEPS)} "
                                "(steps are joined by '+', e.g. epilogue=bias+relu; epilogue=none for none)", lineno)
    twice = next((s for s in steps if steps.count(s) > 1), None)
    if twice:
        raise WorkloadError(path, f"epilogue '{text[:80]}': '{twice}' is given twice", lineno)
    acts = [s for s in steps if s in ACTIVATIONS]
    if len(acts) > 1:
        raise WorkloadError(path, f"epilogue '{text[:80]}': one activation at most, not {' and '.join(acts)}", lineno)
    if "bias" in steps and steps[0] != "bias":
        raise WorkloadError(path, f"epilogue '{text[:80]}': bias comes first (it is added to the product)", lineno)
    return text


def epilogue_steps(epilogue: str) -> list:
    """An epilogue's steps in the network's order ([] for none)."""
    return epilogue.split("+") if epilogue else []


def steps_after_bias(epilogue: str) -> list:
    """The steps a library runs after a convolution or linear layer that adds the epilogue's bias itself."""
    steps = epilogue_steps(epilogue)
    return steps[1:] if steps[:1] == ["bias"] else steps


def epilogue_suffix(epilogue: str) -> str:
    """What a workload's name says of its epilogue: ``_e<steps joined by _>``, nothing for none."""
    return f"_e{epilogue.replace('+', '_')}" if epilogue else ""


# The fusion of the kernels that apply a ReLU or none as the launch says (kernelgen.fusion,
# profiler/optional_relu.h): the epilogues of steps bias, add and relu, the add before the ReLU (a
# kernel without a source operand C: those without the add).
OPTIONAL_RELU = "optional_relu"
# The op suffix of such a kernel without C: it serves only the epilogues of no residual add.
WITHOUT_C = "without_c"


def add_after_activation(epilogue: str) -> bool:
    """Whether ``epilogue`` adds its residual after its activation (no fused kernel computes that)."""
    order = epilogue_steps(epilogue)
    act = next((s for s in order if s in ACTIVATIONS), None)
    return act is not None and "add" in order and order.index("add") > order.index(act)


def fused_ops(ops: tuple, epilogue: str) -> tuple:
    """The kernel ops that run a problem of ``epilogue``: ``<op>:<epilogue>`` for each of ``ops`` (a
    fused kernel computes its epilogue; the plain ones serve the problems of none), and
    ``<op>:optional_relu`` where a kernel of OPTIONAL_RELU computes it (``optional_relu_computes``),
    and ``<op>:optional_relu:without_c`` (such a kernel without a source operand C) where it adds no
    residual."""
    if not epilogue:
        return ops
    extra = ()
    if optional_relu_computes(epilogue):
        extra = tuple(f"{op}:{OPTIONAL_RELU}" for op in ops)
        if "add" not in epilogue_steps(epilogue):
            extra += tuple(f"{op}:{OPTIONAL_RELU}:{WITHOUT_C}" for op in ops)
    return tuple(f"{op}:{epilogue}" for op in ops) + extra


def optional_relu_computes(epilogue: str) -> bool:
    """Whether a kernel of OPTIONAL_RELU computes ``epilogue``: steps of bias, add and relu, the add
    first (one that adds, where the kernel reads C)."""
    steps = set(epilogue_steps(epilogue))
    return bool(steps) and steps <= {"bias", "add", "relu"} and not add_after_activation(epilogue)


@functools.cache
def fused_op(op: str, epilogue: str, reads_c: bool = True) -> str:
    """The op of a kernel of ``op`` with ``epilogue`` fused (``fused_ops`` of one op; of an
    OPTIONAL_RELU kernel that does not ``reads_c``, ``<op>:optional_relu:without_c``), kept: a fused
    set's catalog asks it of tens of thousands of kernels of a few ops and epilogues."""
    if epilogue == OPTIONAL_RELU and not reads_c:
        return f"{op}:{OPTIONAL_RELU}:{WITHOUT_C}"
    return fused_ops((op,), epilogue)[0]


def epilogue_bytes(epilogue: str, channels: int, outputs: int, size: int) -> int:
    """The bytes an epilogue reads besides the product's: the bias (one a channel) and the residual
    (one an output element)."""
    steps = epilogue_steps(epilogue)
    return size * (channels * ("bias" in steps) + outputs * ("add" in steps))


def read_values(path, lineno, pairs: dict, keys: set, shorthands: dict) -> dict:
    """``pairs`` (key -> text) as values: integers, ``dtype`` a data type of the vocabulary,
    ``epilogue`` its canonical text (``parse_epilogue``); ``shorthands`` set several keys at once
    (``pad`` -> ``pad_h``, ``pad_w``)."""
    values = {}
    for key, raw in pairs.items():
        targets = shorthands.get(key, (key,))
        if targets[0] not in keys:
            allowed = sorted(keys | set(shorthands))
            raise WorkloadError(path, f"unknown key '{key}' (allowed: {', '.join(allowed)})", lineno)
        if key == "dtype":
            if raw not in DATA_TYPES:
                raise WorkloadError(path, f"dtype '{raw}' is not one of {', '.join(sorted(DATA_TYPES))}", lineno)
            values["dtype"] = raw
            continue
        if key == "epilogue":
            values["epilogue"] = parse_epilogue(path, lineno, raw)
            continue
        if not _INTEGER.match(raw):
            raise WorkloadError(path, f"'{key}={raw}' is not an integer", lineno)
        number = int(raw, 10)
        for t in targets:
            if t in values:
                raise WorkloadError(path, f"'{t}' is given twice", lineno)
            values[t] = number
    return values


def check_sizes(path, lineno, values: dict, required) -> None:
    missing = [k for k in required if k not in values]
    if missing:
        raise WorkloadError(path, f"missing {', '.join(missing)}", lineno)
    for key, v in values.items():
        if key in ("dtype", "epilogue"):
            continue
        low = 0 if key.startswith("pad") else 1
        if v < low:
            raise WorkloadError(path, f"'{key}' must be at least {low}, got {v}", lineno)
        if v > INT_MAX:
            raise WorkloadError(path, f"'{key}' must be at most {INT_MAX} (a C++ int), got {v}", lineno)


def check_products(path, lineno, products: dict) -> None:
    """Each product must fit a C++ int: {"n*h*w*c (the input's elements)": value, ...}."""
    for what, value in products.items():
        if value > INT_MAX:
            raise WorkloadError(path, f"{what} = {value} exceeds {INT_MAX}, the largest C++ int", lineno)


def operand_sets(operand_bytes: int, l2_bytes: int) -> int:
    """Operand copies to rotate through: four times the L2, as the profiler does."""
    return max(1, min(64, math.ceil(4 * l2_bytes / operand_bytes)))


# Where the baseline libraries' operands are made (the tests make them on the CPU).
DEVICE = "cuda"


def epilogue_tensors(torch, epilogue: str, channels: int, outputs, dtype) -> tuple:
    """(bias, residual) of ``epilogue`` for a baseline: a bias of ``channels`` values where it has
    one, a residual like ``outputs`` (a tensor of the output's shape and layout) where it adds one,
    else None; uniform in [-1, 1) as the profiler fills its operands."""
    order = epilogue_steps(epilogue)
    bias = torch.empty(channels, device=DEVICE, dtype=dtype).uniform_(-1, 1) if "bias" in order else None
    residual = torch.empty_like(outputs).uniform_(-1, 1) if "add" in order else None
    return bias, residual


def apply_epilogue(torch, steps: list, y, bias, residual, channel_dim: int):
    """``y`` through ``steps`` (an epilogue's, in order) with PyTorch's ops, as an unfused network
    runs them: the bias broadcast along ``channel_dim``, the residual added, the activation."""
    F = torch.nn.functional
    for step in steps:
        if step == "bias":
            shape = [1] * y.dim()
            shape[channel_dim] = -1
            y = y + bias.view(shape)
        elif step == "add":
            y = y + residual
        else:
            y = torch.sigmoid(y) if step == "sigmoid" else getattr(F, step)(y)
    return y


# The torch dtype of each workload dtype, for the baseline libraries.
TORCH_DTYPES = {"f16": "half", "bf16": "bfloat16", "f32": "float32"}


def torch_dtype(torch, dtype: str):
    return getattr(torch, TORCH_DTYPES[dtype])
