"""On a GPU: scons profile over a few kernels x two layers, then best_kernels.h, end to end.

Skipped where no GPU is usable. Set KERNELGEN_TEST_BUILD to a build directory that
already holds the kernels' objects (e.g. generated/) to reuse them instead of compiling.
"""

import os
import shutil
import subprocess
import sys

from conftest import ROOT, requires_gpu, workload_file  # noqa: F401  (fixture)
from kernelgen import results
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


def scons(*args):
    out = subprocess.run([sys.executable, shutil.which("scons"), "-j16", *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=3600)
    assert out.returncode == 0, f"scons {' '.join(args)} failed:\n{out.stdout[-5000:]}\n{out.stderr[-5000:]}"
    return out


@requires_gpu
def test_profile_verifies_and_times_each_kernel_then_the_header_picks_the_fastest(tmp_path, workload_file):
    build = os.environ.get("KERNELGEN_TEST_BUILD", str(tmp_path / "build"))
    common = [f"WORKLOADS={workload_file}", f"KERNELS={KERNELS}", f"RESULTS={tmp_path / 'results'}", f"BUILD={build}"]
    scons("profile", *common)
    problems = parse_workloads(workload_file.read_text())
    fastest = []
    for problem in problems:
        frame = results.read_csv(tmp_path / "results" / workload_file.stem / f"{problem.name}.csv")
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

    scons("best_kernels.h", *common)
    text = (ROOT / build / "best_kernels.h").read_text()
    for problem, kernel in zip(problems, fastest):
        assert f'"{problem.name}",' in text and f"using Kernel = {kernel};" in text


HALO = "kernelgen_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_3x3_64x232_w56_rows4_halo"
HALO_LAYERS = """\
conv2d_fprop n=3 h=56 w=56 c=64 k=64 r=3 s=3 pad=1 stride=1
conv2d_fprop n=2 h=30 w=56 c=64 k=64 r=3 s=3 pad=1 stride=1
conv2d_fprop n=2 h=56 w=56 c=64 k=64 r=1 s=1 pad=0 stride=1
conv2d_fprop n=2 h=28 w=28 c=64 k=64 r=3 s=3 pad=1 stride=1
"""


@requires_gpu
def test_halo_kernel_is_verified_on_full_and_partial_tiles_and_refuses_other_layers(tmp_path):
    """Three images (fewer tiles than SMs), 30 rows (a last tile of 2 rows, clipped by TMA), and
    layers it was not built for (1x1; another width): unsupported, with the reason."""
    workloads = tmp_path / "halo.txt"
    workloads.write_text(HALO_LAYERS)
    build = os.environ.get("KERNELGEN_TEST_BUILD", str(tmp_path / "build"))
    scons("profile", f"WORKLOADS={workloads}", f"KERNELS={HALO}", f"RESULTS={tmp_path / 'results'}", f"BUILD={build}")
    rows = {}
    for problem in parse_workloads(HALO_LAYERS):
        frame = results.read_csv(tmp_path / "results" / "halo" / f"{problem.name}.csv")
        assert list(frame["kernel"]) == [HALO]
        rows[(problem.h, problem.w, problem.r)] = frame.iloc[0]
    for shape in ((56, 56, 3), (30, 56, 3)):
        row = rows[shape]
        assert row["status"] == "ok", row["message"]
        assert 0 < row["rel_l2_error"] < 1e-3 and row["rel_max_error"] < 1e-3
    assert rows[(56, 56, 1)]["status"] == "unsupported" and "3x3" in rows[(56, 56, 1)]["message"]
    assert rows[(28, 28, 3)]["status"] == "unsupported" and "width" in rows[(28, 28, 3)]["message"]
