// Runs every choice of best_kernels.h through its launcher: checks the output against a direct
// convolution computed on the GPU, then times the launcher as the profiler times a kernel
// (operands rotated over copies that cover four times the L2 cache, 20 batches of about 1 ms of
// launches timed with CUDA events, the median per launch): each batch captured once in a CUDA
// graph and replayed after the GPU idled 50 ms, the batches queued back to back, as the profiler
// does by default (--rest-ms 50), the GPU's time (`ms`, beside the profiler's and their ratio), and launched
// back to back from the host, the host's cost per launch included (`launches ms`). Then one
// problem that was not profiled (the first layer with another batch), which runs the launcher's
// fallback kernel. A problem of an epilogue (best_kernels::Epilogue) is given a bias and a residual
// filled as the other operands and checked against the reference through the same epilogue.
// Exit status 0 when every output matched.
//
//   run_best_kernels [--repeats N]
//
// It includes best_kernels.h and links libbest_kernels.a (CMakeLists.txt: find_package(best_kernels)):
// nothing of CUTLASS is compiled here.
#include "best_kernels.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using Element = best_kernels::Element;  // the header's operand type: __half or __nv_bfloat16

// What the profiler accepts: relative L2 and element errors within half an ulp of the output's type
// or so (kernelgen.vocab.verify_tolerance).
constexpr double kTolerance = std::is_same_v<Element, __nv_bfloat16> ? 8e-3 : 1e-3;
using best_kernels::Conv2dFpropProblem;

void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    std::fprintf(stderr, "run_best_kernels: %s: %s\n", what, cudaGetErrorString(error));
    std::exit(2);
  }
}

int out_p(const Conv2dFpropProblem& p) { return (p.h + 2 * p.pad_h - p.dilation_h * (p.r - 1) - 1) / p.stride_h + 1; }
int out_q(const Conv2dFpropProblem& p) { return (p.w + 2 * p.pad_w - p.dilation_w * (p.s - 1) - 1) / p.stride_w + 1; }
size_t x_elements(const Conv2dFpropProblem& p) { return size_t(p.n) * p.h * p.w * p.c; }
size_t w_elements(const Conv2dFpropProblem& p) { return size_t(p.k) * p.r * p.s * (p.c / p.groups); }  // KRS(C/groups)
size_t y_elements(const Conv2dFpropProblem& p) { return size_t(p.n) * out_p(p) * out_q(p) * p.k; }
size_t round_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Values uniform in [-1, 1) from a hash of the index and the seed.
__global__ void fill(Element* data, size_t count, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) ^ (uint32_t(i >> 32) * 0x9e3779b9u) ^ (seed * 0x85ebca6bu);
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    data[i] = Element(float(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
  }
}

// The direct convolution, one thread per output element: NHWC x, KRSC w (KRS(C/groups) grouped), NPQK y,
// fp32 sums.
__global__ void reference(Conv2dFpropProblem p, int pp, int qq, const Element* x, const Element* w, float* y) {
  const size_t total = size_t(p.n) * pp * qq * p.k;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const int k = int(i % p.k);
    const int q = int(i / p.k % qq);
    const int o = int(i / p.k / qq % pp);
    const int n = int(i / p.k / qq / pp);
    float sum = 0.0f;
    for (int r = 0; r < p.r; ++r) {
      const int h = o * p.stride_h - p.pad_h + r * p.dilation_h;
      if (h < 0 || h >= p.h) continue;
      for (int s = 0; s < p.s; ++s) {
        const int col = q * p.stride_w - p.pad_w + s * p.dilation_w;
        if (col < 0 || col >= p.w) continue;
        const int group_c = p.c / p.groups, group = k / (p.k / p.groups);  // k's group reads its C/groups channels
        const Element* xs = x + ((size_t(n) * p.h + h) * p.w + col) * p.c + size_t(group) * group_c;
        const Element* ws = w + ((size_t(k) * p.r + r) * p.s + s) * group_c;
        for (int c = 0; c < group_c; ++c) sum += float(xs[c]) * float(ws[c]);
      }
    }
    y[i] = sum;
  }
}

// The reference through the problem's epilogue: + bias[k], + residual, the activation, in fp32.
__global__ void apply_epilogue(best_kernels::Epilogue e, size_t count, int channels, const Element* bias,
                               const Element* residual, float* y) {
  using best_kernels::Activation;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    float v = y[i];
    if (e.bias) v += float(bias[i % channels]);
    if (e.add) v += float(residual[i]);
    switch (e.activation) {
      case Activation::kNone: break;
      case Activation::kRelu: v = fmaxf(v, 0.0f); break;
      case Activation::kSilu: v = v / (1.0f + expf(-v)); break;
      case Activation::kGelu: v = 0.5f * v * (1.0f + erff(v * 0.70710678f)); break;
      case Activation::kHardswish: v = v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f; break;
      case Activation::kSigmoid: v = 1.0f / (1.0f + expf(-v)); break;
    }
    y[i] = v;
  }
}

struct Errors {
  double squared_error, squared_reference;
  unsigned int max_error_bits, max_reference_bits;  // non-negative floats order as their bits do
  unsigned long long nonfinite;
};

__global__ void compare(const Element* y, const float* expected, size_t count, Errors* errors) {
  double squared_error = 0, squared_reference = 0;
  float max_error = 0, max_reference = 0;
  unsigned long long nonfinite = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    const float got = float(y[i]), want = expected[i];
    if (!isfinite(got)) {
      ++nonfinite;
      continue;
    }
    const float error = fabsf(got - want);
    squared_error += double(error) * error;
    squared_reference += double(want) * want;
    max_error = fmaxf(max_error, error);
    max_reference = fmaxf(max_reference, fabsf(want));
  }
  atomicAdd(&errors->squared_error, squared_error);
  atomicAdd(&errors->squared_reference, squared_reference);
  atomicMax(&errors->max_error_bits, __float_as_uint(max_error));
  atomicMax(&errors->max_reference_bits, __float_as_uint(max_reference));
  atomicAdd(&errors->nonfinite, nonfinite);
}

float as_float(unsigned int bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// One problem to run: its convolution (a GEMM as the 1x1 convolution it was profiled as) and
// how the launcher runs it.
struct Case {
  std::string label;
  Conv2dFpropProblem conv;
  bool is_gemm;
  best_kernels::GemmProblem gemm;
  double profiled_ms;  // 0 when not profiled

  const char* kernel() const { return is_gemm ? best_kernels::kernel_for(gemm) : best_kernels::kernel_for(conv); }
  size_t workspace() const { return is_gemm ? best_kernels::workspace_size(gemm) : best_kernels::workspace_size(conv); }
  const best_kernels::Epilogue& epilogue() const { return is_gemm ? gemm.epilogue : conv.epilogue; }
  best_kernels::Status run(const Element* x, const Element* w, Element* y, const Element* bias, const Element* residual,
                           void* workspace, size_t bytes, cudaStream_t stream) const {
    return is_gemm ? best_kernels::gemm(gemm, x, w, y, bias, residual, workspace, bytes, stream)
                   : best_kernels::conv2d_fprop(conv, x, w, y, bias, residual, workspace, bytes, stream);
  }
};

class Runner {
 public:
  explicit Runner(int repeats) : repeats_(repeats) {
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&l2_bytes_, cudaDevAttrL2CacheSize, device), "L2 size");
    check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
    check(cudaMalloc(&errors_, sizeof(Errors)), "cudaMalloc errors");
  }

  // True when the launcher's output matched the reference.
  bool run(const Case& c) {
    const Conv2dFpropProblem& p = c.conv;
    const size_t x_bytes = round_up(x_elements(p) * 2), w_bytes = round_up(w_elements(p) * 2);
    const best_kernels::Epilogue& epilogue = c.epilogue();
    const size_t y_bytes = round_up(y_elements(p) * 2);
    const size_t b_bytes = epilogue.bias ? round_up(size_t(p.k) * 2) : 0, r_bytes = epilogue.add ? y_bytes : 0;
    const size_t set_bytes = x_bytes + w_bytes + y_bytes + b_bytes + r_bytes;
    const size_t sets = std::max<size_t>(1, (4 * size_t(l2_bytes_) + set_bytes - 1) / set_bytes);
    const size_t workspace_bytes = c.workspace();
    char* pool = nullptr;
    float* expected = nullptr;
    void* workspace = nullptr;
    check(cudaMalloc(&pool, sets * set_bytes), "cudaMalloc operands");
    check(cudaMalloc(&expected, y_elements(p) * sizeof(float)), "cudaMalloc reference");
    if (workspace_bytes) check(cudaMalloc(&workspace, workspace_bytes), "cudaMalloc workspace");
    std::vector<const Element*> xs, ws, bs, rs;
    std::vector<Element*> ys;
    for (size_t i = 0; i < sets; ++i) {
      char* base = pool + i * set_bytes;
      xs.push_back(reinterpret_cast<Element*>(base));
      ws.push_back(reinterpret_cast<Element*>(base + x_bytes));
      ys.push_back(reinterpret_cast<Element*>(base + x_bytes + w_bytes));
      bs.push_back(epilogue.bias ? reinterpret_cast<Element*>(base + x_bytes + w_bytes + y_bytes) : nullptr);
      rs.push_back(epilogue.add ? reinterpret_cast<Element*>(base + x_bytes + w_bytes + y_bytes + b_bytes) : nullptr);
      fill<<<1024, 256, 0, stream_>>>(const_cast<Element*>(xs[i]), x_elements(p), uint32_t(4 * i + 1));
      fill<<<1024, 256, 0, stream_>>>(const_cast<Element*>(ws[i]), w_elements(p), uint32_t(4 * i + 2));
      if (bs[i]) fill<<<1024, 256, 0, stream_>>>(const_cast<Element*>(bs[i]), size_t(p.k), uint32_t(4 * i + 3));
      if (rs[i]) fill<<<1024, 256, 0, stream_>>>(const_cast<Element*>(rs[i]), y_elements(p), uint32_t(4 * i + 4));
    }
    check(cudaMemsetAsync(ys[0], 0xff, y_elements(p) * 2, stream_), "poison the output");  // NaN
    reference<<<4096, 256, 0, stream_>>>(p, out_p(p), out_q(p), xs[0], ws[0], expected);
    if (epilogue.bias || epilogue.add || epilogue.activation != best_kernels::Activation::kNone) {
      apply_epilogue<<<1024, 256, 0, stream_>>>(epilogue, y_elements(p), p.k, bs[0], rs[0], expected);
    }
    check(cudaGetLastError(), "reference launch");

    const char* kernel = c.kernel();
    best_kernels::Status status = c.run(xs[0], ws[0], ys[0], bs[0], rs[0], workspace, workspace_bytes, stream_);
    bool ok = status == best_kernels::Status::kSuccess;
    double ms = 0, launches_ms = 0, rel_l2 = 0, rel_max = 0;
    if (ok) {
      Errors zero{};
      check(cudaMemcpyAsync(errors_, &zero, sizeof zero, cudaMemcpyHostToDevice, stream_), "clear errors");
      compare<<<1024, 256, 0, stream_>>>(ys[0], expected, y_elements(p), errors_);
      Errors e{};
      check(cudaMemcpyAsync(&e, errors_, sizeof e, cudaMemcpyDeviceToHost, stream_), "read errors");
      check(cudaStreamSynchronize(stream_), "first run");
      rel_l2 = std::sqrt(e.squared_error / std::max(e.squared_reference, 1e-30));
      rel_max = as_float(e.max_error_bits) / std::max(as_float(e.max_reference_bits), 1e-30f);
      ok = e.nonfinite == 0 && rel_l2 <= kTolerance && rel_max <= kTolerance;
      ms = time(c, xs, ws, ys, bs, rs, workspace, workspace_bytes, true);
      launches_ms = time(c, xs, ws, ys, bs, rs, workspace, workspace_bytes, false);
    }
    std::printf("%-24s %-8.4f %-11.4f %-8s %-6s %-9.2e %-9.2e %s %s\n", c.label.c_str(), ms, launches_ms,
                c.profiled_ms > 0 ? std::to_string(c.profiled_ms).substr(0, 6).c_str() : "-",
                c.profiled_ms > 0 && ms > 0 ? std::to_string(ms / c.profiled_ms).substr(0, 4).c_str() : "-", rel_l2,
                rel_max, ok ? "ok" : (status == best_kernels::Status::kSuccess ? "MISMATCH" : best_kernels::status_string(status)),
                kernel ? kernel : "(none)");
    std::fflush(stdout);
    check(cudaFree(pool), "cudaFree");
    check(cudaFree(expected), "cudaFree");
    if (workspace) check(cudaFree(workspace), "cudaFree");
    return ok;
  }

 private:
  // The median over `repeats_` batches of the time per launch, each batch about 1 ms: replayed
  // from a CUDA graph (`graph`), or launched from the host.
  double time(const Case& c, const std::vector<const Element*>& xs, const std::vector<const Element*>& ws,
              const std::vector<Element*>& ys, const std::vector<const Element*>& bs,
              const std::vector<const Element*>& rs, void* workspace, size_t workspace_bytes, bool graph) {
    size_t next = 0;
    auto launch = [&](int count) {
      for (int i = 0; i < count; ++i, ++next) {
        const size_t set = next % xs.size();
        if (c.run(xs[set], ws[set], ys[set], bs[set], rs[set], workspace, workspace_bytes, stream_) !=
            best_kernels::Status::kSuccess) {
          std::fprintf(stderr, "run_best_kernels: %s: a timed launch failed\n", c.label.c_str());
          std::exit(2);
        }
      }
    };
    auto timed = [&](int count) {
      check(cudaEventRecord(start_, stream_), "cudaEventRecord");
      launch(count);
      check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
      check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
      return double(ms);
    };
    launch(10);  // warm-up
    const double once = timed(10) / 10;
    // A whole number of passes over the operand sets, as the profiler replays them.
    int count = std::max(1, int(std::ceil(1.0 / std::max(once, 1e-4))));
    count = int((count + xs.size() - 1) / xs.size() * xs.size());
    std::vector<double> batches;
    if (graph) {
      cudaGraph_t captured = nullptr;
      cudaGraphExec_t replay = nullptr;
      check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
      launch(count);  // recorded, not run
      check(cudaStreamEndCapture(stream_, &captured), "cudaStreamEndCapture");
      check(cudaGraphInstantiate(&replay, captured, 0), "cudaGraphInstantiate");
      check(cudaGraphLaunch(replay, stream_), "cudaGraphLaunch");  // uploads the graph
      check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      std::this_thread::sleep_for(std::chrono::milliseconds(kRestMs));
      std::vector<cudaEvent_t> events(2 * repeats_);
      for (cudaEvent_t& e : events) check(cudaEventCreate(&e), "cudaEventCreate");
      for (int i = 0; i < repeats_; ++i) {  // queued back to back, read after the last
        check(cudaEventRecord(events[2 * i], stream_), "cudaEventRecord");
        check(cudaGraphLaunch(replay, stream_), "cudaGraphLaunch");
        check(cudaEventRecord(events[2 * i + 1], stream_), "cudaEventRecord");
      }
      check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      for (int i = 0; i < repeats_; ++i) {
        float ms = 0;
        check(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]), "cudaEventElapsedTime");
        batches.push_back(double(ms) / count);
      }
      for (cudaEvent_t& e : events) check(cudaEventDestroy(e), "cudaEventDestroy");
      check(cudaGraphExecDestroy(replay), "cudaGraphExecDestroy");
      check(cudaGraphDestroy(captured), "cudaGraphDestroy");
    } else {
      for (int i = 0; i < repeats_; ++i) batches.push_back(timed(count) / count);
    }
    std::sort(batches.begin(), batches.end());
    return batches[batches.size() / 2];
  }

  static constexpr int kRestMs = 50;  // the profiler's default --rest-ms
  int repeats_;
  int l2_bytes_ = 0;
  cudaStream_t stream_{};
  cudaEvent_t start_{}, stop_{};
  Errors* errors_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  int repeats = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--repeats N]\n", argv[0]);
      return 2;
    }
  }
  std::vector<Case> cases;
#if BEST_KERNELS_CONV2D_FPROP_COUNT
  for (const best_kernels::Choice& choice : best_kernels::kConv2dFprop) {
    cases.push_back({"conv " + std::to_string(cases.size()), choice.problem, false, {}, choice.runtime_ms});
  }
#endif
#if BEST_KERNELS_GEMM_COUNT
  for (const best_kernels::GemmChoice& choice : best_kernels::kGemm) {
    const best_kernels::GemmProblem& g = choice.problem;
    cases.push_back({"gemm " + std::to_string(cases.size()), {g.m, 1, 1, g.k, g.n, 1, 1, 0, 0, 1, 1, 1, 1, 1}, true,
                     g, choice.runtime_ms});
  }
#endif
  if (!cases.empty() && !cases[0].is_gemm) {
    Case other = cases[0];  // the first layer with another batch: not profiled, a fallback kernel
    other.label = "conv 0, batch " + std::to_string(other.conv.n / 2 + 1);
    other.conv.n = other.conv.n / 2 + 1;
    other.profiled_ms = 0;
    cases.push_back(other);
  }

  Runner runner(repeats);
  std::printf("%-24s %-8s %-11s %-8s %-6s %-9s %-9s %s %s\n", "problem", "ms", "launches ms", "profiled", "ratio",
              "rel_l2", "rel_max", "result", "kernel");
  int failed = 0;
  for (const Case& c : cases) failed += !runner.run(c);
  std::printf("%d of %zu problems matched the reference\n", int(cases.size()) - failed, cases.size());
  return failed ? 1 : 0;
}
