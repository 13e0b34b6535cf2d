## The C++ type of one packed 1x1 conv2d fprop kernel (profiler/conv_packed.h): 1x1 filters at
## stride 1 without padding, C or K no multiple of 8. Inputs: name (the procedural name), v (type:
## its C++ template; bm, bn: the tile; wm, wn: the warps; reduction: the most reduction columns
## held; blocks: CTAs per SM it is built for; threads; shared_bytes: what the spec check counted,
## asserted equal to what the kernel asks for at most; stages, pdl: the pipelined kernel's staging
## buffers and launch, profiler/conv_packed_pipelined.h, absent for conv_packed.h's).
% if "stages" in v:
// Packed 1x1 conv2d fprop, ${v["bm"]}x${v["bn"]} tiles, ${v["wm"]}x${v["wn"]} warps, up to ${v["reduction"]} reduction columns, ${v["blocks"]} CTAs per SM, ${v["stages"]} staging buffers${", a programmatic dependent launch" if v["pdl"] else ""}: ${name}
using ${name} = kernelgen::${v["type"]}<${v["bm"]}, ${v["bn"]}, ${v["wm"]}, ${v["wn"]}, ${v["reduction"]}, ${v["blocks"]}, ${v["stages"]}, ${"true" if v["pdl"] else "false"}>;
% else:
// Packed 1x1 conv2d fprop, ${v["bm"]}x${v["bn"]} tiles, ${v["wm"]}x${v["wn"]} warps, up to ${v["reduction"]} reduction columns, ${v["blocks"]} CTAs per SM: ${name}
using ${name} = kernelgen::${v["type"]}<${v["bm"]}, ${v["bn"]}, ${v["wm"]}, ${v["wn"]}, ${v["reduction"]}, ${v["blocks"]}>;
% endif
static_assert(${name}::kSharedBytes == ${v["shared_bytes"]}, "the spec check counts shared memory as the kernel does");
static_assert(${name}::kThreads == ${v["threads"]}, "the spec check counts threads as the kernel does");
