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
// The macro must be defined before any CUTLASS header of the translation unit: a kernel launched
// so without the wait would read operands still being written. Device code compiled without it
// stops here.
#pragma once

#include <cuda_runtime.h>

#include "cutlass/arch/grid_dependency_control.h"
#include "cutlass/cutlass.h"

#if defined(__CUDA_ARCH__) && !defined(CUTLASS_GDC_ENABLED)
#error "dependent_launch.h: CUTLASS's grid-dependency control is off in this translation unit: define CUTLASS_ENABLE_GDC_FOR_SM90 before any CUTLASS header is included, and compile for sm_90a"
#endif

namespace kernelgen {

template <typename DeviceOp>
struct DependentLaunch : DeviceOp {
  cutlass::Status run(cudaStream_t stream) { return DeviceOp::run(stream, nullptr, /*launch_with_pdl=*/true); }
};

}  // namespace kernelgen
