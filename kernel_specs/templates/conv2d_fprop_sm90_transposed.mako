## The C++ type of one transposed persistent CUTLASS 3.x SM90 conv2d fprop kernel: the output
## computed as Y^T = W * im2col(X)^T, filters as wgmma's A, pixels as its B (conv_sm90_transposed.h);
## the NHWC output is D column-major, (K x N*P*Q). Cooperative or ping-pong, fp32 accumulation.
## Inputs: name (the procedural name), v (values from the descriptor, C++ spellings).
<%namespace name="sm90" file="sm90_epilogue.mako"/>\
// CUTLASS 3.x transposed persistent conv2d fprop: ${name}
${sm90.epilogue(name, v, "ColumnMajor")}\
using ${name}_mainloop = typename kernelgen::Sm90TransposedFprop<
    ${v["schedule"]}, ${v["element"]}, ${v["accumulator"]}, ${v["tile"][0]}, ${v["tile"][1]}, ${v["tile"][2]},
    ${v["cluster"][0]}, ${v["cluster"][1]},
    static_cast<int>(sizeof(typename ${name}_epilogue::SharedStorage))
  >::CollectiveOp;
using ${name}_base = cutlass::gemm::kernel::GemmUniversal<
    ${name}_mainloop::GemmShape,
    ${name}_mainloop,
    ${name}_epilogue,
    ${v["scheduler"]}>;
${sm90.device_op(name, v)}\
