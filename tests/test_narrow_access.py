"""Layers of channel counts no multiple of 8 (kernel_specs/families/conv2d_fprop_sm80_narrow_output.toml:
16-byte input and 1-, 2- or 4-element output accesses for K no multiple of 8;
conv2d_fprop_sm75_narrow.toml: 2-byte accesses throughout for odd C;
conv2d_fprop_sm80_narrow_output_split.toml: the first's with K split over CTAs;
conv2d_fprop_sm90_persistent_narrow_output.toml: SM90 wgmma kernels storing D from registers, any K;
conv2d_fprop_sm80_narrow_access.toml: CUTLASS 2.x tiles of 4- and 2-element accesses as cuBLAS takes them):
a kernel of each compiles
through the project's rendering, the cost model proposes them for such layers, and on a GPU each
kernel computes exactly the small odd layers it says it serves (verified against the reference)
and CUTLASS refuses the others."""

from conftest import ROOT, assert_kernels_compile, assert_served_rows_verify, profile_layers, requires_gpu, requires_nvcc
from kernelgen import candidates
from kernelgen.cost_model import load_model
from kernelgen.ops.conv2d_fprop import Conv2dProblem
from kernelgen.specs import load_catalog, load_family

FAMILIES = ROOT / "kernel_specs" / "families"
SPECS = [FAMILIES / "conv2d_fprop_sm80_narrow_output.toml", FAMILIES / "conv2d_fprop_sm75_narrow.toml",
         FAMILIES / "conv2d_fprop_sm80_narrow_output_split.toml", FAMILIES / "conv2d_fprop_sm90_persistent_narrow_output.toml",
         FAMILIES / "conv2d_fprop_sm80_narrow_access.toml"]
GLOBS = ("cutlass_tensorop_f16_s16816fprop_optimized_f16_*_align8_out*,cutlass_tensorop_f16_s1688fprop_optimized_f16_*_align1,"
         "cutlass3x_sm90_tensorop_fprop_*_epi_nosmem,"
         + ",".join(f"cutlass_tensorop_f16_s16816fprop_optimized_f16_{tile}_nhwc_align[24]"
                    for tile in ("128x64_64x3", "64x128_64x4", "256x128_32x3")))


def test_the_model_proposes_narrow_accesses_where_the_channels_are_odd():
    """R(2+1)D's layers: 512 -> 921 channels gets SM90 kernels that store D from registers first
    (on the H200, R(2+1)D's two 921-channel layers at 0.65 and 0.70 of cuDNN, where the 2.x kernels
    of narrow output accesses took 0.75 and 1.15); 921 -> 512 the 2-byte SM75 ones or the SM90
    ones that pad C first (on R(2+1)D's 45-channel layer 0.074 ms against the SM75 kernels' 0.183);
    neither is left to the few-channels kernels alone."""
    catalog = load_catalog(FAMILIES)
    model = load_model("nvidia_h200")
    odd_k, odd_c = Conv2dProblem(16, 7, 7, 512, 921, 3, 3, 1, 1), Conv2dProblem(8, 2, 49, 921, 512, 3, 1, 1, 0)
    for layer, families in ((odd_k, {"conv2d_fprop_sm90_persistent_narrow_output"}),
                            (odd_c, {"conv2d_fprop_sm75_narrow", "conv2d_fprop_sm90_persistent_padded"})):
        proposal, = candidates.propose([layer], catalog, model, 4)
        assert proposal.ranked[0][1].family in families, [k.name for _, k in proposal.ranked]


def test_few_output_tiles_of_narrow_accesses_get_wgmma_first_then_splits_and_one_output_access_a_tile():
    """RetinaNet's 36-channel box head on a 13x13 map at batch 2: 338 pixels are 6 tiles of 64 for
    132 SMs. SM90 kernels of narrow N tiles storing from registers lead (measured 0.0086 ms against
    0.0128 for the best 2.x kernel, split 4 ways); the 2.x kernels proposed split each tile's 72 K
    iterations; and of kernels alike but for the output's accesses, one is proposed, the widest
    that serves (4 elements for K = 36): none narrower was faster where both ran."""
    catalog = load_catalog(FAMILIES)
    proposal, = candidates.propose([Conv2dProblem(2, 13, 13, 256, 36, 3, 3, 1, 1)], catalog, load_model("nvidia_h200"), 4)
    names = [k.name for _, k in proposal.ranked]
    assert names[0].endswith("_epi_nosmem") and "_64x48x64_" in names[0], names
    narrow = [k for _, k in proposal.ranked if k.family.startswith("conv2d_fprop_sm80_narrow_output")]
    assert narrow and all("_splitk" in k.name and k.k_alignment == 4 for k in narrow), names
    bases = [n.replace("_out1", "").replace("_out2", "").replace("_out4", "") for n in names]
    assert len(set(bases)) == len(bases), names


def test_an_aligned_layer_keeps_the_tma_kernel_of_a_tile_both_stores_serve():
    """The kernels that store D from registers serve any K, aligned layers too, and the model's
    corrections of them (fitted on odd layers) may rank one above its TMA twin there: the layer's
    candidates hold the twin, the wider output store, in its place."""
    catalog = load_catalog(FAMILIES)
    model = load_model("nvidia_h200")
    aligned = Conv2dProblem(8, 38, 38, 512, 512, 3, 3, 1, 1)
    nosmem = next(k for k in catalog if k.name.endswith("_128x128x64_1x1x1_0_align8_warpspecialized_pingpong_epi_nosmem"))
    twin = next(k for k in catalog if k.name == nosmem.name.replace("_epi_nosmem", "_epi_tma"))
    assert model.predict(nosmem, aligned) < model.predict(twin, aligned), "the case this guards"
    proposal, = candidates.propose([aligned], catalog, model, 10)
    names = [k.name for _, k in proposal.ranked]
    assert twin.name in names and not any(n.endswith("_epi_nosmem") for n in names), names
    odd, = candidates.propose([Conv2dProblem(8, 38, 38, 512, 364, 3, 3, 1, 1)], catalog, model, 10)
    assert nosmem.name in [k.name for _, k in odd.ranked]


@requires_nvcc
def test_a_kernel_of_each_family_compiles_for_sm90a_through_the_rendering(tmp_path):
    """The profiler's translation units of a kernel of each family, in one nvcc run: the device
    code too (the output's narrower accesses are the epilogue's vector, the inputs' the iterators')."""
    assert_kernels_compile(tmp_path, [load_family(spec)[-1] for spec in SPECS])


# Small odd layers: K of 1, 2 and 4 modulo 8 over aligned C; odd C (45, 21) and odd C and K; a
# temporal view's 3x1 filter with stride 2 along h; partial tiles, stride 2, padding.
LAYERS = [
    "n=2 h=7 w=7 c=64 k=921 r=3 s=3 pad=1 stride=1",
    "n=2 h=9 w=11 c=64 k=230 r=3 s=3 pad=1 stride=2",
    "n=1 h=6 w=13 c=128 k=460 r=3 s=3 pad=1 stride=1",
    "n=2 h=8 w=49 c=45 k=64 r=3 s=1 pad_h=1 pad_w=0 stride=1",
    "n=2 h=4 w=49 c=921 k=64 r=3 s=1 pad_h=1 pad_w=0 stride_h=2 stride_w=1",
    "n=1 h=9 w=9 c=21 k=45 r=3 s=3 pad=1 stride=2",
    "n=2 h=13 w=13 c=256 k=36 r=3 s=3 pad=1 stride=1",
]


@requires_gpu
def test_each_kernel_verifies_on_the_layers_it_serves_and_cutlass_refuses_the_others(tmp_path):
    kernels = {k.name: k for spec in SPECS for k in load_family(spec)}
    for problem, frame in profile_layers(tmp_path, LAYERS, GLOBS):
        assert_served_rows_verify(problem, frame, kernels)
