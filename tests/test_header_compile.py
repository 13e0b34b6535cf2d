"""The committed results give a header that compiles on its own in a consumer .cu."""

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

int main() {
  First::Arguments first{};
  Last::Arguments last{};
  (void)first;
  (void)last;
  return 0;
}
"""


@requires_nvcc
def test_committed_results_give_a_header_that_compiles(tmp_path):
    out = subprocess.run([sys.executable, shutil.which("scons"), "best_kernels.h", f"BUILD={tmp_path}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    header = tmp_path / "best_kernels.h"
    text = header.read_text()
    assert str(ROOT) not in text, "nothing in the header depends on where the project lives"
    (tmp_path / "consumer.cu").write_text(CONSUMER)
    cutlass = default_cutlass_root()
    compiled = subprocess.run(
        ["nvcc", "-std=c++17", "--expt-relaxed-constexpr", "-gencode=arch=compute_90a,code=sm_90a",
         f"-I{tmp_path}", "-isystem", f"{cutlass}/include", "-isystem", f"{cutlass}/tools/util/include",
         "-c", "-o", str(tmp_path / "consumer.o"), str(tmp_path / "consumer.cu")],
        capture_output=True, text=True, timeout=900)
    assert compiled.returncode == 0, compiled.stderr[-5000:]
