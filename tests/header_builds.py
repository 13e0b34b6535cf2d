"""Headers built once per test session, and the nvcc compiles of consumers of them.

The compiles take about a minute of one core in all, so they start in the background as soon as
a test asks for them (tests/test_header_compile.py, early in the run) and are waited for where
their result is checked (tests/test_using_the_header.py, late in the run): the rest of the suite
runs meanwhile on the other core.
"""

import atexit
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from conftest import ROOT, STARTING_ENVIRONMENT
from kernelgen.variables import default_cutlass_root

# What the profiler compiles kernels with (kernelgen.variables.DEFAULT_NVCCFLAGS and ARCH=90a),
# less -O3: these compiles only check that the code compiles, and nvcc optimises device code anyway.
MEASURED_FLAGS = ["-std=c++17", "-DNDEBUG", "--expt-relaxed-constexpr", "-gencode=arch=compute_90a,code=sm_90a"]

_state = {}


def session_dir() -> Path:
    if "dir" not in _state:
        _state["dir"] = Path(tempfile.mkdtemp(prefix="kernelgen-header-"))
        atexit.register(_clean_up)
    return _state["dir"]


def _clean_up():
    for job in _state.get("jobs", {}).values():
        job.stop()
    shutil.rmtree(_state["dir"], ignore_errors=True)


def nvcc_command(directory: Path, source: str, flags, output=None, more_sources=()) -> list:
    """nvcc on directory/source (and `more_sources`, linked with it), which include
    directory/best_kernels.h; -c unless `output`."""
    cutlass = default_cutlass_root()
    out = ["-o", str(directory / output)] if output else ["-c", "-o", str(directory / (source + ".o"))]
    return ["nvcc", *flags, f"-I{directory}", "-isystem", f"{cutlass}/include", "-isystem",
            f"{cutlass}/tools/util/include", *out, str(directory / source), *(str(directory / m) for m in more_sources)]


def cuda_include() -> str:
    """The CUDA toolkit's include directory, as nvcc passes it to the host compiler."""
    out = subprocess.run(["nvcc", "-dryrun", "-x", "cu", "-c", "/dev/null", "-o", "/dev/null"], capture_output=True,
                         text=True, timeout=60)
    found = re.search(r'INCLUDES="-I([^"]+)"', out.stdout + out.stderr)
    assert found, out.stdout + out.stderr
    return found.group(1)


def committed_header() -> Path:
    """The folder of the resnet50 header files that `scons best_kernels.h` builds from the
    committed results (BUILD/sets/resnet50), built once (the scons run's output is kept beside it
    as scons.log)."""
    if "committed" not in _state:
        build = session_dir() / "committed"
        out = subprocess.run([sys.executable, shutil.which("scons"), "best_kernels.h", f"BUILD={build}"],
                             cwd=ROOT, capture_output=True, text=True, timeout=600)
        directory = build / "sets" / "resnet50"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "scons.log").write_text(out.stdout + out.stderr)
        assert out.returncode == 0, out.stdout + out.stderr
        _state["committed"] = directory
    return _state["committed"]


# The kernel the launcher programs of several modules link (tests/test_launcher.py's SM80: a CUTLASS
# 2.x conv through the generic adapter), as the library's build compiles its profiler source, to the
# end of the device front end; its host code with -ftrapv, so that a signed int overflow in the
# adapter or in CUTLASS's host code aborts the program (tests/test_hostile_launcher.py's rows ask
# for it; in the others' programs an overflow aborts as well).
def sm80_flags() -> list:
    return [*MEASURED_FLAGS, "-fdevice-syntax-only", "-Xcompiler", "-ftrapv", f"-I{ROOT / 'profiler'}"]


def shared_folder() -> Path:
    """A folder of the test session's, shared by pytest-xdist's workers (tests/conftest.py makes it
    and names it in KERNELGEN_TESTS_SHARED; without it, this process's own)."""
    shared = os.environ.get("KERNELGEN_TESTS_SHARED")
    return Path(shared) if shared and Path(shared).is_dir() else session_dir()


def shared_object(source_name: str, source: str, flags) -> Path:
    """`source` compiled (nvcc -c, with `flags`) once per test session, whichever worker asks
    first: the others wait for it (a lock of the source and flags) and link the same object (about
    7 s of nvcc for a CUTLASS kernel, which three programs link)."""
    folder = shared_folder()
    key = hashlib.sha256(json.dumps([source_name, source, list(flags)]).encode()).hexdigest()[:20]
    obj = folder / f"{key}.o"
    with open(folder / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not obj.exists():
            directory = folder / key
            directory.mkdir(exist_ok=True)
            (directory / source_name).write_text(source)
            out = subprocess.run(nvcc_command(directory, source_name, flags), capture_output=True, text=True,
                                 timeout=900, env=STARTING_ENVIRONMENT)
            assert out.returncode == 0, out.stdout + out.stderr[-5000:]
            os.replace(directory / (source_name + ".o"), obj)
    return obj


class _Job:
    """A compile in the background: the shared objects it links made first (shared_object), then
    its nvcc run."""

    def __init__(self, command: list, objects, log: Path):
        self.log, self.returncode, self.process, self._stopped = log, None, None, False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, args=(command, objects), daemon=True)
        self._thread.start()

    def _run(self, command, objects):
        with open(self.log, "w") as f:
            try:
                command = [*command, *(str(make()) for make in objects)]
            except BaseException as e:
                f.write(f"a shared object did not compile: {e}\n")
                self.returncode = 1
                return
            with self._lock:
                if self._stopped:
                    return
                self.process = subprocess.Popen(command, stdout=f, stderr=subprocess.STDOUT, env=STARTING_ENVIRONMENT)
            self.returncode = self.process.wait()

    def wait(self, timeout):
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.stop()
            self._thread.join()

    def stop(self):
        with self._lock:
            self._stopped = True
            if self.process is not None and self.process.poll() is None:
                self.process.kill()
                self.process.wait()


def start(name: str, directory: Path, source_name: str, source: str, flags, output=None, more_sources=None,
          objects=()) -> None:
    """Starts compiling `source` in the background (once per session under `name`), with
    `more_sources` (file name -> text, or None for a file already there) and the objects that
    `objects` (functions that give an object's path) give linked to it."""
    jobs = _state.setdefault("jobs", {})
    if name in jobs:
        return
    (directory / source_name).write_text(source)
    for other, text in (more_sources or {}).items():
        if text is not None:
            (directory / other).write_text(text)
    command = nvcc_command(directory, source_name, flags, output, list(more_sources or {}))
    jobs[name] = _Job(command, objects, directory / f"{name}.log")


def result(name: str, timeout=900) -> tuple:
    """(exit status, output) of the compile started under `name`, once it has finished."""
    job = _state["jobs"][name]
    job.wait(timeout)
    return job.returncode, job.log.read_text()


# A consumer of the committed header alone: its lookups and the launcher's declarations; it needs
# CUDA's headers only, and any C++17 compiler (tests/test_using_the_header.py compiles it with the
# host compiler).
CONSUMER = """\
#include "best_kernels.h"

using namespace best_kernels;

constexpr Conv2dFpropProblem kFirst{256, 56, 56, 64, 256, 1, 1, 0, 0, 1, 1, 1, 1};
static_assert(find(kFirst) != nullptr, "the first ResNet-50 layer has a kernel");
static_assert(find(kFirst)->runtime_ms > 0, "with its measured time");
static_assert(find(Conv2dFpropProblem{1, 8, 8, 8, 8, 1, 1, 0, 0, 1, 1, 1, 1}) == nullptr, "others have none");
static_assert(sizeof(kConv2dFprop) / sizeof(kConv2dFprop[0]) == 19, "one choice per layer");
static_assert(BEST_KERNELS_CONV2D_FPROP_COUNT == 19 && BEST_KERNELS_GEMM_COUNT == 0, "the tables' sizes");
static_assert(int(Status::kErrorNotSupported) == 5, "CUTLASS's values");

// Declared here, defined in libbest_kernels.a.
Status launch(const Element* x, const Element* w, Element* y, void* workspace, cudaStream_t stream) {
  size_t bytes = workspace_size(kFirst) + workspace_size(GemmProblem{8, 8, 8});
  if (kernel_for(kFirst) == nullptr || kernel_for(GemmProblem{8, 8, 8}) == nullptr) return Status::kErrorInternal;
  Status status = conv2d_fprop(kFirst, x, w, y, workspace, bytes, stream);
  return status != Status::kSuccess ? status : gemm(GemmProblem{8, 8, 8}, x, w, y, workspace, bytes, stream);
}

int main() { return 0; }
"""

# A consumer of the committed header's CUTLASS types: the types of chosen kernels of each family
# (persistent conv, GEMM kernel chosen for a convolution, halo).
TYPES_CONSUMER = """\
#include "best_kernels_cutlass.h"

using namespace best_kernels;

using First = Conv2dFprop<256, 56, 56, 64, 256, 1, 1, 0, 0, 1, 1, 1, 1>::Kernel;
using Last = Conv2dFprop<256, 7, 7, 2048, 512, 1, 1, 0, 0, 1, 1, 1, 1>::Kernel;
using Stage1Conv3x3 = Conv2dFprop<256, 56, 56, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1>::Kernel;
using GemmForConv = Conv2dFprop<256, 28, 28, 128, 512, 1, 1, 0, 0, 1, 1, 1, 1>::Kernel;
static_assert(find(Conv2dFpropProblem{256, 56, 56, 64, 256, 1, 1, 0, 0, 1, 1, 1, 1}) != nullptr, "with the tables");

int main() {
  First::Arguments first{};
  Last::Arguments last{};
  Stage1Conv3x3::Arguments stage1{};
  GemmForConv::Arguments gemm_for_conv{};
  (void)first;
  (void)last;
  (void)stage1;
  (void)gemm_for_conv;
  return 0;
}
"""

# The launcher linked, on a header whose kernels are quick to compile: a CUTLASS 2.x conv (the
# generic CUTLASS adapter) and a pointwise kernel (the resident adapter), serving convolutions and a
# GEMM workload: this program, the library's launcher source and the kernels' profiler sources (as
# the build compiles them into the library). It runs one problem given on its command line through
# kernel_for and the launcher and prints the status and the kernel: pointers are addresses (0:
# null), for inputs the launcher refuses before it touches the GPU.
LAUNCHER = """\
#include "best_kernels_cutlass.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace best_kernels;

static_assert(find(GemmProblem{256, 1000, 2048}) != nullptr, "the GEMM workload has a kernel");
static_assert(find(GemmProblem{256, 1000, 2049}) == nullptr, "others have none");
static_assert(BEST_KERNELS_CONV2D_FPROP_COUNT == 3 && BEST_KERNELS_GEMM_COUNT == 1, "the tables' sizes");
using Fc = Gemm<256, 1000, 2048>::Kernel;
using Pointwise = Conv2dFprop<8, 14, 14, 64, 128, 1, 1, 0, 0, 1, 1, 1, 1>::Kernel;

//   launcher conv N H W C K R S PAD_H PAD_W STRIDE_H STRIDE_W DIL_H DIL_W X W Y WORKSPACE BYTES
//   launcher gemm M N K A B D WORKSPACE BYTES
int main(int argc, char** argv) {
  Fc::Arguments fc{};
  Pointwise::Arguments pointwise{};
  (void)fc;
  (void)pointwise;
  auto number = [&](int i) { return std::strtoll(argv[i], nullptr, 0); };
  auto pointer = [&](int i) { return reinterpret_cast<Element*>(uintptr_t(number(i))); };
  Status status;
  const char* kernel;
  if (argc == 20 && std::strcmp(argv[1], "conv") == 0) {
    int v[13];
    for (int i = 0; i < 13; ++i) v[i] = int(number(2 + i));
    Conv2dFpropProblem p{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12]};
    kernel = kernel_for(p);
    status = conv2d_fprop(p, pointer(15), pointer(16), pointer(17), pointer(18), size_t(number(19)), nullptr);
  } else if (argc == 10 && std::strcmp(argv[1], "gemm") == 0) {
    GemmProblem p{int(number(2)), int(number(3)), int(number(4))};
    kernel = kernel_for(p);
    status = gemm(p, pointer(5), pointer(6), pointer(7), pointer(8), size_t(number(9)), nullptr);
  } else {
    std::fprintf(stderr, "usage: launcher conv N H W C K R S PAD_H PAD_W STRIDE_H STRIDE_W DIL_H DIL_W X W Y "
                         "WORKSPACE BYTES | gemm M N K A B D WORKSPACE BYTES\\n");
    return 2;
  }
  std::printf("%s\\n%s\\n", status_string(status), kernel ? kernel : "(none)");
  return 0;
}
"""

POINTWISE = "kernelgen_sm90_tensorop_fprop_f16nhwc_f16nhwc_f32_f16nhwc_1x1_64x256_c64_stages4_pointwise"


def sm80_object() -> Path:
    """tests/test_launcher.py's SM80 kernel's profiler source compiled (sm80_flags), once a session."""
    from test_launcher import CATALOG, SM80, TEMPLATES
    from kernelgen import render

    return shared_object(f"kernel_{SM80}.cu", render.kernel_source(render.lookup(TEMPLATES), CATALOG[SM80]),
                         sm80_flags())


def launcher_header() -> Path:
    """The folder of the launcher set's header files (a 3x3 layer, a 1x1 layer, a GEMM, a strided
    1x1 layer), with kernel_<name>.cu, the pointwise kernel's profiler source, beside them (the
    SM80 kernel's is sm80_object's)."""
    from test_launcher import CATALOG, SM80, TEMPLATES, header  # its set

    directory = session_dir() / "launcher"
    if not (directory / "out" / "best_kernels.h").exists():
        directory.mkdir(exist_ok=True)
        header(directory, [SM80, POINTWISE, SM80, SM80])
        from kernelgen import render

        (directory / "out" / f"kernel_{POINTWISE}.cu").write_text(render.kernel_source(render.lookup(TEMPLATES),
                                                                                      CATALOG[POINTWISE]))
    return directory / "out"


def start_compiles() -> None:
    """The compiles, in the background (once): about 50 and 25 s of one core."""
    # The types' consumer through nvcc's front ends (-cuda: the host code as the host compiler would
    # get it; -fdevice-syntax-only: device code checked, not generated), which is where a header that
    # does not compile fails: about 50 s, where compiling it to an object takes 65.
    start("types_consumer", committed_header(), "types_consumer.cu", TYPES_CONSUMER,
          [*MEASURED_FLAGS, "-fdevice-syntax-only", "-cuda"], output="types_consumer.cu.ii")
    # The launcher's program, the launcher and the kernels' device code only to the end of the
    # front end: it checks that the kernels instantiate, without the minutes of code generation (the
    # profiler build generates it).
    directory = launcher_header()
    start("launcher", directory, "launcher.cu", LAUNCHER, [*MEASURED_FLAGS, "-fdevice-syntax-only", "-I", str(ROOT / "profiler")],
          output="launcher", more_sources={name: None for name in ["best_kernels_launcher.cu"] + sorted(
              p.name for p in directory.glob("kernel_*.cu"))}, objects=[sm80_object])
