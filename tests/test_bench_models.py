"""The tensor-core kernels of bench/narrow_conv.cu, bench/grouped_direct.cu and bench/depthwise_toeplitz.cu, checked on the CPU:
each compiled for sm_90a, then `--model` fills every CTA's shared memory and takes every warp's
fragments as ldmatrix and mma.sync define them, from the kernels' own address functions, against a
plain convolution; a wrong address or fragment makes the model's largest difference the size of
the outputs and its exit status 1; bench/narrow_wgmma.cu's wgmma descriptors, decoded on the CPU.
And their command lines: sizes that are not positive integers refused in one line."""

import subprocess

import pytest

from conftest import ROOT, requires_nvcc


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The bench of a source, compiled for sm_90a once for this module's tests."""
    binaries = {}

    def build(source: str):
        if source not in binaries:
            binary = tmp_path_factory.mktemp("bench") / source.replace(".cu", "")
            out = subprocess.run(["nvcc", "-std=c++17", "-O1", "-gencode=arch=compute_90a,code=sm_90a", source, "-o",
                                  str(binary)], cwd=ROOT / "bench", capture_output=True, text=True, timeout=600)
            assert out.returncode == 0, out.stderr[-2000:]
            binaries[source] = binary
        return binaries[source]
    return build


@requires_nvcc
@pytest.mark.parametrize("source", ["narrow_conv.cu", "grouped_direct.cu", "depthwise_toeplitz.cu"])
def test_a_bench_kernels_indexing_passes_its_cpu_model(built, source):
    out = subprocess.run([str(built(source)), "--model"], capture_output=True, text=True, timeout=300)
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and lines and all(line.startswith("model ") and line.endswith("  ok") for line in lines), \
        out.stdout + out.stderr


@requires_nvcc
def test_the_wgmma_benchs_descriptors_address_the_layout_its_loads_write(built):
    """bench/narrow_wgmma.cu's shared-memory matrix descriptors, decoded as the canonical K-major
    layout of no swizzle, on the CPU: every element of every k-step's A and B is where the window's
    and the filter's loads put it."""
    out = subprocess.run([str(built("narrow_wgmma.cu")), "--descriptors"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("descriptors: 0 elements") and out.stdout.endswith("ok\n"), \
        out.stdout + out.stderr


# (bench, its arguments, what the one-line error says): sizes are read before any GPU is asked for
BAD_ARGUMENTS = [
    ("narrow_conv.cu", ["32", "112", "112"], "3 numbers are not groups of 5"),
    ("narrow_conv.cu", ["32", "112", "112", "24", "x"], "'x' is not a positive integer"),
    ("narrow_conv.cu", ["32", "112", "112", "24", "-24"], "'-24' is not a positive integer"),
    ("narrow_conv.cu", ["32", "112", "112", "24", "24k"], "'24k' is not a positive integer"),
    ("grouped_direct.cu", ["32", "56", "56", "128", "128", "0", "32"], "'0' is not a positive integer"),
    ("grouped_direct.cu", ["32", "56", "56", "128", "128", "1"], "6 numbers are not groups of 7"),
    ("narrow_wgmma.cu", ["32", "147", "147", "32", "0"], "'0' is not a positive integer"),
    ("depthwise_toeplitz.cu", ["32", "14", "14"], "3 numbers are not groups of 4"),
    ("depthwise_toeplitz.cu", ["32", "14", "14", "x"], "'x' is not a positive integer"),
]


@requires_nvcc
@pytest.mark.parametrize("source, arguments, message", BAD_ARGUMENTS)
def test_a_bench_refuses_sizes_that_are_not_positive_integers_in_one_line(built, source, arguments, message):
    out = subprocess.run([str(built(source)), *arguments], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert message in out.stderr and "(usage: " in out.stderr and out.stderr.count("\n") == 1, out.stderr
