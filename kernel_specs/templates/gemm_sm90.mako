## The C++ type of one CUTLASS 3.x SM90 GEMM kernel: D (M x N, row-major) = A (M x K,
## row-major) * B (K x N, K contiguous), fp32 accumulation.
## Inputs: name (the procedural name), v (values from the descriptor, C++ spellings).
<%namespace name="sm90" file="sm90_epilogue.mako"/>\
// CUTLASS 3.x GemmUniversal: ${name}
${sm90.epilogue(name, v, "RowMajor")}\
using ${name}_mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    ${v["element"]}, cutlass::layout::RowMajor, 128 / cute::sizeof_bits_v<${v["element"]}>,
    ${v["element"]}, cutlass::layout::ColumnMajor, 128 / cute::sizeof_bits_v<${v["element"]}>,
    ${v["accumulator"]},
    cute::Shape<cute::_${v["tile"][0]}, cute::_${v["tile"][1]}, cute::_${v["tile"][2]}>,
    cute::Shape<cute::_${v["cluster"][0]}, cute::_${v["cluster"][1]}, cute::_${v["cluster"][2]}>,
    cutlass::gemm::collective::StageCountAutoCarveout<
        static_cast<int>(sizeof(typename ${name}_epilogue::SharedStorage))>,
    ${v["schedule"]}
  >::CollectiveOp;
using ${name}_base = cutlass::gemm::kernel::GemmUniversal<
    cute::Shape<int, int, int, int>,
    ${name}_mainloop,
    ${name}_epilogue,
    ${v["scheduler"]}>;
${sm90.device_op(name, v)}\
