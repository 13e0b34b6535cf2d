"""The header's launcher as rendered: the kernels it dispatches to, through which adapter, in
which order, the profiler adapters it embeds, and the device target its flag checks demand.
(test_header_compile.py compiles it.)"""

import re
import shutil
import subprocess
from dataclasses import dataclass

import pytest

import header_builds
from conftest import ROOT, requires_nvcc
from kernelgen import render, results
from kernelgen.reduce import build_header, target_arch
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
    hashes = write_set(tmp_path, winners, catalog)
    out = tmp_path / "best_kernels.h"
    build_header(tmp_path, PROBLEMS, hashes, catalog, TEMPLATES, out, project_includes)
    return out.read_text()


def launchers(text):
    """(adapter, kernel, name) of each row of detail::kLaunchers, in order: the adapter and kernel of
    its Operation<i>, the name in the table row that points at its entry points."""
    table = text[text.index("inline constexpr Launcher kLaunchers[] = {"):]
    table = table[:table.index("};")]
    rows = re.findall(r'\{"(\w+)", &supports_(\d+), &workspace_\2, &launch_\2\}', table)
    assert [int(i) for _, i in rows] == list(range(len(rows))), "row i dispatches to kernel i's entry points"
    operations = dict(re.findall(r"using Operation(\d+) = (.+);", text))
    return [(*re.fullmatch(r"(.+?)<(\w+)>", operations[i]).groups(), name) for name, i in rows]


def test_the_launcher_dispatches_each_winner_through_its_own_adapter_in_first_chosen_order(tmp_path):
    text = header(tmp_path, [HALO, PERSISTENT, GEMM, SM80])
    rows = launchers(text)
    # conv problems first (halo, persistent, SM80), then the GEMM table's (the GEMM kernel).
    assert [(adapter, kernel) for adapter, kernel, _ in rows] == [
        (CATALOG[HALO].adapter, HALO), (CATALOG[PERSISTENT].adapter, PERSISTENT), (CATALOG[SM80].adapter, SM80),
        (CATALOG[GEMM].adapter, GEMM)]
    assert all(kernel == name for _, kernel, name in rows), "the row's name is its kernel's"
    assert "inline constexpr int kConv2dFpropLauncher[] = {0, 1, 2};" in text
    assert "inline constexpr int kGemmLauncher[] = {3};" in text


def test_a_kernel_chosen_twice_is_one_launcher(tmp_path):
    text = header(tmp_path, [PERSISTENT, PERSISTENT, PERSISTENT, SM80])
    assert [kernel for _, kernel, _ in launchers(text)] == [PERSISTENT, SM80]
    assert "inline constexpr int kConv2dFpropLauncher[] = {0, 0, 1};" in text
    assert "inline constexpr int kGemmLauncher[] = {0};" in text


def test_the_adapters_and_what_they_include_are_embedded_before_their_users(tmp_path):
    text = header(tmp_path, [HALO, PERSISTENT, GEMM, SM80])
    embedded = re.findall(r"^// ---- (\S+), from kernelgen, embedded", text, re.MULTILINE)
    for name in ("operation.h", "adapter_common.h", "resident_adapter.h", "conv2d_adapter_3x.h",
                 "gemm_adapter_3x.h", "conv2d_adapter_2x.h"):
        assert embedded.count(name) == 1, name
    assert embedded.index("operation.h") < embedded.index("adapter_common.h") < embedded.index("gemm_adapter_3x.h")
    assert embedded.index("operation.h") < embedded.index("resident_adapter.h")
    assert not set(re.findall(r'#include "([^"]+)"', text)) & {p.name for p in (ROOT / "profiler").iterdir()}
    assert "direct_adapter.h" not in embedded, "only the winners' adapters"


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
    text = header(results_dir, [kernel.name, SM80, kernel.name, SM80], {**CATALOG, kernel.name: kernel}, includes)
    assert [(adapter, name) for adapter, name, _ in launchers(text)] == [
        ("kernelgen::NewFamilyOperation", kernel.name), (CATALOG[SM80].adapter, SM80)]
    embedded = re.findall(r"^// ---- (\S+), from kernelgen, embedded", text, re.MULTILINE)
    assert embedded.index("direct_adapter.h") < embedded.index("new_family_adapter.h")


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
    text = header(tmp_path, winners)
    guard = text.index(check)
    assert text.index(message) > guard and text.index("#if !defined(BEST_KERNELS_WRONG_FLAGS)") > guard
    assert message.split("(")[1].rstrip(")") in text[:text.index("#pragma once")], "the opening comment names it"


def test_the_launcher_is_deterministic_and_compiled_only_where_asked(tmp_path):
    text = header(tmp_path, [HALO, PERSISTENT, GEMM, SM80])
    assert header(tmp_path, [HALO, PERSISTENT, GEMM, SM80]) == text
    body = text[text.index("#if defined(BEST_KERNELS_IMPLEMENTATION)\n"):text.index("#endif  // BEST_KERNELS_IMPLEMENTATION\n")]
    assert "inline constexpr Launcher kLaunchers[]" in body
    parts = text[text.index("#if defined(BEST_KERNELS_IMPLEMENTATION) || defined(BEST_KERNELS_PARTS)"):
                 text.index("#endif  // BEST_KERNELS_IMPLEMENTATION || BEST_KERNELS_PARTS")]
    assert [int(i) for i in re.findall(r"#if BEST_KERNELS_IN_THIS_PART\((\d+)\)\nusing Operation\1 = ", parts)] == \
        [0, 1, 2, 3], "each kernel's entry points compiled in its part only"
    declarations = text[:text.index("#if defined(BEST_KERNELS_IMPLEMENTATION)")]
    for declaration in ("size_t workspace_size(const Conv2dFpropProblem& problem);",
                        "cutlass::Status conv2d_fprop(const Conv2dFpropProblem& problem, const Element* x",
                        "cutlass::Status gemm(const GemmProblem& problem, const Element* a",
                        "using Element = cutlass::half_t;",
                        "const char* kernel_for(const GemmProblem& problem);"):
        assert declaration in declarations
    assert text.rstrip().endswith("#endif  // !BEST_KERNELS_WRONG_FLAGS")


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
#define BEST_KERNELS_IMPLEMENTATION
#include "best_kernels.h"
#include <cstdio>

int main() {
  using namespace best_kernels;
  Conv2dFpropProblem p{8, 56, 56, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1};
  auto* x = reinterpret_cast<cutlass::half_t*>(0x10000);
  auto* w = reinterpret_cast<cutlass::half_t*>(0x20000);
  auto* y = reinterpret_cast<cutlass::half_t*>(0x30000);
  auto* other = reinterpret_cast<cutlass::half_t*>(0x40000);
  auto* stream = reinterpret_cast<cudaStream_t>(0x50000);
  int status = 0;
  auto launch = [&](cutlass::half_t* out, cudaStream_t s) {
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


@requires_nvcc
def test_a_repeated_launch_reuses_the_prepared_kernel_and_any_change_prepares_it_again(tmp_path):
    includes = tmp_path / "profiler"
    shutil.copytree(ROOT / "profiler", includes)
    (includes / "counting_adapter.h").write_text(COUNTING_ADAPTER)
    kernel = CountingKernel()
    results_dir = tmp_path / "results"
    results_dir.mkdir()
    header(results_dir, [kernel.name] * len(PROBLEMS), {**CATALOG, kernel.name: kernel}, includes)
    (results_dir / "main.cu").write_text(COUNTING_MAIN)
    build = subprocess.run(header_builds.nvcc_command(results_dir, "main.cu", header_builds.MEASURED_FLAGS,
                                                      output="main"), capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-5000:]
    out = subprocess.run([str(results_dir / "main")], capture_output=True, text=True, timeout=60)
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
                        tmp_path / "best_kernels.h", ROOT / "profiler")
    assert list(best["kernel"]) == [bf16.name], "the faster row is over bf16's tolerance"
    text = (tmp_path / "best_kernels.h").read_text()
    assert "using Element = cutlass::bfloat16_t;" in text
    assert "cutlass::Status conv2d_fprop(const Conv2dFpropProblem& problem, const Element* x" in text
