## The C++ type of one few-channels conv2d fprop kernel (profiler/conv_few_channels.h): C = 1 to
## 4 input channels, any filter, stride, padding and dilation, a multiple of 8 output channels.
## Inputs: name (the procedural name), v (mode: "im2col" or "rows"; type: its C++ template; bm, bn:
## the tile; wm, wn: the warps; reduction: the most reduction columns held; staged: the most input
## pixels a rows-mode tile stages; blocks: CTAs per SM it is built for; threads; shared_bytes: what
## the spec check counted, asserted equal to what the kernel asks for at most).
% if v["mode"] == "rows":
// Few-channels conv2d fprop, rows mode, ${v["bm"]}x${v["bn"]} tiles, ${v["wm"]}x${v["wn"]} warps, up to ${v["reduction"]} reduction columns and ${v["staged"]} staged input pixels, ${v["blocks"]} CTAs per SM: ${name}
using ${name} = kernelgen::${v["type"]}<${v["bm"]}, ${v["bn"]}, ${v["wm"]}, ${v["wn"]}, ${v["reduction"]}, ${v["staged"]}, ${v["blocks"]}>;
% else:
// Few-channels conv2d fprop, ${v["bm"]}x${v["bn"]} tiles, ${v["wm"]}x${v["wn"]} warps, up to ${v["reduction"]} reduction columns, ${v["blocks"]} CTAs per SM: ${name}
using ${name} = kernelgen::${v["type"]}<${v["bm"]}, ${v["bn"]}, ${v["wm"]}, ${v["wn"]}, ${v["reduction"]}, ${v["blocks"]}>;
% endif
static_assert(${name}::kSharedBytes == ${v["shared_bytes"]}, "the spec check counts shared memory as the kernel does");
static_assert(${name}::kThreads == ${v["threads"]}, "the spec check counts threads as the kernel does");
