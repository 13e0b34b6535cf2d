## The C++ type of one depthwise kernel (profiler/depthwise.h; profiler/depthwise_tma.h where tma):
## groups = C = K, R = S = filter.
## Inputs: name (the procedural name), v (element, filter, stride, rows, thread_rows, columns, channel_vectors, stages, tma, threads).
// Depthwise ${v["filter"]}x${v["filter"]} stride ${v["stride"]}, tiles of ${v["rows"]} output rows, ${v["thread_rows"]}x${v["columns"]} outputs a thread, ${8 * v["channel_vectors"]} channels a CTA, ${v["stages"]} stages${", tiles by tensor copies, taps kept in registers" if v["tma"] else ""}${"" if v["threads"] == 256 else ", CTAs of %d threads" % v["threads"]}: ${name}
using ${name} = kernelgen::${"DepthwiseTma" if v["tma"] else "Depthwise"}<${v["element"]}, ${v["filter"]}, ${v["filter"]}, ${v["stride"]}, ${v["rows"]}, ${v["thread_rows"]}, ${v["columns"]}, ${v["channel_vectors"]}, ${v["stages"]}${"" if v["threads"] == 256 else ", %d" % v["threads"]}>;
