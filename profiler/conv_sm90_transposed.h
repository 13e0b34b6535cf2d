// Transposed persistent CUTLASS 3.x SM90 conv2d fprop: the product computed as
// Y^T (K x N*P*Q) = W (K x C*R*S) * im2col(X)^T, filters as wgmma's A operand and activation
// pixels as its B operand, so that a layer with few output channels still gets a wide wgmma N.
//
// A 64-channel layer computed the usual way (conv_sm90_persistent.h) runs wgmma 64x64x16: per
// multiply-add it reads twice the shared memory a 64x256x16 does, which caps it below the
// tensor rate. Here the tile is 64 channels x up to 256 pixels. The loads are CUTLASS's conv
// mainloop unchanged (TMA im2col of the activations, TMA of the filters), with the tile's
// pixel and channel extents as that mainloop's M and N; only the roles in the wgmma and in the
// kernel's tile coordinates swap. The NHWC output is Y^T stored column-major: a GEMM epilogue
// with D column-major, (K x N*P*Q), leading dimension K.
#pragma once

#include "conv_sm90_persistent.h"

namespace kernelgen {

// Conv: CUTLASS's conv mainloop built for tiles of (pixels, channels, (K)) = (TileN, TileM, (TileK)),
// in clusters of (ClusterN, ClusterM). TileShape, TiledMma, ClusterShape: the kernel's, (channels,
// pixels, (K)). Clusters span one dimension, where the CTA ranks of both orders coincide, so the
// mainloop's multicast masks (built in its own order) name the right CTAs.
template <class Conv, class TileShape_, class TiledMma_, class ClusterShape_>
struct FpropTransposed4GemmKernel : Fprop4GemmKernel<Conv> {
  static_assert(cute::size<0>(ClusterShape_{}) == 1 || cute::size<1>(ClusterShape_{}) == 1,
                "a transposed kernel's cluster spans one dimension");
  using Base = Fprop4GemmKernel<Conv>;
  using ConvShape = typename Conv::ProblemShape;
  using TileShape = TileShape_;
  using TiledMma = TiledMma_;
  // What the kernel reads of the policy: the mainloop's schedule and stages, its own cluster.
  struct DispatchPolicy : Conv::DispatchPolicy {
    using ClusterShape = ClusterShape_;
  };
  using GemmShape = typename Base::GemmShape;  // (K, N*P*Q, (C, S, R), 1) here
  using typename Base::Arguments;
  using typename Base::MainloopPipeline;
  using typename Base::Params;
  using typename Base::PipelineState;
  using typename Base::TensorStorage;

  static GemmShape gemm_shape(ConvShape const& shape) {
    auto [m, n, k, l] = Base::gemm_shape(shape);
    return {n, m, k, l};
  }

  static bool can_implement(GemmShape const& gemm, Arguments const& args) {
    return gemm == gemm_shape(args.shape) && Conv::can_implement(args.shape, args.conv);
  }

  // The kernel reads tile counts from the first two: (BLK_M, BLK_K, m, k) for the filters and
  // (BLK_N, BLK_K, n, k, l) for the pixels, as coordinate tensors of those shapes; the
  // mainloop's own tiled views follow, for load().
  template <class ProblemShapeMNKL>
  CUTLASS_DEVICE auto load_init(ProblemShapeMNKL const& problem_shape_MNKL, Params const& params) {
    auto [m, n, k, l] = problem_shape_MNKL;
    auto [gA_pixels, gB_filters] = Conv::load_init(cute::make_shape(n, m, k, l), params);
    return cute::make_tuple(cute::make_identity_tensor(cute::shape(gB_filters)),
                            cute::make_identity_tensor(cute::append(cute::shape(gA_pixels), cute::_1{})),
                            gA_pixels, gB_filters);
  }

  template <class... Tensors, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, MainloopPipeline pipeline, PipelineState state,
                           cute::tuple<Tensors...> const& load_inputs, BlockCoord const& blk_coord,
                           KTileIterator k_tile_iter, int k_tile_count, int thread_idx,
                           uint32_t block_rank_in_cluster, TensorStorage& shared_tensors) {
    auto mainloop_coord = cute::make_coord(cute::get<1>(blk_coord), cute::get<0>(blk_coord), cute::_,
                                           cute::get<3>(blk_coord));
    Conv::load(params, pipeline, state, cute::make_tuple(cute::get<2>(load_inputs), cute::get<3>(load_inputs)),
               mainloop_coord, k_tile_iter, k_tile_count, thread_idx, block_rank_in_cluster, shared_tensors);
  }

  // CUTLASS's CollectiveConv::mma (sm90_implicit_gemm_gmma_ss_warpspecialized.hpp) with the
  // filters' shared memory as A and the pixels' as B.
  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_consumer_state, FrgTensorC& accum,
                          int k_tile_count, int thread_idx, TensorStorage& shared_tensors, Params const&) {
    using namespace cute;
    static_assert(is_rmem<FrgTensorC>::value, "C tensor must be rmem resident.");
    Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), typename Conv::SmemLayoutB{});
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), typename Conv::SmemLayoutA{});

    TiledMma tiled_mma;
    auto thread_mma = tiled_mma.get_thread_slice(thread_idx);
    Tensor tCsA = thread_mma.partition_A(sA);  // (MMA,MMA_M,MMA_K,PIPE)
    Tensor tCsB = thread_mma.partition_B(sB);  // (MMA,MMA_N,MMA_K,PIPE)
    Tensor tCrA = thread_mma.make_fragment_A(tCsA);
    Tensor tCrB = thread_mma.make_fragment_B(tCsB);
    CUTE_STATIC_ASSERT_V(size<1>(tCsA) == size<1>(accum));
    CUTE_STATIC_ASSERT_V(size<1>(tCsB) == size<2>(accum));
    CUTE_STATIC_ASSERT_V(size<2>(tCsA) == size<2>(tCsB));
    CUTE_STATIC_ASSERT_V(size<3>(tCsA) == size<3>(tCsB));
    static_assert(0 <= Conv::K_PIPE_MMAS && Conv::K_PIPE_MMAS < Conv::K_PIPE_MAX);

    // Waits for the next k-tile's stage and issues its wgmmas, as one batch.
    auto issue_k_tile = [&](PipelineState& stage) {
      pipeline.consumer_wait(stage);
      int read_stage = stage.index();
      warpgroup_arrive();
      CUTLASS_PRAGMA_UNROLL
      for (int k_block = 0; k_block < size<2>(tCrA); ++k_block) {
        cute::gemm(tiled_mma, tCrA(_, _, k_block, read_stage), tCrB(_, _, k_block, read_stage), accum);
        tiled_mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      ++stage;
    };

    PipelineState smem_pipe_release = smem_pipe_consumer_state;
    int prologue_mma_count = min(Conv::K_PIPE_MMAS, k_tile_count);
    tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;

    warpgroup_fence_operand(accum);
    CUTLASS_PRAGMA_UNROLL
    for (int k_tile_prologue = prologue_mma_count; k_tile_prologue > 0; --k_tile_prologue) {
      issue_k_tile(smem_pipe_consumer_state);
    }
    warpgroup_fence_operand(accum);
    k_tile_count -= prologue_mma_count;

    CUTLASS_PRAGMA_NO_UNROLL
    for (; k_tile_count > 0; --k_tile_count) {
      warpgroup_fence_operand(accum);
      issue_k_tile(smem_pipe_consumer_state);
      warpgroup_wait<Conv::K_PIPE_MMAS>();  // the stage K_PIPE_MMAS back is consumed
      warpgroup_fence_operand(accum);
      pipeline.consumer_release(smem_pipe_release);
      ++smem_pipe_release;
    }
    warpgroup_fence_operand(accum);
  }
};

// A transposed fprop: tiles of TileM channels x TileN pixels x TileK, in clusters of
// ClusterM x ClusterN CTAs (one of them 1), under a persistent Schedule (PersistentMma).
template <class Schedule, class Element, class ElementAccumulator, int TileM, int TileN, int TileK, int ClusterM,
          int ClusterN, int CarveoutBytes>
struct Sm90TransposedFprop {
  using TileShape = cute::Shape<cute::Int<TileM>, cute::Int<TileN>, cute::Shape<cute::Int<TileK>>>;
  using ClusterShape = cute::Shape<cute::Int<ClusterM>, cute::Int<ClusterN>, cute::_1>;
  using TiledMma = typename PersistentMma<Schedule, Element, ElementAccumulator, TileShape>::TiledMma;
  // The mainloop's view: (pixels, channels) tiles and clusters; its mma() is not run.
  using MainloopTile = cute::Shape<cute::Int<TileN>, cute::Int<TileM>, cute::Shape<cute::Int<TileK>>>;
  using MainloopCluster = cute::Shape<cute::Int<ClusterN>, cute::Int<ClusterM>, cute::_1>;
  using Conv = typename Sm90PersistentFprop<Schedule, Element, ElementAccumulator, MainloopTile, MainloopCluster,
                                            CarveoutBytes, TiledMma>::Conv;
  using CollectiveOp = FpropTransposed4GemmKernel<Conv, TileShape, TiledMma, ClusterShape>;
};

}  // namespace kernelgen
