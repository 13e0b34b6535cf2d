"""End-to-end runs of scons on a copy of the project with a two-kernel family: what is
compiled, what is not, and the errors a user sees."""

import atexit
import compileall
import importlib.util
import os
import py_compile
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import scons_runs
from conftest import FAKES, ROOT, requires_nvcc, sm80_family

TINY = sm80_family("threadblock = [64, 64, 32], warps = [2, 2, 1], stages = 3",
                   "threadblock = [64, 64, 64], warps = [2, 2, 1], stages = 3")
# The family the builds with nvcc compile: two matrix-vector kernels (profiler/gemv.h), about 3 s of
# nvcc each where a CUTLASS kernel takes 10 and more.
GEMV = ('kind = "gemv"\nelement = "f16"\naccumulator = "f32"\noutput = "f16"\nkernels = [\n'
        '  { max_m = 1, rows = 4, threads = 128, unroll = 4 },\n'
        '  { max_m = 1, rows = 2, threads = 256, unroll = 4 },\n]\n')


def compiled_site_scons() -> Path:
    """A copy of site_scons with the bytecode of its modules, made once a process: the scons runs
    in a copy of the project then import kernelgen without compiling it first. The bytecode is
    checked against the hash of its source, so that a module a test edits is compiled again."""
    if "site_scons" not in _COMPILED:
        folder = Path(tempfile.mkdtemp(prefix="kernelgen-site-scons-")) / "site_scons"
        atexit.register(shutil.rmtree, folder.parent, True)
        shutil.copytree(ROOT / "site_scons", folder, ignore=shutil.ignore_patterns("__pycache__"))
        assert compileall.compile_dir(folder, quiet=1, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
        _COMPILED["site_scons"] = folder
    return _COMPILED["site_scons"]


_COMPILED = {}


def copy_project(dest, spec=TINY):
    for name in ("SConstruct", "site_scons", "profiler", "kernel_specs"):
        if name == "site_scons":
            shutil.copytree(compiled_site_scons(), dest / name)
            continue
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, dest / name)
    (dest / "specs").mkdir()
    (dest / "specs" / "tiny.toml").write_text(spec)
    return dest


def scons(project, *args, check=True, path=None):
    env = dict(os.environ, PATH=path or os.environ["PATH"])
    out = scons_runs.run(["-j2", "SPECS=specs", "TOP=listed", *args], cwd=project, env=env, timeout=1800)
    if check and out.returncode != 0:
        raise AssertionError(f"scons {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
    return out


def compiled_kernels(output: str) -> list:
    return sorted(re.findall(r"\] nvcc (\S+)\.cu", output))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    project = copy_project(tmp_path_factory.mktemp("project"), GEMV)
    first = scons(project, "profiler")
    return project, first


@requires_nvcc
def test_cold_build_compiles_each_kernel_once_and_links_one_profiler(built):
    project, first = built
    assert compiled_kernels(first.stdout) == [
        "kernelgen_sm80_simt_gemv_f16_f16_f32_f16_m1_rows2_threads256_unroll4",
        "kernelgen_sm80_simt_gemv_f16_f16_f32_f16_m1_rows4_threads128_unroll4",
    ]
    assert re.search(r"\[2/2\] nvcc", first.stdout), "progress counts the kernels to compile"
    listed = subprocess.run([str(project / "generated" / "profiler"), "--list"], capture_output=True, text=True)
    assert listed.stdout.split() == compiled_kernels(first.stdout)


@requires_nvcc
def test_nothing_changed_runs_no_nvcc(built):
    project, _ = built
    again = scons(project, "profiler")
    assert "nvcc" not in again.stdout
    assert "up to date" in again.stdout


@requires_nvcc
def test_generated_sources_are_byte_identical_across_runs(built):
    project, _ = built
    before = {p.name: p.read_bytes() for p in (project / "generated" / "kernels").iterdir()}
    scons(project, "profiler")
    assert before == {p.name: p.read_bytes() for p in (project / "generated" / "kernels").iterdir()}


@requires_nvcc
@pytest.mark.parametrize("jobs, error", [
    ("workload w gemm f16 4 8\n", "1: expected 3 integers after gemm"),
    ("workload w gemm f16 4 8 16 2\n", "1: more than 3 integers after gemm"),
    ("workload a gemm f16 4 8 16\nworkload w conv3d f16 1 2 3\n", "2: unknown operation conv3d"),
    ("workload w gemm f32 4 8 16\n", "1: unknown dtype f32 (f16, bf16)"),
    ("workload w gemm\n", "1: expected: workload NAME OP DTYPE ..."),
    ("workload w gemm bf16 0 8 16\n", "1: an extent below 1, or padding below 0"),
    ("workload w conv2d_fprop f16 1 2 2 8 8 3 3 0 0 1 1 1 1\n", "1: problem has no output"),
    ("workload w conv2d_fprop f16 1 8 8 8 8 3 3 1 1 1 1 1\n", "1: expected 13 integers after conv2d_fprop"),
    ("kernel k 0.001\n", "1: kernel before any workload"),
    ("workload w conv2d_fprop f16 1 8 8 64 64 1 1 1073741824 0 1073741824 1 1 1\n", "1: h+2*pad_h exceeds 2147483647"),
    ("workload w conv2d_fprop f16 1 8 8 64 64 1 1 2147483647 0 2147483647 1 1 1\n", "1: h+2*pad_h exceeds 2147483647"),
    ("workload w gemm f16 65536 65536 8\n", "1: n*p*q*k (the output's elements) exceeds 2147483647"),
    ("workload w conv2d_fprop f16 2 1024 1024 1024 8 1 1 0 0 1 1 1 1\n",
     "1: n*h*w*c (the input's elements) exceeds 2147483647"),
], ids=["gemm-short", "gemm-long", "unknown-op", "unknown-dtype", "no-dtype", "gemm-m-0", "no-output",
        "conv-short", "kernel-first", "pad-2^30", "pad-int-max", "gemm-output", "conv-input"])
def test_the_profiler_reads_each_ops_job_line_and_refuses_a_bad_one_before_the_gpu(built, tmp_path, jobs, error):
    project, _ = built
    path = tmp_path / "jobs.txt"
    path.write_text(jobs)
    out = subprocess.run([str(project / "generated" / "profiler"), "--jobs", str(path)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and out.stdout.splitlines() == [f"fatal\t{path}:{error}"], out.stdout + out.stderr


@requires_nvcc
def test_the_profiler_takes_a_gemm_and_a_bf16_convolution_job(built, tmp_path):
    project, _ = built
    path = tmp_path / "jobs.txt"
    path.write_text("workload a gemm f16 4 8 16\nworkload b conv2d_fprop bf16 1 8 8 8 8 3 3 1 1 1 1 1 1\n")
    out = subprocess.run([str(project / "generated" / "profiler"), "--jobs", str(path)], capture_output=True,
                         text=True, timeout=300)
    assert f"fatal\t{path}:" not in out.stdout, out.stdout  # read; then run, or no GPU to run on
    assert out.returncode == 0 or "no CUDA device" in out.stdout, out.stdout + out.stderr


@requires_nvcc
def test_template_and_generator_edits_rebuild_what_depends_on_them(built):
    project, _ = built
    template = project / "kernel_specs" / "templates" / "gemv.mako"
    original = template.read_text()
    template.write_text(original.replace("// Matrix-vector GEMM", "// Matrix-vector (edited) GEMM"))
    dry = scons(project, "-n", "profiler")
    assert len(compiled_kernels(dry.stdout)) == 2, dry.stdout
    template.write_text(original)

    render = project / "site_scons" / "kernelgen" / "render.py"
    original = render.read_text()
    render.write_text(original.replace("Generated by kernelgen", "Generated by kernelgen (edited)"))
    dry = scons(project, "-n", "profiler")
    assert len(compiled_kernels(dry.stdout)) == 2
    assert "nvcc profiler/main.cu" not in dry.stdout, "the hand-written driver does not depend on it"
    render.write_text(original)
    assert "nvcc" not in scons(project, "-n", "profiler").stdout, "back to the built state"


@requires_nvcc
def test_changing_one_spec_entry_recompiles_exactly_that_kernel(built):
    project, _ = built
    spec = project / "specs" / "tiny.toml"
    spec.write_text(GEMV.replace("rows = 2, threads = 256, unroll = 4", "rows = 2, threads = 256, unroll = 2"))
    out = scons(project, "profiler")
    assert compiled_kernels(out.stdout) == ["kernelgen_sm80_simt_gemv_f16_f16_f32_f16_m1_rows2_threads256_unroll2"]
    assert "nvcc profiler/main.cu" not in out.stdout
    listed = subprocess.run([str(project / "generated" / "profiler"), "--list"], capture_output=True, text=True)
    assert listed.stdout.split() == ["kernelgen_sm80_simt_gemv_f16_f16_f32_f16_m1_rows2_threads256_unroll2",
                                     "kernelgen_sm80_simt_gemv_f16_f16_f32_f16_m1_rows4_threads128_unroll4"]
    spec.write_text(GEMV)


@requires_nvcc
def test_clean_removes_the_build_but_never_results(built):
    project, _ = built
    results = project / "profile_results" / "resnet50"
    results.mkdir(parents=True)
    (results / "keep.csv").write_text("workload,kernel\n")
    scons(project, "-c", "profiler")
    assert not (project / "generated" / "profiler").exists()
    assert not list((project / "generated").rglob("*.o"))
    assert (results / "keep.csv").exists()


def test_unknown_variable_is_an_error(tmp_path):
    project = copy_project(tmp_path)
    out = scons(project, "WORKLAODS=resnet50", check=False)
    assert out.returncode != 0
    assert "unknown variable(s): WORKLAODS" in out.stderr


def test_help_lists_the_variables(tmp_path):
    out = scons(copy_project(tmp_path), "--help")
    for name in ("WORKLOADS", "KERNELS", "ARCH", "CUTLASS", "NVCC", "RESULTS"):
        assert re.search(rf"^{name}:", out.stdout, re.MULTILINE), name


def test_bad_spec_fails_before_anything_is_generated(tmp_path):
    project = copy_project(tmp_path)
    (project / "specs" / "tiny.toml").write_text(TINY.replace("stages = 3 }", "stages = 3, swizzle = 2 }", 1))
    out = scons(project, "profiler", check=False)
    assert out.returncode != 0
    assert "specs/tiny.toml, entry tiles[0], key 'swizzle': unknown key" in out.stderr
    assert not (project / "generated").exists()


def test_unknown_workload_set_is_an_error(tmp_path):
    out = scons(copy_project(tmp_path), "WORKLOADS=resnet5", check=False)
    assert out.returncode != 0
    assert "resnet5: unknown workload set" in out.stderr


@pytest.fixture
def no_gpu_path(tmp_path):
    """A PATH on which nvidia-smi finds no GPU."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def test_profile_without_a_gpu_says_so_before_compiling(tmp_path, no_gpu_path):
    project = copy_project(tmp_path)
    out = scons(project, "profile", check=False, path=no_gpu_path)
    assert out.returncode != 0
    assert "scons profile needs a CUDA GPU" in out.stderr and "NVIDIA-SMI has failed" in out.stderr
    assert "nvcc" not in out.stdout and not (project / "generated").exists()


def test_best_kernels_h_without_results_names_the_missing_csv(tmp_path):
    project = copy_project(tmp_path)
    out = scons(project, "best_kernels.h", "RESULTS=nowhere", check=False)
    assert out.returncode != 0
    assert "nowhere/resnet50: no GPU has results for this set" in out.stderr
    assert "run scons profile on a GPU" in out.stderr
    (project / "nowhere" / "resnet50" / "nvidia_h200").mkdir(parents=True)
    (project / "nowhere" / "resnet50" / "nvidia_h200" / "other.csv").write_text("workload\n")
    out = scons(project, "best_kernels.h", "RESULTS=nowhere", check=False)
    assert out.returncode != 0
    assert "nowhere/resnet50/nvidia_h200/conv2d_fprop_f16_n256_h56_w56_c64_k256" in out.stderr
    assert "run scons profile on a GPU" in out.stderr



def test_compare_without_a_gpu_says_so(tmp_path, no_gpu_path):
    out = scons(copy_project(tmp_path), "compare", check=False, path=no_gpu_path)
    assert out.returncode != 0
    assert "scons compare needs a CUDA GPU" in out.stderr


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="PyTorch is installed here")
def test_compare_without_pytorch_says_so(tmp_path):
    out = scons(copy_project(tmp_path), "compare", check=False, path=f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    assert out.returncode != 0
    assert "scons compare needs PyTorch" in out.stderr

