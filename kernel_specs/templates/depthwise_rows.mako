## The C++ type of one depthwise kernel of narrow channel counts at one stride (profiler/depthwise_rows.h:
## DepthwiseRows): R = S = filter, V channels a thread, TQ output columns a thread, the stride.
## Inputs: name (the procedural name), v (type, element, filter, vector, columns, stride).
// ${v["type"]} ${v["filter"]}x${v["filter"]}, stride ${v["stride"]}, ${v["vector"]} channel(s) a thread, ${v["columns"]} output column(s) a thread, no shared memory: ${name}
using ${name} = kernelgen::${v["type"]}<${v["element"]}, ${v["filter"]}, ${v["filter"]}, ${v["vector"]}, ${v["columns"]}, ${v["stride"]}>;
