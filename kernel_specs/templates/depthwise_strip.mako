## The C++ type of one depthwise kernel of even channel counts at one stride that walks rows
## (profiler/depthwise_strip.h: DepthwiseStrip): R = S = filter, a thread's columns, the lanes across
## a strip, and a programmatic dependent launch or not.
## Inputs: name (the procedural name), v (type, element, filter, stride, columns, lanes, pdl).
// ${v["type"]} ${v["filter"]}x${v["filter"]}, stride ${v["stride"]}, strips of ${v["columns"]} x ${v["lanes"]} output columns walking rows: ${name}
using ${name} = kernelgen::${v["type"]}<${v["element"]}, ${v["filter"]}, ${v["stride"]}, ${v["columns"]}, ${v["lanes"]}, ${"true" if v["pdl"] else "false"}>;
