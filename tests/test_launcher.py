"""The header's launcher as rendered: the kernels it dispatches to (the factories of their profiler
objects, each kernel behind the adapter it was measured through), in which order, the project
headers best_kernels_cutlass.h embeds, and the device target its flag checks demand.
(test_header_compile.py compiles them.)"""

import re
import shutil
import subprocess
from dataclasses import dataclass

import pytest

import header_builds
from conftest import ROOT, requires_nvcc
from kernelgen import render, results
from kernelgen.reduce import HEADER_FILES, build_header, target_arch
from kernelgen.specs import load_catalog
from kernelgen.workloads import parse_workloads

TEMPLATES = ROOT / "kernel_specs" / "templates"
CATALOG = {k.name: k for k in load_catalog(ROOT / "kernel_specs" / "families")}
SM80 = "cutlass_tensorop_f16_s16816fprop_optimized_f16_128x128_32x3_nhwc_align8"
GEMM = "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_f16_f16_128x256x64_1x1x1_0_tnt_align8_warpspecialized_cooperative_epi_tma"
HALO = "kernelgen_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_3x3_64x232_w56_rows4_halo"
PERSISTENT = ("cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_128x128x64_1x1x1_0_align8"
              "_warpspecialized_pingpong_epi_tma_64x128")
PROBLEMS = parse_workloads("conv2d_fprop n=8 h=56 w=56 c=64 k=64 r=3 s=3 pad=1 stride=1\n"
                           "conv2d_fprop n=8 h=14 w=14 c=64 k=128 r=1 s=1 pad=0 stride=1\n"
                           "gemm m=256 n=1000 k=2048\n"
                           "conv2d_fprop n=8 h=14 w=14 c=64 k=128 r=1 s=1 pad=0 stride=2\n")


def write_set(directory, winners, catalog):
    """One CSV per problem of PROBLEMS, `winners[i]` the fastest ok kernel of problem i and
    every other kernel of `winners` slower; returns the hashes of the kernels."""
    hashes = {name: f"h{i}" for i, name in enumerate(sorted(set(winners)))}
    for problem, winner in zip(PROBLEMS, winners):
        rows = []
        for name in hashes:
            r = {c: None for c in results.COLUMNS}
            r.update(workload=problem.name, kernel=name, status="ok", runtime_ms=0.1 if name == winner else 0.2,
                     rel_l2_error=2e-4, rel_max_error=4e-4, kernel_hash=hashes[name], gpu="NVIDIA H200", driver="580.159.04", cuda="13.0", cutlass="4.2.0")
            rows.append(r)
        results.write_csv(directory / f"{problem.name}.csv", rows)
    return hashes


def header(tmp_path, winners, catalog=CATALOG, project_includes=ROOT / "profiler"):
    """The files the header build writes for PROBLEMS with ``winners`` chosen, by name (written
    into tmp_path/out)."""
    hashes = write_set(tmp_path, winners, catalog)
    out = tmp_path / "out"
    build_header(tmp_path, PROBLEMS, hashes, catalog, TEMPLATES, out, project_includes)
    return {name: (out / name).read_text() for name in HEADER_FILES}


def launchers(files):
    """The kernels of the launcher's fallback order: best_kernels.h's kLaunchOrder, which must be
    the factories the library's launcher calls, in the same order."""
    text = files["best_kernels.h"]
    order = text[text.index("inline constexpr const char* kLaunchOrder[] = {"):]
    order = re.findall(r'^    "(\w+)",$', order[:order.index("};")], re.MULTILINE)
    launcher = files["best_kernels_launcher.cu"]
    table = launcher[launcher.index("constexpr kernelgen::OperationFactory kMake[] = {"):]
    assert re.findall(r"&kernelgen::make_(\w+),", table[:table.index("};")]) == order, "row i runs kernel i"
    declared = re.findall(r"^std::unique_ptr<Operation> make_(\w+)\(\);$", launcher, re.MULTILINE)
    assert declared == order
    return order


def factory_adapter(kernel):
    """The adapter the kernel's profiler object returns it behind (kernel.cu.mako's make_<name>):
    what the library's launcher runs it through, as the profiler measured it."""
    source = render.kernel_source(render.lookup(TEMPLATES), kernel)
    return re.search(r"std::make_unique<(.+)<::" + kernel.name + r">>\(\)", source).group(1)


def test_the_launcher_dispatches_each_winner_through_its_own_adapter_in_first_chosen_order(tmp_path):
    files = header(tmp_path, [HALO, PERSISTENT, GEMM, SM80])
    # conv problems first (halo, persistent, SM80), then the GEMM table's (the GEMM kernel).
    assert launchers(files) == [HALO, PERSISTENT, SM80, GEMM]
    assert all(factory_adapter(CATALOG[k]) == CATALOG[k].adapter for k in (HALO, PERSISTENT, SM80, GEMM))
    assert "constexpr int kConv2dFpropLauncher[] = {0, 1, 2};" in files["best_kernels_launcher.cu"]
    assert "constexpr int kGemmLauncher[] = {3};" in files["best_kernels_launcher.cu"]


def test_a_kernel_chosen_twice_is_one_launcher(tmp_path):
    files = header(tmp_path, [PERSISTENT, PERSISTENT, PERSISTENT, SM80])
    assert launchers(files) == [PERSISTENT, SM80]
    assert "constexpr int kConv2dFpropLauncher[] = {0, 0, 1};" in files["best_kernels_launcher.cu"]
    assert "constexpr int kGemmLauncher[] = {0};" in files["best_kernels_launcher.cu"]


def test_the_kernels_project_headers_are_embedded_before_their_users(tmp_path):
    text = header(tmp_path, [HALO, PERSISTENT, GEMM, SM80])["best_kernels_cutlass.h"]
    embedded = re.findall(r"^// ---- (\S+), from kernelgen, embedded", text, re.MULTILINE)
    for name in ("conv_sm90_persistent.h", "conv_sm90_resident.h"):
        assert embedded.count(name) == 1, name
    assert not set(re.findall(r'#include "([^"]+)"', text)) - {"best_kernels.h"} & \
        {p.name for p in (ROOT / "profiler").iterdir()}, "project headers are embedded, not included"
    assert not {"operation.h", "direct_adapter.h", "resident_adapter.h"} & set(embedded), \
        "the adapters are the library's, not the types'"
    assert text.index('#include "best_kernels.h"') < text.index("---- conv_sm90_persistent.h")


@dataclass(frozen=True)
class NewFamilyKernel:
    """A kernel of a family the launcher has never seen: only its adapter is new."""

    name = "kernelgen_test_direct_fprop_f16_none"
    family = "new_family"
    op = "conv2d_fprop"
    element = "f16"  # with op, which workloads it serves
    accumulator = "f32"  # with its output, its verification tolerance
    output = "f16"
    arch = 80
    arch_specific = False
    template = "test_faults.mako"
    includes = ("cuda_fp16.h",)
    adapter = "kernelgen::NewFamilyOperation"
    adapter_header = "new_family_adapter.h"

    def values(self):
        return {"fault": 0}


def test_a_new_family_is_launched_through_its_adapter_without_template_changes(tmp_path):
    includes = tmp_path / "profiler"
    shutil.copytree(ROOT / "profiler", includes)
    (includes / "new_family_adapter.h").write_text(
        '#pragma once\n#include "direct_adapter.h"\nnamespace kernelgen {\n'
        "template <typename K> using NewFamilyOperation = DirectOperation<K>;\n}\n")
    kernel = NewFamilyKernel()
    results_dir = tmp_path / "results"
    results_dir.mkdir()
    files = header(results_dir, [kernel.name, SM80, kernel.name, SM80], {**CATALOG, kernel.name: kernel}, includes)
    assert launchers(files) == [kernel.name, SM80]
    assert factory_adapter(kernel) == "kernelgen::NewFamilyOperation"


@pytest.mark.parametrize("kernels, expected", [
    ([SM80], (80, False)),
    ([SM80, GEMM], (90, True)),
    ([HALO], (90, True)),
    ([PERSISTENT, HALO, SM80], (90, True)),
])
def test_the_target_every_device_pass_must_have(kernels, expected):
    assert target_arch([CATALOG[k] for k in kernels]) == expected


@pytest.mark.parametrize("winners, check, message", [
    ([SM80] * 4, "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800\n",
     "compile for sm_80 or later (-gencode=arch=compute_80,code=sm_80)"),
    ([SM80, SM80, GEMM, SM80],
     "#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ != 900 || !defined(__CUDA_ARCH_FEAT_SM90_ALL))\n",
     "compile for sm_90a only (-gencode=arch=compute_90a,code=sm_90a)"),
])
def test_the_header_demands_its_kernels_target(tmp_path, winners, check, message):
    files = header(tmp_path, winners)
    text = files["best_kernels_cutlass.h"]
    guard = text.index(check)
    assert text.index(message) > guard and text.index("#if !defined(BEST_KERNELS_WRONG_FLAGS)") > guard
    assert message.split("(")[1].rstrip(")") in text[:text.index("#pragma once")], "the opening comment names it"
    target = message.split("-gencode=arch=compute_")[1].split(",")[0]
    assert f"(sm_{target} code)" in files["best_kernels.h"], "the header says what its library was compiled for"


def test_the_launcher_is_deterministic_and_declared_without_cutlass(tmp_path):
    files = header(tmp_path, [HALO, PERSISTENT, GEMM, SM80])
    assert header(tmp_path, [HALO, PERSISTENT, GEMM, SM80]) == files
    declarations = files["best_kernels.h"]
    for declaration in ("size_t workspace_size(const Conv2dFpropProblem& problem);",
                        "Status conv2d_fprop(const Conv2dFpropProblem& problem, const Element* x",
                        "Status gemm(const GemmProblem& problem, const Element* a",
                        "using Element = __half;",
                        "const char* kernel_for(const GemmProblem& problem);"):
        assert declaration in declarations
    launcher = files["best_kernels_launcher.cu"]
    for definition in ("size_t workspace_size(const Conv2dFpropProblem& problem) {",
                       "Status conv2d_fprop(const Conv2dFpropProblem& problem, const Element* x",
                       "Status gemm(const GemmProblem& problem, const Element* a",
                       "const char* status_string(Status status) {"):
        assert definition in launcher
    assert re.findall(r'#include\s*[<"]([^>"]+)', launcher) == ["best_kernels.h", "cstdint", "initializer_list",
                                                                  "memory", "fused.h", "activation_at_launch.h", "grouped.h",
                                                                  "launch_settings.h", "operation.h"], \
        "no CUTLASS"


# A family whose adapter counts how often the launcher prepares it and never touches the GPU, to
# show that a launch repeated with the same problem, operands and stream skips the host-side setup.
COUNTING_ADAPTER = """\
#pragma once
#include "operation.h"
namespace kernelgen {
inline int prepared = 0;
template <typename K>
class CountingOperation final : public Operation {
 public:
  std::string can_implement(const Conv2dProblem&) override { return {}; }
  size_t workspace_bytes(const Conv2dProblem&) override { return 0; }
  std::string prepare(const Conv2dProblem&, const std::vector<Conv2dBinding>&, cudaStream_t) override {
    ++prepared;
    return {};
  }
  bool run(size_t, cudaStream_t) override { return true; }
};
}  // namespace kernelgen
"""

COUNTING_MAIN = """\
#include "best_kernels.h"
#include "counting_adapter.h"
#include <cstdio>

int main() {
  using namespace best_kernels;
  Conv2dFpropProblem p{8, 56, 56, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1};
  auto* x = reinterpret_cast<Element*>(0x10000);
  auto* w = reinterpret_cast<Element*>(0x20000);
  auto* y = reinterpret_cast<Element*>(0x30000);
  auto* other = reinterpret_cast<Element*>(0x40000);
  auto* stream = reinterpret_cast<cudaStream_t>(0x50000);
  int status = 0;
  auto launch = [&](Element* out, cudaStream_t s) {
    status |= int(conv2d_fprop(p, x, w, out, nullptr, 0, s));
    std::printf("%d ", kernelgen::prepared);
  };
  launch(y, nullptr);
  launch(y, nullptr);
  launch(y, nullptr);
  launch(other, nullptr);
  launch(y, nullptr);
  launch(y, stream);
  p.n = 4;
  launch(y, stream);
  std::printf("status %d\\n", status);
  return 0;
}
"""


@dataclass(frozen=True)
class CountingKernel(NewFamilyKernel):
    name = "kernelgen_test_counting_fprop_f16_none"
    family = "counting_family"
    adapter = "kernelgen::CountingOperation"
    adapter_header = "counting_adapter.h"


def run_with_launcher(tmp_path, kernel, adapter: str, main: str) -> subprocess.CompletedProcess:
    """``main`` (a program calling the library's launcher) built with the header and launcher of a
    set whose every layer chose ``kernel``, whose adapter header (``kernel.adapter_header``) is
    ``adapter``, and run."""
    includes = tmp_path / "profiler"
    shutil.copytree(ROOT / "profiler", includes)
    (includes / kernel.adapter_header).write_text(adapter)
    results_dir = tmp_path / "results"
    results_dir.mkdir()
    header(results_dir, [kernel.name] * len(PROBLEMS), {**CATALOG, kernel.name: kernel}, includes)
    out_dir = results_dir / "out"
    (out_dir / "main.cu").write_text(main)
    # the kernel's profiler object, as the build compiles it, linked with the library's launcher
    (out_dir / "kernel.cu").write_text(render.kernel_source(render.lookup(TEMPLATES), kernel))
    command = ["nvcc", *header_builds.MEASURED_FLAGS, f"-I{out_dir}", f"-I{includes}", "-o", str(results_dir / "main"),
               str(out_dir / "main.cu"), str(out_dir / "best_kernels_launcher.cu"), str(out_dir / "kernel.cu")]
    build = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-5000:]
    return subprocess.run([str(results_dir / "main")], capture_output=True, text=True, timeout=60)


@requires_nvcc
def test_a_repeated_launch_reuses_the_prepared_kernel_and_any_change_prepares_it_again(tmp_path):
    out = run_with_launcher(tmp_path, CountingKernel(), COUNTING_ADAPTER, COUNTING_MAIN)
    # Same problem, operands and stream: prepared once; a new output pointer, the old one again, a
    # new stream and a new problem each prepare it again.
    assert out.stdout.split() == ["1", "1", "1", "2", "3", "4", "5", "status", "0"], out.stdout + out.stderr


def test_a_bf16_set_gives_a_header_whose_launcher_takes_bf16_and_whose_kernels_are_checked_at_bf16s_tolerance(
        tmp_path):
    from dataclasses import replace as with_fields

    from kernelgen.vocab import verify_tolerance

    bf16 = with_fields(CATALOG[SM80], element="bf16", output="bf16")
    assert bf16.name != SM80 and verify_tolerance(bf16) == 8e-3 and verify_tolerance(CATALOG[SM80]) == 1e-3
    problems = parse_workloads("conv2d_fprop n=8 h=14 w=14 c=64 k=128 r=1 s=1 dtype=bf16\n")
    rows = []
    for name, error in ((bf16.name, 5e-3), ("other", 9e-3)):  # within bf16's tolerance; over it
        r = {c: None for c in results.COLUMNS}
        r.update(workload=problems[0].name, kernel=name, status="ok", runtime_ms=0.1 if name == "other" else 0.2,
                 rel_l2_error=error, rel_max_error=error, kernel_hash="h", gpu="NVIDIA H200", driver="580.159.04",
                 cuda="13.0", cutlass="4.2.0")
        rows.append(r)
    results.write_csv(tmp_path / f"{problems[0].name}.csv", rows)
    catalog = {bf16.name: bf16, "other": bf16}  # "other": the same kind of kernel under another name
    best = build_header(tmp_path, problems, {bf16.name: "h", "other": "h"}, catalog, TEMPLATES,
                        tmp_path / "out", ROOT / "profiler")
    assert list(best["kernel"]) == [bf16.name], "the faster row is over bf16's tolerance"
    text = (tmp_path / "out" / "best_kernels.h").read_text()
    assert "using Element = __nv_bfloat16;" in text and "#include <cuda_bf16.h>" in text
    assert "Status conv2d_fprop(const Conv2dFpropProblem& problem, const Element* x" in text


# A grouped family whose adapter counts the operations the launcher makes and prepares: an
# operation serves one number of groups (a grouped kernel's launches fork to as many streams as its
# groups take, grouped_adapter_3x.h), so a launch of other groups makes a fresh one.
COUNTING_GROUPED_ADAPTER = """\
#pragma once
#include "grouped.h"
namespace kernelgen {
inline int made = 0, prepared = 0;
template <typename K>
class CountingGroupedOperation final : public GroupedOperation {
 public:
  CountingGroupedOperation() { ++made; }
  void set_groups(int) override {}
  std::string can_implement(const Conv2dProblem&) override { return {}; }
  size_t workspace_bytes(const Conv2dProblem&) override { return 0; }
  std::string prepare(const Conv2dProblem&, const std::vector<Conv2dBinding>&, cudaStream_t) override {
    ++prepared;
    return {};
  }
  bool run(size_t, cudaStream_t) override { return true; }
};
}  // namespace kernelgen
"""

COUNTING_GROUPED_MAIN = """\
#include "best_kernels.h"
#include "counting_grouped_adapter.h"
#include <cstdio>

int main() {
  using namespace best_kernels;
  Conv2dFpropProblem p{8, 14, 14, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1};
  auto* x = reinterpret_cast<Element*>(0x10000);
  auto* w = reinterpret_cast<Element*>(0x20000);
  auto* y = reinterpret_cast<Element*>(0x30000);
  int status = 0;
  for (int groups : {2, 2, 4, 4, 2}) {
    p.groups = groups;
    status |= int(conv2d_fprop(p, x, w, y, nullptr, 0, nullptr));
    std::printf("%d/%d ", kernelgen::made, kernelgen::prepared);
  }
  std::printf("status %d\\n", status);
  return 0;
}
"""


@dataclass(frozen=True)
class CountingGroupedKernel(NewFamilyKernel):
    name = "kernelgen_test_counting_grouped_fprop_f16_none"
    family = "counting_grouped_family"
    adapter = "kernelgen::CountingGroupedOperation"
    adapter_header = "counting_grouped_adapter.h"


@requires_nvcc
def test_a_launch_of_other_groups_makes_a_fresh_operation_and_the_same_groups_reuse_it(tmp_path):
    out = run_with_launcher(tmp_path, CountingGroupedKernel(), COUNTING_GROUPED_ADAPTER, COUNTING_GROUPED_MAIN)
    # made counts the probe the launcher asks can_implement of (1) and each operation it launches
    # through: groups 2 (made, prepared), 2 again (reused), 4 (a fresh one), 4, 2 (a fresh one)
    assert out.stdout.split() == ["2/1", "2/1", "3/2", "3/2", "4/3", "status", "0"], out.stdout + out.stderr
