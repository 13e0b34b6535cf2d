// Persistent CUTLASS 3.x SM90 conv2d fprop: CUTLASS's implicit-GEMM conv mainloop (TMA im2col
// loads of the activations, TMA loads of the filters, wgmma) run by GemmUniversal's persistent
// warp-specialized kernels with two consumer warpgroups, cooperative or ping-pong.
//
// CUTLASS 4.2 builds SM90 convolutions with one consumer warpgroup only: its conv dispatch policy
// refuses the conv Cooperative and Pingpong tags. Its fprop mainloop, though, sees the problem as
// a GEMM (M = N*P*Q, N = K, K = C*R*S, linearised because the activations load in im2col mode)
// and has the interface the GEMM kernels drive. Fprop4GemmKernel below adapts what differs: the
// arguments carry the convolution's shape (the GEMM kernels hand their mainloop the GEMM shape),
// and the tiled views gain the batch mode L = 1 the persistent kernels index. The output of an
// NHWC fprop is a row-major (N*P*Q) x K matrix, so the epilogue is a GEMM epilogue.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/conv/collective/collective_builder.hpp"
#include "cutlass/conv/collective/collective_conv.hpp"
#include "cutlass/conv/convnd_problem_shape.hpp"
#include "cutlass/conv/dispatch_policy.hpp"
#include "cutlass/gemm/collective/builders/sm90_common.inl"
#include "cutlass/gemm/dispatch_policy.hpp"

namespace kernelgen {

inline constexpr auto kFpropMajor = cute::GMMA::Major::K;  // fprop: activations and filters both K-major

// The conv fprop mainloop behind the interface GemmUniversal's persistent kernels call.
template <class Conv>
struct Fprop4GemmKernel : Conv {
  using ConvShape = typename Conv::ProblemShape;
  // The kernel's problem: (N*P*Q, K, (C, S, R), 1), its batch extent dynamic as a GEMM's is.
  using GemmShape = cute::Shape<int, int, cute::tuple_element_t<2, decltype(Conv::get_problem_shape_MNKL(ConvShape{}))>, int>;
  using typename Conv::MainloopPipeline;
  using typename Conv::Params;
  using typename Conv::PipelineState;
  using typename Conv::TensorStorage;
  // The GEMM kernels only check that these are rank 3 (M or N, K, L); the conv mainloop keeps
  // its own NHWC / KRSC strides, derived from ConvShape.
  using StrideA = cute::Stride<int64_t, cute::_1, cute::_0>;
  using StrideB = cute::Stride<int64_t, cute::_1, cute::_0>;
  static constexpr int NumProducerThreadEvents = 1;  // one elected thread issues the TMA loads

  struct Arguments {
    typename Conv::Arguments conv;
    ConvShape shape;
  };

  static GemmShape gemm_shape(ConvShape const& shape) {
    auto [m, n, k, l] = Conv::get_problem_shape_MNKL(shape);
    return {int(m), int(n), k, int(l)};
  }

  static Params to_underlying_arguments(GemmShape const&, Arguments const& args, void* workspace) {
    return Conv::to_underlying_arguments(args.shape, args.conv, workspace);
  }

  static bool can_implement(GemmShape const& gemm, Arguments const& args) {
    return gemm == gemm_shape(args.shape) && Conv::can_implement(args.shape, args.conv);
  }

  // (BLK_M, BLK_K, m, k) for the activations; (BLK_N, BLK_K, n, k, l) for the filters, with the
  // unit batch mode the persistent kernels read the batch extent from.
  template <class ProblemShapeMNKL>
  CUTLASS_DEVICE auto load_init(ProblemShapeMNKL const& problem_shape_MNKL, Params const& params) {
    auto [gA_mk, gB_nk] = Conv::load_init(problem_shape_MNKL, params);
    auto gB_nkl = cute::make_tensor(gB_nk.data(), cute::append(gB_nk.layout(), cute::Layout<cute::_1, cute::_0>{}));
    return cute::make_tuple(gA_mk, gB_nkl);
  }

  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, MainloopPipeline pipeline, PipelineState state,
                           cute::tuple<TensorA, TensorB> const& load_inputs, BlockCoord const& blk_coord,
                           KTileIterator k_tile_iter, int k_tile_count, int thread_idx,
                           uint32_t block_rank_in_cluster, TensorStorage& shared_tensors) {
    using cute::_;
    auto const& gB_nkl = cute::get<1>(load_inputs);
    Conv::load(params, pipeline, state, cute::make_tuple(cute::get<0>(load_inputs), gB_nkl(_, _, _, _, 0)),
               blk_coord, k_tile_iter, k_tile_count, thread_idx, block_rank_in_cluster, shared_tensors);
  }
};

// The wgmma tiling of a persistent schedule over a TileShape (M, N, (K)): cooperative
// (KernelTmaWarpSpecializedCooperative) splits the tile's M between two warpgroups; ping-pong
// (KernelTmaWarpSpecializedPingpong) gives each warpgroup a whole tile of its own.
template <class Schedule, class Element, class ElementAccumulator, class TileShape>
struct PersistentMma {
  static constexpr bool kCooperative =
      cute::is_base_of_v<cutlass::gemm::KernelTmaWarpSpecializedCooperative, Schedule>;
  static_assert(kCooperative || cute::is_base_of_v<cutlass::gemm::KernelTmaWarpSpecializedPingpong, Schedule>,
                "a persistent schedule: cooperative or ping-pong");
  using AtomLayoutMNK =
      cute::conditional_t<kCooperative, cute::Layout<cute::Shape<cute::_2, cute::_1, cute::_1>>,
                          cute::Layout<cute::Shape<cute::_1, cute::_1, cute::_1>>>;
  using TiledMma = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<Element, Element, ElementAccumulator, TileShape, kFpropMajor, kFpropMajor>(),
      AtomLayoutMNK{}));
};

// What cutlass::conv::collective::CollectiveBuilder builds for an SM90 NHWC fprop, with the
// GEMM kernel schedule `Schedule` (see PersistentMma) and `CarveoutBytes` of shared memory left
// to the epilogue. TileShape is (M, N, (K)): the conv mainloop tiles the hierarchical (C, S, R)
// mode. TiledMma: the wgmma tiling the mainloop's mma() runs.
template <class Schedule, class Element, class ElementAccumulator, class TileShape, class ClusterShape,
          int CarveoutBytes,
          class TiledMma = typename PersistentMma<Schedule, Element, ElementAccumulator, TileShape>::TiledMma>
struct Sm90PersistentFprop {
  static constexpr auto kFprop = cutlass::conv::Operator::kFprop;

  using GmemTiledCopyA =
      decltype(cutlass::conv::collective::detail::sm90_cluster_shape_to_im2col_tma_atom(cute::shape<1>(ClusterShape{})));
  using GmemTiledCopyB =
      decltype(cutlass::gemm::collective::detail::sm90_cluster_shape_to_tma_atom(cute::shape<0>(ClusterShape{})));
  using SmemLayoutAtomA = decltype(cutlass::gemm::collective::detail::ss_smem_selector<
      kFpropMajor, Element, decltype(cute::get<0>(TileShape{})), decltype(cute::get<2>(TileShape{}))>());
  using SmemLayoutAtomB = decltype(cutlass::gemm::collective::detail::ss_smem_selector<
      kFpropMajor, Element, decltype(cute::get<1>(TileShape{})), decltype(cute::get<2>(TileShape{}))>());

  static constexpr int Stages = cutlass::conv::collective::detail::compute_stage_count_or_override<
      cutlass::gemm::collective::detail::sm90_smem_capacity_bytes, Element, Element, TileShape>(
      cutlass::conv::collective::StageCountAutoCarveout<CarveoutBytes>{});

  using SmemLayoutA = decltype(cute::tile_to_shape(
      SmemLayoutAtomA{}, cute::make_shape(cute::shape<0>(TileShape{}), cute::shape<2>(TileShape{}), cute::Int<Stages>{}),
      cute::Step<cute::_2, cute::_1, cute::_3>{}));
  using SmemLayoutB = decltype(cute::tile_to_shape(
      SmemLayoutAtomB{}, cute::make_shape(cute::shape<1>(TileShape{}), cute::shape<2>(TileShape{}), cute::Int<Stages>{}),
      cute::Step<cute::_2, cute::_1, cute::_3>{}));

  // Schedule derives from a GEMM schedule, not from the conv tags the policy refuses.
  using DispatchPolicy =
      cutlass::conv::MainloopSm90TmaGmmaWarpSpecializedImplicitGemm<kFprop, Stages, 2, ClusterShape, Schedule>;
  using Conv = cutlass::conv::collective::CollectiveConv<
      DispatchPolicy, TileShape, Element, Element, TiledMma,
      cutlass::conv::collective::detail::Sm90ImplicitGemmTileTraits<GmemTiledCopyA, SmemLayoutA>,
      cutlass::conv::collective::detail::Sm90ImplicitGemmTileTraits<GmemTiledCopyB, SmemLayoutB>>;
  using CollectiveOp = Fprop4GemmKernel<Conv>;
};

}  // namespace kernelgen
