// CUTLASS 3.x GemmUniversal kernels (the GEMMs and the persistent convolutions) whose tile
// scheduler's runtime parameters are searched at profile time (launch_settings.h): the plain and
// fused kernels' arguments (gemm_adapter_3x.h, conv2d_adapter_3x.h, fused_adapter_3x.h) with the
// setting set_setting() chose (a stream-K kernel's device operator is stream_k_adapter.h's SplitK).
//
// Settings, one kernel compiled for all of them:
// - CUTLASS's persistent tile scheduler: the order its CTAs walk the output tiles in (along M or
//   along N) and the swizzle (1, 2 or 4 tiles), which of the tiles run together share in L2;
// - the stream-K scheduler: the decomposition (CUTLASS's heuristic, data-parallel, stream-K, or
//   split-K in 2, 3 or 4), deterministic reduction, each launch zeroing the workspace's counters
//   first as StreamKOperation does.
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "adapter_common.h"
#include "conv2d_adapter_3x.h"
#include "fused.h"
#include "fused_adapter_3x.h"
#include "gemm_adapter_3x.h"
#include "launch_settings.h"
#include "stream_k_adapter.h"

namespace kernelgen {

// Whether a tile scheduler's arguments are the stream-K scheduler's: they carry a decomposition.
template <typename SchedulerArguments, typename = void>
struct IsStreamK : std::false_type {};

template <typename SchedulerArguments>
struct IsStreamK<SchedulerArguments, std::void_t<decltype(std::declval<SchedulerArguments>().decomposition_mode)>>
    : std::true_type {};

// The settings of a tile scheduler's arguments (`SchedulerArguments`, DeviceOp::Arguments's
// `scheduler`): their text and how each sets the arguments (a stream-K setting sets the whole
// decomposition, its splits too).
template <typename SchedulerArguments, bool StreamK = IsStreamK<SchedulerArguments>::value>
struct SchedulerSettings;

template <typename SchedulerArguments>
struct SchedulerSettings<SchedulerArguments, false> {
  using Raster = decltype(std::declval<SchedulerArguments>().raster_order);

  // setting i: raster along M for i < 3, else along N; swizzle 1 << (i % 3)
  static std::vector<std::string> all() {
    std::vector<std::string> out;
    for (const char* raster : {"m", "n"}) {
      for (int swizzle : {1, 2, 4}) out.push_back(std::string("raster=") + raster + " swizzle=" + std::to_string(swizzle));
    }
    return out;
  }

  static void apply(size_t index, SchedulerArguments& args) {
    args.raster_order = index < 3 ? Raster::AlongM : Raster::AlongN;
    args.max_swizzle_size = 1 << (index % 3);
  }
};

template <typename SchedulerArguments>
struct SchedulerSettings<SchedulerArguments, true> {
  using Mode = decltype(std::declval<SchedulerArguments>().decomposition_mode);

  static std::vector<std::string> all() {
    return {"decomposition=heuristic", "decomposition=data_parallel", "decomposition=stream_k",
            "decomposition=split_k splits=2", "decomposition=split_k splits=3", "decomposition=split_k splits=4"};
  }

  static void apply(size_t index, SchedulerArguments& args) {
    constexpr Mode kModes[] = {Mode::Heuristic, Mode::DataParallel, Mode::StreamK};
    args.splits = index < 3 ? 1 : int(index) - 1;
    args.decomposition_mode = index < 3 ? kModes[index] : Mode::SplitK;
  }
};

// DeviceOp run with ArgumentsFor's arguments (with the epilogue's operands where Fused:
// FusedArguments) and the chosen setting; a kernel of the stream-K scheduler (IsStreamK) has its
// counters zeroed before each launch.
template <typename DeviceOp, typename ArgumentsFor, bool Fused>
class SearchedOperation final : public std::conditional_t<Fused, FusedOperation, Operation>, public SettingsAtLaunch {
 public:
  using Arguments = typename DeviceOp::Arguments;
  using SchedulerArguments = decltype(std::declval<Arguments>().scheduler);
  using Settings = SchedulerSettings<SchedulerArguments>;
  static constexpr bool StreamK = IsStreamK<SchedulerArguments>::value;
  using Epilogue = FusedArguments<DeviceOp, ArgumentsFor>;

  std::vector<std::string> settings() const override { return Settings::all(); }

  void set_setting(size_t index) override { setting_ = index < Settings::all().size() ? index : 0; }

  std::string can_implement(const Conv2dProblem& problem) override {
    std::string reason = ArgumentsFor::unsupported(problem);
    if (!reason.empty()) return reason;
    return status_text(DeviceOp::can_implement(make(problem, {}, {})));
  }

  size_t workspace_bytes(const Conv2dProblem& problem) override {
    return DeviceOp::get_workspace_size(make(problem, {}, {}));
  }

  // A fused kernel's (FusedOperation): the epilogue's operands of the next prepare()'s bindings.
  void set_epilogue(const std::vector<EpilogueOperands>& operands) { epilogue_ = operands; }

  std::string prepare(const Conv2dProblem& problem, const std::vector<Conv2dBinding>& bindings,
                      cudaStream_t stream) override {
    ops_.clear();
    launches_.clear();
    if (Fused && epilogue_.size() != bindings.size()) {
      return "a fused kernel needs its epilogue's operands for each binding (set_epilogue: " +
             std::to_string(epilogue_.size()) + ", bindings: " + std::to_string(bindings.size()) + ")";
    }
    for (size_t i = 0; i < bindings.size(); ++i) {
      EpilogueOperands operands;
      if constexpr (Fused) {
        operands = epilogue_[i];
        if (!Epilogue::kReadsC && operands.residual != nullptr) {
          return "this fused kernel adds no residual (its epilogue has no source operand)";
        }
      }
      auto op = std::make_unique<DeviceOp>();
      Arguments args = make(problem, bindings[i], operands);
      std::string error = status_text(op->initialize(args, bindings[i].workspace, stream));
      if (!error.empty()) return error;
      ops_.push_back(std::move(op));
      launches_.push_back({args, bindings[i].workspace});
    }
    return {};
  }

  bool run(size_t index, cudaStream_t stream) override {
    if constexpr (StreamK) {
      const Launch& launch = launches_[index];
      if (DeviceOp::GemmKernel::initialize_workspace(launch.args, launch.workspace, stream) !=
          cutlass::Status::kSuccess) {
        return false;
      }
    }
    return ops_[index]->run(stream) == cutlass::Status::kSuccess;
  }

 private:
  Arguments make(const Conv2dProblem& problem, const Conv2dBinding& binding, const EpilogueOperands& operands) const {
    Arguments args;
    if constexpr (Fused) {
      args = Epilogue::make(problem, binding, operands);
    } else {
      args = ArgumentsFor::make(problem, binding);
    }
    Settings::apply(setting_, args.scheduler);
    return args;
  }

  struct Launch {
    Arguments args;
    void* workspace;
  };
  size_t setting_ = 0;
  std::vector<EpilogueOperands> epilogue_;
  std::vector<std::unique_ptr<DeviceOp>> ops_;
  std::vector<Launch> launches_;
};

// The adapters of the searched kernels, by their fixed twins' (kernelgen::X -> kernelgen::SearchedX):
// a stream-K kernel's is its persistent twin's, the setting giving the whole decomposition.
template <typename DeviceOp>
using SearchedGemmOperation3x = SearchedOperation<DeviceOp, GemmArguments3x<DeviceOp>, false>;

template <typename DeviceOp>
using SearchedFusedGemmOperation3x = SearchedOperation<DeviceOp, GemmArguments3x<DeviceOp>, true>;

template <typename DeviceOp>
using SearchedConv2dPersistentOperation3x = SearchedOperation<DeviceOp, Conv2dFpropPersistentArguments3x<DeviceOp>, false>;

template <typename DeviceOp>
using SearchedFusedConv2dPersistentOperation3x = SearchedOperation<DeviceOp, Conv2dFpropPersistentArguments3x<DeviceOp>, true>;

template <typename DeviceOp>
using SearchedGemmStreamKOperation3x = SearchedGemmOperation3x<DeviceOp>;
template <typename DeviceOp>
using SearchedFusedGemmStreamKOperation3x = SearchedFusedGemmOperation3x<DeviceOp>;
template <typename DeviceOp>
using SearchedConv2dPersistentStreamKOperation3x = SearchedConv2dPersistentOperation3x<DeviceOp>;
template <typename DeviceOp>
using SearchedFusedConv2dPersistentStreamKOperation3x = SearchedFusedConv2dPersistentOperation3x<DeviceOp>;

}  // namespace kernelgen
