// Groups of 48 and 56 channels for grouped_mma.h's kernels (RegNetX-3.2GF's and RegNetY-8GF's
// layers, which no other tensor-core kernel of this project serves): their Unit, as grouped_mma.h
// has it for groups of 24 and 64 channels. A unit is 8 output channels of one group (6 or 7 units a
// group); a k-step is 16 input channels of one tap, 3 or 4 k-steps a tap (a group of 56's fourth
// reads 8 channels past the group, the next group's or the window's zeroed padding, against B rows
// of zeros). The unit's B stays in registers: 54 or 72 of them.
//
// A kernel type of these groups needs this header (the family's `includes` name it); Unit<CG> of
// other groups is grouped_mma.h's.
#pragma once

#include "grouped_mma.h"

namespace kernelgen {
namespace grouped_mma {

template <int CG>
struct WideUnit {
  static constexpr int kOut = 8, kBlocks = 1, kSplit = (CG + 15) / 16, kSteps = 9 * kSplit;
};

template <>
struct Unit<48> : WideUnit<48> {};
template <>
struct Unit<56> : WideUnit<56> {};

}  // namespace grouped_mma
}  // namespace kernelgen
