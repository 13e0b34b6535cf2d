## The C++ type of one depthwise kernel of narrow channel counts at one stride (profiler/depthwise_rows.h:
## DepthwiseRows): R = S = filter, V channels a thread, TQ output columns a thread, the stride, TP
## output rows a thread.
## Inputs: name (the procedural name), v (type, element, filter, vector, columns, stride, rows).
// ${v["type"]} ${v["filter"]}x${v["filter"]}, stride ${v["stride"]}, ${v["vector"]} channel(s) a thread, ${v["columns"]} output column(s)${"" if v["rows"] == 1 else " x %d rows" % v["rows"]} a thread, no shared memory: ${name}
using ${name} = kernelgen::${v["type"]}<${v["element"]}, ${v["filter"]}, ${v["filter"]}, ${v["vector"]}, ${v["columns"]}, ${v["stride"]}${"" if v["rows"] == 1 else ", %d" % v["rows"]}>;
