// Kernels launched as programmatic dependents (profiler/dependent_kernel.h) run back to back on
// their own output: y1 = conv(x), y2 = conv(y1), ROUNDS such pairs captured in one CUDA graph and
// replayed, each launch right after the one before it. The second of a pair may be scheduled while
// the first still writes y1; it must wait for it. Each y2 is then compared, bit for bit, with the
// same kernel run alone on its y1 after the GPU has synchronized (the same operands, the same code:
// the same bits), and each y1 with the first (the same x).
// tests/test_dependent_launch.py compiles it with a header of kernel types (kernel_types.h: the
// types, and KERNELS(X) applying X to each) and reads one line a kernel and layer: "refused ...",
// "ok", or "mismatch ...".
//
//   pdl_chain N H W C R GROUPS   (K = C, stride 1, padding R / 2: the output is the input's shape)
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernel_types.h"

namespace {

constexpr int kRounds = 16;

using kernelgen::Conv2dBinding;
using kernelgen::Conv2dProblem;

bool ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::printf("error %s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

template <typename Kernel>
void check(const char* name, const Conv2dProblem& p, int groups) {
  std::string why;
  const int ctas = Kernel::configure(why);
  if (ctas == 0) {
    std::printf("%s refused %s\n", name, why.c_str());
    return;
  }
  why = Kernel::can_implement(p, groups);
  if (!why.empty()) {
    std::printf("%s refused %s\n", name, why.c_str());
    return;
  }
  const size_t elements = p.activation_elements(), taps = size_t(p.k) * p.r * p.s * (p.c / groups);
  std::vector<__half> host(elements > taps ? elements : taps);
  unsigned seed = 12345;
  auto uniform = [&] { return float((seed = seed * 1664525u + 1013904223u) >> 8) / float(1 << 24) * 2.0f - 1.0f; };
  __half *x, *w, *y3;
  std::vector<__half*> y1(kRounds), y2(kRounds);
  if (!ok(cudaMalloc(&x, elements * 2), "cudaMalloc") || !ok(cudaMalloc(&w, taps * 2), "cudaMalloc") ||
      !ok(cudaMalloc(&y3, elements * 2), "cudaMalloc"))
    return;
  for (int i = 0; i < kRounds; ++i)
    if (!ok(cudaMalloc(&y1[i], elements * 2), "cudaMalloc") || !ok(cudaMalloc(&y2[i], elements * 2), "cudaMalloc"))
      return;
  for (size_t i = 0; i < elements; ++i) host[i] = __float2half(uniform());
  cudaMemcpy(x, host.data(), elements * 2, cudaMemcpyHostToDevice);
  const float scale = 1.0f / float(p.r * p.s * (p.c / groups));  // keeps y1 and y2 of the order of x
  for (size_t i = 0; i < taps; ++i) host[i] = __float2half(uniform() * scale * 4.0f);
  cudaMemcpy(w, host.data(), taps * 2, cudaMemcpyHostToDevice);
  for (int i = 0; i < kRounds; ++i) {
    cudaMemset(y1[i], 0xff, elements * 2);  // NaN until written
    cudaMemset(y2[i], 0xff, elements * 2);
  }
  cudaStream_t stream;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  if (!ok(cudaStreamCreate(&stream), "cudaStreamCreate") ||
      !ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture"))
    return;
  for (int i = 0; i < kRounds; ++i) {
    Kernel::launch(p, Conv2dBinding{x, w, y1[i], nullptr}, ctas, stream);
    Kernel::launch(p, Conv2dBinding{y1[i], w, y2[i], nullptr}, ctas, stream);
  }
  if (!ok(cudaStreamEndCapture(stream, &graph), "capture") || !ok(cudaGraphInstantiate(&exec, graph, 0), "instantiate") ||
      !ok(cudaGraphLaunch(exec, stream), "cudaGraphLaunch") || !ok(cudaStreamSynchronize(stream), "the graph"))
    return;
  std::vector<__half> a(elements), b(elements);
  int bad = 0;
  for (int i = 0; i < kRounds && bad == 0; ++i) {
    Kernel::launch(p, Conv2dBinding{y1[i], w, y3, nullptr}, ctas, stream);
    if (!ok(cudaStreamSynchronize(stream), "the kernel alone")) return;
    cudaMemcpy(a.data(), y2[i], elements * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(b.data(), y3, elements * 2, cudaMemcpyDeviceToHost);
    if (std::memcmp(a.data(), b.data(), elements * 2) != 0) {
      bad = 1;
      std::printf("%s mismatch: round %d's y2 is not the kernel's output on its y1\n", name, i);
    }
    cudaMemcpy(b.data(), y1[i], elements * 2, cudaMemcpyDeviceToHost);
    if (bad == 0 && i == 0) std::memcpy(host.data(), b.data(), elements * 2);
    if (bad == 0 && std::memcmp(host.data(), b.data(), elements * 2) != 0) {
      bad = 1;
      std::printf("%s mismatch: round %d's y1 is not round 0's\n", name, i);
    }
  }
  if (bad == 0) std::printf("%s ok\n", name);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  for (int i = 0; i < kRounds; ++i) cudaFree(y1[i]), cudaFree(y2[i]);
  cudaFree(x), cudaFree(w), cudaFree(y3);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: pdl_chain N H W C R GROUPS\n");
    return 2;
  }
  int v[6];
  for (int i = 0; i < 6; ++i) v[i] = std::atoi(argv[i + 1]);
  const int r = v[4];
  const Conv2dProblem p{v[0], v[1], v[2], v[3], v[3], r, r, r / 2, r / 2, 1, 1, 1, 1};
  const int groups = v[5];
#define CHECK(K) check<K>(#K, p, groups);
  KERNELS(CHECK)
  return 0;
}
