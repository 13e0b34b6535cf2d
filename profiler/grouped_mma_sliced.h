// GroupedMma (grouped_mma.h) whose CTAs compute at most MaxSlice channels each: the same kernel,
// launched with the layer's channels cut into slices of MaxSlice (or fewer, down to a unit of output
// channels for each of the 8 warps, where the layer has fewer tiles than two a SM). A CTA loads its
// whole input window before it computes; with a window of all C one CTA fills a SM's shared memory
// and the SM idles its tensor cores while the window arrives, then its memory while it computes. A
// window of a slice lets several CTAs share a SM (as many as their registers allow), one loading
// while another computes. The slices of a tile read disjoint channels: nothing is read twice but
// each CTA's filter fragments.
#pragma once

#include <string>

#include "grouped_mma.h"

namespace kernelgen {

template <typename T, int CG, int Stride, int TP, int TQ, bool Parity, int MaxSlice>
struct GroupedMmaSliced {
  using Whole = GroupedMma<T, CG, Stride, TP, TQ, Parity>;
  using Win = typename Whole::Win;
  static constexpr int kGroupChannels = CG, kStride = Stride, kRows = TP, kColumns = TQ;
  static constexpr int kLeast = 8 * grouped_mma::Unit<CG>::kOut;  // a unit for each warp
  static_assert(MaxSlice % kLeast == 0 && MaxSlice % CG == 0, "a slice of whole groups and a unit for each warp");

  // The channels a CTA computes: C halved while over MaxSlice, or (as GroupedMma) while the layer
  // has fewer tiles than two for each of `ctas`, as long as each half holds whole groups and a unit
  // for each warp. ctas = 0: the most channels a launch gives a CTA.
  static int slice(const Conv2dProblem& p, int ctas) {
    const long long tiles = (long long)p.n * ((p.p() + TP - 1) / TP) * ((p.q() + TQ - 1) / TQ);
    int slice = p.c;
    while (slice % 2 == 0 && (slice / 2) % kLeast == 0 && (slice / 2) % CG == 0 &&
           (long long)p.n * (p.c / slice) * 2 <= 65535 && (slice > MaxSlice || tiles * (p.c / slice) < 2LL * ctas))
      slice /= 2;
    return slice;
  }

  static std::string can_implement(const Conv2dProblem& p, int groups) {
    if (groups < 2 || p.c % groups != 0 || p.c / groups != CG || p.k != p.c)
      return "built for " + std::to_string(CG) + " channels a group in and out (K = C = " + std::to_string(CG) +
             " x groups)";
    if (p.r != 3 || p.s != 3) return "built for 3x3 filters";
    if (p.stride_h != Stride || p.stride_w != Stride) return "built for stride " + std::to_string(Stride);
    if (p.dilation_h != 1 || p.dilation_w != 1) return "built for dilation 1";
    if (p.c % 8 != 0) return "C must be a multiple of 8 (16-byte accesses along C)";
    const int channels = slice(p, 0);
    if (Win::bytes(channels) > grouped_mma::kSharedMemory)
      return "the input window of a slice of " + std::to_string(channels) + " channels needs " +
             std::to_string(Win::bytes(channels)) + " bytes of shared memory, more than " +
             std::to_string(grouped_mma::kSharedMemory);
    if ((long long)p.n * (p.c / channels) > 65535 || (p.p() + TP - 1) / TP > 65535)
      return "more images or tile rows than a grid holds";
    return {};
  }

  // GroupedMma's configure(), and the most shared memory a SM may give its CTAs (a carveout the
  // driver would otherwise size for one).
  static int configure(std::string& why) {
    const int sms = Whole::configure(why);
    if (sms > 0 && cudaFuncSetAttribute(grouped_mma::grouped_mma_kernel<T, CG, Stride, TP, TQ, Parity>,
                                        cudaFuncAttributePreferredSharedMemoryCarveout,
                                        cudaSharedmemCarveoutMaxShared) != cudaSuccess) {
      why = std::string("cannot configure the kernel: ") + cudaGetErrorString(cudaGetLastError());
      return 0;
    }
    return sms;
  }

  static void launch(const Conv2dProblem& p, const Conv2dBinding& b, int ctas, cudaStream_t stream) {
    const int channels = slice(p, ctas), splits = p.c / channels;
    const dim3 grid((p.q() + TQ - 1) / TQ, (p.p() + TP - 1) / TP, p.n * splits);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
    grouped_mma::grouped_mma_kernel<T, CG, Stride, TP, TQ, Parity><<<grid, 256, size_t(Win::bytes(channels)), stream>>>(
        p, p.p(), p.q(), channels, splits, static_cast<const T*>(b.x), static_cast<const T*>(b.w),
        static_cast<T*>(b.y));
  }
};

}  // namespace kernelgen
