## Shared pieces of the SM90 entry families' templates.
## epilogue(name, v, layout): the kernel's epilogue type, ${name}_epilogue, for C and D of
## cutlass::layout::<layout>: what CUTLASS's builder makes, or with v["store_stages"] TMA stores
## in flight (profiler/epilogue_sm90.h); with v["fusion"], that fusion operation (kernelgen.fusion);
## C and D aligned to v["output_alignment"] elements (1 with v["epilogue"] NoSmemWarpSpecialized:
## CUTLASS's DefaultEpilogue, which stores from registers).
## device_op(name, v): the kernel's device-level type, ${name}: GemmUniversalAdapter over
## ${name}_base, launched with PDL (v["pdl"], profiler/dependent_launch.h) or with a K split
## (v["splits"], profiler/stream_k_adapter.h). A kernel of launch settings searched (v["searched"])
## runs a type of its own, ${name}_kernel (as CUTLASS's library names each kernel): its fixed twin
## is the same GemmUniversal, and the same kernel compiled in two objects of one binary launched
## from the second one's code fails ("invalid argument": the shared-memory size set on the other's).
<%def name="epilogue(name, v, layout)">\
% if v["store_stages"] is None:
using ${name}_epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    cute::Shape<cute::_${v["tile"][0]}, cute::_${v["tile"][1]}, cute::_${v["tile"][2]}>,
    cute::Shape<cute::_${v["cluster"][0]}, cute::_${v["cluster"][1]}, cute::_${v["cluster"][2]}>,
    ${v["epilogue_tile"]},
    ${v["accumulator"]}, ${v["accumulator"]},
    ${v["source"]}, cutlass::layout::${layout}, ${v["output_alignment"]},
    ${v["output"]}, cutlass::layout::${layout}, ${v["output_alignment"]},
    ${v["epilogue"]}${"" if v["fusion"] is None else ",\n    " + v["fusion"]}
  >::CollectiveOp;
% else:
using ${name}_epilogue = typename kernelgen::Sm90TmaEpilogue<
    cute::Shape<cute::_${v["tile"][0]}, cute::_${v["tile"][1]}, cute::_${v["tile"][2]}>,
    ${v["epilogue_tile"]},
    ${v["accumulator"]},
    ${v["source"]}, cutlass::layout::${layout},
    ${v["output"]}, cutlass::layout::${layout},
    ${v["epilogue"]}, ${v["store_stages"]}
  >::CollectiveOp;
% endif
</%def>
<%def name="device_op(name, v)">\
<% kernel = name + ("_kernel" if v["searched"] else "_base") %>\
% if v["searched"]:
struct ${kernel} : ${name}_base {};
% endif
% if v["pdl"]:
using ${name} = kernelgen::DependentLaunch<cutlass::gemm::device::GemmUniversalAdapter<${kernel}>>;
% elif v["splits"] is None:
using ${name} = cutlass::gemm::device::GemmUniversalAdapter<${kernel}>;
% else:
using ${name} = kernelgen::SplitK<cutlass::gemm::device::GemmUniversalAdapter<${kernel}>, ${v["splits"]}>;
% endif
</%def>