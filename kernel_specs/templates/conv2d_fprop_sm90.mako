## The C++ type of one CUTLASS 3.x SM90 conv2d fprop kernel.
## Inputs: name (the procedural name), v (values from the descriptor, C++ spellings).
// CUTLASS 3.x ConvUniversal conv2d fprop: ${name}
using ${name}_epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    cute::Shape<cute::_${v["tile"][0]}, cute::_${v["tile"][1]}, cute::Shape<cute::_${v["tile"][2]}>>,
    cute::Shape<cute::_${v["cluster"][0]}, cute::_${v["cluster"][1]}, cute::_${v["cluster"][2]}>,
    cutlass::epilogue::collective::EpilogueTileAuto,
    ${v["accumulator"]}, ${v["accumulator"]},
    ${v["output"]}, cutlass::layout::TensorNHWC, 128 / cute::sizeof_bits_v<${v["output"]}>,
    ${v["output"]}, cutlass::layout::TensorNHWC, 128 / cute::sizeof_bits_v<${v["output"]}>,
    ${v["epilogue"]}${"" if v["fusion"] is None else ",\n    " + v["fusion"]}
  >::CollectiveOp;
using ${name}_mainloop = typename cutlass::conv::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    cutlass::conv::Operator::kFprop,
    ${v["element"]}, cutlass::layout::TensorNHWC, 128 / cute::sizeof_bits_v<${v["element"]}>,
    ${v["element"]}, cutlass::layout::TensorNHWC, 128 / cute::sizeof_bits_v<${v["element"]}>,
    ${v["accumulator"]},
    cute::Shape<cute::_${v["tile"][0]}, cute::_${v["tile"][1]}, cute::Shape<cute::_${v["tile"][2]}>>,
    cute::Shape<cute::_${v["cluster"][0]}, cute::_${v["cluster"][1]}, cute::_${v["cluster"][2]}>,
% if v["stages"]:
    cutlass::conv::collective::StageCount<${v["stages"]}>,
% else:
    cutlass::conv::collective::StageCountAutoCarveout<
        static_cast<int>(sizeof(typename ${name}_epilogue::SharedStorage))>,
% endif
    ${v["schedule"]}
  >::CollectiveOp;
using ${name}_base = cutlass::conv::kernel::ConvUniversal<
    cutlass::conv::ConvProblemShape<cutlass::conv::Operator::kFprop,
                                    ${name}_mainloop::DispatchPolicy::NumSpatialDimensions>,
    ${name}_mainloop,
    ${name}_epilogue>;
using ${name} = cutlass::conv::device::ConvUniversalAdapter<${name}_base>;
