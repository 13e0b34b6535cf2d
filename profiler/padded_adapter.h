// Convolutions of input channels no multiple of 8, run by a kernel that reads them in 16-byte
// accesses: each launch first copies the activations and the filters into the workspace with their
// channels padded by zeros to a multiple of 8 (one elementwise kernel each), then runs the kernel
// on the padded copies, whose zero channels add nothing to the output. The output is the layer's
// own. cuDNN runs such layers the same way (its nhwcAddPaddingKernel before and after).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "adapter_common.h"
#include "conv2d_adapter_3x.h"

namespace kernelgen {

inline constexpr int kPaddedChannels = 8;  // 16 bytes of 16-bit elements

inline int padded_channels(int c) { return (c + kPaddedChannels - 1) / kPaddedChannels * kPaddedChannels; }

// `rows` rows of `c` 16-bit elements -> rows of `cp` (a multiple of 8), channels c.. zero: each
// thread writes 16-byte vectors of the output. A template, so that every translation unit that
// includes this header may define it.
template <int kVector = kPaddedChannels>
__global__ void pad_channels_kernel(const uint16_t* __restrict__ in, uint4* __restrict__ out, size_t rows, int c,
                                    int cp) {
  const size_t vectors = size_t(cp / kVector);
  const size_t total = rows * vectors;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const size_t row = i / vectors;
    const int first = int(i - row * vectors) * kVector;
    const uint16_t* src = in + row * size_t(c);
    uint32_t packed[kVector / 2];
#pragma unroll
    for (int j = 0; j < kVector; j += 2) {
      const uint32_t lo = first + j < c ? src[first + j] : 0u;
      const uint32_t hi = first + j + 1 < c ? src[first + j + 1] : 0u;
      packed[j / 2] = lo | (hi << 16);
    }
    out[i] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  }
}

inline bool pad_channels(const void* in, void* out, size_t rows, int c, cudaStream_t stream) {
  const int cp = padded_channels(c);
  const size_t total = rows * size_t(cp / kPaddedChannels);
  const int threads = 256;
  const size_t wanted = (total + threads - 1) / threads;
  const int blocks = int(wanted < 4096 ? (wanted ? wanted : 1) : 4096);
  pad_channels_kernel<><<<blocks, threads, 0, stream>>>(static_cast<const uint16_t*>(in), static_cast<uint4*>(out),
                                                         rows, c, cp);
  return cudaGetLastError() == cudaSuccess;
}

// `Inner` (an Operation of a kernel that needs C a multiple of 8) on the padded copies of the
// operands; 16-bit elements.
template <typename Inner>
class PaddedChannelsOperation final : public Operation {
 public:
  std::string can_implement(const Conv2dProblem& problem) override {
    if (problem.c % kPaddedChannels == 0) return "C is a multiple of 8: the kernel runs it unpadded";
    return inner_.can_implement(padded(problem));
  }

  size_t workspace_bytes(const Conv2dProblem& problem) override {
    const Conv2dProblem q = padded(problem);
    return copies_bytes(q) + inner_.workspace_bytes(q);
  }

  std::string prepare(const Conv2dProblem& problem, const std::vector<Conv2dBinding>& bindings,
                      cudaStream_t stream) override {
    problem_ = problem;
    bindings_ = bindings;
    const Conv2dProblem q = padded(problem);
    const size_t x_bytes = round_up(q.activation_elements() * 2), copies = copies_bytes(q);
    const bool inner_workspace = inner_.workspace_bytes(q) > 0;
    std::vector<Conv2dBinding> inner;
    for (const Conv2dBinding& b : bindings) {
      char* ws = static_cast<char*>(b.workspace);
      if (ws == nullptr) return "no workspace for the padded operands";
      inner.push_back({ws, ws + x_bytes, b.y, inner_workspace ? ws + copies : nullptr});
    }
    return inner_.prepare(q, inner, stream);
  }

  bool run(size_t index, cudaStream_t stream) override {
    const Conv2dBinding& b = bindings_[index];
    const Conv2dProblem q = padded(problem_);
    char* ws = static_cast<char*>(b.workspace);
    const size_t x_bytes = round_up(q.activation_elements() * 2);
    return pad_channels(b.x, ws, size_t(problem_.n) * problem_.h * problem_.w, problem_.c, stream) &&
           pad_channels(b.w, ws + x_bytes, size_t(problem_.k) * problem_.r * problem_.s, problem_.c, stream) &&
           inner_.run(index, stream);
  }

 private:
  static Conv2dProblem padded(Conv2dProblem p) {
    p.c = padded_channels(p.c);
    return p;
  }
  static size_t round_up(size_t bytes) { return (bytes + 255) / 256 * 256; }
  static size_t copies_bytes(const Conv2dProblem& q) {
    return round_up(q.activation_elements() * 2) + round_up(q.filter_elements() * 2);
  }

  Inner inner_;
  Conv2dProblem problem_{};
  std::vector<Conv2dBinding> bindings_;
};

template <typename DeviceOp>
using PaddedConv2dPersistentOperation3x = PaddedChannelsOperation<Conv2dPersistentOperation3x<DeviceOp>>;

}  // namespace kernelgen
