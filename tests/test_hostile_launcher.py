"""Problems whose sizes overflow a C++ int: the header's launcher refuses them before any adapter
computes one (check() in best_kernels_launcher.cu.mako), a workload line is refused on the same sizes, and
a problem just inside the limits is accepted, its P and Q computed in int as in 64 bits."""

import shutil
import subprocess
from dataclasses import dataclass

import pytest

import header_builds
from conftest import ROOT, requires_nvcc
from kernelgen.errors import WorkloadError
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.ops.gemm import GemmProblem
from kernelgen.workloads import parse_workloads
from test_hostile_input import refused
from kernelgen import render
from test_launcher import CATALOG, SM80, TEMPLATES, NewFamilyKernel, header

INT_MAX = 2**31 - 1
OK, INVALID, UNSUPPORTED = "Success", "Error Invalid Problem", "Error Not Supported"


def conv(n=1, h=8, w=8, c=64, k=64, r=1, s=1, **more):
    """A 1x1 convolution of one 8x8 image, 64 channels to 64, but for the fields given."""
    return Conv2dProblem(n, h, w, c, k, r, s, **more)


# (id, problem, what check() returns, for a refusal the workload parser's message)
ROWS = [
    ("pad-and-stride-2^30", conv(pad_h=2**30, stride_h=2**30), UNSUPPORTED, r"h\+2\*pad_h = 2147483656 exceeds"),
    ("int-max-pad-and-stride", conv(pad_h=INT_MAX, stride_h=INT_MAX), UNSUPPORTED,
     r"h\+2\*pad_h = 4294967302 exceeds"),
    ("int-max-pad-w", conv(pad_w=INT_MAX), UNSUPPORTED, r"w\+2\*pad_w = 4294967302 exceeds"),
    ("padded-h-over", conv(h=2, w=1, c=1, k=8, pad_h=2**30 - 1, stride_h=2**30), UNSUPPORTED,
     r"h\+2\*pad_h = 2147483648 exceeds"),
    ("padded-h-int-max", conv(h=1, w=1, c=1, k=8, pad_h=2**30 - 1, stride_h=2**30), OK, None),
    ("padded-input-over", conv(c=4, k=8, pad_h=2**26, stride_h=2**26), UNSUPPORTED,
     r"n\*\(h\+2\*pad_h\)\*\(w\+2\*pad_w\)\*c \(the padded input's elements\) = 4294967552 exceeds"),
    ("padded-input-under", conv(h=1, w=1, c=8, k=8, pad_h=2**27 - 1, stride_h=2**27), OK, None),
    ("int-max-strides", conv(r=3, s=3, pad_h=1, pad_w=1, stride_h=INT_MAX, stride_w=INT_MAX), OK, None),
    ("int-max-dilation", conv(r=2, dilation_h=INT_MAX), INVALID, r"leave no output \(-2147483639x8\)"),
    ("dilated-filter-fills-h", conv(h=2**30 + 1, w=1, c=1, k=8, r=2, dilation_h=2**30), OK, None),
    ("dilation-of-1-row-filter", conv(c=1, k=8, dilation_h=2**28), UNSUPPORTED,
     r"dilation_h\*w\*c \(the input elements between the rows two filter rows read\) = 2147483648 exceeds"),
    ("input-over", conv(n=2**15, h=2**8, w=2**8, c=1, k=8), UNSUPPORTED,
     r"n\*h\*w\*c \(the input's elements\) = 2147483648 exceeds"),
    ("input-int-max", conv(n=INT_MAX, h=1, w=1, c=1, k=1), OK, None),
    ("output-over", conv(h=2**16, w=2**12, c=1, k=8), UNSUPPORTED,
     r"n\*p\*q\*k \(the output's elements\) = 2147483648 exceeds"),
    ("output-under", conv(h=2**16, w=2**12, c=1, k=7), OK, None),
    ("filter-over", conv(h=1, w=1, c=2**15, k=2**16), UNSUPPORTED,
     r"k\*r\*s\*c \(the filter's elements\) = 2147483648 exceeds"),
    ("filter-under", conv(h=1, w=1, c=2**15, k=2**16 - 1), OK, None),
    ("gemm-m*k-over", GemmProblem(2**16, 8, 2**15), UNSUPPORTED, r"m\*k \(A's elements\) = 2147483648 exceeds"),
    ("gemm-n*k-over", GemmProblem(8, 2**16, 2**15), UNSUPPORTED, r"n\*k \(B's elements\) = 2147483648 exceeds"),
    ("gemm-m*n-over", GemmProblem(2**16, 2**15, 8), UNSUPPORTED, r"m\*n \(D's elements\) = 2147483648 exceeds"),
    ("gemm-m-int-max", GemmProblem(INT_MAX, 1, 1), OK, None),
    ("gemm-under", GemmProblem(2**16 - 1, 2**15, 2**15), OK, None),
    ("layer", conv(n=2, h=7, w=7, c=64, k=128), OK, None),
]
IDS = [row[0] for row in ROWS]


def workload_line(problem) -> str:
    if isinstance(problem, GemmProblem):
        return f"gemm m={problem.m} n={problem.n} k={problem.k}"
    names = ["n", "h", "w", "c", "k", "r", "s", "pad_h", "pad_w", "stride_h", "stride_w", "dilation_h", "dilation_w"]
    return "conv2d_fprop " + " ".join(f"{name}={value}" for name, value in zip(names, problem.args()))


@pytest.mark.parametrize("problem, status, message", [row[1:] for row in ROWS], ids=IDS)
def test_a_workload_line_is_refused_on_the_sizes_the_launcher_refuses(problem, status, message):
    """Every problem of a header's tables came from a workload line: none of them is one that its
    launcher refuses."""
    line = workload_line(problem)
    if status == OK:
        assert parse_workloads(line + "\n", "layers.txt") == [problem]
    else:
        assert refused(lambda: parse_workloads(line + "\n", "layers.txt"), WorkloadError, message) \
            .startswith("layers.txt:1: ")


# A family whose adapter runs any problem the launcher lets through, with a workspace, and never
# touches the GPU: what the launcher refuses, only its own check refused.
ANY_PROBLEM_ADAPTER = """\
#pragma once
#include "operation.h"
namespace kernelgen {
template <typename K>
class AnyProblemOperation final : public Operation {
 public:
  std::string can_implement(const Conv2dProblem&) override { return {}; }
  size_t workspace_bytes(const Conv2dProblem&) override { return 256; }
  std::string prepare(const Conv2dProblem&, const std::vector<Conv2dBinding>&, cudaStream_t) override { return {}; }
  bool run(size_t, cudaStream_t) override { return true; }
};
}  // namespace kernelgen
"""


@dataclass(frozen=True)
class AnyProblemKernel(NewFamilyKernel):
    name = "kernelgen_test_any_problem_fprop_f16_none"
    family = "any_problem_family"
    adapter = "kernelgen::AnyProblemOperation"
    adapter_header = "any_problem_adapter.h"


ANY = AnyProblemKernel()
WORKSPACE = {SM80: 0, ANY.name: 256}

# One line per problem on stdin (conv N H W C K R S PAD_H PAD_W STRIDE_H STRIDE_W DIL_H DIL_W, or
# gemm M N K), one line out, tab-separated: check()'s status, kernel_for, workspace_size, the
# launch's status with x misaligned (a problem that passes check() stops there, before the GPU),
# and for such a problem P and Q as operation.h computes them (in int, as the adapters do) and as
# CUTLASS 3.x's ConvProblemShape does.
PROGRAM = """\
#include "best_kernels_launcher.cu"  // the library's launcher, its detail:: functions seen here

#include "cute/tensor.hpp"
#include "cutlass/conv/convnd_problem_shape.hpp"

#include <cstdio>
#include <iostream>
#include <string>
#include <type_traits>

using namespace best_kernels;

template <typename Problem>
void report(const Problem& problem) {
  const kernelgen::Conv2dProblem p = detail::as_conv(problem);
  const Status status = detail::check(p);
  auto* x = reinterpret_cast<Element*>(0x10002);
  auto* w = reinterpret_cast<Element*>(0x20000);
  auto* y = reinterpret_cast<Element*>(0x30000);
  void* workspace = reinterpret_cast<void*>(0x40000);
  Status launched;
  if constexpr (std::is_same_v<Problem, GemmProblem>)
    launched = gemm(problem, x, w, y, workspace, 1 << 20, nullptr);
  else
    launched = conv2d_fprop(problem, x, w, y, workspace, 1 << 20, nullptr);
  const char* kernel = kernel_for(problem);
  std::printf("%s\\t%s\\t%zu\\t%s", status_string(status), kernel ? kernel : "(none)",
              workspace_size(problem), status_string(launched));
  if (status == Status::kSuccess) {
    cutlass::conv::ConvProblemShape<cutlass::conv::Operator::kFprop, 2> shape(
        cutlass::conv::Mode::kCrossCorrelation, {p.n, p.h, p.w, p.c}, {p.k, p.r, p.s, p.c}, {p.pad_h, p.pad_w},
        {p.pad_h, p.pad_w}, {p.stride_h, p.stride_w}, {p.dilation_h, p.dilation_w}, 1);
    std::printf("\\t%d\\t%d\\t%d\\t%d", p.p(), p.q(), shape.shape_C[1], shape.shape_C[2]);
  }
  std::printf("\\n");
  std::fflush(stdout);  // what came before, should a later problem abort the program
}

int main() {
  std::string op;
  while (std::cin >> op) {
    if (op == "gemm") {
      GemmProblem p{};
      std::cin >> p.m >> p.n >> p.k;
      report(p);
    } else {
      Conv2dFpropProblem p{};
      std::cin >> p.n >> p.h >> p.w >> p.c >> p.k >> p.r >> p.s >> p.pad_h >> p.pad_w >> p.stride_h >> p.stride_w >>
          p.dilation_h >> p.dilation_w;
      report(p);
    }
  }
  return 0;
}
"""


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Each row's output line, split, by row id: one program, on a header whose fallback order is
    the SM80 kernel (CUTLASS 2.x through the generic adapter), then one that takes any problem;
    its host code built with -ftrapv, so that a signed int overflow in an adapter or in CUTLASS's
    host code aborts it."""
    directory = tmp_path_factory.mktemp("hostile_launcher")
    includes = directory / "profiler"
    shutil.copytree(ROOT / "profiler", includes)
    (includes / ANY.adapter_header).write_text(ANY_PROBLEM_ADAPTER)
    header(directory, [SM80, ANY.name, SM80, SM80], {**CATALOG, ANY.name: ANY}, includes)
    out_dir = directory / "out"
    (out_dir / "hostile.cu").write_text(PROGRAM)
    # the kernels' profiler sources, as the library holds them: SM80's compiled once a session with
    # -ftrapv (header_builds.sm80_object), ANY's here
    (out_dir / f"kernel_{ANY.name}.cu").write_text(render.kernel_source(render.lookup(TEMPLATES), ANY))
    flags = [*header_builds.MEASURED_FLAGS, "-fdevice-syntax-only", "-Xcompiler", "-ftrapv", f"-I{includes}"]
    assert set(header_builds.sm80_flags()) - set(flags) == {f"-I{ROOT / 'profiler'}"}, "the same flags"
    build = subprocess.run(header_builds.nvcc_command(out_dir, "hostile.cu", flags, output="hostile",
                                                      more_sources=[f"kernel_{ANY.name}.cu"])
                           + [str(header_builds.sm80_object())], capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-5000:]
    lines = "".join(program_line(problem) for _, problem, *_ in ROWS)
    out = subprocess.run([str(out_dir / "hostile")], input=lines, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    results = [line.split("\t") for line in out.stdout.splitlines()]
    assert len(results) == len(ROWS), out.stdout
    return dict(zip(IDS, results))


def program_line(problem) -> str:
    if isinstance(problem, GemmProblem):
        return f"gemm {problem.m} {problem.n} {problem.k}\n"
    return "conv " + " ".join(map(str, problem.args())) + "\n"


@requires_nvcc
@pytest.mark.parametrize("row, problem, status", [row[:3] for row in ROWS], ids=IDS)
def test_the_launcher_refuses_a_problem_whose_sizes_overflow_an_int_before_optional_relu_adapter_sees_it(
        outputs, row, problem, status):
    checked, kernel, workspace, launched, *sizes = outputs[row]
    assert checked == status
    if status != OK:
        assert (kernel, workspace, launched, sizes) == ("(none)", "0", status, [])
        return
    assert kernel in WORKSPACE and int(workspace) == WORKSPACE[kernel], "the first kernel that takes it"
    assert launched == "Error Misaligned Operand", "checked, then refused for its operand, before the GPU"
    as_conv = problem.as_conv()
    assert sizes == [str(as_conv.p), str(as_conv.q)] * 2, "P and Q in int (operation.h, CUTLASS 3.x) as in 64 bits"
