## The C++ type of one narrow depthwise kernel (profiler/depthwise_narrow.h): groups = C = K,
## R = S = filter, V channels a thread (4-byte accesses where 2), TQ output columns a thread.
## Inputs: name (the procedural name), v (element, filter, vector, columns).
// Depthwise ${v["filter"]}x${v["filter"]}, any stride and dilation, ${v["vector"]} channel(s) a thread (C a multiple of ${v["vector"]}), ${v["columns"]} output column(s) a thread, no shared memory: ${name}
using ${name} = kernelgen::DepthwiseNarrow<${v["element"]}, ${v["filter"]}, ${v["filter"]}, ${v["vector"]}, ${v["columns"]}>;
