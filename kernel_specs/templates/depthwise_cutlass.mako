## The C++ type of one CUTLASS depthwise direct convolution (DefaultDepthwiseDirect2dConvFprop run by
## cutlass::conv::device::DirectConvolution; profiler/depthwise_cutlass_adapter.h): groups = C = K,
## R = S = filter, f16 in and out, f32 accumulation and epilogue.
## Inputs: name (the procedural name), v (element, accumulator, output, filter, tile, groups, warp_m,
## stages, algorithm, stride_support, stride, fixed, tiles_per_cta, epilogue_vector).
<%
  p, q = v["tile"]
  stride = v["stride"] if v["fixed"] else -1
  dilation = 1 if v["fixed"] else -1
%>\
// CUTLASS depthwise direct conv ${v["filter"]}x${v["filter"]}, ${"stride %d compiled in" % v["stride"] if v["fixed"] else "stride at run time"}, tiles of ${p}x${q} pixels by ${v["groups"]} channels, warps of ${v["warp_m"]} pixels, ${v["stages"]} stages, ${v["tiles_per_cta"]} tile(s) a CTA: ${name}
using ${name}_kernel = typename cutlass::conv::kernel::DefaultDepthwiseDirect2dConvFprop<
    ${v["element"]}, cutlass::layout::TensorNHWC,
    ${v["element"]}, cutlass::layout::TensorNHWC,
    ${v["output"]}, cutlass::layout::TensorNHWC,
    ${v["accumulator"]},
    cutlass::arch::OpClassSimt,
    cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<${p * q}, ${v["groups"]}, ${v["filter"] ** 2}>,
    cutlass::conv::TensorNHWCShape<1, ${p}, ${q}, ${v["groups"]}>,
    cutlass::MatrixShape<${v["filter"]}, ${v["filter"]}>,
    cutlass::gemm::GemmShape<${v["warp_m"]}, ${v["groups"]}, ${v["filter"] ** 2}>,
    cutlass::gemm::GemmShape<1, 1, 1>,
    cutlass::epilogue::thread::LinearCombination<
        ${v["output"]}, ${v["epilogue_vector"]}, ${v["accumulator"]}, ${v["accumulator"]}>,
    cutlass::conv::threadblock::DepthwiseDirect2dConvIdentityThreadblockSwizzle<1, 1, ${p}, ${q}>,
    ${v["stages"]},
    cutlass::arch::OpMultiplyAdd,
    ${v["algorithm"]},
    ${v["stride_support"]},
    cutlass::MatrixShape<${stride}, ${stride}>,
    cutlass::MatrixShape<${dilation}, ${dilation}>
  >::Kernel;
struct ${name} : cutlass::conv::device::DirectConvolution<${name}_kernel> {
  static constexpr int kTilesPerCta = ${v["tiles_per_cta"]};  // output tiles a CTA computes in turn
};
