"""GPU architecture targets (``ARCH=90a``) and the nvcc flags for them; which architectures have
an arch-specific target (the ``a`` suffix) is ``targets.TARGETS``'s to say."""

import re
from dataclasses import dataclass

from .errors import KernelgenError, shorten
from .targets import TARGETS

_ARCH = re.compile(r"^(\d{2,3})(a?)$")


@dataclass(frozen=True)
class Arch:
    number: int  # compute capability, major * 10 + minor
    specific: bool  # the "a" targets (sm_90a): architecture-specific instructions such as wgmma

    def __str__(self) -> str:
        return f"{self.number}{TARGETS[self.number].suffix if self.specific else ''}"

    def gencode_flags(self) -> list[str]:
        return [f"-gencode=arch=compute_{self},code=sm_{self}"]

    def runs(self, kernel) -> bool:
        """Whether code built for this target can run ``kernel``'s instructions."""
        if kernel.arch_specific:
            return self.specific and self.number == kernel.arch
        return self.number >= kernel.arch


def parse_arch(text: str) -> Arch:
    """An ARCH= value: an architecture the targets table has a row for, or a later minor version
    of one (86 runs what 80 does). Code for any other has no row here to be checked against."""
    m = _ARCH.match(str(text).strip())
    if not m:
        raise KernelgenError(f"ARCH={shorten(text)!r}: expected a compute capability such as 80, 90 or 90a")
    number, suffix = int(m.group(1)), m.group(2)
    if suffix and (number not in TARGETS or TARGETS[number].suffix != suffix):
        known = ", ".join(f"{t.sm}{t.suffix}" for t in TARGETS.values() if t.suffix)
        raise KernelgenError(f"ARCH={text!r}: sm_{number} has no arch-specific target '{suffix}' known here "
                             f"(known: {known}; targets.TARGETS lists the architectures)")
    if not any(sm // 10 == number // 10 and sm <= number for sm in TARGETS):
        known = ", ".join(f"{t.sm}, {t.sm}{t.suffix}" if t.suffix else str(t.sm) for t in TARGETS.values())
        raise KernelgenError(f"ARCH={text!r}: sm_{number} is not an architecture known here (known: {known}, "
                             "and later minor versions such as 86; kernelgen/targets.py TARGETS lists them)")
    return Arch(number, bool(suffix))
