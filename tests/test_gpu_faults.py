"""On a GPU: kernels that fault, hang or compute the wrong thing are recorded as such, the
run carries on, and the reducer never picks them; awkward channel counts are served.

Set KERNELGEN_TEST_BUILD to a build directory that already holds the real kernels' objects
(e.g. generated/) to reuse them instead of compiling."""

import shutil
import subprocess
import sys

from conftest import ROOT, build_folder, requires_gpu, workload_file  # noqa: F401  (fixture)
from kernelgen import results
from kernelgen.profile import query_gpu
from kernelgen.workloads import parse_workloads

AWKWARD = """\
conv2d_fprop n=8 h=224 w=224 c=3 k=64 r=7 s=7 pad=3 stride=2
conv2d_fprop n=8 h=14 w=14 c=5 k=24 r=3 s=3 pad=1 stride=1
conv2d_fprop n=64 h=1 w=1 c=2048 k=1000 r=1 s=1 pad=0 stride=1
"""
NARROW = "cutlass_tensorop_f16_s1688fprop_few_channels_f16_64x64_32x2_nhwc_align1"
WIDE = "cutlass_tensorop_f16_s16816fprop_optimized_f16_128x128_32x3_nhwc_align8"
SM90 = "cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16_f16nhwc_128x128x64_1x1x1_0_align8_warpspecialized_epi_tma"


def scons(*args, check=True):
    out = subprocess.run([sys.executable, shutil.which("scons"), "-j16", *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=3000)
    if check:
        assert out.returncode == 0, f"scons {' '.join(args)} failed:\n{out.stdout[-5000:]}\n{out.stderr[-5000:]}"
    return out


def this_gpu(results_root, set_name):
    """Where scons profile writes a set's CSVs on this machine: a folder per GPU."""
    return results.gpu_dir(results_root, set_name, query_gpu()[0])


def statuses(path):
    frame = results.read_csv(path)
    return dict(zip(frame["kernel"], frame["status"])), frame.set_index("kernel")


@requires_gpu
def test_faulty_kernels_are_recorded_and_never_chosen(tmp_path, workload_file):
    common = ["SPECS=tests/specs", "TOP=listed", f"WORKLOADS={workload_file}", f"RESULTS={tmp_path / 'results'}",
              f"BUILD={tmp_path / 'build'}", "PROFILE_TIMEOUT=10"]
    scons("profile", *common)
    for problem in parse_workloads(workload_file.read_text()):
        found, frame = statuses(this_gpu(tmp_path / "results", workload_file.stem) / f"{problem.name}.csv")
        assert found == {
            "kernelgen_test_direct_fprop_f16_none": "ok",
            "kernelgen_test_direct_fprop_f16_wrong_scale": "incorrect",
            "kernelgen_test_direct_fprop_f16_illegal_address": "crashed",
            "kernelgen_test_direct_fprop_f16_hang": "timeout",
        }
        assert "illegal" in frame.loc["kernelgen_test_direct_fprop_f16_illegal_address", "message"].lower()
        assert frame.loc["kernelgen_test_direct_fprop_f16_wrong_scale", "rel_l2_error"] > 0.9
    scons("best_kernels.h", *common)
    header = (tmp_path / "build" / "sets" / workload_file.stem / "best_kernels_cutlass.h").read_text()
    assert header.count("using Kernel = kernelgen_test_direct_fprop_f16_none;") == 2


@requires_gpu
def test_awkward_channel_counts_get_a_verified_kernel(tmp_path):
    layers = tmp_path / "awkward.txt"
    layers.write_text(AWKWARD)
    build = build_folder(tmp_path)
    # TOP=listed: each of the three on each layer, whatever GPU (no cost model of its own needed)
    common = [f"WORKLOADS={layers}", f"RESULTS={tmp_path / 'results'}", f"BUILD={build}", "TOP=listed"]
    scons("profile", f"KERNELS={NARROW},{WIDE},{SM90}", *common)
    rgb, odd, classifier = parse_workloads(AWKWARD)
    found, _ = statuses(this_gpu(tmp_path / "results", "awkward") / f"{rgb.name}.csv")
    assert found == {NARROW: "ok", WIDE: "unsupported", SM90: "unsupported"}
    found, _ = statuses(this_gpu(tmp_path / "results", "awkward") / f"{odd.name}.csv")
    assert found[NARROW] == "ok" and found[WIDE] == "unsupported"
    found, _ = statuses(this_gpu(tmp_path / "results", "awkward") / f"{classifier.name}.csv")
    assert found == {NARROW: "ok", WIDE: "ok", SM90: "ok"}
    scons("best_kernels.h", f"KERNELS={NARROW},{WIDE},{SM90}", *common)

    refused = scons("best_kernels.h", f"KERNELS={WIDE},{SM90}", *common, check=False)
    assert refused.returncode != 0
    assert f"workload {rgb.name} has no kernel that ran correctly on the current code (2 unsupported)" in refused.stderr
