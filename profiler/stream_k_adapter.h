// Stream-K and split-K CUTLASS 3.x kernels: GemmUniversal with CUTLASS's stream-K tile scheduler,
// which splits the K extent of output tiles across CTAs and adds their partial sums through the
// workspace, synchronised by counters kept there.
//
// kernelgen::SplitK<DeviceOp, Splits> is DeviceOp (a cutlass::gemm::device::GemmUniversalAdapter
// of such a kernel) with the decomposition it is run with: Splits ways along K for every output
// tile (split-K), or with Splits = 0 as the scheduler chooses (stream-K: whole tiles and a
// balanced share of split ones, or plain data-parallel tiles).
//
// A launch leaves the counters changed, and a launch on counters left so waits forever: CUTLASS
// zeroes them in initialize(), once. Each run here zeroes them first (GemmKernel's
// initialize_workspace: a memset on the same stream, captured with the kernel in a CUDA graph),
// so the workspace needs no care between launches and the memset is part of what is timed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "adapter_common.h"
#include "conv2d_adapter_3x.h"
#include "gemm_adapter_3x.h"

namespace kernelgen {

template <typename DeviceOp, int Splits>
struct SplitK : DeviceOp {
  static_assert(Splits == 0 || Splits >= 2, "Splits: 0 (stream-K, the scheduler's choice) or 2 and more");
  static constexpr int kSplits = Splits;
};

// ArgumentsFor (GemmArguments3x, Conv2dFpropPersistentArguments3x) with DeviceOp::kSplits's
// decomposition.
template <typename DeviceOp, typename ArgumentsFor>
struct StreamKArguments {
  using Scheduler = typename DeviceOp::GemmKernel::TileScheduler;

  static std::string unsupported(const Conv2dProblem& p) { return ArgumentsFor::unsupported(p); }

  static typename DeviceOp::Arguments make(const Conv2dProblem& p, const Conv2dBinding& b) {
    typename DeviceOp::Arguments args = ArgumentsFor::make(p, b);
    if constexpr (DeviceOp::kSplits > 0) {
      args.scheduler.splits = DeviceOp::kSplits;
      args.scheduler.decomposition_mode = Scheduler::DecompositionMode::SplitK;
    } else {
      args.scheduler.decomposition_mode = Scheduler::DecompositionMode::Heuristic;
    }
    return args;
  }
};

template <typename DeviceOp, typename ArgumentsFor>
class StreamKOperation final : public Operation {
 public:
  using Arguments = StreamKArguments<DeviceOp, ArgumentsFor>;

  std::string can_implement(const Conv2dProblem& problem) override {
    std::string reason = Arguments::unsupported(problem);
    if (!reason.empty()) return reason;
    return status_text(DeviceOp::can_implement(Arguments::make(problem, {})));
  }

  size_t workspace_bytes(const Conv2dProblem& problem) override {
    return DeviceOp::get_workspace_size(Arguments::make(problem, {}));
  }

  std::string prepare(const Conv2dProblem& problem, const std::vector<Conv2dBinding>& bindings,
                      cudaStream_t stream) override {
    ops_.clear();
    launches_.clear();
    for (const Conv2dBinding& binding : bindings) {
      auto op = std::make_unique<DeviceOp>();
      auto args = Arguments::make(problem, binding);
      std::string error = status_text(op->initialize(args, binding.workspace, stream));
      if (!error.empty()) return error;
      ops_.push_back(std::move(op));
      launches_.push_back({args, binding.workspace});
    }
    return {};
  }

  bool run(size_t index, cudaStream_t stream) override {
    const Launch& launch = launches_[index];
    if (DeviceOp::GemmKernel::initialize_workspace(launch.args, launch.workspace, stream) != cutlass::Status::kSuccess)
      return false;
    return ops_[index]->run(stream) == cutlass::Status::kSuccess;
  }

 private:
  struct Launch {
    typename DeviceOp::Arguments args;
    void* workspace;
  };
  std::vector<std::unique_ptr<DeviceOp>> ops_;
  std::vector<Launch> launches_;
};

template <typename DeviceOp>
using GemmStreamKOperation3x = StreamKOperation<DeviceOp, GemmArguments3x<DeviceOp>>;

template <typename DeviceOp>
using Conv2dPersistentStreamKOperation3x = StreamKOperation<DeviceOp, Conv2dFpropPersistentArguments3x<DeviceOp>>;

}  // namespace kernelgen
