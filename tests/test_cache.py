"""CACHE=: a folder of compiled objects shared by builds. A second clean copy of the project, in
another folder and with CUTLASS reached by another path, compiles no kernel, nor does a BUILD
outside the project; another flag compiles
them again; what is taken from the cache is recorded, so `scons -c` removes it (fake nvcc of
tests/test_hostile_build.py)."""

import os

import pytest

from conftest import ROOT
from kernelgen import units
from kernelgen.variables import default_cutlass_root
from test_hostile_build import KERNELS, LAYERS, Toolchain, run
from test_scons_build import copy_project


def project_in(folder):
    folder.mkdir(parents=True)
    project = copy_project(folder)
    (project / "kernel_specs" / "workloads" / "pair.txt").write_text("\n".join(LAYERS) + "\n")
    return project


def compiled_kernels(toolchain, since: int) -> list:
    return sorted(a[-1].rsplit("/", 1)[-1] for a in toolchain.argvs()[since:] if "-c" in a and "/kernels/" in a[-1])


def test_a_second_clone_takes_every_kernel_from_the_cache_and_another_flag_compiles_again(tmp_path):
    toolchain = Toolchain(tmp_path / "toolchain")
    cache = tmp_path / "shared-cache"
    first = project_in(tmp_path / "one")
    run(first, "profiler", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"CACHE={cache}")
    assert compiled_kernels(toolchain, 0) == sorted(f"{k}.cu" for k in KERNELS)
    assert cache.is_dir() and any(cache.rglob("*")), "the objects went into the cache"

    second = project_in(tmp_path / "two")
    (tmp_path / "cutlass-elsewhere").symlink_to(default_cutlass_root())  # where CUTLASS lives is no part of it
    before = len(toolchain.argvs())
    out = run(second, "profiler", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"CACHE={cache}",
              f"CUTLASS={tmp_path / 'cutlass-elsewhere'}")
    assert compiled_kernels(toolchain, before) == [], out.stdout
    assert out.stdout.count("Retrieved `") >= len(KERNELS) + 1, "the kernels and the profiler"
    objects = [second / "generated" / "obj" / f"{k}.o" for k in KERNELS]
    assert all(o.is_file() for o in objects)

    before = len(toolchain.argvs())
    out = run(second, "profiler", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"CACHE={cache}",
              f"BUILD={tmp_path / 'another-build'}")
    assert compiled_kernels(toolchain, before) == [], "a BUILD elsewhere takes the same objects: " + out.stdout
    assert (tmp_path / "another-build" / "obj" / f"{KERNELS[0]}.o").is_file()

    before = len(toolchain.argvs())
    run(second, "profiler", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"CACHE={cache}", "NVCCFLAGS=-O2 -std=c++17")
    assert compiled_kernels(toolchain, before) == sorted(f"{k}.cu" for k in KERNELS), "another flag: another object"

    run(second, "-c", "profiler", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"CACHE={cache}")
    assert not any(o.exists() for o in objects), "what came from the cache is the build's, and scons -c removes it"
    assert any(cache.rglob("*")), "scons -c never touches the cache"


@pytest.mark.parametrize("value, message", [
    ("{file}", "is a file, not a folder"),
    ("{build}", "is BUILD, inside it or above it"),
    ("{build}/cache", "is BUILD, inside it or above it"),
], ids=["a file", "BUILD", "inside BUILD"])
def test_a_cache_that_is_no_folder_of_its_own_is_refused(tmp_path, value, message):
    project = project_in(tmp_path / "p")
    (tmp_path / "file").write_text("")
    build = tmp_path / "b"
    given = value.format(file=tmp_path / "file", build=build)
    out = run(project, "profiler", "WORKLOADS=pair", f"BUILD={build}", f"CACHE={given}", check=False)
    assert out.returncode != 0 and f"CACHE={given} {message}" in out.stderr, out.stderr
    assert not build.exists()


def test_a_cache_that_cannot_be_written_is_named_and_the_build_goes_on_without_it(tmp_path):
    toolchain = Toolchain(tmp_path / "toolchain")
    project = project_in(tmp_path / "p")
    (tmp_path / "file").write_text("")
    out = run(project, "profiler", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"CACHE={tmp_path / 'file' / 'cache'}")
    assert f"scons: CACHE={tmp_path / 'file' / 'cache'}: cannot write there ({tmp_path / 'file'} is no folder); " \
           "building without the cache" in out.stdout, out.stdout
    assert compiled_kernels(toolchain, 0) == sorted(f"{k}.cu" for k in KERNELS), "compiled, as without CACHE="
    assert (tmp_path / "file").read_text() == "" and "Retrieved `" not in out.stdout


def _nvcc_tool():
    import importlib.util

    spec = importlib.util.spec_from_file_location("kernelgen_nvcc_tool", ROOT / "site_scons" / "site_tools" / "nvcc.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_a_kernel_objects_signature_is_the_compiles_words_not_the_bytecode_of_the_python_that_built_it(monkeypatch):
    """An object cached by a build under one Python is a hit for a build under another (the CACHE=
    of a cluster's machines): the KernelObject action's part of the signature is NVCCCOM's words, not
    the bytecode of the function that runs nvcc, which differs between Python versions."""
    import SCons.Environment

    tool = _nvcc_tool()

    def contents(flags):
        env = SCons.Environment.Environment(tools=[])
        tool.generate(env)
        env.Replace(NVCC="nvcc", NVCCFLAGS=flags)
        return bytes(env["BUILDERS"]["KernelObject"].action.get_contents([env.File("k.o")], [env.File("k.cu")], env))

    first = contents(["-O3"])
    assert tool._compile_kernel.__code__.co_code not in first
    monkeypatch.setattr(tool, "_compile_kernel", lambda target, source, env: 0 if target else 1)  # other bytecode
    assert contents(["-O3"]) == first
    assert contents(["-O2"]) != first, "the compile's words are part of it"


def test_an_object_is_keyed_in_the_cache_by_its_place_among_its_actions_targets_not_its_folder():
    """PlaceFreeCacheDir's key takes a target's name where it is its action's only one, and its
    path from their shared folder where an action writes files of one name in two folders."""
    import SCons.Environment

    tool = _nvcc_tool()
    env = SCons.Environment.Environment(tools=[])
    one, = env.Command("build-one/obj/k.o", "k.cu", "cp $SOURCE $TARGET")
    other, = env.Command("build-two/obj/k.o", "k.cu", "cp $SOURCE $TARGET")
    pair = env.Command(["out/a/x.txt", "out/b/x.txt"], "k.cu", "touch $TARGETS")
    assert tool._place(one) == tool._place(other) == "k.o"
    assert sorted(tool._place(t) for t in pair) == ["a/x.txt", "b/x.txt"]


def test_a_unit_compiled_by_one_clone_is_taken_from_the_cache_by_the_next(tmp_path):
    toolchain = Toolchain(tmp_path / "toolchain")
    cache = tmp_path / "shared-cache"
    run(project_in(tmp_path / "one"), "-j1", "profiler", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"CACHE={cache}")
    assert [n for n in compiled_kernels(toolchain, 0) if n.startswith("unit-")] == [f"{units.unit_name(KERNELS)}.cu"]
    before = len(toolchain.argvs())
    second = project_in(tmp_path / "two")
    out = run(second, "-j1", "profiler", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"CACHE={cache}")
    assert compiled_kernels(toolchain, before) == [], out.stdout
    assert (second / "generated" / "obj" / f"{units.unit_name(KERNELS)}.o").is_file()
