// Programmatic dependent launch (PDL) of this project's own kernels (dependent_launch.h does it for
// CUTLASS's).
//
// A kernel launched with cudaLaunchAttributeProgrammaticStreamSerialization (kernelgen::pdl::launch)
// may be scheduled while the kernel before it on the stream is still running: its CTAs set up what
// needs no operand (barriers, tensor-map prefetch) and then wait (pdl::wait_then_release:
// griddepcontrol.wait) until that kernel has completed and its writes are visible, before they read
// or write global memory. They then let the kernel after them be scheduled
// (griddepcontrol.launch_dependents), which waits for them in turn. A kernel launched so after other
// work than a kernel (a memset, a copy) waits for it as for any launch.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace kernelgen {
namespace pdl {

// In a kernel launched by pdl::launch, before its first access to global memory (sm_90 and later).
__device__ __forceinline__ void wait_then_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// kernel<<<grid, block, shared, stream>>>(args...), scheduled as a programmatic dependent of the
// kernel before it on the stream. A failed launch returns its error and leaves it to cudaGetLastError.
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared, cudaStream_t stream,
                   Args&&... args) {
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace pdl
}  // namespace kernelgen
