## Shared pieces of the SM90 entry families' templates.
## stores(name, v, layout): the kernel's epilogue with v["store_stages"] TMA stores in flight
## (profiler/epilogue_sm90.h), for C and D of cutlass::layout::<layout>.
<%def name="stores(name, v, layout)">\
using ${name}_epilogue = typename kernelgen::Sm90TmaEpilogue<
    cute::Shape<cute::_${v["tile"][0]}, cute::_${v["tile"][1]}, cute::_${v["tile"][2]}>,
    cute::Shape<cute::_${v["epilogue_tile_shape"][0]}, cute::_${v["epilogue_tile_shape"][1]}>,
    ${v["accumulator"]},
    ${v["source"]}, cutlass::layout::${layout},
    ${v["output"]}, cutlass::layout::${layout},
    ${v["epilogue"]}, ${v["store_stages"]}
  >::CollectiveOp;
</%def>
