## The C++ type of one depthwise kernel of even channel counts at one stride that walks rows
## (profiler/strip_conv.h: DepthwiseStrip): R = S = filter, a thread's columns, the lanes across
## a strip, a programmatic dependent launch or not, and the channels a thread.
## Inputs: name (the procedural name), v (type, element, filter, stride, columns, lanes, pdl, vector).
// ${v["type"]} ${v["filter"]}x${v["filter"]}, stride ${v["stride"]}, strips of ${v["columns"]} x ${v["lanes"]} output columns walking rows, ${v["vector"]} channels a thread: ${name}
using ${name} = kernelgen::${v["type"]}<${v["element"]}, ${v["filter"]}, ${v["stride"]}, ${v["columns"]}, ${v["lanes"]}, ${"true" if v["pdl"] else "false"}, ${v["vector"]}>;
