"""Layers of input channels no multiple of 8 run by the SM90 persistent conv kernels on copies of
their operands padded to 8 channels (kernel_specs/families/conv2d_fprop_sm90_persistent_padded.toml,
profiler/padded_adapter.h): the spec's kernels, what they serve, that the model proposes them for
such layers, that one compiles through the rendering, and on a GPU that each computes exactly the
odd layers it says it serves (verified against the reference) and refuses the aligned ones."""

from conftest import ROOT, assert_kernels_compile, assert_served_rows_verify, profile_layers, requires_gpu, requires_nvcc
from kernelgen import candidates
from kernelgen.cost_model import load_model, serves
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_catalog, load_family

FAMILIES = ROOT / "kernel_specs" / "families"
SPEC = FAMILIES / "conv2d_fprop_sm90_persistent_padded.toml"
NOSMEM = FAMILIES / "conv2d_fprop_sm90_persistent_padded_nosmem.toml"  # and D stored from registers: odd K too
GLOBS = "cutlass3x_sm90_tensorop_fprop_*_padc"


def test_the_kernels_pad_c_and_serve_only_what_needs_it():
    kernels = load_family(SPEC)
    assert kernels and all(k.name.endswith("_epi_tma_padc") and k.c_alignment == 1 and k.k_alignment == 8 for k in kernels)
    assert all(k.adapter == "kernelgen::PaddedConv2dPersistentOperation3x" and not k.fusible for k in kernels)
    odd_c, aligned, odd_k = (Conv2dProblem(8, 2, 49, 921, 512, 3, 1, 1, 0), Conv2dProblem(8, 2, 49, 928, 512, 3, 1, 1, 0),
                             Conv2dProblem(8, 2, 49, 921, 510, 3, 1, 1, 0))
    assert serves(kernels[0], odd_c) is None
    assert serves(kernels[0], aligned) == "pads C to a multiple of 8: for C no multiple of 8 only"
    assert "K of the output's 8" in serves(kernels[0], odd_k)
    both = load_family(NOSMEM)
    assert both and all(k.name.endswith("_epi_nosmem_padc") and k.c_alignment == 1 and k.k_alignment == 1 for k in both)
    assert all(k.adapter == "kernelgen::PaddedConv2dPersistentOperation3x" and not k.fusible for k in both)
    assert serves(both[0], odd_c) is None and serves(both[0], odd_k) is None
    assert serves(both[0], aligned) == "pads C to a multiple of 8: for C no multiple of 8 only"


def test_the_model_proposes_padded_kernels_for_odd_input_channels():
    """R(2+1)D's temporal layers of 921 and 45 input channels: padded SM90 kernels among their
    candidates beside the 2-byte SM75 ones."""
    catalog = load_catalog(FAMILIES)
    for layer in (Conv2dProblem(8, 2, 49, 921, 512, 3, 1, 1, 0), Conv2dProblem(8, 16, 3136, 45, 64, 3, 1, 1, 0)):
        proposal, = candidates.propose([layer], catalog, load_model("nvidia_h200"), 4)
        assert any(k.name.endswith("_padc") for _, k in proposal.ranked), [k.name for _, k in proposal.ranked]


@requires_nvcc
def test_a_padded_kernel_compiles_for_sm90a_through_the_rendering(tmp_path):
    assert_kernels_compile(tmp_path, load_family(SPEC)[:1] + load_family(NOSMEM)[:1])


# Odd C (45, 21, 921, 3 x 5) over aligned K; strided, padded, a temporal view's 3x1 filter; and an
# aligned layer every padded kernel refuses.
LAYERS = [
    "n=2 h=8 w=49 c=45 k=64 r=3 s=1 pad_h=1 pad_w=0 stride=1",
    "n=2 h=4 w=49 c=921 k=64 r=3 s=1 pad_h=1 pad_w=0 stride_h=2 stride_w=1",
    "n=1 h=9 w=9 c=21 k=64 r=3 s=3 pad=1 stride=2",
    "n=3 h=11 w=13 c=15 k=128 r=3 s=3 pad=1 stride=1",
    "n=2 h=7 w=7 c=64 k=64 r=3 s=3 pad=1 stride=1",
    "n=2 h=9 w=9 c=27 k=162 r=1 s=1 pad=0 stride=1",
    "n=1 h=7 w=7 c=1044 k=185 r=1 s=1 pad=0 stride=1",
]


@requires_gpu
def test_each_padded_kernel_verifies_on_the_odd_layers_and_refuses_the_aligned_one(tmp_path):
    kernels = {k.name: k for k in load_family(SPEC) + load_family(NOSMEM)}
    for problem, frame in profile_layers(tmp_path, LAYERS, GLOBS):
        assert_served_rows_verify(problem, frame, kernels)
