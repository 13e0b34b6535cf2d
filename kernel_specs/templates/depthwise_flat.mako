## The C++ type of one depthwise kernel of even channel counts at one stride (profiler/depthwise_flat.h:
## DepthwiseFlat): R = S = filter, a band of TP = rows output rows a CTA, the stride.
## Inputs: name (the procedural name), v (type, element, filter, rows, stride).
// ${v["type"]} ${v["filter"]}x${v["filter"]}, stride ${v["stride"]}, a band of ${v["rows"]} output row(s) a CTA staged in shared memory: ${name}
using ${name} = kernelgen::${v["type"]}<${v["element"]}, ${v["filter"]}, ${v["rows"]}, ${v["stride"]}>;
