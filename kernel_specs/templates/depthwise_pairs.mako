## The C++ type of one depthwise kernel of narrow copies (profiler/depthwise_pairs.h): groups = C = K, R = S = filter, or a band's R x S.
## Inputs: name (the procedural name), v (element, filter, or a band's filter_r and filter_s; stride, rows, thread_rows, columns, channel_vectors, stages, access, half).
<% r, s = v.get("filter_r", v["filter"]), v.get("filter_s", v["filter"]) %>\
// Depthwise ${r}x${s} stride ${v["stride"]}, tiles of ${v["rows"]} output rows, ${v["thread_rows"]}x${v["columns"]} outputs a thread, ${8 * v["channel_vectors"]} channels a CTA, ${v["stages"]} stages, ${v["access"]}-byte copies along C${", fp16 sums" if v["half"] else ""}: ${name}
using ${name} = kernelgen::DepthwisePairs<${v["element"]}, ${r}, ${s}, ${v["stride"]}, ${v["rows"]}, ${v["thread_rows"]}, ${v["columns"]}, ${v["channel_vectors"]}, ${v["stages"]}, ${v["access"]}${", true" if v["half"] else ""}>;
