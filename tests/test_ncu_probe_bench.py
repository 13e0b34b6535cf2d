"""bench/ncu_probe.sh: the job the profiler verifies and times carries the kernel's own tolerance,
and a kernel the profiler did not time is said to be so, with the profiler's result line, instead of
an empty listing."""

import json
import subprocess

import pytest

from conftest import ROOT

KERNEL = "kernelgen_sm90_simt_dwconv_half2_f16nhwc_f16nhwc_f16_f16nhwc_7x7_stride1_tile8x8_t4x2_c32_s3_tma_cta128"
JOB = "conv2d_fprop_grouped f16 32 7 7 768 768 7 7 3 3 1 1 1 1 768"
TIMED = "    Duration                         us         9.12\n    Registers Per Thread   register/thread   110\n"
REFUSED = f"result\tprobe\t{KERNEL}\tincorrect\tnan\toutput differs from the reference\n"


def probe(tmp_path, manifest=None, env=None, prints=TIMED):
    """Run the probe with a stand-in ncu that keeps the job file it was given and prints ``prints``."""
    build = tmp_path / "build"
    build.mkdir()
    if manifest is not None:
        (build / "kernels.json").write_text(json.dumps(manifest))
    (tmp_path / "said").write_text(prints)
    ncu = tmp_path / "bin" / "ncu"
    ncu.parent.mkdir()
    ncu.write_text(f'#!/bin/bash\nwhile [ "$1" != --jobs ]; do shift; done\ncp "$2" {tmp_path}/job\ncat {tmp_path}/said\n')
    ncu.chmod(0o755)
    out = subprocess.run(["bash", str(ROOT / "bench" / "ncu_probe.sh"), JOB, KERNEL, str(build), "depthwise"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env={"PATH": f"{ncu.parent}:/usr/bin:/bin", **(env or {})})
    job = (tmp_path / "job").read_text() if (tmp_path / "job").exists() else None
    return out, job


@pytest.mark.parametrize("manifest, env, tolerance", [
    ({"kernels": {KERNEL: {"tolerance": 0.02}}}, {}, "0.02"),
    ({"kernels": {KERNEL: {"tolerance": 0.001}}}, {}, "0.001"),
    ({"kernels": {KERNEL: {"tolerance": 0.02}}}, {"TOLERANCE": "0.005"}, "0.005"),
    (None, {}, "0.02"),
    ({"kernels": {"another_kernel": {"tolerance": 0.001}}}, {}, "0.02"),
], ids=["f16-accumulation", "f32-accumulation", "override", "no-manifest", "kernel-not-in-manifest"])
def test_the_job_carries_the_kernels_tolerance(tmp_path, manifest, env, tolerance):
    out, job = probe(tmp_path, manifest, env)
    assert out.returncode == 0, out.stderr
    assert job == f"workload probe {JOB}\nkernel {KERNEL} {tolerance}\n"
    assert "Duration" in out.stdout and "Registers Per Thread" in out.stdout


def test_a_kernel_the_profiler_did_not_time_is_named_with_its_result(tmp_path):
    out, _ = probe(tmp_path, {"kernels": {KERNEL: {"tolerance": 0.02}}}, prints=REFUSED)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr == "ncu_probe.sh: nothing profiled; the profiler said:\n" + REFUSED
