// Patch convolutions (a filter as wide as its stride along W, no padding nor dilation there: ViT's
// 16x16 stride-16 patch embedding, ConvNeXt's 2x2 stride-2 downsampling) by a CUTLASS 3.x dense
// conv kernel (ConvUniversalAdapter) on the layer's tensors seen another way: the S pixels of each
// filter row are S*C contiguous channels of one wider pixel. NHWC activations of W x C become
// W/S x S*C (the row stride W*C as it was: columns past the last whole window are never read),
// KRSC filters K x R x 1 x S*C (the same bytes), the NPQK output the same. ViT's 3 input channels,
// which no 16-byte tensor copy can start on, become 48; every K iteration is a whole filter row.
//
// kernelgen::PatchConv2dOperation3x<DeviceOp> is a CutlassOperation (adapter_common.h), and
// kernelgen::FusedPatchConv2dOperation3x<DeviceOp> a kernel of a fused epilogue (fused_adapter_3x.h).
#pragma once

#include <string>

#include "conv2d_adapter_3x.h"
#include "fused_adapter_3x.h"

namespace kernelgen {

// Whether the filter's rows fold too: a filter as tall as its stride along H, unpadded and
// undilated there, on an image of whole windows is R-row images of their own (N*P of them, each a
// row of outputs), the stride along H 1: TMA's im2col walks a stride of 8 at most.
inline bool patch_rows_fold(const Conv2dProblem& p) {
  return p.stride_h == p.r && p.pad_h == 0 && p.dilation_h == 1 && p.h % p.r == 0;
}

// Why `p` cannot be folded (S pixels of C channels into one of S*C), or empty.
inline std::string patch_unsupported(const Conv2dProblem& p) {
  if (p.s < 2 || p.stride_w != p.s || p.pad_w != 0 || p.dilation_w != 1 || p.w < p.s)
    return "a patch kernel: needs stride along W equal to the filter's width S > 1, no padding nor dilation along W";
  if ((int64_t(p.s) * p.c) % 8 || (int64_t(p.w) * p.c) % 8 || p.k % 8)
    return "S*C, W*C and K must be multiples of 8 (16-byte tensor copies of a filter row and of an image row)";
  if (p.stride_h > 8 && !patch_rows_fold(p))
    return "a stride along H over 8 needs the filter's rows to fold too (stride R, no padding nor dilation along H, H a multiple of R)";
  return {};
}

// The folded convolution's shape: activations n x h x W/S x S*C with the layer's row and image
// strides (or, where the rows fold, N*P images of R rows, R*W*C apart), filters K x R x 1 x S*C
// packed, the output packed as the layer's.
template <typename ProblemShape>
ProblemShape patch_conv2d_shape_3x(const Conv2dProblem& p) {
  const bool rows = patch_rows_fold(p);
  const int cs = p.s * p.c, ws = p.w / p.s;
  const int n = rows ? p.n * p.p() : p.n, h = rows ? p.r : p.h, stride_h = rows ? 1 : p.stride_h;
  const int64_t c = p.c, k = p.k, w = p.w, q = p.q();
  const int64_t image = int64_t(h) * w * c, out_image = (rows ? 1 : int64_t(p.p())) * q * k;
  return ProblemShape(cutlass::conv::Mode::kCrossCorrelation, {n, h, ws, cs}, {image, w * c, cs, 1},
                      {p.k, p.r, 1, cs}, {int64_t(p.r) * cs, int64_t(cs), int64_t(cs), 1},
                      {out_image, q * k, k, 1}, {p.pad_h, 0}, {p.pad_h, 0}, {stride_h, 1}, {p.dilation_h, 1}, 1);
}

template <typename DeviceOp>
struct PatchConv2dArguments3x {
  using Kernel = typename DeviceOp::ConvKernel;
  using ProblemShape = typename Kernel::ProblemShape;
  using Operands = Operands3x<DeviceOp>;
  using StrideC = typename Kernel::StrideC;
  using StrideD = typename Kernel::StrideD;

  static std::string unsupported(const Conv2dProblem& p) { return patch_unsupported(p); }

  static typename DeviceOp::Arguments make(const Conv2dProblem& p, const Conv2dBinding& b) {
    ProblemShape shape = patch_conv2d_shape_3x<ProblemShape>(p);
    StrideC stride_c;
    StrideD stride_d;
    cute::for_each(cute::make_seq<cute::rank<0>(StrideC{})>{}, [&](auto i) {
      cute::get<0, i>(stride_c) = shape.stride_C[ProblemShape::RankT - 2 - i];
    });
    cute::for_each(cute::make_seq<cute::rank<0>(StrideD{})>{}, [&](auto i) {
      cute::get<0, i>(stride_d) = shape.stride_C[ProblemShape::RankT - 2 - i];
    });
    return typename DeviceOp::Arguments{shape, {Operands::x(b), Operands::w(b)},
                                        Operands::epilogue(b, stride_c, stride_d)};
  }
};

template <typename DeviceOp>
using PatchConv2dOperation3x = CutlassOperation<DeviceOp, PatchConv2dArguments3x<DeviceOp>>;

template <typename DeviceOp>
using FusedPatchConv2dOperation3x =
    FusedCutlassOperation<DeviceOp, FusedArguments<DeviceOp, PatchConv2dArguments3x<DeviceOp>>, false>;

}  // namespace kernelgen
