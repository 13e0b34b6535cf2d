"""Grouped and depthwise convolutions: groups= on a conv2d_fprop line (its name, FLOPs, bytes, job
line, which kernels serve it), refusals that name the line, the depthwise family's static checks
(as its can_implement's), and the launcher's dispatch of a grouped problem to a GroupedOperation
only (compiled with nvcc, run on the CPU: no kernel is launched)."""

import shutil
import subprocess
from dataclasses import dataclass

import pytest

import header_builds
from conftest import ROOT, requires_nvcc
from kernelgen import ops, render
from kernelgen.cost_model import serves
from kernelgen.errors import WorkloadError
from kernelgen.ops.conv2d_fprop import job_line
from kernelgen.specs import load_catalog
from kernelgen.workloads import parse_workloads
from test_launcher import CATALOG, SM80, TEMPLATES, NewFamilyKernel, header

EVERYTHING = load_catalog(ROOT / "kernel_specs" / "families")
DEPTHWISE = "conv2d_fprop n=32 h=56 w=56 c=144 k=144 r=3 s=3 pad=1 groups=144"


def test_groups_are_part_of_the_name_the_flops_the_bytes_and_the_job_line():
    depthwise, dense = parse_workloads(f"{DEPTHWISE}\n{DEPTHWISE.replace(' groups=144', '')}\n")
    assert depthwise.name == dense.name + "_g144", "a grouped layer never shares a dense one's results"
    assert depthwise.flops * 144 == dense.flops, "each filter reads C/groups channels"
    filters = 2 * 144 * 9
    assert dense.min_bytes() - depthwise.min_bytes() == 143 * filters, "KRS(C/groups) filters"
    assert job_line(depthwise).split()[2:] == ["conv2d_fprop_grouped", "f16", *map(str, depthwise.args()), "144"]
    assert job_line(dense).split()[2] == "conv2d_fprop" and len(job_line(dense).split()) == 17
    grouped, = parse_workloads("conv2d_fprop n=1 h=8 w=8 c=64 k=128 r=3 s=3 pad=1 groups=4\n")
    assert grouped.name.endswith("_g4") and grouped.kernel_ops == ("conv2d_fprop_grouped",)


@pytest.mark.parametrize("line, message", [
    ("conv2d_fprop n=1 h=8 w=8 c=64 k=64 r=3 s=3 groups=3", "w.txt:1: groups=3 must divide both c=64 and k=64"),
    ("conv2d_fprop n=1 h=8 w=8 c=64 k=96 r=3 s=3 groups=64", "w.txt:1: groups=64 must divide both c=64 and k=96"),
    ("conv2d_fprop n=1 h=8 w=8 c=64 k=64 r=3 s=3 groups=0", "w.txt:1: "),
    ("conv2d_fprop n=1 h=8 w=8 c=64 k=64 r=3 s=3 groups=x", "w.txt:1: 'groups=x' is not an integer"),
], ids=["3-into-64", "k-not-divided", "zero", "not-a-number"])
def test_groups_that_do_not_divide_the_channels_are_refused_naming_the_line(line, message):
    with pytest.raises(WorkloadError) as error:
        parse_workloads(line + "\n", "w.txt")
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_a_grouped_layer_is_served_by_grouped_kernels_only_and_a_dense_one_never_by_them():
    depthwise, dense = parse_workloads(f"{DEPTHWISE}\n{DEPTHWISE.replace(' groups=144', '')}\n")
    grouped = {k.name for k in EVERYTHING if ops.serves(k, depthwise)}
    assert grouped and all(k.op == "conv2d_fprop_grouped" for k in EVERYTHING if k.name in grouped)
    assert not any(ops.serves(k, dense) for k in EVERYTHING if k.name in grouped)
    # the depthwise kernels' static checks, as their can_implement: the filter, the stride, C % 8
    fitting = {k.name for k in EVERYTHING if serves(k, depthwise) is None}
    # (CUTLASS's optimized depthwise kernels, the narrow and the direct grouped ones take the stride
    # at run time: "3x3_strided", "_dwconv_narrow_..._3x3_v", "_gconv_direct_..._3x3_v"; and the
    # narrow and direct ones of any filter: "_rxs_v")
    assert fitting and all("3x3_stride1" in name or "3x3_strided" in name
                           or ("_dwconv_narrow_" in name or "_gconv_direct_" in name)
                           and ("_3x3_v" in name or "_rxs_v" in name) for name in fitting)
    odd, = parse_workloads("conv2d_fprop n=1 h=8 w=8 c=36 k=36 r=3 s=3 pad=1 groups=36\n")
    assert all(serves(k, odd) == "C must be a multiple of 8" for k in EVERYTHING
               if "_dwconv_" in k.name and "3x3_stride1" in k.name and k.element == "f16"
               and not any(f"_dwconv_{kind}_" in k.name for kind in ("rows", "flat", "strip", "pairs", "m2", "cols")))
    # (a kernel of a channel multiplier refuses it for its K = C first)
    assert {serves(k, odd) for k in EVERYTHING if "_dwconv_m2_" in k.name and "3x3_stride1" in k.name} == {
        "a depthwise kernel of channel multiplier 2: needs groups = C, K = 2 * C"}
    # the row kernels of 4-byte and 2-byte accesses along C, the flat and strip ones (even C), the
    # staged ones of 4- and 8-byte copies and those of a tensor copy an input column take it
    assert {serves(k, odd) for k in EVERYTHING if any(f"_dwconv_{kind}_" in k.name for kind in ("rows", "flat", "strip", "pairs", "cols"))
            and "3x3_stride1" in k.name} == {None}


def test_a_grouped_layer_no_kernel_of_the_build_serves_is_refused_naming_it():
    grouped, = parse_workloads("conv2d_fprop n=1 h=8 w=8 c=64 k=128 r=3 s=3 pad=1 groups=4\n", "w.txt")
    dense_only = [k for k in EVERYTHING if k.op != "conv2d_fprop_grouped"]
    with pytest.raises(WorkloadError) as error:
        ops.check_served([grouped], dense_only, "w.txt")
    assert str(error.value).startswith(f"w.txt:1: workload {grouped.name}: dtype f16: no kernel of this build "
                                       "computes conv2d_fprop with groups=4 in f16")


# A grouped family whose adapter says, without touching the GPU, what the launcher told it.
GROUPED_ADAPTER = """\
#pragma once
#include <cstdio>
#include "grouped.h"
namespace kernelgen {
template <typename K>
class SayingOperation final : public GroupedOperation {
 public:
  void set_groups(int groups) override { groups_ = groups; }
  std::string can_implement(const Conv2dProblem& p) override {
    return groups_ == p.c && p.c == p.k ? std::string() : std::string("depthwise only");
  }
  size_t workspace_bytes(const Conv2dProblem&) override { return 0; }
  std::string prepare(const Conv2dProblem&, const std::vector<Conv2dBinding>&, cudaStream_t) override {
    std::printf("prepared with groups %d\\n", groups_);
    return {};
  }
  bool run(size_t, cudaStream_t) override { return true; }
 private:
  int groups_ = 1;
};
}  // namespace kernelgen
"""

PROGRAM = """\
#include "best_kernels.h"
#include <cstdio>

int main() {
  using namespace best_kernels;
  auto* x = reinterpret_cast<Element*>(0x10000);
  auto* w = reinterpret_cast<Element*>(0x20000);
  auto* y = reinterpret_cast<Element*>(0x30000);
  Conv2dFpropProblem depthwise{8, 56, 56, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 64};  // not profiled: a fallback
  Conv2dFpropProblem dense = depthwise;
  dense.groups = 1;
  Conv2dFpropProblem bad = depthwise;
  bad.groups = 3;
  std::printf("%s\\n", kernel_for(depthwise) ? kernel_for(depthwise) : "(none)");
  std::printf("%s\\n", status_string(conv2d_fprop(depthwise, x, w, y, nullptr, 0, nullptr)));
  std::printf("%s\\n", kernel_for(dense) ? kernel_for(dense) : "(none)");
  std::printf("%s\\n", status_string(conv2d_fprop(bad, x, w, y, nullptr, 0, nullptr)));
  Conv2dFpropProblem grouped = depthwise;
  grouped.k = 128;
  grouped.groups = 4;  // grouped, not depthwise: the only grouped kernel refuses it
  std::printf("%s\\n", status_string(conv2d_fprop(grouped, x, w, y, nullptr, 0, nullptr)));
  return 0;
}
"""


@dataclass(frozen=True)
class SayingKernel(NewFamilyKernel):
    name = "kernelgen_test_saying_dwconv_f16"
    family = "saying_family"
    op = "conv2d_fprop_grouped"
    adapter = "kernelgen::SayingOperation"
    adapter_header = "saying_adapter.h"


@requires_nvcc
def test_the_launcher_gives_a_grouped_problem_to_a_grouped_kernel_told_its_groups_and_a_dense_one_never(tmp_path):
    includes = tmp_path / "profiler"
    shutil.copytree(ROOT / "profiler", includes)
    (includes / "saying_adapter.h").write_text(GROUPED_ADAPTER)
    kernel = SayingKernel()
    results_dir = tmp_path / "results"
    results_dir.mkdir()
    # the set's four problems (test_launcher.PROBLEMS) are dense: SM80 is chosen for them, and the
    # grouped kernel, measured on none, is in the library as a winner of none: add it as a fallback
    files = header(results_dir, [SM80] * 4, {**CATALOG, kernel.name: kernel}, includes)
    out_dir = results_dir / "out"
    launcher = files["best_kernels_launcher.cu"]
    assert kernel.name not in launcher, "the grouped kernel won nothing"
    # a library of the SM80 kernel and the grouped one, the latter as the fallback a grouped problem gets
    launcher = launcher.replace(f"    &kernelgen::make_{SM80},\n",
                                f"    &kernelgen::make_{SM80},\n    &kernelgen::make_{kernel.name},\n")
    launcher = launcher.replace(f"std::unique_ptr<Operation> make_{SM80}();\n",
                                f"std::unique_ptr<Operation> make_{SM80}();\nstd::unique_ptr<Operation> make_{kernel.name}();\n")
    header_text = files["best_kernels.h"].replace(f'    "{SM80}",\n', f'    "{SM80}",\n    "{kernel.name}",\n')
    (out_dir / "best_kernels_launcher.cu").write_text(launcher)
    (out_dir / "best_kernels.h").write_text(header_text)
    (out_dir / "main.cu").write_text(PROGRAM)
    templates = render.lookup(TEMPLATES)
    (out_dir / "kernel_saying.cu").write_text(render.kernel_source(templates, kernel))
    # the SM80 kernel's profiler source compiled once a session (header_builds.sm80_object)
    command = header_builds.nvcc_command(out_dir, "main.cu", [*header_builds.MEASURED_FLAGS, "-fdevice-syntax-only",
                                                               f"-I{includes}"], output="main",
                                         more_sources=["best_kernels_launcher.cu", "kernel_saying.cu"])
    command.append(str(header_builds.sm80_object()))
    build = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-5000:]
    out = subprocess.run([str(out_dir / "main")], capture_output=True, text=True, timeout=60)
    assert out.stdout.splitlines() == [
        kernel.name,                    # the grouped problem: the grouped kernel, never SM80
        "prepared with groups 64",      # told its groups before it was prepared
        "Success",
        SM80,                           # the same sizes dense: never the grouped kernel
        "Error Invalid Problem",        # groups that do not divide C
        "Error Not Supported",          # grouped, not depthwise: no kernel takes it
    ], out.stdout + out.stderr
