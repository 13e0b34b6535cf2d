"""`scons library`: BUILD/sets/<set>/libbest_kernels.a holds the launcher and the chosen kernels'
profiler objects (a profiled build compiles only the launcher again), `scons list` shows the
space without a GPU and `scons -n profile` says what a profile would compile and measure
(on a copy of the project with the fake nvcc of tests/test_hostile_build.py)."""

import os
import re
import shutil
import subprocess
import sys

import pytest

import scons_runs
from kernelgen import outputs, units
from test_hostile_build import KERNELS, LAYERS, fake_build, make_fake_build, run, scons_args  # noqa: F401  (fixture)
from test_hostile_input import no_traceback

needs_ar = pytest.mark.skipif(shutil.which("ar") is None, reason="the library is made with ar")


def members(library) -> list:
    return subprocess.run(["ar", "t", str(library)], capture_output=True, text=True, check=True).stdout.split()


def compiled(toolchain, since: int) -> list:
    """The sources the fake nvcc compiled after its first ``since`` runs."""
    return [argv[-1].rsplit("/", 1)[-1] for argv in toolchain.argvs()[since:] if "-c" in argv]


@pytest.fixture(scope="module")
def profiled_once(tmp_path_factory):
    """A fake build (project, fake nvcc) with the set `pair` profiled into its BUILD, once for the
    module, and a copy of that folder as it was then."""
    folder = tmp_path_factory.mktemp("profiled")
    project, toolchain = make_fake_build(folder)
    run(project, "profile", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={folder / 'build'}")
    as_profiled = tmp_path_factory.mktemp("as-profiled") / folder.name
    shutil.copytree(folder, as_profiled, symlinks=True)
    return folder, as_profiled, project, toolchain


@pytest.fixture
def profiled(profiled_once):
    """(project, fake nvcc, BUILD) with the set `pair` profiled (fake GPU): both kernels run in 1.0
    ms, so the first by name is chosen for both layers. Each test gets the folder as the profile
    run left it, at the paths it ran with (restored from the copy: the commands and BUILD's
    signatures name them)."""
    folder, as_profiled, project, toolchain = profiled_once
    shutil.rmtree(folder)
    shutil.copytree(as_profiled, folder, symlinks=True)
    return project, toolchain, folder / "build"


@needs_ar
def test_a_profiled_build_links_its_objects_and_compiles_only_the_launcher(profiled):
    project, toolchain, build = profiled
    before = len(toolchain.argvs())
    out = run(project, "library", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={build}")
    assert compiled(toolchain, before) == ["best_kernels_launcher.cu"], out.stdout
    folder = build / "sets" / "pair"
    assert sorted(p.name for p in folder.iterdir()) == sorted([*outputs.HEADER_FILES, "libbest_kernels.a", "obj"])
    assert members(folder / "libbest_kernels.a") == ["best_kernels_launcher.o", f"{KERNELS[0]}.o"], \
        "the launcher and the chosen kernel, not the other one profiled"
    launcher = (folder / "best_kernels_launcher.cu").read_text()
    assert f"&kernelgen::make_{KERNELS[0]}," in launcher and KERNELS[1] not in launcher
    again = len(toolchain.argvs())
    run(project, "library", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={build}")
    assert compiled(toolchain, again) == [], "nothing to do the second time"
    # the kernel objects are the profiler's, compiled so that a shared library may link them
    kernel_compile = next(a for a in toolchain.argvs() if "-c" in a and a[-1].endswith(f"{KERNELS[0]}.cu"))
    assert kernel_compile[kernel_compile.index("-Xcompiler") + 1] == "-fPIC"


@needs_ar
def test_a_build_that_profiled_nothing_compiles_just_the_chosen_kernels(profiled, tmp_path):
    """A clean checkout with the committed results: `scons library` needs nvcc, not a GPU."""
    project, toolchain, _ = profiled
    before = len(toolchain.argvs())
    out = run(project, "library", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={tmp_path / 'other'}")
    assert sorted(compiled(toolchain, before)) == sorted(["best_kernels_launcher.cu", f"{KERNELS[0]}.cu"]), out.stdout
    assert re.search(rf"\[1/1\] nvcc {KERNELS[0]}\.cu", out.stdout), "its progress counts the kernels to compile"
    assert "profiler" not in {p.name for p in (tmp_path / "other").iterdir()}, "no profiler is built"
    out = run(project, "-c", "library", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={tmp_path / 'other'}")
    left = sorted(p.relative_to(tmp_path / "other").as_posix() for p in (tmp_path / "other").rglob("*") if p.is_file())
    assert left == [outputs.LOCK], f"scons -c removes all it built but the lock it holds while it cleans: {left}"


def test_a_set_without_results_has_no_library_and_says_why(fake_build, tmp_path):
    project, toolchain = fake_build
    out = run(project, "library", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={tmp_path / 'b'}", check=False)
    assert out.returncode != 0
    assert "no kernel of pair can be linked into a library: its header cannot be built" in out.stderr, out.stderr
    assert not (tmp_path / "b" / "sets" / "pair" / "libbest_kernels.a").exists()


def test_scons_list_shows_the_families_and_the_layers_each_kernel_serves_without_a_gpu(fake_build, tmp_path):
    project, toolchain = fake_build
    no_gpu = {"PATH": os.environ["PATH"]}  # the fake nvidia-smi is not on it
    out = scons_runs.run(scons_args("list", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={tmp_path / 'b'}"),
                         cwd=project, env=dict(os.environ, **no_gpu), timeout=120)
    no_traceback(out)
    assert out.returncode == 0, out.stderr
    assert "2 kernels in 1 families; the set pair has 2 layers" in out.stdout
    assert re.search(r"^tiny\s+2\s+80\s+conv2d_fprop\s+2 of 2$", out.stdout, re.MULTILINE), out.stdout
    narrowed = scons_runs.run(scons_args("list", "WORKLOADS=pair", f"KERNELS={KERNELS[1]}", f"BUILD={tmp_path / 'b'}"),
                              cwd=project, env=dict(os.environ, **no_gpu), timeout=120)
    assert narrowed.returncode == 0, narrowed.stderr
    assert f"{KERNELS[1]}  (tiny): 2 layer(s): conv2d_fprop_f16_n1_h8_w8_c8_k8" in narrowed.stdout
    assert KERNELS[0] not in narrowed.stdout
    assert not (tmp_path / "b" / "profiler").exists()


def test_a_dry_run_of_profile_says_what_it_would_compile_and_measure_without_a_gpu(profiled, tmp_path):
    project, toolchain, build = profiled
    no_gpu = dict(os.environ, PATH=os.environ["PATH"])
    args = ("-n", "profile", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}")
    fresh = scons_runs.run(scons_args(*args, f"BUILD={tmp_path / 'fresh'}", "RESULTS=nowhere"), cwd=project,
                           env=no_gpu, timeout=120)
    no_traceback(fresh)
    assert fresh.returncode == 0, fresh.stderr
    assert ("would compile 2 of the build's 2 kernels and measure 4 (workload, kernel) pair(s) of 2 workload(s)"
            in fresh.stdout), fresh.stdout
    assert not (tmp_path / "fresh").exists(), "a dry run writes nothing"
    done = scons_runs.run(scons_args(*args, f"BUILD={build}"), cwd=project, env=no_gpu, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "would compile 0 of the build's 2 kernels and measure 0 (workload, kernel) pair(s)" in done.stdout



def test_a_dry_run_narrowed_by_kernels_counts_the_pairs_of_the_layers_it_profiles(fake_build, tmp_path):
    """A layer that none of the KERNELS= kernels serves (C = 4: they copy 8 channels at a time) is
    left out of the build, and of what the dry run says it would measure: 2 layers' pairs, not 3."""
    project, toolchain = fake_build
    (project / "kernel_specs" / "workloads" / "three.txt").write_text(
        "\n".join(LAYERS + ["conv2d_fprop n=1 h=8 w=8 c=4 k=8 r=1 s=1"]) + "\n")
    out = scons_runs.run(scons_args("-n", "profile", "WORKLOADS=three", f"KERNELS={KERNELS[0]}", "TOP=all",
                                    f"NVCC={toolchain.nvcc}", f"BUILD={tmp_path / 'b'}", "RESULTS=nowhere"),
                         cwd=project, env=dict(os.environ, PATH=os.environ["PATH"]), timeout=120)
    no_traceback(out)
    assert out.returncode == 0, out.stderr
    assert "serves 2 of the 3 layers of three: the other 1 are left out of this build" in out.stdout, out.stdout
    assert "would compile 1 of the build's 1 kernels and measure 2 (workload, kernel) pair(s) of 2 workload(s)" \
        in out.stdout, out.stdout

@needs_ar
def test_a_clean_checkouts_library_compiles_its_chosen_kernels_in_one_unit_with_one_job(tmp_path):
    """Each layer of `pair` chooses another kernel (the fake GPU runs the second faster on the
    second layer); `scons -j1 library` in a BUILD of its own compiles both in one nvcc run."""
    project, toolchain = make_fake_build(tmp_path)
    second = "conv2d_fprop_f16_n1_h8_w8_c16_k8_r1_s1_pad0x0_str1x1_dil1x1"
    toolchain.behave({f"{second}/{KERNELS[1]}": 0.5})
    run(project, "profile", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={tmp_path / 'p'}")
    before = len(toolchain.argvs())
    out = run(project, "-j1", "library", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"BUILD={tmp_path / 'clean'}")
    unit = units.unit_name(KERNELS)
    assert sorted(compiled(toolchain, before)) == ["best_kernels_launcher.cu", f"{unit}.cu"], out.stdout
    assert f"[1/1] nvcc {unit}.cu (2 kernels)" in out.stdout
    assert members(tmp_path / "clean" / "sets" / "pair" / "libbest_kernels.a") == ["best_kernels_launcher.o", f"{unit}.o"]


@needs_ar
def test_a_chosen_kernel_whose_unit_holds_a_chosen_type_compiled_the_other_way_is_linked_from_its_own_object(tmp_path):
    """The first layer chooses an SM90 kernel of dependent launch (PDL), the second another kernel
    (OTHER) compiled in one unit with PDL's stream twin (STREAM, chosen by neither): the library
    links OTHER from an object of its own, not that unit, which would bring STREAM's code of PDL's
    type beside PDL's (commands.lone_kernels)."""
    from kernelgen.workloads import parse_workloads

    pdl = "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_void_f16_64x32x64_1x1x1_0_tnt_align8_warpspecialized_pingpong_epi_tma_pdl"
    stream = pdl.removesuffix("_pdl")
    other = "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_void_f16_128x64x64_1x1x1_0_tnt_align8_warpspecialized_pingpong_epi_tma"
    project, toolchain = make_fake_build(tmp_path)
    text = "gemm m=256 n=1000 k=2048\ngemm m=512 n=768 k=768\n"
    (project / "kernel_specs" / "workloads" / "twins.txt").write_text(text)
    first, second = (p.name for p in parse_workloads(text))
    toolchain.behave({f"{first}/{pdl}": 0.5, f"{second}/{other}": 0.5})
    common = ["WORKLOADS=twins", "SPECS=kernel_specs/families", f"KERNELS={pdl},{stream},{other}",
              f"NVCC={toolchain.nvcc}", f"BUILD={tmp_path / 'build'}"]
    run(project, "profile", *common)
    unit = units.unit_name([other, stream])
    assert (tmp_path / "build" / "obj" / f"{unit}.o").is_file(), "the profile compiled the stream kernels in one unit"
    before = len(toolchain.argvs())
    out = run(project, "library", *common)
    assert sorted(compiled(toolchain, before)) == sorted(["best_kernels_launcher.cu", f"{other}.cu"]), out.stdout
    assert sorted(members(tmp_path / "build" / "sets" / "twins" / "libbest_kernels.a")) == sorted(
        ["best_kernels_launcher.o", f"{other}.o", f"{pdl}.o"])


def test_the_header_build_names_a_choice_moved_off_its_fastest_row_for_its_type(tmp_path):
    """Each layer runs a PDL kernel or its stream twin fastest, by as much: the set keeps one way
    (the first by name, at equal totals), and the header build says which layer it moved and from what."""
    from kernelgen.workloads import parse_workloads

    pdl = "cutlass3x_sm90_tensorop_gemm_f16_f16_f32_void_f16_64x32x64_1x1x1_0_tnt_align8_warpspecialized_pingpong_epi_tma_pdl"
    stream = pdl.removesuffix("_pdl")
    project, toolchain = make_fake_build(tmp_path)
    text = "gemm m=256 n=1000 k=2048\ngemm m=512 n=768 k=768\n"
    (project / "kernel_specs" / "workloads" / "twins.txt").write_text(text)
    first, second = (p.name for p in parse_workloads(text))
    toolchain.behave({f"{first}/{pdl}": 0.5, f"{first}/{stream}": 0.6, f"{second}/{pdl}": 0.6, f"{second}/{stream}": 0.5})
    common = ["WORKLOADS=twins", "SPECS=kernel_specs/families", f"KERNELS={pdl},{stream}", f"NVCC={toolchain.nvcc}",
              f"BUILD={tmp_path / 'build'}"]
    run(project, "profile", *common)
    out = run(project, "best_kernels.h", *common)
    assert re.search(rf"^  {second} +0\.6000 ms  {pdl}$", out.stdout, re.MULTILINE), out.stdout
    assert "1 workload(s) chose a kernel other than their fastest row's" in out.stdout
    assert f"    {second}: not {stream}" in out.stdout
    header = (tmp_path / "build" / "sets" / "twins" / "best_kernels.h").read_text()
    assert f'"{stream}"' not in header and header.count(f'"{pdl}"') >= 2
