## The C++ type of one CUTLASS 2.x GEMM running a 1x1 convolution transposed (profiler/gemm_adapter_2x.h):
## M the output channels, N the pixels, K the input channels; A the filter (row-major K x C), B the
## activations (column-major C x NPQ), C and D the output (column-major K x NPQ).
## Inputs: name (the procedural name), v (values from the descriptor, C++ spellings). The shapes are
## (pixels, output channels, reduction): device::Gemm runs a column-major D as the row-major GEMM of
## its transpose with the shapes unchanged, so its M tile is the pixels' (the static_assert holds it).
// CUTLASS 2.x GEMM, a 1x1 convolution computed transposed (M: output channels, N: pixels): ${name}
using ${name} = cutlass::gemm::device::Gemm<
    ${v["element"]}, cutlass::layout::RowMajor,
    ${v["element"]}, cutlass::layout::ColumnMajor,
    ${v["output"]}, cutlass::layout::ColumnMajor,
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
    ${v["alignment"]},
    ${v["alignment"]}>;
static_assert(${name}::GemmKernel::Mma::Shape::kM == ${v["threadblock"][0]} &&
              ${name}::GemmKernel::Mma::Shape::kN == ${v["threadblock"][1]},
              "the GEMM runs transposed: its threadblock's M is the tile's pixels, N its output channels");
