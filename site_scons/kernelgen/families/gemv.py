"""Matrix-vector kernels of this project (profiler/gemv.h) for GEMMs with few rows: D (m x n) =
A (m x k) B^T in fp16 with fp32 accumulation, m <= ``max_m``: batch-1 and small-batch fully
connected layers, and 1x1 stride-1 unpadded convolutions of at most ``max_m`` pixels. Such a
product streams B once and is bound by memory; tensor-core tiles of 64 rows and more would
compute mostly padding and leave most SMs idle.

A spec lists entries of ``max_m`` (the most rows of A a kernel takes), ``rows`` (output columns
per CTA), ``threads`` (per CTA, striding over K in 16-byte chunks) and ``unroll`` (chunks of
each B row a thread loads before using any), and ``vector``: 8 (16-byte loads, profiler/gemv.h,
K a multiple of 8; the default) or 2 (4-byte loads, profiler/gemv_narrow.h, K even: the
squeeze-excite layers of 84 or 222 channels), and ``lanes``: "k" (a CTA's threads stride over
K, each keeping every row of A's sums, then reduce them; the default) or "m" (max_m 32: lane i of
every warp keeps row i's sums, the warps split K, profiler/gemv_lanes.h: the same layers at batch
32, where the other scheme spends its time reducing), and ``a``: "global" (each lane reads its row
of A from global memory; the default) or "shared" (lanes "m" only: each CTA first copies A into
shared memory, rows padded against bank conflicts, profiler/gemv_staged.h: the products of a long
A, whose rows every CTA reads, measured faster; those of a short one, slower). Other shapes are
``unsupported``. ``lanes = "mma"`` (profiler/gemv_mma.h): a warp's MaxM x Rows outputs on tensor
cores (mma.sync m16n8k16), max_m 16 to 64 in tiles of 16, rows 8 to 32 in tiles of 8, each lane
loading its fragments' words from global memory, ``unroll`` blocks of 4 x ``vector`` K a warp in
flight (whole mma steps: unroll x vector a multiple of 4); named ``kernelgen_sm80_tensorop_gemv_..._mma``.
gemv_narrow.h
repeats gemv.h's scheme rather than generalising it: a kernel's hash covers the headers it
includes, so gemv.h unchanged keeps its kernels' measured rows current.
"""

from dataclasses import dataclass
from functools import cached_property

from .. import spec_schema as S
from ..errors import SpecError
from .common import MAX_REGISTERS_PER_THREAD, expand_fixed_type_entries, fixed_type_family

KIND = "gemv"
TEMPLATE = "gemv.mako"
TYPES = {"element": "f16", "accumulator": "f32", "output": "f16"}  # what the kernel is written for
# Registers besides the accumulators and the B chunks in flight (pointers, indices, an A chunk).
BASE_REGISTERS = 40

FAMILY = fixed_type_family(KIND)
ENTRY = S.Table((
    S.Key("max_m", S.integer(1, 64)),
    S.Key("rows", S.integer(1, 64)),
    S.Key("threads", S.one_of((32, 64, 128, 256, 512, 1024))),
    S.Key("unroll", S.integer(1, 16)),
    S.Key("vector", S.one_of((8, 2)), 8),
    S.Key("lanes", S.choice({"k": None, "m": None, "mma": None}), "k"),
    S.Key("a", S.choice({"global": None, "shared": None}), "global"),
))
# (lanes, vector) -> (the kernel type, its header)
KERNEL_TYPES = {("k", 8): ("Gemv", "gemv.h"), ("k", 2): ("GemvNarrow", "gemv_narrow.h"),
                ("m", 8): ("GemvLanes", "gemv_lanes.h"), ("m", 2): ("GemvLanesNarrow", "gemv_lanes.h"),
                ("mma", 8): ("GemvMma", "gemv_mma.h"), ("mma", 2): ("GemvMmaNarrow", "gemv_mma.h")}
# vector -> (the kernel type, its header) of lanes "m" with A in shared memory
STAGED_TYPES = {8: ("GemvStaged", "gemv_staged.h"), 2: ("GemvStagedNarrow", "gemv_staged.h")}
SHARED_MEMORY = 227 * 1024  # a CTA's, opted in (profiler/gemv_staged.h)
STATIC_SHARED_MEMORY = 48 * 1024  # a CTA's without opting in: the mma kernels' sums (profiler/gemv_mma.h)


@dataclass(frozen=True)
class Gemv:
    family: str
    max_m: int
    rows: int
    threads: int
    unroll: int
    vector: int = 8  # halves a load of B reads: K must be a multiple of it
    lanes: str = "k"  # what a warp's lanes stride over: "k", "m" (a lane a row of A), or "mma" (tensor-core fragments)
    a: str = "global"  # where the lanes read A: "global", or "shared" (staged by each CTA; lanes "m")

    element = TYPES["element"]
    accumulator = TYPES["accumulator"]
    output = TYPES["output"]
    op = "gemm"
    arch = 80
    arch_specific = False  # plain CUDA: any GPU the other kernels run on
    template = TEMPLATE
    adapter = "kernelgen::DirectOperation"
    adapter_header = "direct_adapter.h"

    @property
    def kernel_type(self) -> tuple:
        """(the C++ kernel type, its header)."""
        return STAGED_TYPES[self.vector] if self.a == "shared" else KERNEL_TYPES[self.lanes, self.vector]

    @property
    def includes(self) -> tuple:
        return (self.kernel_type[1],)

    @cached_property
    def name(self) -> str:
        core = "tensorop" if self.lanes == "mma" else "simt"
        return (f"kernelgen_sm80_{core}_gemv_f16_f16_f32_f16_m{self.max_m}_rows{self.rows}"
                f"_threads{self.threads}_unroll{self.unroll}" + ("" if self.vector == 8 else f"_vec{self.vector}")
                + {"k": "", "m": "_lanesm", "mma": "_mma"}[self.lanes] + ("" if self.a == "global" else "_ashared"))

    @property
    def measure_unfitted(self) -> bool:
        """The tensor-core kernels (seconds to compile) are measured in full on the layers they
        serve while the cost model has no rows of them (``candidates.unfitted``)."""
        return self.lanes == "mma"

    def sums_bytes(self) -> int:
        """Shared memory the warps' fp32 sums take in an mma kernel (profiler/gemv_mma.h), 0 otherwise."""
        return self.threads // 32 * self.max_m * self.rows * 4 if self.lanes == "mma" else 0

    def staged_bytes(self, m: int, k: int) -> int:
        """Shared memory a CTA takes for A (a = "shared"): m rows of k halves, each padded to an odd
        number of chunks, and the warps' sums (profiler/gemv_staged.h); 0 where A stays in global memory."""
        if self.a == "global":
            return 0
        return m * ((k // self.vector) | 1) * self.vector * 2 + self.threads // 32 * 32 * self.rows * 4

    def registers(self) -> int:
        """A thread's registers, about: its fp32 sums, its B loads in flight (a register a pair of
        halves), the rest. With a lane a row of A (lanes "m"), a thread keeps one row's sums and
        loads a chunk of A besides each step's chunks of B."""
        if self.lanes == "mma":  # fp32 fragments of the tiles, and the words of A's two rows a tile and B's in flight
            tiles_m, tiles_n = self.max_m // 16, self.rows // 8
            return 4 * tiles_m * tiles_n + self.vector // 2 * self.unroll * (2 * tiles_m + tiles_n) + BASE_REGISTERS
        if self.lanes == "m":
            return self.rows + self.vector // 2 * self.unroll * (self.rows + 1) + BASE_REGISTERS
        return self.max_m * self.rows + self.vector // 2 * self.unroll * self.rows + BASE_REGISTERS

    def values(self) -> dict:
        values = {"max_m": self.max_m, "rows": self.rows, "threads": self.threads, "unroll": self.unroll}
        if (self.lanes, self.vector, self.a) != ("k", 8, "global"):  # the kernel type named where it is not gemv.h's (whose kernels render as before)
            values["type"] = self.kernel_type[0]
        return values


def check(path, entry, kernel) -> None:
    """Refuse a kernel whose thread would need more registers than a thread has, a lane a row of A
    for other than 32 rows, or tensor-core tiles (lanes "mma") that max_m, rows or unroll x vector
    do not make whole or whose warps' sums outgrow a CTA's static shared memory, naming the key."""
    if kernel.lanes == "mma":
        if kernel.max_m % 16:
            raise SpecError(path, f"tensor-core tiles of 16 rows: max_m must be 16, 32, 48 or 64, not {kernel.max_m}",
                            entry, "max_m")
        if kernel.rows % 8 or kernel.rows > 32:
            raise SpecError(path, f"tensor-core tiles of 8 columns: rows must be 8, 16, 24 or 32, not {kernel.rows}",
                            entry, "rows")
        if kernel.unroll * kernel.vector % 4:
            raise SpecError(path, f"unroll {kernel.unroll} blocks of vector {kernel.vector} make no whole mma step: "
                            "unroll x vector must be a multiple of 4", entry, "unroll")
        if kernel.sums_bytes() > STATIC_SHARED_MEMORY:
            raise SpecError(path, f"the warps' sums take {kernel.sums_bytes()} bytes of shared memory, more than "
                            f"{STATIC_SHARED_MEMORY}", entry, "threads")
    if kernel.lanes == "m" and kernel.max_m != 32:
        raise SpecError(path, f"a lane a row of A takes 32 rows: max_m must be 32, not {kernel.max_m}", entry, "max_m")
    if kernel.a == "shared" and kernel.lanes != "m":
        raise SpecError(path, 'A in shared memory is read a lane a row: it needs lanes = "m"', entry, "a")
    need = kernel.registers()
    if need > MAX_REGISTERS_PER_THREAD:
        raise SpecError(path, f"max_m {kernel.max_m} x rows {kernel.rows} sums and unroll {kernel.unroll} x rows "
                        f"{kernel.rows} chunks in flight need about {need} registers a thread, more than "
                        f"{MAX_REGISTERS_PER_THREAD}", entry, "unroll")


def expand(path, raw: dict) -> list:
    return expand_fixed_type_entries(Gemv, FAMILY, ENTRY, path, raw, TYPES, check)
