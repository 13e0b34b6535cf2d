## The C++ type of one grouped convolution kernel of 4 or 8 channels a group that walks rows
## (profiler/strip_conv.h: GroupedStrip): R = S = filter, the stride, a thread's columns, the lanes
## across a strip, the channels a group, and a programmatic dependent launch or not.
## Inputs: name (the procedural name), v (type, element, filter, stride, columns, lanes, channels, pdl).
// ${v["type"]} ${v["filter"]}x${v["filter"]}, ${v["channels"]} channels a group, stride ${v["stride"]}, strips of ${v["columns"]} x ${v["lanes"]} output columns walking rows: ${name}
using ${name} = kernelgen::${v["type"]}<${v["element"]}, ${v["filter"]}, ${v["stride"]}, ${v["columns"]}, ${v["lanes"]}, ${v["channels"]}, ${"true" if v["pdl"] else "false"}>;
