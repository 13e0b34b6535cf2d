## The C++ type of one depthwise kernel that walks rows and sums in fp16 pairs (profiler/strip_conv.h:
## DepthwiseStripHalf): R = S = filter, the stride, a thread's columns, the lanes across a strip, and
## a programmatic dependent launch or not.
## Inputs: name (the procedural name), v (type, filter, stride, columns, lanes, pdl).
// ${v["type"]} ${v["filter"]}x${v["filter"]}, stride ${v["stride"]}, strips of ${v["columns"]} x ${v["lanes"]} output columns walking rows, fp16 pairs: ${name}
using ${name} = kernelgen::${v["type"]}<${v["filter"]}, ${v["stride"]}, ${v["columns"]}, ${v["lanes"]}, ${"true" if v["pdl"] else "false"}>;
