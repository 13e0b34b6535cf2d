"""On a GPU: scons profile over a few kernels x two layers, then best_kernels.h, end to end.

Skipped where no GPU is usable. Set KERNELGEN_TEST_BUILD to a build directory that
already holds the kernels' objects (e.g. generated/) to reuse them instead of compiling.
"""

import json
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, assert_table_served, build_folder, profile_table_rows, requires_gpu, workload_file  # noqa: F401  (fixture)
from kernelgen import results
from kernelgen.profile import query_gpu
from kernelgen.specs import load_catalog
from kernelgen.workloads import parse_workloads

KERNELS = ",".join([
    "cutlass_tensorop_f16_s16816fprop_optimized_f16_128x128_32x3_nhwc_align8",
    "cutlass_tensorop_f16_s16816fprop_optimized_f16_64x64_32x10_nhwc_align2",
    "cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_128x128x64_1x1x1_0_align8_warpspecialized_epi_tma",
    "cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_128x64x64_1x1x1_0_align8_warpspecialized_pingpong_epi_tma",
    "cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_256x64x64_1x1x1_0_align8_warpspecialized_cooperative_epi_tma",
    "cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_64x256x64_1x1x1_0_align8_warpspecialized_pingpong_epi_tma_transposed",
    "cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_256x128x64_2x1x1_0_align8_warpspecialized_cooperative_epi_tma_transposed",
    "cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_void_f16nhwc_128x128x64_1x1x1_0_align8_warpspecialized_pingpong_epi_tma_64x32_stores8",
])


def this_gpu(results_root, set_name):
    """Where scons profile writes a set's CSVs on this machine: a folder per GPU."""
    return results.gpu_dir(results_root, set_name, query_gpu()[0])


def scons(*args):
    out = subprocess.run([sys.executable, shutil.which("scons"), "-j16", *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=3600)
    assert out.returncode == 0, f"scons {' '.join(args)} failed:\n{out.stdout[-5000:]}\n{out.stderr[-5000:]}"
    return out


@requires_gpu
def test_profile_verifies_and_times_each_kernel_then_the_header_picks_the_fastest(tmp_path, workload_file):
    build = build_folder(tmp_path)
    common = [f"WORKLOADS={workload_file}", "TOP=listed", f"KERNELS={KERNELS}", f"RESULTS={tmp_path / 'results'}", f"BUILD={build}"]
    scons("profile", *common)
    problems = parse_workloads(workload_file.read_text())
    fastest = []
    for problem in problems:
        frame = results.read_csv(this_gpu(tmp_path / "results", workload_file.stem) / f"{problem.name}.csv")
        assert sorted(frame["kernel"]) == sorted(KERNELS.split(","))
        assert set(frame["status"]) == {"ok"}, frame[["kernel", "status", "message"]].to_string()
        assert (frame["rel_l2_error"] < 1e-3).all() and (frame["rel_max_error"] < 1e-3).all()
        assert (frame["rel_l2_error"] > 0).all(), "fp16 output cannot match a double reference exactly"
        assert (frame["min_ms"] <= frame["runtime_ms"]).all() and (frame["runtime_ms"] <= frame["max_ms"]).all()
        assert (frame["iterations"] >= 20).all()
        assert set(frame["gpu"]) == {frame["gpu"].iloc[0]} and "H" in frame["gpu"].iloc[0]
        fastest.append(frame.sort_values(["runtime_ms", "kernel"]).iloc[0]["kernel"])

    again = scons("profile", *common)
    assert "profiled 0 (workload, kernel) pair(s)" in again.stdout, "nothing left to measure"
    # the stack SConstruct expected (commands.measuring_stack) is the one the rows were measured with:
    # with nothing left to measure, the profiler links the chosen kernels alone
    manifest = json.loads((ROOT / build / "kernels.json").read_text())
    assert manifest.get("part") is True and sorted(manifest["kernels"]) == sorted(set(fastest)), manifest["kernels"]

    scons("best_kernels.h", *common)
    folder = ROOT / build / "sets" / workload_file.stem
    text, types = (folder / "best_kernels.h").read_text(), (folder / "best_kernels_cutlass.h").read_text()
    for problem, kernel in zip(problems, fastest):
        assert f'"{problem.name}",' in text and f"using Kernel = {kernel};" in types

    # The library links the profiled objects (nothing compiled again but its launcher), and the CMake
    # example runs every layer through it on the GPU and checks it against a direct convolution.
    linked = scons("library", *common)
    assert linked.stdout.count("nvcc ") == 1 and "best_kernels_launcher.cu" in linked.stdout, linked.stdout
    if shutil.which("cmake") is None:
        pytest.skip("the CMake example needs cmake")
    example = tmp_path / "cmake-example"
    for command in (["cmake", "-S", str(ROOT / "examples" / "cmake"), "-B", str(example), f"-DBEST_KERNELS_DIR={folder}"],
                    ["cmake", "--build", str(example), "-j4"], [str(example / "run_best_kernels"), "--repeats", "2"]):
        out = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count(" ok ") >= len(problems), out.stdout


HALO = "kernelgen_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_3x3_64x232_w56_rows4_halo"
POINTWISE = "kernelgen_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_1x1_64x256_c64_stages4_pointwise"
POINTWISE_128 = "kernelgen_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_1x1_64x256_c128_stages2_pointwise"
# Per kernel: layers it computes (ok) and layers it refuses, with a word of the reason: the model's
# (cost_model.serves), where it leaves the layer out of a build of the kernel, else the profiler's.
# Three images make fewer tiles than SMs; 30 rows leave a last halo tile of 2 rows, and 3 x 7 x 9
# pixels a last pointwise tile of 189 (TMA zero-fills the loads and clips the stores); 192 output
# channels take three CTAs' filter slices.
CATALOG = {k.name: k for k in load_catalog(ROOT / "kernel_specs" / "families")}
RESIDENT = {
    HALO: ({"n=3 h=56 w=56 c=64 k=64 r=3 s=3 pad=1 stride=1", "n=2 h=30 w=56 c=64 k=192 r=3 s=3 pad=1 stride=1"},
           {"n=2 h=56 w=56 c=64 k=64 r=1 s=1 pad=0 stride=1": "3x3",
            "n=2 h=28 w=28 c=64 k=64 r=3 s=3 pad=1 stride=1": "width",
            "n=2 h=8 w=56 c=128 k=64 r=3 s=3 pad=1 stride=1": "64 input channels",
            "n=2 h=8 w=56 c=64 k=96 r=3 s=3 pad=1 stride=1": "multiple of 64"}),
    POINTWISE: ({"n=3 h=7 w=9 c=64 k=192 r=1 s=1 pad=0 stride=1", "n=4 h=56 w=56 c=64 k=64 r=1 s=1 pad=0 stride=1"},
                {"n=2 h=14 w=14 c=64 k=64 r=1 s=1 pad=0 stride=2": "stride 1",
                 "n=2 h=14 w=14 c=128 k=64 r=1 s=1 pad=0 stride=1": "number of channels",
                 "n=2 h=14 w=14 c=64 k=96 r=1 s=1 pad=0 stride=1": "number of channels"}),
    POINTWISE_128: ({"n=3 h=7 w=9 c=128 k=128 r=1 s=1 pad=0 stride=1", "n=2 h=28 w=28 c=128 k=512 r=1 s=1 pad=0 stride=1"},
                    {"n=2 h=14 w=14 c=64 k=64 r=1 s=1 pad=0 stride=1": "number of channels"}),
}


def test_the_resident_kernels_layers_are_served_or_refused_as_the_gpu_test_expects():
    assert_table_served(CATALOG, RESIDENT)


@requires_gpu
@pytest.mark.parametrize("kernel", sorted(RESIDENT))
def test_resident_kernels_are_verified_on_full_and_partial_tiles_and_refuse_other_layers(tmp_path, kernel):
    computes, refuses = RESIDENT[kernel]
    for layer, frame in profile_table_rows(tmp_path, CATALOG[kernel], computes, refuses).items():
        assert list(frame["kernel"]) == [kernel]
        row = frame.iloc[0]
        if layer in computes:
            assert row["status"] == "ok", (layer, row["message"])
            assert 0 < row["rel_l2_error"] < 1e-3 and row["rel_max_error"] < 1e-3
        else:
            assert row["status"] == "unsupported" and refuses[layer] in row["message"], (layer, row["message"])
