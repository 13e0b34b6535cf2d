"""Kernels for small problems: matrix-vector kernels (profiler/gemv.h) for GEMMs of a few rows,
and stream-K / split-K CUTLASS kernels (profiler/stream_k_adapter.h) for problems with few
output tiles and a long K. What they render to, what they serve, and on a GPU that they are
verified on the layers they serve, relaunched many times (a split-K launch on the counters
another left would never finish), and refuse the others."""


import subprocess

import pytest

from conftest import ROOT, assert_table_served, profile_table_rows, requires_gpu, requires_nvcc
from kernelgen import candidates, cost_model, render
from kernelgen.ops import serves
from kernelgen.ops.gemm import GemmProblem
from kernelgen.specs import load_catalog
from kernelgen.workloads import parse_workloads

TEMPLATES = ROOT / "kernel_specs" / "templates"
CATALOG = {k.name: k for k in load_catalog(ROOT / "kernel_specs" / "families")}
GEMV = "kernelgen_sm80_simt_gemv_f16_f16_f32_f16_m4_rows4_threads128_unroll2"
GEMV_1 = "kernelgen_sm80_simt_gemv_f16_f16_f32_f16_m1_rows4_threads128_unroll4"
GEMV_NARROW = "kernelgen_sm80_simt_gemv_f16_f16_f32_f16_m8_rows2_threads64_unroll2_vec2"
GEMV_32 = "kernelgen_sm80_simt_gemv_f16_f16_f32_f16_m32_rows2_threads128_unroll2"
GEMV_32_NARROW = "kernelgen_sm80_simt_gemv_f16_f16_f32_f16_m32_rows2_threads64_unroll2_vec2"
GEMV_LANES = "kernelgen_sm80_simt_gemv_f16_f16_f32_f16_m32_rows4_threads128_unroll2_lanesm"
GEMV_LANES_NARROW = "kernelgen_sm80_simt_gemv_f16_f16_f32_f16_m32_rows2_threads256_unroll4_vec2_lanesm"
GEMV_LANES_1024 = "kernelgen_sm80_simt_gemv_f16_f16_f32_f16_m32_rows1_threads1024_unroll2_lanesm"  # 32 warps a CTA
# A staged in shared memory (profiler/gemv_staged.h): 4-byte and 16-byte chunks
GEMV_STAGED_NARROW = "kernelgen_sm80_simt_gemv_f16_f16_f32_f16_m32_rows4_threads256_unroll4_vec2_lanesm_ashared"
GEMV_STAGED = "kernelgen_sm80_simt_gemv_f16_f16_f32_f16_m32_rows8_threads512_unroll1_lanesm_ashared"
# on tensor cores (profiler/gemv_mma.h): 16-byte loads, 4-byte loads, tiles of 16 rows
GEMV_MMA = "kernelgen_sm80_tensorop_gemv_f16_f16_f32_f16_m32_rows16_threads128_unroll2_mma"
GEMV_MMA_NARROW = "kernelgen_sm80_tensorop_gemv_f16_f16_f32_f16_m32_rows8_threads256_unroll4_vec2_mma"
GEMV_MMA_16 = "kernelgen_sm80_tensorop_gemv_f16_f16_f32_f16_m16_rows8_threads64_unroll4_mma"
SPLIT_GEMM = ("cutlass3x_sm90_tensorop_gemm_f16_f16_f32_void_f16_128x64x64_1x1x1_0_tnt_align8_splitk2"
              "_warpspecialized_cooperative_epi_tma")
STREAM_K_GEMM = ("cutlass3x_sm90_tensorop_gemm_f16_f16_f32_void_f16_128x64x64_1x1x1_0_tnt_align8_stream_k"
                 "_warpspecialized_cooperative_epi_tma")
SPLIT_CONV = ("cutlass3x_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_void_f16nhwc_128x64x64_1x1x1_0_align8_splitk2"
              "_warpspecialized_cooperative_epi_tma")


def source(name):
    return render.kernel_source(render.lookup(TEMPLATES), CATALOG[name])


def test_a_split_k_kernel_is_the_cutlass_kernel_run_with_its_split_and_a_workspace_reset_per_launch():
    text = source(SPLIT_GEMM)
    assert f"using {SPLIT_GEMM} = kernelgen::SplitK<cutlass::gemm::device::GemmUniversalAdapter<{SPLIT_GEMM}_base>, 2>;" \
        in text
    assert "cutlass::gemm::StreamKScheduler>;" in text
    assert '#include "stream_k_adapter.h"' in text
    assert f"kernelgen::GemmStreamKOperation3x<::{SPLIT_GEMM}>" in text
    stream_k = source(STREAM_K_GEMM)
    assert f"GemmUniversalAdapter<{STREAM_K_GEMM}_base>, 0>;" in stream_k, "0: the scheduler's own split"
    conv = source(SPLIT_CONV)
    assert f"kernelgen::Conv2dPersistentStreamKOperation3x<::{SPLIT_CONV}>" in conv
    assert "kernelgen::Sm90PersistentFprop<" in conv and ", 2>;" in conv
    adapter = (ROOT / "profiler" / "stream_k_adapter.h").read_text()
    run = adapter[adapter.index("bool run(size_t index"):]
    assert run.index("initialize_workspace") < run.index("->run(stream)"), "the counters are zeroed before each launch"


def test_a_kernel_without_a_split_renders_as_before():
    plain = SPLIT_GEMM.replace("_splitk2", "").replace("_f32_void_f16_", "_f32_f16_f16_")
    text = source(plain)
    assert f"using {plain} = cutlass::gemm::device::GemmUniversalAdapter<{plain}_base>;" in text
    assert "SplitK" not in text and "stream_k_adapter.h" not in text


def test_a_matrix_vector_kernel_serves_gemms_and_renders_its_parameters():
    kernel = CATALOG[GEMV]
    assert (kernel.op, kernel.element, kernel.arch, kernel.arch_specific) == ("gemm", "f16", 80, False)
    assert serves(kernel, GemmProblem(m=1, n=4096, k=25088)) and not serves(kernel, GemmProblem(1, 8, 8, dtype="bf16"))
    text = source(GEMV)
    assert f"using {GEMV} = kernelgen::Gemv<4, 4, 128, 2>;" in text
    assert '#include "gemv.h"' in text and f"kernelgen::DirectOperation<::{GEMV}>" in text


def test_a_narrow_matrix_vector_kernel_serves_an_even_k_and_renders_its_own_type():
    """vector = 2: gemv_narrow.h's 4-byte loads, for the K (input channels) of squeeze-excite layers
    that no 16-byte load divides; a kernel of gemv.h renders as it did before the key existed."""
    narrow, wide = CATALOG[GEMV_NARROW], CATALOG[GEMV]
    layer = parse_workloads("conv2d_fprop n=1 h=1 w=1 c=222 k=888 r=1 s=1\n")[0]
    assert cost_model.serves(narrow, layer) is None
    assert cost_model.serves(wide, layer) == "K must be a multiple of 8"
    assert cost_model.serves(narrow, GemmProblem(m=2, n=64, k=31)) == "K must be a multiple of 2"
    text = source(GEMV_NARROW)
    assert f"using {GEMV_NARROW} = kernelgen::GemvNarrow<8, 2, 64, 2>;" in text and '#include "gemv_narrow.h"' in text
    assert "gemv.h" not in text.replace("gemv_narrow.h", "")
    assert "vector" not in wide.values() and "type" not in wide.values()


def test_a_staged_matrix_vector_kernel_renders_its_type_and_refuses_an_a_beyond_shared_memory():
    """a = "shared": gemv_staged.h's kernels stage A (m rows of K halves, each row an odd number of
    chunks) in shared memory; the model refuses what the kernel's can_implement refuses."""
    staged, narrow = CATALOG[GEMV_STAGED], CATALOG[GEMV_STAGED_NARROW]
    text = source(GEMV_STAGED_NARROW)
    assert f"using {GEMV_STAGED_NARROW} = kernelgen::GemvStagedNarrow<32, 4, 256, 4>;" in text
    assert '#include "gemv_staged.h"' in text and f"kernelgen::DirectOperation<::{GEMV_STAGED_NARROW}>" in text
    assert f"kernelgen::GemvStaged<32, 8, 512, 1>;" in source(GEMV_STAGED)
    # 32 rows of 308 halves: 154 chunks of 4 bytes, padded to 155; the sums of 8 warps x 4 columns
    assert narrow.staged_bytes(32, 308) == 32 * 155 * 4 + 8 * 32 * 4 * 4
    assert staged.staged_bytes(32, 1232) == 32 * 155 * 16 + 16 * 32 * 8 * 4  # 154 chunks of 16 bytes
    assert CATALOG[GEMV_LANES].staged_bytes(32, 1232) == 0
    assert cost_model.serves(narrow, GemmProblem(m=32, n=8, k=3024)) is None
    assert cost_model.serves(narrow, GemmProblem(m=32, n=8, k=4000)) == "A staged in shared memory is more than a CTA has"
    assert cost_model.serves(narrow, GemmProblem(m=8, n=8, k=4000)) is None  # 8 rows of A fit


def test_a_tensor_core_matrix_vector_kernel_renders_its_type_and_is_measured_in_full_until_its_rows_are_fitted():
    """lanes = "mma": gemv_mma.h's warps compute their tiles by mma.sync; a group of the model's own,
    of no committed row yet, so every layer it serves measures each of its kernels."""
    narrow, wide, lanes = CATALOG[GEMV_MMA_NARROW], CATALOG[GEMV_MMA], CATALOG[GEMV_LANES_NARROW]
    text = source(GEMV_MMA_NARROW)
    assert f"using {GEMV_MMA_NARROW} = kernelgen::GemvMmaNarrow<32, 8, 256, 4>;" in text
    assert '#include "gemv_mma.h"' in text and f"kernelgen::DirectOperation<::{GEMV_MMA_NARROW}>" in text
    assert f"kernelgen::GemvMma<32, 16, 128, 2>;" in source(GEMV_MMA)
    layer = parse_workloads("conv2d_fprop n=32 h=1 w=1 c=222 k=888 r=1 s=1\n")[0]
    assert cost_model.serves(narrow, layer) is None and cost_model.serves(wide, layer) == "K must be a multiple of 8"
    assert cost_model.serves(CATALOG[GEMV_MMA_16], GemmProblem(m=17, n=8, k=8)) == \
        "a matrix-vector kernel for at most 16 rows"
    assert cost_model.group(narrow) == "Gemv/mma" and cost_model.group(lanes) == "Gemv"
    assert (narrow.sums_bytes(), lanes.sums_bytes()) == (8 * 32 * 8 * 4, 0)
    model = cost_model.load_model("nvidia_h200", ROOT / "kernel_specs" / "models")
    assert candidates.unfitted(model, narrow, layer) and not candidates.unfitted(model, lanes, layer)
    # its chain: 222 halves in blocks of 8, 8 warps of 4 blocks a group: one group a warp, 2 mma steps a tile
    features = cost_model._gemv_features(narrow, 32, 888, 222, 0.0, 132)
    assert features[4] == 1 and features[0] == 1 * 4 * 2 / 4 * 2 * 1 / 1e3


# Products of K past the last block of loads (24, 222, 1288, 2050), rows and columns past a tile's
# (17 of 32, 7 of 8, 1001 of 8 a CTA), one row, a long K split by 16 warps (3024)
MMA_PRODUCTS = [(32, 888, 222), (17, 7, 24), (32, 1001, 1288), (1, 5, 8), (31, 3, 2), (32, 9, 2050), (32, 308, 3024),
                (16, 100, 520), (3, 17, 8)]


@requires_nvcc
def test_every_tensor_core_matrix_vector_kernel_computes_odd_products_exactly_on_a_cpu_model_of_its_warps(tmp_path):
    """tests/gemv_mma_model.cu: each committed kernel's CTAs, warps, groups of loads and mma steps on
    the CPU, through the kernel's own index functions: every output exact (small integers), every
    load inside its operand and on its width."""
    kernels = [k for k in CATALOG.values() if k.family == "gemv" and k.lanes == "mma"]
    shapes = sorted({(k.max_m, k.rows, k.threads, k.unroll, k.vector) for k in kernels})
    (tmp_path / "shapes.h").write_text("#define SHAPES(X) " + " ".join(f"X{s}" for s in shapes) + "\n")
    build = subprocess.run(["nvcc", "-std=c++17", "-O1", f"-I{ROOT / 'profiler'}", f"-I{tmp_path}", "-o",
                            str(tmp_path / "model"), str(ROOT / "tests" / "gemv_mma_model.cu")],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-5000:]
    for m, n, k in MMA_PRODUCTS:
        out = subprocess.run([str(tmp_path / "model"), str(m), str(n), str(k)], capture_output=True, text=True,
                             timeout=600)
        assert out.returncode == 0, out.stderr
        lines = [line.split() for line in out.stdout.splitlines()]
        assert sorted(tuple(map(int, shape)) for *shape, _ in lines) == [
            s for s in shapes if m <= s[0] and k % s[4] == 0], (m, n, k)
        for *shape, worst in lines:
            assert float(worst) == 0, ((m, n, k), shape, worst)


SMALL = {
    # (layers it computes, layers it refuses with a word of the reason: the model's, where it leaves the
    # layer out of the build, else the profiler's)
    GEMV: ({"gemm m=1 n=1000 k=2048", "gemm m=3 n=257 k=1032", "gemm m=4 n=64 k=8",
            "conv2d_fprop n=1 h=2 w=2 c=512 k=100 r=1 s=1"},
           {"gemm m=5 n=64 k=64": "at most 4 rows", "gemm m=2 n=64 k=60": "multiple of 8",
            "conv2d_fprop n=1 h=2 w=2 c=64 k=64 r=3 s=3 pad=1": "not a GEMM"}),
    GEMV_1: ({"gemm m=1 n=4096 k=25088", "gemm m=1 n=7 k=4104"}, {"gemm m=2 n=64 k=64": "at most 1 rows"}),
    GEMV_NARROW: ({"conv2d_fprop n=1 h=1 w=1 c=222 k=888 r=1 s=1", "conv2d_fprop n=3 h=1 w=1 c=84 k=337 r=1 s=1",
                   "gemm m=8 n=5 k=2", "gemm m=1 n=1000 k=2050"},
                  {"gemm m=9 n=64 k=64": "at most 8 rows", "gemm m=2 n=64 k=31": "multiple of 2",
                   "conv2d_fprop n=1 h=3 w=3 c=30 k=30 r=3 s=3 pad=1": "not a GEMM"}),
    GEMV_32: ({"conv2d_fprop n=32 h=1 w=1 c=888 k=222 r=1 s=1", "gemm m=17 n=7 k=24", "gemm m=32 n=1000 k=1280"},
              {"gemm m=33 n=64 k=64": "at most 32 rows", "conv2d_fprop n=32 h=1 w=1 c=84 k=336 r=1 s=1": "multiple of 8"}),
    GEMV_32_NARROW: ({"conv2d_fprop n=32 h=1 w=1 c=222 k=888 r=1 s=1", "conv2d_fprop n=32 h=1 w=1 c=12 k=48 r=1 s=1",
                      "gemm m=31 n=3 k=2"}, {"gemm m=64 n=64 k=64": "at most 32 rows"}),
    GEMV_LANES: ({"conv2d_fprop n=32 h=1 w=1 c=888 k=222 r=1 s=1", "gemm m=17 n=7 k=24", "gemm m=32 n=1000 k=1288",
                  "gemm m=1 n=5 k=8"},
                 {"gemm m=33 n=64 k=64": "at most 32 rows", "conv2d_fprop n=32 h=1 w=1 c=84 k=336 r=1 s=1": "multiple of 8"}),
    GEMV_LANES_NARROW: ({"conv2d_fprop n=32 h=1 w=1 c=222 k=888 r=1 s=1", "conv2d_fprop n=32 h=1 w=1 c=30 k=120 r=1 s=1",
                         "gemm m=31 n=3 k=2", "gemm m=32 n=9 k=2050"},
                        {"gemm m=40 n=64 k=64": "at most 32 rows", "gemm m=2 n=64 k=31": "multiple of 2"}),
    GEMV_LANES_1024: ({"conv2d_fprop n=32 h=1 w=1 c=3024 k=308 r=1 s=1", "gemm m=17 n=7 k=24", "gemm m=32 n=3 k=8200"},
                      {"gemm m=33 n=64 k=64": "at most 32 rows", "conv2d_fprop n=32 h=1 w=1 c=84 k=336 r=1 s=1": "multiple of 8"}),
    # rows of A 308 channels wide (odd 4-byte chunks: the padding is one chunk), 1232 (78 KiB of A at
    # 32 rows: opted-in shared memory), 3024 (193 KiB), an A of fewer rows than the lanes
    GEMV_STAGED_NARROW: ({"conv2d_fprop n=32 h=1 w=1 c=308 k=1232 r=1 s=1", "conv2d_fprop n=32 h=1 w=1 c=1232 k=308 r=1 s=1",
                          "gemm m=31 n=3 k=2", "gemm m=32 n=9 k=3024", "gemm m=5 n=7 k=84"},
                         {"gemm m=40 n=64 k=64": "at most 32 rows", "gemm m=2 n=64 k=31": "multiple of 2",
                          "gemm m=32 n=8 k=4000": "shared memory"}),
    GEMV_STAGED: ({"conv2d_fprop n=32 h=1 w=1 c=1232 k=308 r=1 s=1", "conv2d_fprop n=32 h=1 w=1 c=3024 k=308 r=1 s=1",
                   "gemm m=17 n=7 k=24", "gemm m=32 n=1001 k=1288"},
                  {"gemm m=33 n=64 k=64": "at most 32 rows", "conv2d_fprop n=32 h=1 w=1 c=308 k=1232 r=1 s=1": "multiple of 8"}),
    # K past the last block (1288, 24, 2050: zeros loaded), rows and columns past a tile's, 1 row
    GEMV_MMA: ({"conv2d_fprop n=32 h=1 w=1 c=1232 k=308 r=1 s=1", "conv2d_fprop n=32 h=1 w=1 c=3024 k=308 r=1 s=1",
                "gemm m=17 n=7 k=24", "gemm m=32 n=1001 k=1288", "gemm m=1 n=5 k=8"},
               {"gemm m=33 n=64 k=64": "at most 32 rows", "conv2d_fprop n=32 h=1 w=1 c=222 k=888 r=1 s=1": "multiple of 8"}),
    GEMV_MMA_NARROW: ({"conv2d_fprop n=32 h=1 w=1 c=222 k=888 r=1 s=1", "conv2d_fprop n=32 h=1 w=1 c=30 k=120 r=1 s=1",
                       "gemm m=31 n=3 k=2", "gemm m=32 n=9 k=2050"},
                      {"gemm m=40 n=64 k=64": "at most 32 rows", "gemm m=2 n=64 k=31": "multiple of 2"}),
    GEMV_MMA_16: ({"conv2d_fprop n=1 h=1 w=1 c=144 k=6 r=1 s=1", "conv2d_fprop n=1 h=1 w=1 c=480 k=20 r=1 s=1",
                   "gemm m=16 n=100 k=520", "gemm m=3 n=17 k=8"},
                  {"gemm m=17 n=8 k=8": "at most 16 rows", "conv2d_fprop n=1 h=1 w=1 c=6 k=144 r=1 s=1": "multiple of 8"}),
    SPLIT_GEMM: ({"conv2d_fprop n=1 h=7 w=7 c=2048 k=512 r=1 s=1", "gemm m=256 n=4096 k=4096", "gemm m=3 n=200 k=136"},
                 {"conv2d_fprop n=1 h=7 w=7 c=512 k=512 r=3 s=3 pad=1": "not a GEMM"}),
    STREAM_K_GEMM: ({"conv2d_fprop n=1 h=14 w=14 c=1024 k=256 r=1 s=1", "gemm m=1 n=1000 k=2048"}, {}),
    SPLIT_CONV: ({"conv2d_fprop n=1 h=7 w=7 c=512 k=512 r=3 s=3 pad=1",
                  "conv2d_fprop n=1 h=14 w=14 c=1024 k=2048 r=1 s=1 stride=2",
                  "conv2d_fprop n=2 h=9 w=11 c=64 k=72 r=3 s=3 pad=1"}, {}),
}


def test_the_small_problem_kernels_layers_are_served_or_refused_as_the_gpu_test_expects():
    assert_table_served(CATALOG, SMALL)


@requires_gpu
@pytest.mark.parametrize("kernel", sorted(SMALL))
def test_small_problem_kernels_are_verified_relaunched_and_refuse_other_layers(tmp_path, kernel):
    computes, refuses = SMALL[kernel]
    for layer, frame in profile_table_rows(tmp_path, CATALOG[kernel], computes, refuses, "PROFILE_TIMEOUT=20").items():
        row = frame.iloc[0]
        if layer in computes:
            assert row["status"] == "ok", (layer, row["message"])
            assert 0 < row["rel_l2_error"] < 1e-3 and row["rel_max_error"] < 1e-3, layer
            assert row["iterations"] >= 20 and row["timing"] == "graph-rest50", "launched again and again, rested first"
        else:
            assert row["status"] == "unsupported" and refuses[layer] in row["message"], (layer, row["message"])
