## The C++ type of one depthwise kernel on tensor cores (profiler/depthwise_mma.h, or
## profiler/depthwise_mma_half.h where half): groups = C = K, R = S = filter, stride 1.
## Inputs: name (the procedural name), v (element, filter, rows, columns, channel_vectors, stages, threads, half).
// Depthwise ${v["filter"]}x${v["filter"]} stride 1 on tensor cores, tiles of ${v["rows"]}x${v["columns"]} outputs by ${8 * v["channel_vectors"]} channels, ${v["stages"]} stages, CTAs of ${v["threads"]} threads${", 4 channels a warp" if v["half"] else ""}: ${name}
using ${name} = kernelgen::${"DepthwiseMmaHalf" if v["half"] else "DepthwiseMma"}<${v["element"]}, ${v["filter"]}, ${v["filter"]}, ${v["rows"]}, ${v["columns"]}, ${v["channel_vectors"]}, ${v["stages"]}, ${v["threads"]}>;
