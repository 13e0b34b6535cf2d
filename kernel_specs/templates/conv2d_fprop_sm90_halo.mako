## The C++ type of one halo conv2d fprop kernel (profiler/conv_sm90_resident.h): 3x3, stride 1, pad
## 1, 64 input channels, a multiple of 64 output channels, built for one image width. Inputs: name
## (the procedural name), v (width, rows, mma: the wgmma type, element: the C++ element type,
## shared_bytes: what the spec check counted, asserted equal to what the kernel asks for).
// SM90 halo conv2d fprop, width ${v["width"]}, ${v["rows"]} output rows per tile: ${name}
using ${name} = kernelgen::HaloFprop<${v["width"]}, ${v["rows"]}, ${v["mma"]}, ${v["element"]}>;
static_assert(${name}::kSharedBytes == ${v["shared_bytes"]}, "the spec check counts shared memory as the kernel does");
