// The SM clock and the board power of the GPU the profiler runs on, read through NVML
// (libnvidia-ml.so.1, the driver's, opened at run time: nothing to link; where it is missing or
// refuses, the readings are unknown).
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>

namespace kernelgen {

class GpuState {
 public:
  // For the current CUDA device (found in NVML by its PCI bus id).
  GpuState() {
    library_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library_ == nullptr) return;
    auto init = reinterpret_cast<int (*)()>(dlsym(library_, "nvmlInit_v2"));
    auto by_bus = reinterpret_cast<int (*)(const char*, void**)>(dlsym(library_, "nvmlDeviceGetHandleByPciBusId_v2"));
    clock_ = reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(library_, "nvmlDeviceGetClockInfo"));
    power_ = reinterpret_cast<int (*)(void*, unsigned*)>(dlsym(library_, "nvmlDeviceGetPowerUsage"));
    char bus[32] = {0};
    int device = 0;
    if (init == nullptr || by_bus == nullptr || clock_ == nullptr || power_ == nullptr || init() != 0 ||
        cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess ||
        by_bus(bus, &device_) != 0) {
      device_ = nullptr;
    }
  }

  // The SM clock (MHz) and the board's power draw (W) now; -1 where unknown.
  void read(double* sm_clock_mhz, double* power_w) const {
    unsigned mhz = 0, milliwatts = 0;
    *sm_clock_mhz = device_ != nullptr && clock_(device_, kClockSm, &mhz) == 0 ? double(mhz) : -1.0;
    *power_w = device_ != nullptr && power_(device_, &milliwatts) == 0 ? milliwatts / 1000.0 : -1.0;
  }

 private:
  static constexpr int kClockSm = 1;  // NVML_CLOCK_SM
  void* library_ = nullptr;
  void* device_ = nullptr;  // nvmlDevice_t
  int (*clock_)(void*, int, unsigned*) = nullptr;
  int (*power_)(void*, unsigned*) = nullptr;
};

}  // namespace kernelgen
