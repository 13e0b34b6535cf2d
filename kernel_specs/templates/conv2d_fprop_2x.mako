## The C++ type of one CUTLASS 2.x conv2d fprop kernel.
## Inputs: name (the procedural name), v (values from the descriptor, C++ spellings).
// CUTLASS 2.x implicit-GEMM conv2d fprop: ${name}
using ${name}_base = typename cutlass::conv::kernel::DefaultConv2dFprop<
    ${v["element"]}, cutlass::layout::TensorNHWC,
    ${v["element"]}, cutlass::layout::TensorNHWC,
    ${v["output"]}, cutlass::layout::TensorNHWC,
    ${v["accumulator"]},
    cutlass::arch::OpClassTensorOp,
    cutlass::arch::Sm${v["arch"]},
    cutlass::gemm::GemmShape<${", ".join(map(str, v["threadblock"]))}>,
    cutlass::gemm::GemmShape<${", ".join(map(str, v["warp"]))}>,
    cutlass::gemm::GemmShape<${", ".join(map(str, v["instruction"]))}>,
    cutlass::epilogue::thread::LinearCombination<
        ${v["output"]}, ${v["epilogue_vector"]}, ${v["accumulator"]}, ${v["accumulator"]}>,
    ${v["swizzle"]},
    ${v["stages"]},
    cutlass::arch::OpMultiplyAdd,
    ${v["iterator"]},
    cutlass::conv::StrideSupport::kUnity,
    ${v["alignment"]},
    ${v["alignment"]}
  >::Kernel;
% if v["split_k_slices"] > 1:
// each output tile's K iterations split ${v["split_k_slices"]} ways (serial split-K: conv2d_adapter_2x_split.h)
struct ${name} : cutlass::conv::device::ImplicitGemmConvolution<${name}_base> {
  static constexpr int kSplitKSlices = ${v["split_k_slices"]};
};
% else:
using ${name} = cutlass::conv::device::ImplicitGemmConvolution<${name}_base>;
% endif
