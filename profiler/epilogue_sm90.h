// CUTLASS's SM90 TMA epilogue, as its CollectiveBuilder makes it for the TmaWarpSpecialized and
// TmaWarpSpecializedCooperative schedules, with a chosen number of TMA stores of D in flight.
//
// The builder allows two (or one, for a tile of one subtile): a warpgroup that has written its
// third subtile to shared memory waits for the first one's store to leave. A tile of many
// subtiles whose mainloop is short (a 1x1 convolution over few channels) then spends its
// epilogue waiting on memory; more stages let the whole tile's stores overlap, at the cost of
// shared memory the mainloop's stages would otherwise have.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"

namespace kernelgen {

// D (and C, unless void) of layout LayoutD / LayoutC, 16-byte aligned; D = alpha * accumulator
// (+ beta * C). Schedule: cutlass::epilogue::TmaWarpSpecialized or ...Cooperative.
template <class TileShape, class EpilogueTile, class ElementAccumulator, class ElementC, class LayoutC,
          class ElementD, class LayoutD, class Schedule, int StoreStages>
struct Sm90TmaEpilogue {
  static constexpr int kSubtiles = cute::size(cute::shape_div(cute::take<0, 2>(TileShape{}), EpilogueTile{}));
  static_assert(2 <= StoreStages && StoreStages <= kSubtiles, "between two stores and one per subtile in flight");
  static constexpr int kAlignment = 128 / cute::sizeof_bits_v<ElementD>;

  // The builder's policy, but for the stores in flight.
  using BuilderPolicy = decltype(cutlass::epilogue::collective::detail::sm90_get_tma_dispatch_policy<
                                 TileShape, EpilogueTile, ElementC, ElementD, Schedule>());
  using DispatchPolicy =
      cutlass::epilogue::Sm90TmaWarpSpecialized<cute::max(BuilderPolicy::StagesC, StoreStages + int(BuilderPolicy::ReuseSmemC)),
                                                StoreStages, BuilderPolicy::FragmentSize,
                                                BuilderPolicy::ReuseSmemC, BuilderPolicy::DelayTmaStore>;
  using CollectiveOp = typename cutlass::epilogue::collective::detail::Sm90TmaBuilderImpl<
      TileShape, EpilogueTile, ElementAccumulator, ElementAccumulator, ElementC, LayoutC, kAlignment, ElementD,
      LayoutD, kAlignment,
      cutlass::epilogue::fusion::LinearCombination<ElementD, ElementAccumulator, ElementC, ElementAccumulator>,
      DispatchPolicy>::CollectiveOp;
};

}  // namespace kernelgen
