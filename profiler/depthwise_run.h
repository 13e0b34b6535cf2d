// The configuration and launch of a depthwise kernel of a run of tiles whose windows tensor copies
// bring (depthwise_columns.h, depthwise_half_first.h, depthwise_half_each.h): the CTAs the GPU holds
// at once, and the launch, plain or as a programmatic dependent of the kernel before it
// (dependent_kernel.h).
//
// depthwise_half.h and the others written before keep their own copies: a
// kernel's hash covers the headers it includes, so those headers unchanged keep their kernels'
// measured rows current.
#pragma once

#include <string>

#include "dependent_kernel.h"
#include "depthwise_tma.h"

namespace kernelgen {
namespace depthwise {

// CTAs of `threads` threads and `bytes` of dynamic shared memory that the GPU holds at once (the
// grid of a run of tiles); 0, and why, where the kernel cannot run here.
template <typename Kernel>
int run_ctas(Kernel kernel, int threads, int bytes, std::string& why) {
  int device = 0, sms = 0, per_sm = 0;
  if (!tensor_map_encoder()) {
    why = "the driver has no cuTensorMapEncodeTiled";
    return 0;
  }
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, bytes) != cudaSuccess) {
    why = std::string("cannot configure the kernel: ") + cudaGetErrorString(cudaGetLastError());
    return 0;
  }
  if (per_sm < 1) {
    why = "needs " + std::to_string(bytes) + " bytes of shared memory, more than a CTA may have here";
    return 0;
  }
  return sms * per_sm;
}

// kernel<<<grid, threads, bytes, stream>>>(args...), as a programmatic dependent where PDL; where the
// tensor map was not `encoded`, no launch made, and an error left for the caller's cudaPeekAtLastError.
template <bool PDL, typename... Params, typename... Args>
void launch_run(void (*kernel)(Params...), bool encoded, int grid, int threads, int bytes, cudaStream_t stream,
                const Args&... args) {
  if (!encoded) {
    kernel<<<0, threads, 0, stream>>>(args...);
    return;
  }
  if constexpr (PDL) {
    pdl::launch(kernel, dim3(grid), dim3(threads), bytes, stream, args...);
  } else {
    kernel<<<grid, threads, bytes, stream>>>(args...);
  }
}

}  // namespace depthwise
}  // namespace kernelgen
