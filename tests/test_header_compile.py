"""The committed results give a header that compiles on its own in a consumer .cu."""

import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, requires_nvcc
from kernelgen.options import default_cutlass_root

CONSUMER = """\
#include "best_kernels.h"

using namespace best_kernels;

constexpr Conv2dFpropProblem kFirst{256, 56, 56, 64, 256, 1, 1, 0, 0, 1, 1, 1, 1};
static_assert(find(kFirst) != nullptr, "the first ResNet-50 layer has a kernel");
static_assert(find(kFirst)->runtime_ms > 0, "with its measured time");
static_assert(find(Conv2dFpropProblem{1, 8, 8, 8, 8, 1, 1, 0, 0, 1, 1, 1, 1}) == nullptr, "others have none");
static_assert(sizeof(kConv2dFprop) / sizeof(kConv2dFprop[0]) == 19, "one choice per layer");

using First = Conv2dFprop<256, 56, 56, 64, 256, 1, 1, 0, 0, 1, 1, 1, 1>::Kernel;
using Last = Conv2dFprop<256, 7, 7, 2048, 512, 1, 1, 0, 0, 1, 1, 1, 1>::Kernel;
using Stage1Conv3x3 = Conv2dFprop<256, 56, 56, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1>::Kernel;

int main() {
  First::Arguments first{};
  Last::Arguments last{};
  Stage1Conv3x3::Arguments stage1{};
  (void)first;
  (void)last;
  (void)stage1;
  return 0;
}
"""


# What the profiler compiles kernels with (kernelgen.options.DEFAULT_NVCCFLAGS and ARCH=90a).
MEASURED_FLAGS = ["-std=c++17", "-DNDEBUG", "--expt-relaxed-constexpr", "-gencode=arch=compute_90a,code=sm_90a"]


def compile_consumer(directory, source):
    (directory / "consumer.cu").write_text(source)
    cutlass = default_cutlass_root()
    return subprocess.run(
        ["nvcc", *MEASURED_FLAGS,
         f"-I{directory}", "-isystem", f"{cutlass}/include", "-isystem", f"{cutlass}/tools/util/include",
         "-c", "-o", str(directory / "consumer.o"), str(directory / "consumer.cu")],
        capture_output=True, text=True, timeout=900)


@requires_nvcc
def test_committed_results_give_a_header_that_compiles(tmp_path):
    out = subprocess.run([sys.executable, shutil.which("scons"), "best_kernels.h", f"BUILD={tmp_path}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    header = tmp_path / "best_kernels.h"
    text = header.read_text()
    assert str(ROOT) not in text, "nothing in the header depends on where the project lives"
    included = set(re.findall(r'#include "([^"]+)"', text))
    assert included and not included & {p.name for p in (ROOT / "profiler").iterdir()}, \
        "project headers the kernels need are embedded, not included"
    compiled = compile_consumer(tmp_path, CONSUMER)
    assert compiled.returncode == 0, compiled.stderr[-5000:]


GEMM_CONSUMER = """\
#include "best_kernels.h"

using namespace best_kernels;

static_assert(find(GemmProblem{256, 1000, 2048}) != nullptr, "the GEMM workload has a kernel");
static_assert(find(GemmProblem{256, 1000, 2049}) == nullptr, "others have none");
using Fc = Gemm<256, 1000, 2048>::Kernel;
using Pointwise = Conv2dFprop<8, 14, 14, 64, 128, 1, 1, 0, 0, 1, 1, 1, 1>::Kernel;

int main() {
  Fc::Arguments fc{};
  Pointwise::Arguments pointwise{};
  (void)fc;
  (void)pointwise;
  return 0;
}
"""


@requires_nvcc
def test_a_header_with_gemm_kernels_compiles(tmp_path):
    from test_reduce import CATALOG, MIXED, mixed_set
    from kernelgen.reduce import build_header

    hashes = mixed_set(tmp_path)
    build_header(tmp_path, MIXED, hashes, CATALOG, ROOT / "kernel_specs" / "templates", tmp_path / "best_kernels.h",
                 ROOT / "profiler")
    compiled = compile_consumer(tmp_path, GEMM_CONSUMER)
    assert compiled.returncode == 0, compiled.stderr[-5000:]


FLAGS = MEASURED_FLAGS
NDEBUG = "compile with -DNDEBUG"
RELAXED = "compile with --expt-relaxed-constexpr"
STD = r"compile with -std=c\+\+17"
ARCH = r"compile for sm_90a only \(-gencode=arch=compute_90a,code=sm_90a\)"
NVCC = "compile it with nvcc"


def without(flag, *extra):
    return [f for f in FLAGS if f != flag] + list(extra)


def target(*gencodes):
    return without(FLAGS[-1], *(f"-gencode=arch=compute_{g},code=sm_{g}" for g in gencodes))


@requires_nvcc
@pytest.mark.parametrize("compiler, flags, expected, absent", [
    ("nvcc", without("-DNDEBUG"), NDEBUG, [ARCH, RELAXED]),
    ("nvcc", without("--expt-relaxed-constexpr"), RELAXED, [NDEBUG, ARCH]),
    ("nvcc", without("-std=c++17", "-std=c++14"), STD, [NDEBUG, ARCH]),
    ("nvcc", target("80"), ARCH, [NDEBUG, RELAXED]),
    ("nvcc", target("90"), ARCH, [NDEBUG, RELAXED]),
    ("nvcc", target("100a"), ARCH, [NDEBUG, RELAXED]),
    ("nvcc", [f for f in target("80") if f != "-DNDEBUG"] + ["-DBEST_KERNELS_ALLOW_ASSERTS"], ARCH, [NDEBUG]),
    ("g++", ["-std=c++17", "-DNDEBUG", "-x", "c++"], NVCC, [NDEBUG, ARCH]),
], ids=["no-NDEBUG", "no-relaxed-constexpr", "c++14", "sm_80", "sm_90", "sm_100a",
        "asserts-allowed-sm_80", "host-compiler"])
def test_the_header_names_the_flag_it_was_measured_with(tmp_path, compiler, flags, expected, absent):
    """Preprocessing alone shows it (nvcc -E runs one device pass: the first target's; a build for
    several targets stops at the first that is not sm_90a)."""
    if shutil.which(compiler) is None:
        pytest.skip(f"needs {compiler}")
    source = tmp_path / "flags.cu"
    source.write_text('#include "best_kernels.h"\n')
    built = subprocess.run([sys.executable, shutil.which("scons"), "best_kernels.h", f"BUILD={tmp_path}"],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    cutlass = default_cutlass_root()
    out = subprocess.run([compiler, *flags, "-E", f"-I{tmp_path}", "-isystem", f"{cutlass}/include", "-isystem",
                          f"{cutlass}/tools/util/include", "-o", "/dev/null", str(source)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert re.search(expected, out.stderr), out.stderr[-3000:]
    for message in absent:
        assert not re.search(message, out.stderr), out.stderr[-3000:]
    errors = [line for line in out.stderr.splitlines() if re.search(r"\berror\b", line)]
    assert errors and all("#error" in line or "best_kernels.h" in line for line in errors), \
        "the flags' message and nothing else: " + out.stderr[-3000:]
