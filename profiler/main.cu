// The kernelgen profiler: one process verifies and times every (workload, kernel) job it
// is given, with CUDA initialised and operand buffers allocated once.
//
//   profiler --list                 the kernels linked in, one per line
//   profiler --device               one `device` line, then exit
//   profiler --jobs FILE [options]  run the jobs in FILE (see below)
//
// Timing: each kernel's timed batch of launches is captured once in a CUDA graph and replayed
// between the events, so that the figure is the kernels' time on the GPU and a kernel shorter
// than a launch is not charged for the launch (--launches: the batch is launched back to back
// from the host instead, host cost included; --graph, the default, is accepted).
// --prune RATIO (default 1.25; 0: never): a kernel whose first timed batch runs more than RATIO
// times the fastest median measured so far on the workload gets --pruned-repeats batches
// (default 3) instead of --repeats: a kernel that far behind is not the one chosen, and what is
// recorded is still the median of its own batches (ITERATIONS says how many launches).
// --rest-ms MS (default 50): the GPU idles MS milliseconds before a kernel's timed batches, so that
// each kernel is timed from the same rested state: under a power limit, timings without a rest
// depend on what ran before (docs/measuring.md, "Do repeated measurements agree?");
// --hold-ms MS (default 0): after the rest, the kernel runs its batch again and again for MS
// milliseconds, so that the GPU's clocks settle at what this kernel's load holds them to.
//
// Job file, one record per line:
//   workload NAME OP DTYPE EXTENTS...   (OP and its extents: a row of kJobOps below; DTYPE the
//                                        operands' and output's type: f16 or bf16)
//     workload NAME conv2d_fprop f16 N H W C K R S PAD_H PAD_W STRIDE_H STRIDE_W DIL_H DIL_W
//     workload NAME gemm f16 M N K   (D = A B^T, run as the 1x1 convolution it is)
//     workload NAME conv2d_fprop_grouped f16 N H W C K R S PAD_H PAD_W STRIDE_H STRIDE_W DIL_H DIL_W GROUPS
//                                    (grouped.h: KRS(C/GROUPS) filters; GroupedOperation kernels only)
//     a conv2d_fprop or gemm line may end with EPILOGUE, '+'-joined steps (bias, add, relu, silu,
//     gelu, hardswish, sigmoid: reference.h): its kernels are FusedOperation ones (fused.h), given
//     a bias of K values and a residual of the output's shape, and checked against the reference
//     convolution through the same steps
//   kernel NAME TOLERANCE [SETTING] (belongs to the workload above it; SETTING: of a kernel with
//                                  launch settings, the one to measure, its spaces written as commas;
//                                  without, each is measured and the fastest is the result)
// The job file is read, and refused naming its line, before the GPU is asked anything.
//
// Output on stdout, one tab-separated record per line, flushed as it is written:
//   device NAME CC SMS L2_BYTES CUDA_RUNTIME CUDA_DRIVER CUTLASS TIMING   (TIMING: graph or launches,
//                                        then -restMS and -holdMS where not 0: graph-rest50)
//   workload NAME SETS REFERENCE_MS
//   begin WORKLOAD KERNEL
//   result WORKLOAD KERNEL STATUS RUNTIME_MS MIN_MS MAX_MS ITERATIONS REL_L2 REL_MAX MESSAGE SM_MHZ POWER_W SETTING
// (SM_MHZ, POWER_W: the SM clock and the board power NVML read as the last timed batches ran; -1
// where unknown or not timed. SETTING: of a kernel with launch settings (launch_settings.h), the
// one measured, the fastest of them; "-" for others)
// STATUS is ok, unsupported, incorrect, failed or crashed. After `crashed` (the CUDA context
// is lost) the process exits with status 3; a driver restarts it on the remaining jobs.
#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cutlass/version.h"
#include "fused.h"
#include "activation_at_launch.h"
#include "gpu_state.h"
#include "grouped.h"
#include "launch_settings.h"

#include "operation.h"
#include "reference.h"

namespace kernelgen {
namespace {

constexpr int kCrashedExit = 3;

struct KernelJob {
  std::string name;
  double tolerance;
  std::string setting;  // the launch setting to measure (launch_settings.h); empty: search them all
};

struct WorkloadJob {
  std::string name;
  Element element = Element::f16;
  Conv2dProblem problem;
  int groups = 1;  // grouped.h: more than 1 for a conv2d_fprop_grouped job
  std::string epilogue;  // a fused job's epilogue text (fused.h); empty for none
  EpilogueSteps steps;
  std::vector<KernelJob> kernels;

  bool uses(EpilogueStep step) const {
    return std::find(steps.step, steps.step + steps.count, step) != steps.step + steps.count;
  }
  size_t bias_elements() const { return uses(EpilogueStep::bias) ? size_t(problem.k) : 0; }
  size_t residual_elements() const { return uses(EpilogueStep::add) ? problem.output_elements() : 0; }

  size_t filter_elements() const { return problem.filter_elements() / size_t(groups); }  // KRS(C/groups)
};

struct Options {
  std::string jobs_path;
  bool list = false;
  bool device_only = false;
  uint64_t seed = 2024;
  int warmup = 5;
  int repeats = 20;
  double batch_ms = 1.0;       // time one timed batch of launches should take
  double rotate_bytes = 0;     // operand bytes to cycle through per batch; 0: four times L2
  bool graph = true;           // time replays of a CUDA graph of the batch (--launches: host launches)
  double prune = 1.25;         // first batch over prune x the workload's best median: fewer repeats
  int pruned_repeats = 3;
  double hold_ms = 0;          // the kernel's batch run this long before the timed batches
  double rest_ms = 50;         // idle this long before the hold and the timed batches
};

[[noreturn]] void die(const std::string& message) {
  std::printf("fatal\t%s\n", message.c_str());
  std::fflush(stdout);
  std::exit(2);
}

void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(error));
}

std::string clean(std::string text) {
  for (char& ch : text) {
    if (ch == '\t' || ch == '\n' || ch == '\r') ch = ' ';
  }
  return text.empty() ? "-" : text;
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) die(std::string("missing value after ") + flag);
      return argv[++i];
    };
    if (arg == "--list") o.list = true;
    else if (arg == "--device") o.device_only = true;
    else if (arg == "--jobs") o.jobs_path = value("--jobs");
    else if (arg == "--seed") o.seed = std::stoull(value("--seed"));
    else if (arg == "--warmup") o.warmup = std::stoi(value("--warmup"));
    else if (arg == "--repeats") o.repeats = std::stoi(value("--repeats"));
    else if (arg == "--batch-ms") o.batch_ms = std::stod(value("--batch-ms"));
    else if (arg == "--rotate-bytes") o.rotate_bytes = std::stod(value("--rotate-bytes"));
    else if (arg == "--graph") o.graph = true;
    else if (arg == "--launches") o.graph = false;
    else if (arg == "--prune") o.prune = std::stod(value("--prune"));
    else if (arg == "--pruned-repeats") o.pruned_repeats = std::stoi(value("--pruned-repeats"));
    else if (arg == "--hold-ms") o.hold_ms = std::stod(value("--hold-ms"));
    else if (arg == "--rest-ms") o.rest_ms = std::stod(value("--rest-ms"));
    else die("unknown argument " + arg);
  }
  if (o.prune < 0 || o.pruned_repeats < 1) die("--prune must be 0 or more, --pruned-repeats positive");
  if (!(o.hold_ms >= 0 && o.hold_ms <= 60000) || !(o.rest_ms >= 0 && o.rest_ms <= 60000)) {
    die("--hold-ms and --rest-ms must be 0 to 60000");
  }
  if (!o.list && !o.device_only && o.jobs_path.empty()) die("give --list, --device or --jobs FILE");
  if (o.repeats < 1 || o.warmup < 0 || o.batch_ms <= 0) die("--repeats, --warmup and --batch-ms must be positive");
  return o;
}

// The ops a job line may name: how many extents follow the op, and the convolution the kernels
// are given for them (every kernel's interface is the forward convolution's, operation.h).
struct JobOp {
  const char* name;
  int extents;
  Conv2dProblem (*problem)(const std::vector<int>& v);
  int (*groups)(const std::vector<int>& v);
};

int one_group(const std::vector<int>&) { return 1; }

// The activation of an epilogue's steps (reference.h), as ActivationAtLaunch takes it (activation_at_launch.h):
// EpilogueStep numbers bias and add first, then the activations in ActivationKind's order.
int activation_of(const EpilogueSteps& steps) {
  for (int i = 0; i < steps.count; ++i) {
    if (steps.step[i] >= EpilogueStep::relu) return int(steps.step[i]) - int(EpilogueStep::relu) + kActivationRelu;
  }
  return kActivationNone;
}
static_assert(int(EpilogueStep::sigmoid) - int(EpilogueStep::relu) + kActivationRelu == kActivationSigmoid &&
                  int(EpilogueStep::gelu) - int(EpilogueStep::relu) + kActivationRelu == kActivationGelu,
              "EpilogueStep's activations in ActivationKind's order");

const JobOp kJobOps[] = {
    {"conv2d_fprop", 13,
     [](const std::vector<int>& v) {
       return Conv2dProblem{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12]};
     },
     one_group},
    {"gemm", 3,  // M N K: M pixels, K channels, N filters
     [](const std::vector<int>& v) { return Conv2dProblem{v[0], 1, 1, v[2], v[1], 1, 1, 0, 0, 1, 1, 1, 1}; },
     one_group},
    {"conv2d_fprop_grouped", 14,
     [](const std::vector<int>& v) {
       return Conv2dProblem{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12]};
     },
     [](const std::vector<int>& v) { return v[13]; }},
};

const JobOp* job_op(const std::string& name) {
  for (const JobOp& op : kJobOps) {
    if (name == op.name) return &op;
  }
  return nullptr;
}

// The first size a kernel or CUTLASS computes in int that exceeds INT_MAX, computed in 64 bits (as
// best_kernels.h's check() and the workload parser do), or nullptr: Conv2dProblem::p() would wrap.
const char* oversized(const Conv2dProblem& p) {
  const long long kMax = 2147483647LL, h_padded = p.h + 2LL * p.pad_h, w_padded = p.w + 2LL * p.pad_w;
  if (h_padded > kMax) return "h+2*pad_h";
  if (w_padded > kMax) return "w+2*pad_w";
  if (h_padded < p.dilation_h * (p.r - 1LL) + 1 || w_padded < p.dilation_w * (p.s - 1LL) + 1) return nullptr;
  const long long out_h = (h_padded - p.dilation_h * (p.r - 1LL) - 1) / p.stride_h + 1;
  const long long out_w = (w_padded - p.dilation_w * (p.s - 1LL) - 1) / p.stride_w + 1;
  auto over = [&](std::initializer_list<long long> extents) {
    long long product = 1;
    for (long long e : extents) {
      if (e > kMax / product) return true;
      product *= e;
    }
    return false;
  };
  if (over({p.n, p.h, p.w, p.c})) return "n*h*w*c (the input's elements)";
  if (over({p.k, p.r, p.s, p.c})) return "k*r*s*c (the filter's elements)";
  if (over({p.n, out_h, out_w, p.k})) return "n*p*q*k (the output's elements)";
  if (over({p.n, h_padded, w_padded, p.c})) return "n*(h+2*pad_h)*(w+2*pad_w)*c (the padded input's elements)";
  if (over({p.dilation_h, p.w, p.c})) return "dilation_h*w*c";
  return nullptr;
}

std::vector<WorkloadJob> read_jobs(const std::string& path) {
  std::ifstream in(path);
  if (!in) die("cannot read job file " + path);
  std::vector<WorkloadJob> jobs;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    std::istringstream fields(line);
    std::string record;
    if (!(fields >> record)) continue;
    auto bad = [&](const char* why) { die(path + ":" + std::to_string(lineno) + ": " + why); };
    if (record == "workload") {
      WorkloadJob job;
      std::string name, dtype;
      if (!(fields >> job.name >> name >> dtype)) bad("expected: workload NAME OP DTYPE ...");
      const JobOp* op = job_op(name);
      if (op == nullptr) bad(("unknown operation " + name).c_str());
      if (!element_named(dtype.c_str(), &job.element)) bad(("unknown dtype " + dtype + " (f16, bf16)").c_str());
      std::vector<int> extents(op->extents);
      for (int& extent : extents) {
        if (!(fields >> extent)) bad(("expected " + std::to_string(op->extents) + " integers after " + name).c_str());
      }
      std::string extra;
      if (fields >> extra) {
        if (op->groups != one_group || !std::isalpha(static_cast<unsigned char>(extra[0]))) {
          bad(("more than " + std::to_string(op->extents) + " integers after " + name).c_str());
        }
        if (!epilogue_named(extra.c_str(), &job.steps)) bad(("unknown epilogue " + extra).c_str());
        job.epilogue = extra;
        if (fields >> extra) bad("more than one epilogue");
      }
      job.problem = op->problem(extents);
      job.groups = op->groups(extents);
      const Conv2dProblem& p = job.problem;
      if (job.groups < 1 || p.c % job.groups != 0 || p.k % job.groups != 0) bad("GROUPS must divide C and K");
      if (p.n < 1 || p.h < 1 || p.w < 1 || p.c < 1 || p.k < 1 || p.r < 1 || p.s < 1 || p.pad_h < 0 ||
          p.pad_w < 0 || p.stride_h < 1 || p.stride_w < 1 || p.dilation_h < 1 || p.dilation_w < 1)
        bad("an extent below 1, or padding below 0");
      if (const char* size = oversized(p)) bad((std::string(size) + " exceeds 2147483647").c_str());
      if (p.p() < 1 || p.q() < 1) bad("problem has no output");
      jobs.push_back(job);
    } else if (record == "kernel") {
      if (jobs.empty()) bad("kernel before any workload");
      KernelJob k;
      if (!(fields >> k.name >> k.tolerance)) bad("expected: kernel NAME TOLERANCE [SETTING]");
      if (fields >> k.setting) std::replace(k.setting.begin(), k.setting.end(), ',', ' ');
      std::string extra;
      if (fields >> extra) bad("expected: kernel NAME TOLERANCE [SETTING]");
      jobs.back().kernels.push_back(k);
    } else {
      bad("unknown record");
    }
  }
  return jobs;
}

struct Device {
  cudaDeviceProp props;
  int runtime_version = 0;
  int driver_version = 0;
};

Device open_device() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    die(std::string("no CUDA device: ") + (error != cudaSuccess ? cudaGetErrorString(error) : "none found"));
  }
  Device d;
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaGetDeviceProperties(&d.props, 0), "cudaGetDeviceProperties");
  check(cudaRuntimeGetVersion(&d.runtime_version), "cudaRuntimeGetVersion");
  check(cudaDriverGetVersion(&d.driver_version), "cudaDriverGetVersion");
  return d;
}

// How the profiler times, as the device line and each row's `timing` say: graph or launches, then
// the rest and the hold where not 0 (graph-rest50, launches-rest50-hold20).
std::string timing(const Options& o) {
  auto ms = [](double value) {  // at most three decimals, no trailing zeros: 50, 12.5
    char text[32];
    std::snprintf(text, sizeof text, "%.3f", value);
    std::string s = text;
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
    return s;
  };
  std::string text = o.graph ? "graph" : "launches";
  if (o.rest_ms > 0) text += "-rest" + ms(o.rest_ms);
  if (o.hold_ms > 0) text += "-hold" + ms(o.hold_ms);
  return text;
}

void print_device(const Device& d, const Options& o) {
  std::printf("device\t%s\t%d%d\t%d\t%d\t%d.%d\t%d.%d\t%d.%d.%d\t%s\n", clean(d.props.name).c_str(), d.props.major,
              d.props.minor, d.props.multiProcessorCount, d.props.l2CacheSize, d.runtime_version / 1000,
              (d.runtime_version % 1000) / 10, d.driver_version / 1000, (d.driver_version % 1000) / 10,
              CUTLASS_MAJOR, CUTLASS_MINOR, CUTLASS_PATCH, timing(o).c_str());
  std::fflush(stdout);
}

// Operands of one workload: `sets` copies of (x, w, y), each 256-byte aligned, cycled
// through while timing so that a layer that fits in L2 is not timed from L2.
struct Operands {
  std::vector<Conv2dBinding> sets;
  std::vector<EpilogueOperands> epilogue;  // a fused job's, one a set
};

size_t round_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

size_t set_bytes(const WorkloadJob& job) {
  const Conv2dProblem& p = job.problem;
  return round_up(p.activation_elements() * 2) + round_up(job.filter_elements() * 2) +
         round_up(p.output_elements() * 2) + round_up(job.bias_elements() * 2) + round_up(job.residual_elements() * 2);
}

size_t sets_for(const WorkloadJob& job, double rotate_bytes) {
  size_t sets = size_t(std::ceil(rotate_bytes / double(set_bytes(job))));
  return std::clamp<size_t>(sets, 1, 64);
}

class Profiler {
 public:
  Profiler(const Device& device, const Options& options, const std::vector<WorkloadJob>& jobs)
      : options_(options) {
    rotate_bytes_ = options.rotate_bytes > 0 ? options.rotate_bytes : 4.0 * device.props.l2CacheSize;
    size_t pool = 0, outputs = 0;
    for (const WorkloadJob& job : jobs) {
      pool = std::max(pool, sets_for(job, rotate_bytes_) * set_bytes(job));
      outputs = std::max(outputs, job.problem.output_elements());
    }
    check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    check(cudaMalloc(&pool_, std::max<size_t>(pool, 256)), "cudaMalloc operands");
    check(cudaMalloc(&reference_, std::max<size_t>(outputs, 1) * sizeof(float)), "cudaMalloc reference");
    check(cudaMalloc(&scratch_, sizeof(Comparison)), "cudaMalloc scratch");
    for (const Registration& r : registry()) registry_[r.name] = r.make;
  }

  void run(const WorkloadJob& job) {
    const Conv2dProblem& p = job.problem;
    Operands operands = place_operands(job);
    cudaEvent_t start, stop;
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
    check(cudaEventRecord(start, stream_), "cudaEventRecord");
    reference_conv2d_fprop(job.element, p, operands.sets[0].x, operands.sets[0].w, reference_, stream_, job.groups);
    if (job.steps.count > 0) {
      reference_epilogue(job.element, job.steps, p.output_elements(), p.k, operands.epilogue[0].bias,
                         operands.epilogue[0].residual, reference_, stream_);
    }
    check(cudaEventRecord(stop, stream_), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "reference convolution");
    float reference_ms = 0;
    check(cudaEventElapsedTime(&reference_ms, start, stop), "cudaEventElapsedTime");
    check(cudaEventDestroy(start), "cudaEventDestroy");
    check(cudaEventDestroy(stop), "cudaEventDestroy");
    std::printf("workload\t%s\t%zu\t%.3f\n", job.name.c_str(), operands.sets.size(), reference_ms);
    std::fflush(stdout);
    best_ms_ = INFINITY;
    for (const KernelJob& kernel : job.kernels) profile(job, kernel, operands);
  }

 private:
  struct Result {
    std::string status;
    std::string message;
    double median_ms = NAN, min_ms = NAN, max_ms = NAN;
    long iterations = 0;
    double rel_l2 = NAN, rel_max = NAN;
    double sm_clock_mhz = -1, power_w = -1;  // seen while the last timed batches ran (GpuState); -1: unknown
    std::string setting;  // the launch setting measured (launch_settings.h); empty for a kernel of none
  };

  Operands place_operands(const WorkloadJob& job) {
    const Conv2dProblem& p = job.problem;
    const Element element = job.element;
    Operands operands;
    size_t sets = sets_for(job, rotate_bytes_);
    char* base = static_cast<char*>(pool_);
    for (size_t i = 0; i < sets; ++i) {
      Conv2dBinding b{};
      b.x = base;
      fill_random(element, base, p.activation_elements(), options_.seed * 7919 + 2 * i, stream_);
      base += round_up(p.activation_elements() * 2);
      b.w = base;
      fill_random(element, base, job.filter_elements(), options_.seed * 7919 + 2 * i + 1, stream_);
      base += round_up(job.filter_elements() * 2);
      b.y = base;
      base += round_up(p.output_elements() * 2);
      operands.sets.push_back(b);
      if (job.steps.count > 0) {
        EpilogueOperands e;
        if (size_t count = job.bias_elements()) {
          e.bias = base;
          fill_random(element, base, count, options_.seed * 7919 + 2 * sets + 2 * i, stream_);
          base += round_up(count * 2);
        }
        if (size_t count = job.residual_elements()) {
          e.residual = base;
          fill_random(element, base, count, options_.seed * 7919 + 2 * sets + 2 * i + 1, stream_);
          base += round_up(count * 2);
        }
        operands.epilogue.push_back(e);
      }
    }
    check(cudaStreamSynchronize(stream_), "filling operands");
    return operands;
  }

  void* workspace(size_t bytes) {
    if (bytes > workspace_bytes_) {
      if (workspace_) check(cudaFree(workspace_), "cudaFree workspace");
      check(cudaMalloc(&workspace_, bytes), "cudaMalloc workspace");
      workspace_bytes_ = bytes;
    }
    return bytes ? workspace_ : nullptr;
  }

  // After a kernel ran: a CUDA error here has lost the context, so report and exit.
  void synchronize_or_crash(const WorkloadJob& job, const KernelJob& kernel, const char* stage) {
    cudaError_t error = cudaStreamSynchronize(stream_);
    if (error == cudaSuccess) error = cudaGetLastError();
    if (error == cudaSuccess) return;
    Result r;
    r.status = "crashed";
    r.message = std::string(stage) + ": " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error);
    emit(job, kernel, r);
    std::exit(kCrashedExit);
  }

  void profile(const WorkloadJob& job, const KernelJob& kernel, Operands& operands) {
    std::printf("begin\t%s\t%s\n", job.name.c_str(), kernel.name.c_str());
    std::fflush(stdout);
    Result r = measure(job, kernel, operands);
    if (r.status == "ok") best_ms_ = std::min(best_ms_, r.median_ms);
    emit(job, kernel, r);
  }

  Result measure(const WorkloadJob& job, const KernelJob& kernel, Operands& operands) {
    Result r;
    // An error that earlier work left to be read (not a sticky one: that ends the process) is not
    // this kernel's: it is read here, and said on stderr, so that this kernel's launch is judged alone.
    if (cudaError_t stale = cudaGetLastError(); stale != cudaSuccess) {
      std::fprintf(stderr, "profiler: before %s on %s: cleared an error left by earlier work: %s\n",
                   kernel.name.c_str(), job.name.c_str(), cudaGetErrorString(stale));
    }
    auto found = registry_.find(kernel.name);
    if (found == registry_.end()) {
      r.status = "failed";
      r.message = "not linked into this profiler";
      return r;
    }
    std::unique_ptr<Operation> op = found->second();
    if (job.groups > 1) {  // a grouped job: for a GroupedOperation only, told the groups first
      auto* grouped = dynamic_cast<GroupedOperation*>(op.get());
      if (grouped == nullptr) {
        r.status = "unsupported";
        r.message = "can_implement: not a grouped-convolution kernel (groups " + std::to_string(job.groups) + ")";
        return r;
      }
      grouped->set_groups(job.groups);
    }
    auto* fused = dynamic_cast<FusedOperation*>(op.get());
    if (job.steps.count > 0 && fused == nullptr) {
      r.status = "unsupported";
      r.message = "can_implement: not a fused kernel (epilogue " + job.epilogue + ")";
      return r;
    }
    if (job.steps.count == 0 && fused != nullptr) {
      r.status = "unsupported";
      r.message = "can_implement: a fused kernel, for workloads of its epilogue only";
      return r;
    }
    if (fused != nullptr) fused->set_epilogue(operands.epilogue);
    if (auto* at_launch = dynamic_cast<ActivationAtLaunch*>(op.get())) at_launch->set_activation(activation_of(job.steps));
    if (auto* settings = dynamic_cast<SettingsAtLaunch*>(op.get())) return search(job, kernel, operands, *op, *settings);
    if (!kernel.setting.empty()) {
      r.status = "failed";
      r.message = "launch setting '" + kernel.setting + "' for a kernel of none";
      return r;
    }
    return measure_operation(job, kernel, operands, *op);
  }

  // Each of the kernel's launch settings (launch_settings.h) measured as measure_operation
  // measures a kernel: the fastest that ran correctly is the result, its setting recorded. A
  // setting whose output is wrong makes the kernel's result incorrect, naming the setting; one the
  // kernel cannot run, or that fails, is passed over (the first such is the result where none ran;
  // a failure names its setting, a refusal is the layer's, whatever the setting).
  // The job's setting, where it names one, is the only one measured.
  Result search(const WorkloadJob& job, const KernelJob& kernel, Operands& operands, Operation& op,
                SettingsAtLaunch& settings) {
    const std::vector<std::string> all = settings.settings();
    if (!kernel.setting.empty()) {
      const long index = setting_index(settings, kernel.setting);
      Result r;
      if (index < 0) {
        r.status = "failed";
        r.message = "no launch setting '" + kernel.setting + "' (this kernel's: " + std::to_string(all.size()) + ")";
        return r;
      }
      settings.set_setting(size_t(index));
      r = measure_operation(job, kernel, operands, op);
      if (r.status == "ok") r.setting = kernel.setting;
      return r;
    }
    Result best, first_miss;
    for (size_t i = 0; i < all.size(); ++i) {
      settings.set_setting(i);
      Result r = measure_operation(job, kernel, operands, op);
      r.setting = all[i];
      if (r.status == "ok") {
        if (best.status.empty() || r.median_ms < best.median_ms) best = r;
        continue;
      }
      if (r.status != "unsupported") r.message = "setting " + all[i] + ": " + r.message;
      if (r.status == "incorrect") return r;
      if (first_miss.status.empty()) first_miss = r;
    }
    if (!best.status.empty()) return best;
    if (first_miss.status.empty()) {
      first_miss.status = "unsupported";
      first_miss.message = "can_implement: the kernel offers no launch setting";
    }
    first_miss.setting.clear();
    return first_miss;
  }

  // Verifies and times `op`, set up for the job (measure).
  Result measure_operation(const WorkloadJob& job, const KernelJob& kernel, Operands& operands, Operation& op) {
    const Conv2dProblem& p = job.problem;
    Result r;
    std::string why = op.can_implement(p);
    if (!why.empty()) {
      r.status = "unsupported";
      r.message = "can_implement: " + why;
      return r;
    }
    size_t ws = round_up(op.workspace_bytes(p));
    char* ws_base = static_cast<char*>(workspace(ws * operands.sets.size()));
    std::vector<Conv2dBinding> bindings = operands.sets;
    for (size_t i = 0; i < bindings.size(); ++i) bindings[i].workspace = ws ? ws_base + i * ws : nullptr;
    std::string error = op.prepare(p, bindings, stream_);
    if (!error.empty()) {
      r.status = "failed";
      r.message = "initialize: " + error;
      cudaGetLastError();
      return r;
    }

    // One run on fresh random operands, compared with the reference on the same inputs.
    fill_nan(job.element, bindings[0].y, p.output_elements(), stream_);
    bool launched = op.run(0, stream_);
    cudaError_t launch_error = cudaGetLastError();
    if (!launched || launch_error != cudaSuccess) {
      synchronize_or_crash(job, kernel, "first run");
      r.status = "failed";
      r.message = std::string("launch: ") + (launch_error != cudaSuccess ? cudaGetErrorString(launch_error)
                                                                         : "CUTLASS run() reported an error");
      return r;
    }
    synchronize_or_crash(job, kernel, "first run");
    Comparison c = compare(job.element, bindings[0].y, reference_, p.output_elements(), scratch_, stream_);
    r.rel_l2 = c.relative_l2();
    r.rel_max = c.relative_max();
    if (c.nonfinite > 0 || !(r.rel_l2 <= kernel.tolerance) || !(r.rel_max <= kernel.tolerance)) {
      r.status = "incorrect";
      std::ostringstream m;
      m << "output differs from the reference: " << c.nonfinite << " non-finite elements, relative L2 error "
        << r.rel_l2 << ", relative max error " << r.rel_max << " (tolerance " << kernel.tolerance << ")";
      r.message = m.str();
      return r;
    }

    r.status = time(job, kernel, op, bindings.size(), r) ? "ok" : "failed";
    if (r.status == "failed" && r.message.empty()) r.message = "a timed launch failed";
    return r;
  }

  // Warm-up, calibration, then `repeats` batches of launches timed with CUDA events.
  bool time(const WorkloadJob& job, const KernelJob& kernel, Operation& op, size_t sets, Result& r) {
    size_t next = 0;
    bool launched = true;
    auto launch = [&](int count) {
      for (int i = 0; i < count && launched; ++i) launched = op.run(next++ % sets, stream_);
      if (!launched && r.message.empty()) {
        cudaError_t error = cudaGetLastError();
        r.message = std::string("a timed launch failed") + (error != cudaSuccess ? std::string(": ") + cudaGetErrorString(error) : "");
      }
    };
    // Warm-up: up to --warmup launches, fewer for a long kernel (the first run was one already).
    // Calibration: as many launches (at most 3) as the warm-up managed.
    auto warm_start = std::chrono::steady_clock::now();
    int warmed = 0;
    while (warmed < options_.warmup && launched) {
      launch(1);
      ++warmed;
      synchronize_or_crash(job, kernel, "warm-up");
      if (std::chrono::steady_clock::now() - warm_start > std::chrono::milliseconds(1)) break;
    }
    const int calibration_launches = std::clamp(warmed, 1, 3);

    cudaEvent_t start, stop;
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
    check(cudaEventRecord(start, stream_), "cudaEventRecord");
    launch(calibration_launches);
    check(cudaEventRecord(stop, stream_), "cudaEventRecord");
    synchronize_or_crash(job, kernel, "calibration");
    float calibration_ms = 0;
    check(cudaEventElapsedTime(&calibration_ms, start, stop), "cudaEventElapsedTime");
    int batch = int(std::clamp(std::round(options_.batch_ms / std::max(double(calibration_ms) / calibration_launches, 1e-4)),
                               1.0, 10000.0));

    // --graph: the batch of launches captured once, instantiated once, replayed per repeat; a
    // whole number of passes over the operand sets, so that every replay touches each set alike.
    cudaGraphExec_t replay = nullptr;
    if (options_.graph && launched) {
      size_t passes = (size_t(batch) + sets - 1) / sets;
      batch = int(std::min(passes * sets, std::max<size_t>(10000 / sets, 1) * sets));
      std::string error = capture(job, kernel, launch, batch, &replay);
      if (error.empty() && !launched) error = "--graph: a launch failed while capturing";
      if (!error.empty()) {
        if (replay) check(cudaGraphExecDestroy(replay), "cudaGraphExecDestroy");
        r.message = error;
        check(cudaEventDestroy(start), "cudaEventDestroy");
        check(cudaEventDestroy(stop), "cudaEventDestroy");
        return false;
      }
      cudaError_t first = cudaGraphLaunch(replay, stream_);  // the first replay uploads the graph
      if (first != cudaSuccess) {
        cudaGetLastError();
        synchronize_or_crash(job, kernel, "graph warm-up");
        check(cudaGraphExecDestroy(replay), "cudaGraphExecDestroy");
        r.message = std::string("--graph: cudaGraphLaunch: ") + cudaGetErrorString(first);
        check(cudaEventDestroy(start), "cudaEventDestroy");
        check(cudaEventDestroy(stop), "cudaEventDestroy");
        return false;
      }
      synchronize_or_crash(job, kernel, "graph warm-up");
    }

    // The rest, then the hold: the batch run until --hold-ms have passed.
    if (options_.rest_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(options_.rest_ms));
    if (options_.hold_ms > 0 && launched) {
      auto hold_start = std::chrono::steady_clock::now();
      const auto hold = std::chrono::duration<double, std::milli>(options_.hold_ms);
      while (launched && std::chrono::steady_clock::now() - hold_start < hold) {
        if (replay) {
          check(cudaGraphLaunch(replay, stream_), "cudaGraphLaunch");
        } else {
          launch(batch);
        }
        synchronize_or_crash(job, kernel, "hold");
      }
    }

    // The first batch alone, then the rest: a kernel well behind the workload's fastest so far
    // (--prune) is timed with fewer batches.
    int repeats = options_.repeats;
    std::vector<cudaEvent_t> events(2 * repeats);
    for (cudaEvent_t& e : events) check(cudaEventCreate(&e), "cudaEventCreate");
    for (int i = 0; i < repeats; ++i) {
      check(cudaEventRecord(events[2 * i], stream_), "cudaEventRecord");
      if (replay) {
        check(cudaGraphLaunch(replay, stream_), "cudaGraphLaunch");
      } else {
        launch(batch);
      }
      check(cudaEventRecord(events[2 * i + 1], stream_), "cudaEventRecord");
      if (i == 0 && options_.prune > 0 && std::isfinite(best_ms_)) {
        synchronize_or_crash(job, kernel, "timed runs");
        float first_ms = 0;
        check(cudaEventElapsedTime(&first_ms, events[0], events[1]), "cudaEventElapsedTime");
        if (first_ms / batch > options_.prune * best_ms_) repeats = std::min(repeats, options_.pruned_repeats);
      }
    }
    gpu_state_.read(&r.sm_clock_mhz, &r.power_w);  // the last batches are queued or running
    synchronize_or_crash(job, kernel, "timed runs");
    if (replay) check(cudaGraphExecDestroy(replay), "cudaGraphExecDestroy");
    std::vector<double> per_launch;
    for (int i = 0; i < repeats; ++i) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]), "cudaEventElapsedTime");
      per_launch.push_back(ms / batch);
    }
    for (cudaEvent_t& e : events) check(cudaEventDestroy(e), "cudaEventDestroy");
    check(cudaEventDestroy(start), "cudaEventDestroy");
    check(cudaEventDestroy(stop), "cudaEventDestroy");
    std::sort(per_launch.begin(), per_launch.end());
    size_t n = per_launch.size();
    r.median_ms = n % 2 ? per_launch[n / 2] : 0.5 * (per_launch[n / 2 - 1] + per_launch[n / 2]);
    r.min_ms = per_launch.front();
    r.max_ms = per_launch.back();
    r.iterations = long(batch) * repeats;
    return launched;
  }

  // Captures `batch` launches on the timing stream into a graph and instantiates it. Empty on
  // success; otherwise why not (the stream is out of capture mode either way).
  template <typename Launch>
  std::string capture(const WorkloadJob& job, const KernelJob& kernel, Launch& launch, int batch,
                      cudaGraphExec_t* replay) {
    cudaError_t error = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed);
    if (error != cudaSuccess) {
      cudaGetLastError();
      return std::string("--graph: cudaStreamBeginCapture: ") + cudaGetErrorString(error);
    }
    launch(batch);  // recorded into the graph, not run
    cudaGraph_t graph = nullptr;
    cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    cudaError_t last = cudaGetLastError();  // a launch refused while capturing
    std::string why;
    if (end != cudaSuccess) {
      why = std::string("--graph: capturing the launches: ") + cudaGetErrorString(end);
    } else if (last != cudaSuccess) {
      why = std::string("--graph: a launch while capturing: ") + cudaGetErrorString(last);
    } else {
      error = cudaGraphInstantiate(replay, graph, 0);
      if (error != cudaSuccess) {
        cudaGetLastError();
        *replay = nullptr;
        why = std::string("--graph: cudaGraphInstantiate: ") + cudaGetErrorString(error);
      }
    }
    if (graph) check(cudaGraphDestroy(graph), "cudaGraphDestroy");
    synchronize_or_crash(job, kernel, "graph capture");
    return why;
  }

  void emit(const WorkloadJob& job, const KernelJob& kernel, const Result& r) {
    std::printf("result\t%s\t%s\t%s\t%.6g\t%.6g\t%.6g\t%ld\t%.3g\t%.3g\t%s\t%.0f\t%.1f\t%s\n", job.name.c_str(),
                kernel.name.c_str(), r.status.c_str(), r.median_ms, r.min_ms, r.max_ms, r.iterations, r.rel_l2, r.rel_max,
                clean(r.message).c_str(), r.sm_clock_mhz, r.power_w, clean(r.setting).c_str());
    std::fflush(stdout);
  }

  const Options& options_;
  GpuState gpu_state_;
  double best_ms_ = INFINITY;  // the fastest median measured on the current workload
  double rotate_bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  void* pool_ = nullptr;
  float* reference_ = nullptr;
  Comparison* scratch_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<std::string, OperationFactory> registry_;
};

}  // namespace
}  // namespace kernelgen

int main(int argc, char** argv) {
  using namespace kernelgen;
  Options options = parse_options(argc, argv);
  if (options.list) {
    for (const Registration& r : registry()) std::printf("%s\n", r.name);
    return 0;
  }
  std::vector<WorkloadJob> jobs;
  if (!options.device_only) jobs = read_jobs(options.jobs_path);  // refused before the GPU is asked
  Device device = open_device();
  print_device(device, options);
  if (options.device_only) return 0;
  try {
    Profiler profiler(device, options, jobs);
    for (const WorkloadJob& job : jobs) profiler.run(job);
  } catch (const std::exception& e) {
    die(e.what());
  }
  return 0;
}
