"""What kernel families share: the spec keys every family has and the expansion of a family of
entries written for fixed types. (An architecture's tile and cluster checks are its row's, in
``targets.py``.)"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from ..vocab import DATA_TYPES

SHARED_MEMORY = 227 * 1024  # dynamic shared memory a CTA may have on SM90 (the direct kernels' families)
SM_SHARED_MEMORY, CTA_RESERVED = 228 * 1024, 1024  # a SM's shared memory, and what it keeps back a CTA
REGISTERS_PER_SM = 65536
MAX_REGISTERS_PER_THREAD = 255
ANY_FILTER = "any"  # a direct kernel's ``filter`` where R and S are given at run time (direct_conv_any.h)


def family_keys(kind: str) -> tuple:
    return (
        S.Key("kind", S.literal(kind)),
        S.Key("description", S.text, ""),  # free text, never rendered into C++
        S.Key("element", S.choice(DATA_TYPES)),  # inputs (activations and filters, or A and B)
        S.Key("accumulator", S.choice(DATA_TYPES)),
        S.Key("output", S.choice(DATA_TYPES)),
    )


def fixed_type_family(kind: str) -> S.Table:
    """A family of entries: the common keys, then ``kernels``, a list of entry tables."""
    return S.Table((*family_keys(kind), S.Key("kernels", lambda v: v)))


def direct_filter(sizes) -> callable:
    """A direct kernel's ``filter`` key: R = S, one of ``sizes``, or "any" (R x S at run time)."""
    size = S.one_of(sizes)

    def check(v):
        if v == ANY_FILTER:
            return v
        try:
            return size(v)
        except ValueError as e:
            raise ValueError(f'{e} or "{ANY_FILTER}"') from None
    return check


def every_entry_builds(path, entry, kernel) -> None:
    """``expand_fixed_type_entries``'s check for a family whose every entry the schema takes builds:
    nothing to refuse."""


def one_stride_refuses(conv, stride: int, most_elements: int) -> str | None:
    """Why a kernel built for one ``stride`` and dilation 1, with 32-bit indices below
    ``most_elements``, cannot compute ``conv``, or None."""
    if (conv.stride_h, conv.stride_w) != (stride, stride):
        return f"built for stride {stride}"
    if (conv.dilation_h, conv.dilation_w) != (1, 1):
        return "built for dilation 1"
    if max(conv.n * conv.h * conv.w * conv.c, conv.n * conv.p * conv.q * conv.k) >= most_elements:
        return "2^31 elements or more (32-bit indices)"
    return None


def one_stride_depthwise_refuses(conv, stride: int, vector: int, most_elements: int) -> str | None:
    """Why a depthwise kernel of ``vector`` channels an access (2 or 4), built for one ``stride`` and
    dilation 1 with 32-bit indices below ``most_elements``, cannot compute ``conv`` (the checks
    depthwise_flat.h's and strip_conv.h's items make first, in their order), or None."""
    if not conv.groups == conv.c == conv.k:
        return "a depthwise kernel: needs groups = C = K"
    if conv.c % vector:
        return ("C must be even (two channels a 4-byte access)" if vector == 2
                else "C must be a multiple of 4 (four channels an 8-byte access)")
    return one_stride_refuses(conv, stride, most_elements)


def expand_fixed_type_entries(cls, family: S.Table, entry: S.Table, path, raw: dict, types, check) -> list:
    """The kernels of a family whose kernels are written for fixed types: one ``cls(family=...,
    **entry)`` per entry of ``kernels``, refused by ``check(path, entry name, kernel)`` if the
    family cannot build it. ``types`` is one typing (key -> data type) or a tuple of them; where
    there are several, the family's ``element`` is passed on (``cls(element=...)``) and names the
    typing."""
    fam = family.read(path, raw)
    typings = types if isinstance(types, tuple) else (types,)
    typing = next((t for t in typings if t["element"] == fam["element"]), None)
    if typing is None:
        allowed = " or ".join(t["element"] for t in typings)
        raise SpecError(path, f"this family is written for element {allowed}, not {fam['element']}", None, "element")
    for key, value in typing.items():
        if fam[key] != value:
            raise SpecError(path, f"this family is written for {key} {value}, not {fam[key]}"
                            + (f" (with element {fam['element']})" if len(typings) > 1 else ""), None, key)
    typed = {"element": fam["element"]} if len(typings) > 1 else {}
    kernels = []
    for name, spec in S.read_entries(path, fam["kernels"], "kernels", entry):
        kernel = cls(family=path.stem, **spec, **typed)
        check(path, name, kernel)
        kernels.append(kernel)
    return kernels


class GroupedKernel:
    """What this project's grouped-convolution kernels (depthwise.h, grouped_mma.h: plain CUDA, SM80
    instructions at most, a kernel type for DepthwiseOperation) declare alike; a family's dataclass
    adds its fields (``element`` among them), ``template`` and ``includes``."""

    accumulator = "f32"
    op = "conv2d_fprop_grouped"
    arch = 80
    arch_specific = False  # plain CUDA
    adapter = "kernelgen::DepthwiseOperation"
    adapter_header = "depthwise_adapter.h"
    measure_unfitted = True  # seconds to compile: measured in full while the cost model has no rows of it

    @property
    def output(self) -> str:
        return self.element

    def cuda_element(self) -> str:
        """The CUDA toolkit's type of the kernel's element (__half, __nv_bfloat16): its template's T."""
        return DATA_TYPES[self.element].cuda


@dataclass(frozen=True)
class DirectKernel(GroupedKernel):
    """A direct grouped kernel (profiler/direct_conv.h: depthwise_narrow, grouped_direct): R = S =
    ``filter``, or any R x S for ``filter = "any"`` (profiler/direct_conv_any.h: taps read at each
    use), ``vector`` channels a thread computes, ``columns`` output columns; a family's subclass
    gives ``kernel_type`` (the C++ type, direct_conv.h's; direct_conv_any.h's adds "Any"),
    ``name_stem`` and ``item_refuses`` (its item's checks)."""

    family: str
    filter: int | str
    vector: int
    columns: int
    element: str = "f16"

    types = ({"element": "f16", "accumulator": "f32", "output": "f16"},
             {"element": "bf16", "accumulator": "f32", "output": "bf16"})  # what direct_conv.h is written for
    template = "direct_conv.mako"
    adapter = "kernelgen::DirectOperation"
    adapter_header = "direct_conv.h"

    @property
    def any_filter(self) -> bool:
        return self.filter == ANY_FILTER

    @property
    def includes(self) -> tuple:
        return ("direct_conv_any.h",) if self.any_filter else ("direct_conv.h",)

    @cached_property
    def name(self) -> str:
        t = self.element
        return (f"kernelgen_sm80_simt_{self.name_stem}_{t}nhwc_{t}nhwc_f32_{t}nhwc_{self.name_shape()}"
                f"_v{self.vector}_q{self.columns}")

    def name_shape(self) -> str:
        """The name's part after the types: the filter, "rxs" for any (a subclass adds what else its
        code is built for)."""
        return "rxs" if self.any_filter else f"{self.filter}x{self.filter}"

    def refuses(self, conv) -> str | None:
        """Why the kernel's can_implement (DirectConv's or AnyFilterConv's, then its item's) refuses
        ``conv``, or None."""
        if conv.groups < 2 or conv.c % conv.groups or conv.k % conv.groups:
            return "needs groups (at least 2) dividing C and K"
        if not self.any_filter and (conv.r, conv.s) != (self.filter, self.filter):
            return f"built for {self.filter}x{self.filter} filters"
        return self.item_refuses(conv)

    def values(self) -> dict:
        return {"type": self.kernel_type + ("Any" if self.any_filter else ""), "element": self.cuda_element(),
                "filter": self.filter, "vector": self.vector, "columns": self.columns}
