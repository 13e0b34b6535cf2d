"""scons compare's report: each workload is compared with the library PyTorch runs it with."""

from kernelgen import compare
from kernelgen.workloads import Conv2dProblem, GemmProblem


class Device:
    gpu, driver, cuda, cutlass = "NVIDIA H200", "580", "13.0", "4.2.0"


def row(library, kernel_ms, library_ms):
    return {"layer": "l", "kernel": "k", "kernel_ms": kernel_ms, "cudnn_ms": library_ms, "floor_ms": 0.5,
            "kernel_vs_cudnn": kernel_ms / library_ms, "library": library, "measured_at": "2026-11-30T00:00:00Z"}


def report(rows):
    return compare.report(rows, (4e12, 7e14), Device(), {"torch": "2.11", "cudnn": "91900"}, "t")


def test_the_report_names_the_library_each_set_was_compared_with():
    conv = report([row("cudnn", 1.0, 2.0), row("cudnn", 3.0, 2.0)])
    assert "| kernel ms | cuDNN ms |" in conv and "cuBLAS" not in conv.split("\n", 3)[3]
    assert "Kernels beat cuDNN on 1 of 2 layers" in conv and "worst layer 1.50" in conv
    gemm = report([row("cublas", 1.0, 2.0)])
    assert "| kernel ms | cuBLAS ms |" in gemm and "Kernels beat cuBLAS on 1 of 1" in gemm
    assert "| kernel ms | cuDNN / cuBLAS ms |" in report([row("cublas", 1.0, 2.0), row("cudnn", 1.0, 2.0)])


def test_a_gemm_workload_is_timed_with_cublas_a_convolution_with_cudnn(monkeypatch):
    calls = []
    monkeypatch.setattr(compare, "time_cublas", lambda torch, p, l2: calls.append(("cublas", p)) or 1.0)
    monkeypatch.setattr(compare, "time_cudnn", lambda torch, p, l2: calls.append(("cudnn", p)) or 2.0)
    gemm, conv = GemmProblem(m=256, n=1000, k=2048), Conv2dProblem(n=1, h=8, w=8, c=8, k=8, r=3, s=3)
    assert compare.time_library(None, gemm, 1 << 20) == ("cublas", 1.0)
    assert compare.time_library(None, conv, 1 << 20) == ("cudnn", 2.0)
    assert calls == [("cublas", gemm), ("cudnn", conv)]
