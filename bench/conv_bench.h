// What bench/grouped_direct.cu and bench/narrow_conv.cu share: a layer, a plain fp32 reference on
// the GPU, operands in enough copies to cover four times the L2 cache, and `run`, which checks one
// launch of a kernel against the reference (relative L2 and largest element error, both within
// 1e-3) and times it as the profiler does: back-to-back launches cycling over the copies captured
// in one CUDA graph, the median over 20 replays. NHWC input, KRS(C/groups) filter, NPQK output, fp16.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace bench {

inline void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(error));
    std::exit(1);
  }
}

struct Layer {
  int n, h, w, c, k, r, s, pad, stride, groups;
  __host__ __device__ int p() const { return (h + 2 * pad - r) / stride + 1; }
  __host__ __device__ int q() const { return (w + 2 * pad - s) / stride + 1; }
};

// One thread an output, fp32 accumulation.
__global__ void reference(Layer L, const __half* x, const __half* w, float* y) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  const long long total = (long long)L.n * L.p() * L.q() * L.k;
  if (i >= total) return;
  const int k = int(i % L.k);
  long long t = i / L.k;
  const int q = int(t % L.q());
  t /= L.q();
  const int p = int(t % L.p()), n = int(t / L.p());
  const int cg = L.c / L.groups, kg = L.k / L.groups, g = k / kg;
  float acc = 0.0f;
  for (int r = 0; r < L.r; ++r) {
    const int h = p * L.stride - L.pad + r;
    if (h < 0 || h >= L.h) continue;
    for (int s = 0; s < L.s; ++s) {
      const int col = q * L.stride - L.pad + s;
      if (col < 0 || col >= L.w) continue;
      const __half* in = x + ((size_t(n) * L.h + h) * L.w + col) * L.c + g * cg;
      const __half* tap = w + ((size_t(k) * L.r + r) * L.s + s) * cg;
      for (int j = 0; j < cg; ++j) acc += __half2float(in[j]) * __half2float(tap[j]);
    }
  }
  y[i] = acc;
}

__global__ void fill(__half* data, size_t count, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    unsigned v = unsigned(i) * 2654435761u ^ seed;
    v ^= v >> 13, v *= 0x5bd1e995u, v ^= v >> 15;
    data[i] = __float2half(float(v % 2001) / 1000.0f - 1.0f);  // [-1, 1]
  }
}

struct Buffers {
  std::vector<__half*> x, y;
  __half* w = nullptr;
  float* reference = nullptr;
};

// Checks `launch(x, w, y, stream)` (one launch of a kernel on the layer) against the reference on
// the first copy of the operands, times it, and prints a line labelled `label`.
template <typename Launch>
void run(const Layer& L, const Buffers& b, const std::string& label, Launch launch) {
  const size_t outputs = size_t(L.n) * L.p() * L.q() * L.k;
  launch(b.x[0], b.w, b.y[0], cudaStream_t(0));
  check(cudaDeviceSynchronize(), "the kernel");
  std::vector<__half> got(outputs);
  std::vector<float> want(outputs);
  check(cudaMemcpy(got.data(), b.y[0], outputs * sizeof(__half), cudaMemcpyDeviceToHost), "cudaMemcpy");
  check(cudaMemcpy(want.data(), b.reference, outputs * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  double diff = 0, norm = 0, largest_diff = 0, largest = 0;
  for (size_t i = 0; i < outputs; ++i) {
    const double d = double(__half2float(got[i])) - want[i];
    diff += d * d, norm += double(want[i]) * want[i];
    largest_diff = std::max(largest_diff, std::fabs(d)), largest = std::max(largest, std::fabs(double(want[i])));
  }
  const double rel_l2 = std::sqrt(diff / std::max(norm, 1e-30)), rel_max = largest_diff / std::max(largest, 1e-30);
  const bool ok = rel_l2 <= 1e-3 && rel_max <= 1e-3 && std::isfinite(rel_l2);
  // Timed: a graph of launches cycling over the copies, replayed.
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  const int launches = int(b.x.size()) * std::max(1, int(40 / b.x.size()));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
  for (int i = 0; i < launches; ++i) launch(b.x[i % b.x.size()], b.w, b.y[i % b.y.size()], stream);
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> times;
  for (int i = 0; i < 20; ++i) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(ms / launches);
  }
  std::sort(times.begin(), times.end());
  std::printf("%d,%d,%d,%d,%d,%d,g%d  %-40s %9.4f ms  rel_l2 %.2e  rel_max %.2e  %s\n", L.n, L.h, L.w, L.c,
              L.k, L.stride, L.groups, label.c_str(), times[times.size() / 2], rel_l2, rel_max, ok ? "ok" : "INCORRECT");
  cudaGraphExecDestroy(exec), cudaGraphDestroy(graph), cudaStreamDestroy(stream);
  cudaEventDestroy(start), cudaEventDestroy(stop);
}

// The layer's operands: `copies` of x and y (enough to cover four times the L2), filled; the filter
// of `filter` values; the reference output of the first copy.
inline Buffers allocate(const Layer& L, size_t filter) {
  int device = 0, l2 = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "cudaDeviceGetAttribute");
  const size_t inputs = size_t(L.n) * L.h * L.w * L.c, outputs = size_t(L.n) * L.p() * L.q() * L.k;
  const size_t bytes = (inputs + outputs) * sizeof(__half);
  const int copies = int(std::max<size_t>(1, (4 * size_t(l2) + bytes - 1) / bytes));
  Buffers b;
  for (int i = 0; i < copies; ++i) {
    __half *x, *y;
    check(cudaMalloc(&x, inputs * sizeof(__half)), "cudaMalloc");
    check(cudaMalloc(&y, outputs * sizeof(__half)), "cudaMalloc");
    fill<<<1024, 256>>>(x, inputs, 17u + i);
    b.x.push_back(x), b.y.push_back(y);
  }
  check(cudaMalloc(&b.w, filter * sizeof(__half)), "cudaMalloc");
  fill<<<256, 256>>>(b.w, filter, 91u);
  check(cudaMalloc(&b.reference, outputs * sizeof(float)), "cudaMalloc");
  reference<<<unsigned((outputs + 255) / 256), 256>>>(L, b.x[0], b.w, b.reference);
  check(cudaDeviceSynchronize(), "the reference");
  return b;
}

inline void release(Buffers& b) {
  for (size_t i = 0; i < b.x.size(); ++i) cudaFree(b.x[i]), cudaFree(b.y[i]);
  cudaFree(b.w), cudaFree(b.reference);
}

// The command line's numbers (argv[1..]) in groups of `fields`, each a positive integer, into
// `groups`; false, with what is wrong and `usage` in one line on stderr, where they are not.
inline bool read_groups(int argc, char** argv, int fields, const char* usage, std::vector<std::vector<int>>& groups) {
  if ((argc - 1) % fields != 0) {
    std::fprintf(stderr, "%s: %d numbers are not groups of %d (usage: %s %s)\n", argv[0], argc - 1, fields, argv[0],
                 usage);
    return false;
  }
  for (int i = 1; i < argc; i += fields) {
    std::vector<int> group;
    for (int j = 0; j < fields; ++j) {
      char* end = nullptr;
      const long v = std::strtol(argv[i + j], &end, 10);
      if (end == argv[i + j] || *end != '\0' || v < 1 || v > (1 << 30)) {
        std::fprintf(stderr, "%s: '%s' is not a positive integer (usage: %s %s)\n", argv[0], argv[i + j], argv[0],
                     usage);
        return false;
      }
      group.push_back(int(v));
    }
    groups.push_back(group);
  }
  return true;
}

// The command line's layers as groups of `n h w c k`: 3x3 filters, stride 1, padding 1, one group
// (read_groups); false where they are not positive integers in groups of five.
inline bool read_3x3_layers(int argc, char** argv, std::vector<Layer>& layers) {
  std::vector<std::vector<int>> groups;
  if (!read_groups(argc, argv, 5, "[n h w c k ...]", groups)) return false;
  for (const auto& v : groups) layers.push_back({v[0], v[1], v[2], v[3], v[4], 3, 3, 1, 1, 1});
  return true;
}

}  // namespace bench
