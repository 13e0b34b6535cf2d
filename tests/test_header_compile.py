"""The committed results give a header that includes CUDA's headers only, CUTLASS types that need
nothing but CUTLASS, and those stop with a message naming the flag when compiled without the flags
their kernels were measured with.

The header's compiles start here, in the background, and are checked at the end of the run
(tests/test_using_the_header.py; tests/header_builds.py says why)."""

import re
import shutil
import subprocess

import pytest

import header_builds
from conftest import ROOT, requires_nvcc


@requires_nvcc
def test_committed_results_give_a_header_of_cuda_headers_and_types_that_need_only_cutlass():
    folder = header_builds.committed_header()
    header, types = (folder / "best_kernels.h").read_text(), (folder / "best_kernels_cutlass.h").read_text()
    for text in (header, types, (folder / "best_kernels_launcher.cu").read_text()):
        assert str(ROOT) not in text, "nothing in the header depends on where the project lives"
    assert re.findall(r'#include\s*[<"]([^>"]+)', header) == ["cstddef", "cuda_runtime_api.h", "cuda_fp16.h"]
    included = set(re.findall(r'#include "([^"]+)"', types))
    assert "best_kernels.h" in included and not included & {p.name for p in (ROOT / "profiler").iterdir()}, \
        "project headers the kernels need are embedded, not included"
    header_builds.start_compiles()


FLAGS = header_builds.MEASURED_FLAGS
NDEBUG = "compile with -DNDEBUG"
RELAXED = "compile with --expt-relaxed-constexpr"
STD = r"compile with -std=c\+\+17"
ARCH = r"compile for sm_90a only \(-gencode=arch=compute_90a,code=sm_90a\)"
NVCC = "compile it with nvcc"


def without(flag, *extra):
    return [f for f in FLAGS if f != flag] + list(extra)


def target(*gencodes):
    return without(FLAGS[-1], *(f"-gencode=arch=compute_{g},code=sm_{g}" for g in gencodes))


@requires_nvcc
@pytest.mark.parametrize("compiler, flags, expected, absent", [
    ("nvcc", without("-DNDEBUG"), NDEBUG, [ARCH, RELAXED]),
    ("nvcc", without("--expt-relaxed-constexpr"), RELAXED, [NDEBUG, ARCH]),
    ("nvcc", without("-std=c++17", "-std=c++14"), STD, [NDEBUG, ARCH]),
    ("nvcc", target("80"), ARCH, [NDEBUG, RELAXED]),
    ("nvcc", target("90"), ARCH, [NDEBUG, RELAXED]),
    ("nvcc", target("100a"), ARCH, [NDEBUG, RELAXED]),
    ("nvcc", [f for f in target("80") if f != "-DNDEBUG"] + ["-DBEST_KERNELS_ALLOW_ASSERTS"], ARCH, [NDEBUG]),
    ("g++", ["-std=c++17", "-DNDEBUG", "-x", "c++"], NVCC, [NDEBUG, ARCH]),
], ids=["no-NDEBUG", "no-relaxed-constexpr", "c++14", "sm_80", "sm_90", "sm_100a",
        "asserts-allowed-sm_80", "host-compiler"])
def test_the_header_names_the_flag_it_was_measured_with(tmp_path, compiler, flags, expected, absent):
    """Preprocessing alone shows it (nvcc -E runs one device pass: the first target's; a build for
    several targets stops at the first that is not sm_90a)."""
    if shutil.which(compiler) is None:
        pytest.skip(f"needs {compiler}")
    source = tmp_path / "flags.cu"
    source.write_text('#include "best_kernels_cutlass.h"\n')
    command = header_builds.nvcc_command(header_builds.committed_header(), "", flags, "/dev/null")
    command[0], command[-1] = compiler, str(source)
    out = subprocess.run([*command, "-E"], capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert re.search(expected, out.stderr), out.stderr[-3000:]
    for message in absent:
        assert not re.search(message, out.stderr), out.stderr[-3000:]
    errors = [line for line in out.stderr.splitlines() if re.search(r"\berror\b", line)]
    assert errors and all("#error" in line or "best_kernels_cutlass.h" in line for line in errors), \
        "the flags' message and nothing else: " + out.stderr[-3000:]


@requires_nvcc
@pytest.mark.parametrize("defined", [False, True], ids=["without-the-macro", "with-the-macro"])
def test_a_dependent_launch_without_grid_dependency_control_stops_at_compile_time(tmp_path, defined):
    """profiler/dependent_launch.h, which the _pdl kernels and a header holding one include: device
    code that would launch with PDL but not wait for the previous kernel does not compile."""
    source = tmp_path / "pdl.cu"
    source.write_text(("#define CUTLASS_ENABLE_GDC_FOR_SM90\n" if defined else "")
                      + '#include "cutlass/cutlass.h"\n#include "dependent_launch.h"\n')
    command = header_builds.nvcc_command(ROOT / "profiler", "", header_builds.MEASURED_FLAGS, "/dev/null")
    command[-1] = str(source)
    out = subprocess.run([*command, "-E"], capture_output=True, text=True, timeout=300)
    if defined:
        assert out.returncode == 0, out.stderr[-3000:]
    else:
        assert out.returncode != 0
        assert "grid-dependency control is off in this translation unit: define CUTLASS_ENABLE_GDC_FOR_SM90" \
            in out.stderr, out.stderr[-3000:]
