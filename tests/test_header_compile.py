"""The committed results give a header that compiles on its own in a consumer .cu."""

import re
import shutil
import subprocess
import sys

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


def compile_consumer(directory, source):
    (directory / "consumer.cu").write_text(source)
    cutlass = default_cutlass_root()
    return subprocess.run(
        ["nvcc", "-std=c++17", "--expt-relaxed-constexpr", "-gencode=arch=compute_90a,code=sm_90a",
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
    build_header(tmp_path, MIXED, hashes, CATALOG, ROOT / "kernel_specs" / "templates", tmp_path / "best_kernels.h")
    compiled = compile_consumer(tmp_path, GEMM_CONSUMER)
    assert compiled.returncode == 0, compiled.stderr[-5000:]
