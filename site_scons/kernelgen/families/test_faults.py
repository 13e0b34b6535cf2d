"""Deliberately faulty kernels, for testing the tool's own fault handling (not for use).

A spec lists faults; each is one naive direct-convolution kernel that
  none             computes the convolution correctly,
  wrong_scale      scales its output by 2 (a wrong epilogue),
  illegal_address  writes through a bad pointer (the CUDA context is lost),
  hang             spins for up to 60 s (longer than any sane timeout).
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError

KIND = "test_faults"
FAULTS = {"none": 0, "wrong_scale": 1, "illegal_address": 2, "hang": 3}

FAMILY = S.Table((
    S.Key("kind", S.literal(KIND)),
    S.Key("description", S.text, ""),
    S.Key("faults", S.list_of(S.choice(FAULTS))),
))


@dataclass(frozen=True)
class FaultyKernel:
    family: str
    fault: str

    op = "conv2d_fprop"
    element = "f16"
    arch = 80
    arch_specific = False
    accumulator = "f32"
    output = "f16"
    template = "test_faults.mako"
    includes = ("cuda_fp16.h",)
    adapter = "kernelgen::DirectOperation"
    adapter_header = "direct_adapter.h"

    @cached_property
    def name(self) -> str:
        return f"kernelgen_test_direct_fprop_f16_{self.fault}"

    def values(self) -> dict:
        return {"fault": FAULTS[self.fault]}


def expand(path, raw: dict) -> list:
    fam = FAMILY.read(path, raw)
    if not fam["faults"]:
        raise SpecError(path, "no faults listed", None, "faults")
    return [FaultyKernel(family=path.stem, fault=f) for f in fam["faults"]]
