## The C++ type of one pointwise conv2d fprop kernel (profiler/conv_sm90_resident.h): 1x1, stride 1,
## no padding, 64 * channel_blocks input channels, a multiple of 64 output channels. Inputs: name
## (the procedural name), v (channel_blocks, stages, mma: the wgmma type, element: the C++ element
## type, shared_bytes: what the spec check counted, asserted equal to what the kernel asks for).
// SM90 pointwise conv2d fprop, ${v["channel_blocks"] * 64} input channels, ${v["stages"]} stages: ${name}
using ${name} = kernelgen::PointwiseFprop<${v["channel_blocks"]}, ${v["stages"]}, ${v["mma"]}, ${v["element"]}>;
static_assert(${name}::kSharedBytes == ${v["shared_bytes"]}, "the spec check counts shared memory as the kernel does");
