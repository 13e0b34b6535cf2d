## The C++ type of one depthwise kernel on tensor cores (profiler/depthwise_mma.h): groups = C = K,
## R = S = filter, stride 1.
## Inputs: name (the procedural name), v (element, filter, rows, columns, channel_vectors, stages, threads).
// Depthwise ${v["filter"]}x${v["filter"]} stride 1 on tensor cores, tiles of ${v["rows"]}x${v["columns"]} outputs by ${8 * v["channel_vectors"]} channels, ${v["stages"]} stages, CTAs of ${v["threads"]} threads: ${name}
using ${name} = kernelgen::DepthwiseMma<${v["element"]}, ${v["filter"]}, ${v["filter"]}, ${v["rows"]}, ${v["columns"]}, ${v["channel_vectors"]}, ${v["stages"]}, ${v["threads"]}>;
