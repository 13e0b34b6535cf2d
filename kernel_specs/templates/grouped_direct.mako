## The C++ type of one direct grouped kernel (profiler/grouped_direct.h): 1 < groups dividing C and K,
## R = S = filter, V output channels a thread, TQ output columns a thread.
## Inputs: name (the procedural name), v (element, filter, vector, columns).
// Grouped ${v["filter"]}x${v["filter"]}, any channels a group, stride and dilation, ${v["vector"]} output channel(s) a thread, ${v["columns"]} output column(s) a thread, no shared memory: ${name}
using ${name} = kernelgen::GroupedDirect<${v["element"]}, ${v["filter"]}, ${v["filter"]}, ${v["vector"]}, ${v["columns"]}>;
