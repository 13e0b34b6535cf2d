## The C++ type of one CUTLASS 2.x grouped conv2d fprop kernel (DefaultConv2dGroupFprop).
## Inputs: name (the procedural name), v (values from the descriptor, C++ spellings).
// CUTLASS 2.x implicit-GEMM grouped conv2d fprop: ${name}
using ${name}_base = typename cutlass::conv::kernel::DefaultConv2dGroupFprop<
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
    ${v["group_mode"]},
    ${v["iterator"]},
    cutlass::conv::StrideSupport::kUnity,
    ${v["alignment"]},
    ${v["alignment"]}
  >::Kernel;
using ${name} = cutlass::conv::device::ImplicitGemmConvolution<${name}_base>;
