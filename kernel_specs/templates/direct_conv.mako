## The C++ type of one direct grouped kernel (profiler/direct_conv.h: DepthwiseNarrow or GroupedDirect):
## R = S = filter, V channels a thread, TQ output columns a thread.
## Inputs: name (the procedural name), v (type, element, filter, vector, columns). filter "any":
## profiler/direct_conv_any.h's type, R x S given at run time.
% if v["filter"] == "any":
// ${v["type"]}: any R x S filter (its taps read at each use), any stride and dilation, ${v["vector"]} channel(s) a thread, ${v["columns"]} output column(s) a thread, no shared memory: ${name}
using ${name} = kernelgen::${v["type"]}<${v["element"]}, ${v["vector"]}, ${v["columns"]}>;
% else:
// ${v["type"]} ${v["filter"]}x${v["filter"]}, any stride and dilation, ${v["vector"]} channel(s) a thread, ${v["columns"]} output column(s) a thread, no shared memory: ${name}
using ${name} = kernelgen::${v["type"]}<${v["element"]}, ${v["filter"]}, ${v["filter"]}, ${v["vector"]}, ${v["columns"]}>;
% endif
