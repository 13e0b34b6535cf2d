"""Fused epilogues: the kernels that compute a layer's epilogue (``epilogue=``, ops.common) inside.

A fused kernel is a descriptor of a fusible family (``fusible``) with ``fusion`` set to the
epilogue's canonical text. Its epilogue is CUTLASS's ``LinCombPerColBiasEltAct`` (SM90 epilogue
visitor tree): D = activation(acc + bias + C), the bias one value an output channel (absent: none),
C the residual (read only for an epilogue with ``add``), the activation the epilogue's (none:
identity). So it computes the epilogues whose residual add, if any, comes before the activation,
as ResNet's blocks (bias+add+relu) and the inverted-residual blocks (bias+add) have it; an add
after the activation is refused (``refuses``). Its name is the plain kernel's with the
epilogue's suffix (``_ebias_add_relu``), its op ``<op>:<epilogue>`` (ops.common.fused_ops): it
serves the layers of that epilogue only, and the plain kernels serve none of them.

A kernel of fusion ``optional_relu`` (``_eoptional_relu``) computes the epilogues of steps bias,
add and relu, the add before the ReLU, applying the ReLU or none as the launch says
(profiler/optional_relu.h); one without a source operand C (``source = "void"``) those without
the add. A build compiles one where the layers' candidates hold fused kernels
alike but for their epilogue, two epilogues or more it computes (``candidates.merged``): one
compile in place of several.
"""

from dataclasses import fields, replace

from .ops.common import ACTIVATIONS, OPTIONAL_RELU, add_after_activation, epilogue_suffix, optional_relu_computes
from .ops.common import epilogue_steps as steps
from .vocab import DATA_TYPES

# The activation of an epilogue: its functor (CUTLASS's, cutlass/epilogue/thread/activation.h, or this
# project's, profiler/fused_activation.h), applied in fp32 (but FP16_FUNCTORS's); "" for an epilogue without one.
ACTIVATION_FUNCTORS = {
    "": "cutlass::epilogue::thread::Identity",
    "relu": "cutlass::epilogue::thread::ReLu",
    "silu": "kernelgen::SiluTanh",  # x sigmoid(x), sigmoid by tanh.approx (profiler/tanh_activation.h)
    "gelu": "kernelgen::Gelu",  # tanh form, within 4.8e-4 of torch.nn.GELU()'s erf (profiler/fused_activation.h)
    "hardswish": "cutlass::epilogue::thread::HardSwish",
    "sigmoid": "kernelgen::SigmoidTanh",
}
assert set(ACTIVATION_FUNCTORS) == {"", *ACTIVATIONS}
# A kernel of fp16 output computes these in fp16x2 arithmetic instead, two values an instruction:
# GELU's polynomial and tanh.approx.f16x2 on the values rounded to fp16 (profiler/fused_activation.h).
FP16_FUNCTORS = {"gelu": "kernelgen::GeluF16x2"}

# What a fused kernel includes: CUTLASS's epilogue visitor tree and activations, and the project's
# header (profiler/) of an activation that is its own, only there (a header is part of a kernel's hash).
FUSED_INCLUDES = ("cutlass/epilogue/fusion/operations.hpp", "cutlass/epilogue/thread/activation.h")
ACTIVATION_HEADERS = {"gelu": ("fused_activation.h",), "silu": ("tanh_activation.h",), "sigmoid": ("tanh_activation.h",)}
# OPTIONAL_RELU's kernels: their activation functor (ReLU or none, a select an element) and header.
OPTIONAL_RELU_FUNCTOR = "kernelgen::OptionalRelu"
OPTIONAL_RELU_HEADERS = ("optional_relu_adapter_3x.h",)

def includes(epilogue: str) -> tuple:
    """The headers a fused kernel of ``epilogue`` includes; none for a plain kernel ("")."""
    if epilogue == OPTIONAL_RELU:
        return FUSED_INCLUDES + OPTIONAL_RELU_HEADERS
    return (FUSED_INCLUDES + ACTIVATION_HEADERS.get(activation(epilogue), ())) if epilogue else ()


def fused_adapter(fusion: str, adapter: str) -> str:
    """The adapter of a kernel of ``fusion`` whose family's fused kernels run through ``adapter``:
    that one, or of OPTIONAL_RELU its own (profiler/optional_relu_adapter_3x.h): kernelgen::FusedX
    -> kernelgen::FusedOptionalReluX."""
    if fusion != OPTIONAL_RELU:
        return adapter
    assert adapter.startswith("kernelgen::Fused"), adapter
    return "kernelgen::FusedOptionalRelu" + adapter[len("kernelgen::Fused"):]


# best_kernels::Activation's enumerators (best_kernels.h.mako), by activation.
ACTIVATION_ENUMERATORS = {"": "kNone", "relu": "kRelu", "silu": "kSilu", "gelu": "kGelu", "hardswish": "kHardswish",
                          "sigmoid": "kSigmoid"}
assert set(ACTIVATION_ENUMERATORS) == set(ACTIVATION_FUNCTORS)


def activation(epilogue: str) -> str:
    """The epilogue's activation, "" for none."""
    return next((s for s in steps(epilogue) if s in ACTIVATIONS), "")


def adds(epilogue: str) -> bool:
    """Whether the epilogue adds a residual (the kernel's source operand C)."""
    return "add" in steps(epilogue)


def refuses(epilogue: str) -> str | None:
    """Why no fused kernel computes ``epilogue``, or None."""
    if add_after_activation(epilogue):
        return f"epilogue={epilogue}: a residual add after the activation (fused kernels add it before)"
    return None


def fusible_part(epilogue: str, groups: int = 1, channels: tuple = (), dtype: str = "f16") -> tuple:
    """(what of ``epilogue`` a fused kernel computes, why the rest is left unfused or ""): a grouped
    convolution's none (no fused kernel is grouped), nor one whose ``channels`` (input and output;
    a GEMM's K and N) are no multiple of the fused families' alignment (16 bytes: TMA); an add after
    the activation and what follows it stay unfused."""
    if not epilogue:
        return "", ""
    if groups > 1:
        return "", "a grouped convolution's (no fused kernel is grouped)"
    alignment = 128 // DATA_TYPES[dtype].bits
    if any(c % alignment for c in channels):
        return "", f"channels no multiple of {alignment} (the fused kernels move 16-byte rows)"
    if refuses(epilogue):
        order = steps(epilogue)
        return "+".join(order[:order.index("add")]), "a residual add after the activation"
    return epilogue, ""


def fusion_cpp(epilogue: str, output: str, accumulator: str, source: str, per_row: bool = False) -> str:
    """The C++ fusion operation of ``epilogue`` for a kernel of these C++ types (``source``: C's,
    void for none): the last argument of CUTLASS's SM90 epilogue CollectiveBuilder. ``per_row``: the
    output channels are the GEMM's M (a transposed kernel's D), so the bias is one value a row."""
    if epilogue == OPTIONAL_RELU:
        functor = OPTIONAL_RELU_FUNCTOR
    else:
        act = activation(epilogue)
        functor = (FP16_FUNCTORS.get(act) if output == "cutlass::half_t" else None) or ACTIVATION_FUNCTORS[act]
    return (f"cutlass::epilogue::fusion::LinCombPer{'Row' if per_row else 'Col'}BiasEltAct<{functor}, "
            f"{output}, {accumulator}, {output}, {source}, {accumulator}>")


def epilogue_cpp(epilogue: str) -> str:
    """The initializer of the header's best_kernels::Epilogue for ``epilogue`` ("{}" for none)."""
    if not epilogue:
        return "{}"
    bias = "true" if "bias" in steps(epilogue) else "false"
    return f"{{{bias}, {'true' if adds(epilogue) else 'false'}, Activation::{ACTIVATION_ENUMERATORS[activation(epilogue)]}}}"


def reads_c(kernel) -> bool:
    """Whether a kernel has a source operand C (a fused kernel's residual); none of ``source = "void"``."""
    return getattr(kernel, "source", None) != "void"


def launcher_epilogue_cpp(kernel) -> str:
    """``epilogue_cpp`` of what ``kernel`` computes, for the launcher: of an OPTIONAL_RELU kernel, what
    it reads (the bias, and the residual where it has C)."""
    fusion = getattr(kernel, "fusion", "")
    if fusion == OPTIONAL_RELU:
        return f"{{true, {'true' if reads_c(kernel) else 'false'}, Activation::kNone}}"
    return epilogue_cpp(fusion)


def fusible(kernel) -> bool:
    """Whether ``kernel`` can be built with a fused epilogue (its descriptor's ``fusible``: those of
    the families whose epilogue is CUTLASS's SM90 builder's, not yet fused)."""
    return bool(getattr(kernel, "fusible", False))


def fused(kernel, epilogue: str):
    """``kernel`` with ``epilogue`` fused: an epilogue that adds a residual reads C, of the
    output's type (a kernel of no source operand gets one)."""
    changes = {"fusion": epilogue}
    if adds(epilogue) and not reads_c(kernel):
        changes["source"] = None
    variant = _replaced(kernel, changes)
    if len(changes) == 1 and getattr(kernel, "name_ends_with_fusion", False) and not kernel.fusion:
        # the name is the kernel's and the epilogue's suffix (a fused catalog names tens of
        # thousands of variants; tests/test_specs.py checks this against the name computed)
        variant.__dict__["name"] = kernel.name + epilogue_suffix(epilogue)
    return variant


def _replaced(kernel, changes: dict):
    """``dataclasses.replace(kernel, **changes)``, made without the dataclass's __init__ where that
    only sets the fields (a fused set's catalog makes tens of thousands of variants): a new
    descriptor of the same fields, none of the old one's cached properties (its name)."""
    names = _PLAIN_FIELDS.get(type(kernel))
    if names is None:
        names = _PLAIN_FIELDS[type(kernel)] = _plain_fields(type(kernel))
    if not names or not changes.keys() <= names:
        return replace(kernel, **changes)
    state = {name: kernel.__dict__[name] for name in names}
    state.update(changes)
    variant = object.__new__(type(kernel))
    variant.__dict__.update(state)
    return variant


_PLAIN_FIELDS = {}  # descriptor class -> its fields' names, or () where replace() is needed


def _plain_fields(cls) -> frozenset:
    """The names of ``cls``'s fields where its __init__ does nothing but set them (every field an
    init field kept in the instance's __dict__, no __post_init__); otherwise ()."""
    try:
        found = fields(cls)
    except TypeError:  # not a dataclass
        return ()
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__") or not all(f.init for f in found):
        return ()
    if len(found) != len(getattr(cls, "__dataclass_fields__", ())):  # an InitVar or ClassVar among them
        return ()
    return frozenset(f.name for f in found)


def epilogues(problems) -> list:
    """The epilogues of ``problems`` that fused kernels compute, in order of first use."""
    found = dict.fromkeys(getattr(p, "epilogue", "") for p in problems)
    return [e for e in found if e and refuses(e) is None]


def with_fused(kernels: list, problems, variants: dict | None = None) -> list:
    """``kernels`` and, for each epilogue of ``problems`` (``epilogues``) and OPTIONAL_RELU where it
    computes one of them, the fused variant of each fusible one (of OPTIONAL_RELU, of each whose
    ``optional_relu`` allows it), sorted by name; a variant two kernels
    give (one of no source operand, one whose C is never read) once. ``variants``, where given,
    keeps each epilogue's variants of these same ``kernels`` for the next call (sets of other
    epilogues share those they have in common)."""
    wanted = epilogues(problems)
    if not wanted:
        return kernels
    if any(optional_relu_computes(e) for e in wanted):
        wanted.append(OPTIONAL_RELU)
    by_name = {k.name: k for k in kernels}
    for epilogue in wanted:
        made = None if variants is None else variants.get(epilogue)
        if made is None:
            made = [fused(kernel, epilogue) for kernel in kernels
                    if fusible(kernel) and (epilogue != OPTIONAL_RELU or getattr(kernel, "optional_relu", True))]
            if variants is not None:
                variants[epilogue] = made
        for variant in made:
            by_name.setdefault(variant.name, variant)
    return sorted(by_name.values(), key=lambda k: k.name)
