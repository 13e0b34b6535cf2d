"""GPU architecture targets (``ARCH=90a``) and the nvcc flags for them."""

import re
from dataclasses import dataclass

from .errors import KernelgenError

_ARCH = re.compile(r"^(\d{2,3})(a?)$")


@dataclass(frozen=True)
class Arch:
    number: int  # compute capability, major * 10 + minor
    specific: bool  # the "a" targets (sm_90a): architecture-specific instructions such as wgmma

    def __str__(self) -> str:
        return f"{self.number}{'a' if self.specific else ''}"

    def gencode_flags(self) -> list[str]:
        return [f"-gencode=arch=compute_{self},code=sm_{self}"]

    def runs(self, kernel) -> bool:
        """Whether code built for this target can run ``kernel``'s instructions."""
        if kernel.arch_specific:
            return self.specific and self.number == kernel.arch
        return self.number >= kernel.arch


def parse_arch(text: str) -> Arch:
    m = _ARCH.match(str(text).strip())
    if not m:
        raise KernelgenError(f"ARCH={text!r}: expected a compute capability such as 80, 90 or 90a")
    return Arch(int(m.group(1)), bool(m.group(2)))
