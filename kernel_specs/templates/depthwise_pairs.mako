## The C++ type of one depthwise kernel of narrow copies (profiler/depthwise_pairs.h): groups = C = K, R = S = filter.
## Inputs: name (the procedural name), v (element, filter, stride, rows, thread_rows, columns, channel_vectors, stages, access).
// Depthwise ${v["filter"]}x${v["filter"]} stride ${v["stride"]}, tiles of ${v["rows"]} output rows, ${v["thread_rows"]}x${v["columns"]} outputs a thread, ${8 * v["channel_vectors"]} channels a CTA, ${v["stages"]} stages, ${v["access"]}-byte copies along C: ${name}
using ${name} = kernelgen::DepthwisePairs<${v["element"]}, ${v["filter"]}, ${v["filter"]}, ${v["stride"]}, ${v["rows"]}, ${v["thread_rows"]}, ${v["columns"]}, ${v["channel_vectors"]}, ${v["stages"]}, ${v["access"]}>;
