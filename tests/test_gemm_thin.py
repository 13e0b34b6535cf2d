"""The thin GEMM family (profiler/gemm_thin.h, site_scons/kernelgen/families/gemm_thin.py): its
spec checks refuse entries the kernel cannot build, naming file, entry and key; a kernel serves the
GEMMs (and 1x1 stride-1 convolutions) of a reduction and columns up to its own, of any alignment,
and says why it refuses the others; the model has no rows of it, so a build measures each of its
kernels on the GEMMs it serves (ConViT's positional projection, which only tensor-core tiles of C
padded to 8 served); a kernel compiles as the profiler builds it; on a GPU each computes GEMMs of
odd sizes or refuses them as the Python side says."""

import pytest

from conftest import (ROOT, assert_entry_refused, assert_kernels_compile, assert_served_rows_verify, one_entry_family,
                      profile_layers, requires_gpu, requires_nvcc)
from kernelgen.cost_model import serves, theta_group
from kernelgen.specs import load_family
from kernelgen.workloads import parse_workloads

SPEC = ROOT / "kernel_specs" / "families" / "gemm_thin.toml"
FIRST = "{ k_max = 8, n_max = 8, rows = 4, threads = 256 }"
CONVIT = "gemm m=1229312 n=4 k=3"


@pytest.mark.parametrize("entry, key, message", [
    (FIRST.replace("k_max = 8", "k_max = 17"), "k_max", "17 is outside [1, 16]"),
    (FIRST.replace("n_max = 8", "n_max = 0"), "n_max", "0 is outside [1, 16]"),
    (FIRST.replace("threads = 256", "threads = 96"), "threads", "96 is not one of 64, 128, 256, 512"),
    (FIRST.replace("rows = 4", "rows = 16").replace("k_max = 8", "k_max = 16"), "rows",
     "blocks of 256 x 16 rows of A and D need 197120 bytes of shared memory, more than 49152"),
])
def test_bad_entries_are_refused_naming_file_entry_and_key(tmp_path, entry, key, message):
    assert_entry_refused(tmp_path, "gemm_thin", entry, key, message)


def test_the_name_and_type_say_the_limits_and_the_block(tmp_path):
    from kernelgen import render

    path = tmp_path / "family.toml"  # a block of 64 rows of a reduction of 3: A's, D's and B's bytes
    path.write_text(one_entry_family("gemm_thin", FIRST.replace("rows = 4, threads = 256", "rows = 1, threads = 64")
                                     .replace("k_max = 8", "k_max = 3")))
    assert load_family(path)[0].shared_bytes() == 64 * (3 + 8) * 2 + 8 * 3 * 4

    kernel = next(k for k in load_family(SPEC) if (k.k_max, k.n_max) == (8, 8))
    assert kernel.name == "kernelgen_sm80_simt_gemm_thin_f16_f16_f32_f16_k8_n8_rows4_threads256"
    assert (kernel.op, kernel.arch, kernel.includes, kernel.adapter) == ("gemm", 80, ("gemm_thin.h",),
                                                                          "kernelgen::DirectOperation")
    templates = render.lookup(ROOT / "kernel_specs" / "templates")
    assert render.type_definition(templates, kernel).rstrip().endswith("kernelgen::GemmThin<8, 8, 4, 256>;")


@pytest.mark.parametrize("line, why", [
    (CONVIT, None),
    ("gemm m=7 n=1 k=1", None),
    ("gemm m=1000 n=8 k=8", None),
    ("gemm m=1000 n=9 k=8", "a thin GEMM of at most 8 columns, not 9"),
    ("gemm m=1000 n=8 k=12", "a thin GEMM of a reduction of at most 8, not 12"),
    ("conv2d_fprop n=32 h=56 w=56 c=3 k=8 r=1 s=1", None),
    ("conv2d_fprop n=32 h=56 w=56 c=3 k=8 r=3 s=3 pad=1", "not a GEMM: needs a 1x1, stride-1, unpadded convolution"),
])
def test_a_kernel_serves_the_thin_gemms_of_any_alignment(line, why):
    kernel = next(k for k in load_family(SPEC) if (k.k_max, k.n_max) == (8, 8))
    assert serves(kernel, parse_workloads(line)[0]) == why


def test_a_build_measures_each_kernel_on_the_thin_gemms_it_serves_until_fitted():
    """A group of its own that the committed model has no rows of: every kernel of the family is
    proposed (unranked) on ConViT's projection beside the model's top 3; none on ViT's MLP GEMM."""
    from kernelgen import candidates
    from kernelgen.cost_model import load_model
    from kernelgen.specs import load_catalog

    model = load_model("nvidia_h200")
    family = load_family(SPEC)
    assert theta_group(family[0]) == "GemmThin" and candidates.unfitted(model, family[0])
    convit, mlp = parse_workloads(f"{CONVIT}\ngemm m=6304 n=3072 k=768\n")
    first, second = candidates.propose([convit, mlp], load_catalog(SPEC.parent), model, 3)
    assert {k.name for k in family} <= first.unranked
    assert not {k.name for k in family} & ({k.name for _, k in second.ranked} | second.unranked)


@requires_nvcc
def test_a_kernel_compiles_as_the_profiler_builds_it(tmp_path):
    assert_kernels_compile(tmp_path, load_family(SPEC)[:1])


# GEMMs of odd sizes within the limits (m under a block, over several, a partial last block; the
# block's runs of A and D whatever k and n), and two beyond them
COMPUTES = ["gemm m=1000 n=4 k=3", "gemm m=4099 n=7 k=5", "gemm m=33 n=3 k=1", "gemm m=8 n=1 k=2",
            "gemm m=100003 n=3 k=4"]
REFUSES = {"gemm m=64 n=17 k=3": "columns, not 17", "gemm m=64 n=4 k=24": "reduction of at most"}


@requires_gpu
def test_each_kernel_verifies_on_odd_thin_gemms_or_refuses_them(tmp_path):
    """Every kernel on each GEMM: within 1e-3 where it serves it, ``unsupported`` where it does not;
    the two beyond every kernel left out of the narrowed build."""
    kernels = {k.name: k for k in load_family(SPEC)}
    frames = profile_layers(tmp_path, COMPUTES + sorted(REFUSES), ",".join(kernels))
    assert len(frames) == len(COMPUTES)
    for problem, frame in frames:
        assert_served_rows_verify(problem, frame, kernels)
