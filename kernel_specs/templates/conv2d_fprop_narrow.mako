## The C++ type of one narrow 3x3 conv2d fprop kernel (profiler/narrow_conv.h): C -> K channels at
## stride 1 or 2. Inputs: name (the procedural name), v (c, k: the channels it is built for; stride; rows,
## columns: its tile of output pixels; warps; persistent: persistent CTAs, two windows, or a CTA a
## tile; bias, add, activation: its fused epilogue, activation_at_launch.h's kind; threads and
## shared_bytes: what the spec check counted, asserted equal to the kernel's).
// Narrow 3x3 conv2d fprop, ${v["c"]} -> ${v["k"]} channels${"" if v["stride"] == 1 else ", stride %d" % v["stride"]}, tiles of ${v["rows"]}x${v["columns"]} output pixels, ${v["warps"]} warps${", persistent CTAs" if v["persistent"] else ""}${", a bias" if v["bias"] else ""}${", a residual add" if v["add"] else ""}${"" if v["activation"] == "kActivationNone" else ", activation " + v["activation"]}: ${name}
using ${name} = kernelgen::NarrowFprop<${v["c"]}, ${v["k"]}, ${v["rows"]}, ${v["columns"]}, ${v["warps"]}, ${"true" if v["persistent"] else "false"}, ${"true" if v["bias"] else "false"}, ${"true" if v["add"] else "false"}, kernelgen::${v["activation"]}, ${v["stride"]}>;
static_assert(${name}::kSharedBytes == ${v["shared_bytes"]}, "the spec check counts shared memory as the kernel does");
static_assert(${name}::kThreads == ${v["threads"]}, "the spec check counts threads as the kernel does");
