// Patch convolutions whose filter row of S*C values is no multiple of 8 (ViT-L/14's, ViT-H/14's
// and DINOv2's 14x14 stride-14 patch embeddings of 3 channels: rows of 42 values), which the patch
// kernels (patch_adapter_3x.h) cannot fold: no 16-byte tensor copy starts on a window of 84 bytes.
// A filter as large as its stride, unpadded and undilated, on an image of whole windows: each
// filter row of a window is S*C contiguous values of the NHWC input, and the input is rows of S*C
// values (N*H*W/S of them). Each launch copies those rows, and the filter's K*R rows of S*C, into
// the workspace padded by zeros to a multiple of 8 (padded_adapter.h's elementwise kernel), then
// runs a dense convolution kernel on the copies seen as N*P images of R rows of W/S pixels of
// S*C padded channels, R x 1 filters at stride 1: one row of Q outputs an image, the layer's NPQK
// output as it is. The zero channels add nothing.
//
// It repeats PaddedChannelsOperation's binding of the copies (padded_adapter.h) rather than
// generalising it: a kernel's hash covers the headers it includes, so padded_adapter.h unchanged
// keeps its kernels' measured rows current.
//
// kernelgen::PatchPaddedConv2dPersistentOperation3x<DeviceOp> is an Operation over a persistent
// CUTLASS 3.x conv kernel (conv2d_adapter_3x.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "conv2d_adapter_3x.h"
#include "padded_adapter.h"

namespace kernelgen {

// Why `p` is not a patch convolution of padded filter rows, or empty.
inline std::string patch_padded_unsupported(const Conv2dProblem& p) {
  if (p.s < 2 || p.stride_w != p.s || p.pad_w != 0 || p.dilation_w != 1 || p.w % p.s != 0)
    return "a padded patch kernel: needs stride along W equal to the filter's width S > 1, no padding nor "
           "dilation along W, W a multiple of S";
  if (p.stride_h != p.r || p.pad_h != 0 || p.dilation_h != 1 || p.h % p.r != 0)
    return "a padded patch kernel: needs stride along H equal to the filter's height R, no padding nor dilation "
           "along H, H a multiple of R";
  if ((int64_t(p.s) * p.c) % kPaddedChannels == 0)
    return "S*C is a multiple of 8: the patch kernels fold it without a copy";
  if (p.k % 8) return "K must be a multiple of 8";
  return {};
}

// The convolution the kernel runs on the padded copies.
inline Conv2dProblem patch_padded_problem(const Conv2dProblem& p) {
  Conv2dProblem q = p;
  q.n = p.n * p.p(), q.h = p.r, q.w = p.w / p.s, q.c = padded_channels(p.s * p.c), q.s = 1;
  q.stride_h = q.stride_w = 1, q.dilation_h = q.dilation_w = 1, q.pad_h = q.pad_w = 0;
  return q;
}

template <typename Inner>
class PatchPaddedOperation final : public Operation {
 public:
  std::string can_implement(const Conv2dProblem& problem) override {
    const std::string why = patch_padded_unsupported(problem);
    return why.empty() ? inner_.can_implement(patch_padded_problem(problem)) : why;
  }

  size_t workspace_bytes(const Conv2dProblem& problem) override {
    const Conv2dProblem q = patch_padded_problem(problem);
    return copies_bytes(q) + inner_.workspace_bytes(q);
  }

  std::string prepare(const Conv2dProblem& problem, const std::vector<Conv2dBinding>& bindings,
                      cudaStream_t stream) override {
    problem_ = problem;
    bindings_ = bindings;
    const Conv2dProblem q = patch_padded_problem(problem);
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
    const Conv2dProblem& p = problem_;
    char* ws = static_cast<char*>(b.workspace);
    const size_t x_bytes = round_up(patch_padded_problem(p).activation_elements() * 2);
    const int row = p.s * p.c;  // a filter row's values: of the input's window and of the filter
    return pad_channels(b.x, ws, size_t(p.n) * p.h * (p.w / p.s), row, stream) &&
           pad_channels(b.w, ws + x_bytes, size_t(p.k) * p.r, row, stream) && inner_.run(index, stream);
  }

 private:
  static size_t round_up(size_t bytes) { return (bytes + 255) / 256 * 256; }
  static size_t copies_bytes(const Conv2dProblem& q) {
    return round_up(q.activation_elements() * 2) + round_up(q.filter_elements() * 2);
  }

  Inner inner_;
  Conv2dProblem problem_{};
  std::vector<Conv2dBinding> bindings_;
};

template <typename DeviceOp>
using PatchPaddedConv2dPersistentOperation3x = PatchPaddedOperation<Conv2dPersistentOperation3x<DeviceOp>>;

}  // namespace kernelgen
