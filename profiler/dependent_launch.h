// Programmatic dependent launch (PDL) of CUTLASS 3.x SM90 kernels.
//
// kernelgen::DependentLaunch<DeviceOp> is DeviceOp (a cutlass::gemm::device::GemmUniversalAdapter)
// whose run(stream) launches with cudaLaunchAttributeProgrammaticStreamSerialization: the kernel
// may be scheduled while the kernel before it on the stream is still finishing, and sets up its
// CTAs (barriers, TMA descriptors) meanwhile. CUTLASS's grid-dependency control, compiled in by
// CUTLASS_ENABLE_GDC_FOR_SM90, makes the kernel wait (griddepcontrol.wait) for the previous
// kernel to complete and its writes to be visible before it reads or writes global memory, and
// lets the next kernel be scheduled once its last tile's mainloop is done. A kernel launched
// after other work than a kernel (a memset, a copy) waits for it as for any launch.
//
// The launch is made here, with the kernel's cluster shape as a launch attribute (1x1x1 too):
// CUTLASS 4.2's own launch with PDL of a kernel of static 1x1x1 clusters failed on the H200 where
// its cluster launch did not. A failed launch leaves its error to cudaGetLastError.
//
// The macro must be defined before any CUTLASS header of the translation unit: a kernel launched
// so without the wait would read operands still being written. Device code compiled without it
// stops here.
#pragma once

#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/arch/grid_dependency_control.h"
#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"

#if defined(__CUDA_ARCH__) && !defined(CUTLASS_GDC_ENABLED)
#error "dependent_launch.h: CUTLASS's grid-dependency control is off in this translation unit: define CUTLASS_ENABLE_GDC_FOR_SM90 before any CUTLASS header is included, and compile for sm_90a"
#endif

namespace kernelgen {

template <typename DeviceOp>
struct DependentLaunch : DeviceOp {
  cutlass::Status run(cudaStream_t stream) {
    using Kernel = typename DeviceOp::GemmKernel;
    using Cluster = typename Kernel::DispatchPolicy::ClusterShape;
    auto& params = const_cast<typename DeviceOp::Params&>(this->params());
    cudaLaunchAttribute attributes[2] = {};
    attributes[0].id = cudaLaunchAttributeClusterDimension;
    attributes[0].val.clusterDim.x = cute::size<0>(Cluster{});
    attributes[0].val.clusterDim.y = cute::size<1>(Cluster{});
    attributes[0].val.clusterDim.z = cute::size<2>(Cluster{});
    attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[1].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = DeviceOp::get_grid_shape(params);
    config.blockDim = Kernel::get_block_shape();
    config.dynamicSmemBytes = Kernel::SharedStorageSize;
    config.stream = stream;
    config.attrs = attributes;
    config.numAttrs = 2;
    void* arguments[] = {&params};
    cudaError_t error =
        cudaLaunchKernelExC(&config, reinterpret_cast<const void*>(&cutlass::device_kernel<Kernel>), arguments);
    return error == cudaSuccess ? cutlass::Status::kSuccess : cutlass::Status::kErrorInternal;
  }
};

}  // namespace kernelgen
