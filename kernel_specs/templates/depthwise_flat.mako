## The C++ type of one depthwise kernel of even channel counts at stride 1 and "same" padding
## (profiler/depthwise_flat.h: DepthwiseFlat): R = S = filter, a band of TP = rows output rows a CTA.
## Inputs: name (the procedural name), v (type, element, filter, rows).
// ${v["type"]} ${v["filter"]}x${v["filter"]}, stride 1, a band of ${v["rows"]} output row(s) a CTA staged in shared memory: ${name}
using ${name} = kernelgen::${v["type"]}<${v["element"]}, ${v["filter"]}, ${v["rows"]}>;
