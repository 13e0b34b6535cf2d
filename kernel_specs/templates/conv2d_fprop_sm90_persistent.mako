## The C++ type of one persistent CUTLASS 3.x SM90 conv2d fprop kernel: GemmUniversal's
## cooperative or ping-pong kernel running CUTLASS's conv mainloop (conv_sm90_persistent.h);
## the NHWC output is the row-major (N*P*Q) x K matrix D. fp32 accumulation.
## Inputs: name (the procedural name), v (values from the descriptor, C++ spellings).
<%namespace name="sm90" file="sm90_epilogue.mako"/>\
// CUTLASS 3.x persistent conv2d fprop: ${name}
${sm90.epilogue(name, v, "RowMajor")}\
using ${name}_mainloop = typename kernelgen::Sm90PersistentFprop<
    ${v["schedule"]}, ${v["element"]}, ${v["accumulator"]},
    cute::Shape<cute::_${v["tile"][0]}, cute::_${v["tile"][1]}, cute::Shape<cute::_${v["tile"][2]}>>,
    cute::Shape<cute::_${v["cluster"][0]}, cute::_${v["cluster"][1]}, cute::_${v["cluster"][2]}>,
    static_cast<int>(sizeof(typename ${name}_epilogue::SharedStorage))
  >::CollectiveOp;
using ${name}_base = cutlass::gemm::kernel::GemmUniversal<
    ${name}_mainloop::GemmShape,
    ${name}_mainloop,
    ${name}_epilogue,
    ${v["scheduler"]}>;
${sm90.device_op(name, v)}\
