// Grouped convolutions (1 < groups) by a CUTLASS 3.x dense conv kernel (ConvUniversalAdapter), one
// launch a group: group g is a dense convolution of C/groups input and K/groups output channels
// whose tensors are views into the grouped layer's: its activations start at channel g * C/groups
// of each pixel (a pixel's stride stays C), its filters are the K/groups rows of KRS(C/groups)
// from g * K/groups, its output channels start at g * K/groups (a pixel's stride K). CUTLASS's
// im2col tensor copies take non-packed strides for fprop, so each group's windows arrive as a
// dense layer's would; a tile's channels past the group's come in as zeros (the copy's bounds are
// the group's), and its output columns past the group's are not stored.
//
// The groups' launches are independent: they go out on up to kStreams streams, the caller's and
// streams of the operation's own, which wait for the caller's stream before their first launch and
// which the caller's stream waits for after their last (in a captured graph, parallel branches).
//
// kernelgen::GroupedConv2dOperation3x<DeviceOp> is a GroupedOperation (grouped.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "conv2d_adapter_3x.h"
#include "grouped.h"

namespace kernelgen {

// The shape of group `g`'s dense convolution: NHWC activations of C/groups channels a pixel C
// apart, packed K/groups x R x S x C/groups filters, an NPQ(K/groups) output of pixels K apart.
template <typename ProblemShape>
ProblemShape grouped_conv2d_shape_3x(const Conv2dProblem& p, int groups) {
  const int cg = p.c / groups, kg = p.k / groups;
  const int64_t c = p.c, k = p.k, h = p.h, w = p.w, pq = int64_t(p.p()) * p.q(), q = p.q();
  return ProblemShape(cutlass::conv::Mode::kCrossCorrelation, {p.n, p.h, p.w, cg}, {h * w * c, w * c, c, 1},
                      {kg, p.r, p.s, cg}, {int64_t(p.r) * p.s * cg, int64_t(p.s) * cg, int64_t(cg), 1},
                      {pq * k, q * k, k, 1}, {p.pad_h, p.pad_w}, {p.pad_h, p.pad_w}, {p.stride_h, p.stride_w},
                      {p.dilation_h, p.dilation_w}, 1);
}

template <typename DeviceOp>
class GroupedConv2dOperation3x final : public GroupedOperation {
 public:
  static constexpr int kStreams = 8;  // groups launched at once, at most

  ~GroupedConv2dOperation3x() override {
    for (cudaStream_t s : streams_) cudaStreamDestroy(s);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }

  void set_groups(int groups) override { groups_ = groups; }

  std::string can_implement(const Conv2dProblem& problem) override {
    if (groups_ < 2) return "a grouped-convolution kernel, given no groups";
    if (problem.c % groups_ || problem.k % groups_) return "groups must divide C and K";
    if ((problem.c / groups_) % 8 || (problem.k / groups_) % 8)
      return "C/groups and K/groups must be multiples of 8 (16-byte tensor copies of a group's channels)";
    return status_text(DeviceOp::can_implement(arguments(problem, {}, 0)));
  }

  size_t workspace_bytes(const Conv2dProblem& problem) override {
    return size_t(groups_) * group_workspace(problem);
  }

  std::string prepare(const Conv2dProblem& problem, const std::vector<Conv2dBinding>& bindings,
                      cudaStream_t stream) override {
    std::string why = can_implement(problem);
    if (!why.empty()) return why;
    const int lanes = groups_ < kStreams ? groups_ : kStreams;
    while (int(streams_.size()) < lanes - 1) {
      cudaStream_t s;
      if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
        return std::string("cannot create a stream: ") + cudaGetErrorString(cudaGetLastError());
      streams_.push_back(s);
    }
    while (int(events_.size()) < lanes) {  // events_[0]: the fork; [i]: stream i's join
      cudaEvent_t e;
      if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess)
        return std::string("cannot create an event: ") + cudaGetErrorString(cudaGetLastError());
      events_.push_back(e);
    }
    lanes_ = lanes;
    const size_t each = group_workspace(problem);
    ops_.clear();
    for (const Conv2dBinding& binding : bindings) {
      std::vector<std::unique_ptr<DeviceOp>> groups;
      for (int g = 0; g < groups_; ++g) {
        void* workspace = each ? static_cast<char*>(binding.workspace) + g * each : nullptr;
        auto op = std::make_unique<DeviceOp>();
        std::string error = status_text(op->initialize(arguments(problem, binding, g), workspace, stream));
        if (!error.empty()) return error;
        groups.push_back(std::move(op));
      }
      ops_.push_back(std::move(groups));
    }
    return {};
  }

  bool run(size_t index, cudaStream_t stream) override {
    auto lane = [&](int g) { return g % lanes_ == 0 ? stream : streams_[g % lanes_ - 1]; };
    if (lanes_ > 1) {
      if (cudaEventRecord(events_[0], stream) != cudaSuccess) return false;
      for (cudaStream_t s : streams_)
        if (cudaStreamWaitEvent(s, events_[0], 0) != cudaSuccess) return false;
    }
    bool ok = true;
    for (int g = 0; g < groups_; ++g) ok = ok && ops_[index][g]->run(lane(g)) == cutlass::Status::kSuccess;
    for (int i = 1; i < lanes_; ++i) {  // the caller's stream waits for every other, even after a failure
      ok = cudaEventRecord(events_[i], streams_[i - 1]) == cudaSuccess && ok;
      ok = cudaStreamWaitEvent(stream, events_[i], 0) == cudaSuccess && ok;
    }
    return ok;
  }

 private:
  using Kernel = typename DeviceOp::ConvKernel;
  using ProblemShape = typename Kernel::ProblemShape;

  // Group g's arguments: the group's shape, its operands' first elements.
  typename DeviceOp::Arguments arguments(const Conv2dProblem& p, const Conv2dBinding& b, int g) const {
    using Operands = Operands3x<DeviceOp>;
    using StrideC = typename Kernel::StrideC;
    using StrideD = typename Kernel::StrideD;
    ProblemShape shape = grouped_conv2d_shape_3x<ProblemShape>(p, groups_);
    StrideC stride_c;
    StrideD stride_d;
    cute::for_each(cute::make_seq<cute::rank<0>(StrideC{})>{}, [&](auto i) {
      cute::get<0, i>(stride_c) = shape.stride_C[ProblemShape::RankT - 2 - i];
    });
    cute::for_each(cute::make_seq<cute::rank<0>(StrideD{})>{}, [&](auto i) {
      cute::get<0, i>(stride_d) = shape.stride_C[ProblemShape::RankT - 2 - i];
    });
    const int cg = p.c / groups_, kg = p.k / groups_;
    Conv2dBinding group = b;
    if (b.x) {
      group.x = Operands::x(b) + size_t(g) * cg;
      group.w = Operands::w(b) + size_t(g) * kg * p.r * p.s * cg;
      group.y = static_cast<typename DeviceOp::ElementD*>(b.y) + size_t(g) * kg;
    }
    return typename DeviceOp::Arguments{shape, {Operands::x(group), Operands::w(group)},
                                        Operands::epilogue(group, stride_c, stride_d)};
  }

  // One group's workspace, rounded up to 256 bytes.
  size_t group_workspace(const Conv2dProblem& p) const {
    return (DeviceOp::get_workspace_size(arguments(p, {}, 0)) + 255) / 256 * 256;
  }

  int groups_ = 1;
  int lanes_ = 1;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
  std::vector<std::vector<std::unique_ptr<DeviceOp>>> ops_;
};

}  // namespace kernelgen
