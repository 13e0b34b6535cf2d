"""bf16 end to end: the bf16 families' kernels serve bf16 workloads only, the profiler verifies
them against the reference in bf16 at bf16's tolerance, and the header of a bf16 set takes bf16.
(On a GPU; the CPU parts of the same path are in test_ops.py and test_launcher.py.)"""


import pytest

from conftest import ROOT, build_folder, requires_gpu
from kernelgen import results
from kernelgen.ops import serves
from kernelgen.specs import load_catalog
from kernelgen.vocab import verify_tolerance
from kernelgen.workloads import parse_workloads
from test_gpu_profile import scons, this_gpu

CATALOG = load_catalog(ROOT / "kernel_specs" / "families")
BF16 = sorted(k.name for k in CATALOG if k.element == "bf16" and k.op != "conv2d_fprop_grouped")
LAYERS = ("conv2d_fprop n=2 h=14 w=14 c=64 k=128 r=1 s=1 dtype=bf16\n"
          "conv2d_fprop n=2 h=9 w=11 c=64 k=72 r=3 s=3 pad=1 stride=2 dtype=bf16\n"
          "conv2d_fprop n=1 h=10 w=56 c=64 k=128 r=3 s=3 pad=1 dtype=bf16\n"  # the halo kernel's width
          "conv2d_fprop n=1 h=16 w=16 c=128 k=64 r=1 s=1 dtype=bf16\n"
          "gemm m=200 n=136 k=264 dtype=bf16\n")


def test_the_bf16_kernels_serve_bf16_workloads_only_at_bf16s_tolerance():
    bf16, = parse_workloads("gemm m=8 n=16 k=32 dtype=bf16\n")
    f16, = parse_workloads("gemm m=8 n=16 k=32\n")
    kernels = [k for k in CATALOG if k.element == "bf16" and k.op != "conv2d_fprop_grouped"]
    assert len(kernels) == 21 and all(serves(k, bf16) and not serves(k, f16) for k in kernels)
    assert {verify_tolerance(k) for k in kernels} == {8e-3}
    assert not any(serves(k, bf16) for k in CATALOG if k.element == "f16")


@requires_gpu
def test_bf16_kernels_are_verified_in_bf16_and_give_a_bf16_header(tmp_path):
    workloads = tmp_path / "bf16.txt"
    workloads.write_text(LAYERS)
    build = build_folder(tmp_path)
    common = [f"WORKLOADS={workloads}", "TOP=listed", f"KERNELS={','.join(BF16)}", f"RESULTS={tmp_path / 'results'}",
              f"BUILD={build}"]
    scons("profile", *common, "PROFILE_TIMEOUT=20")
    verified = set()
    for problem in parse_workloads(LAYERS):
        frame = results.read_csv(this_gpu(tmp_path / "results", "bf16") / f"{problem.name}.csv")
        ran = frame[frame["status"] != "unsupported"]
        assert len(ran) and set(ran["status"]) == {"ok"}, frame[["kernel", "status", "message"]].to_string()
        # bf16 rounding shows (an fp16-sized error would mean the output was not bf16) but stays within its tolerance
        assert (ran["rel_l2_error"] > 5e-4).all() and (ran["rel_max_error"] < 8e-3).all()  # fp16 shows 2e-4
        verified |= set(ran["kernel"])
    assert verified == set(BF16)  # every bf16 kernel ran, and was right, on some layer
    scons("best_kernels.h", *common)
    assert "using Element = __nv_bfloat16;" in (ROOT / build / "sets" / "bf16" / "best_kernels.h").read_text()
