"""SCons tool: compile .cu files with nvcc through the stock Object builder, link with nvcc.

Construction variables:
  NVCC            the compiler (default: nvcc on PATH)
  NVCCFLAGS       flags for every .cu compile
  NVCC_GENCODE    -gencode flags (set from ARCH by kernelgen.arch)
  NVCC_SYSTEM_INCLUDES  directories passed with -isystem: external headers (CUTLASS) that
                  are versioned as a whole and not scanned header by header
  NVCC_HOST_FLAGS flags for the host compiler only (default -Xcompiler -fPIC: an object may be
                  linked into a shared library, the torch extension; device code is the same,
                  so they are no part of a kernel's hash)
  NVCCCOMSTR      one-line display of a compile
  DID_NOT_COMPILE (target, source) -> the path of a stub source it wrote: for env.KernelObject,
                  what a kernel's object is built from when nvcc refuses its source
  KERNELS_IN_UNIT (an override of env.KernelObject) the number of kernels its source includes
                  (kernelgen.units); where nvcc refuses such a source, each kernel is compiled
                  alone and the objects joined by PARTIAL_LINKCOM (ld -r)

env.KernelObject(target, source) compiles a generated kernel as Object does; where nvcc refuses
the source, it compiles DID_NOT_COMPILE's stub into the object instead (an operation that runs
nothing and says so), so that one descriptor of a searched space that CUTLASS rejects costs its
own rows, not the build.

NVCC, each of NVCCFLAGS and each of NVCC_SYSTEM_INCLUDES given as an SCons Literal (such as
kernelgen.variables.Word) reach nvcc as one word each, as they are: SCons neither substitutes
nor splits a Literal, and the noshell tool runs commands without a shell.
"""

import os

import SCons.Action
import SCons.Builder
import SCons.CacheDir
import SCons.Defaults
import SCons.Scanner.C
import SCons.Tool
import SCons.Util


def _isystem_flags(target, source, env, for_signature):
    """-isystem DIR for each of NVCC_SYSTEM_INCLUDES (SCons substitutes what this returns once
    more: a DIR given as a Literal stays as it is). No part of a signature (``$( $)``): where the
    headers are is not what they are, which the toolchain's CUTLASS version says (a dependency of
    every object), so that an object built in another clone or machine is the same one (CACHE=)."""
    flags = [flag for d in env.get("NVCC_SYSTEM_INCLUDES", []) for flag in ("-isystem", d)]
    return ["$(", *flags, "$)"] if flags else []


COMPILE = SCons.Action.Action("$NVCCCOM", "$NVCCCOMSTR")


PARTIAL_LINK = SCons.Action.Action("$PARTIAL_LINKCOM", None)


def _compile_kernel(target, source, env):
    """KernelObject's action (shown as $NVCCCOMSTR): the compile, else the stub's; for a unit
    (KERNELS_IN_UNIT: kernelgen.units), else each of its kernels alone."""
    status = COMPILE(target, source, env, show=0)
    if status == 0:
        return 0
    name = str(source[0]).rsplit("/", 1)[-1]
    if env.get("KERNELS_IN_UNIT"):
        return _compile_each_kernel(target, source, env, name)
    print(f"nvcc refused {name} (above); its object says so instead: every row of the kernel will be "
          "unsupported, 'did not compile'")
    return COMPILE(target, [env.File(env["DID_NOT_COMPILE"](target, source))], env, show=0)


def _compile_each_kernel(target, source, env, name):
    """A unit nvcc refused: each of its kernels compiled alone into BUILD/obj/<unit>.parts/ (one nvcc
    refuses, its stub), and those objects joined into the unit's by a partial link ($PARTIAL_LINKCOM),
    then removed. So a kernel CUTLASS rejects costs its own rows, not its unit's."""
    from kernelgen.units import unit_members

    members = unit_members(source[0].get_text_contents())
    print(f"nvcc refused {name} (above): its {len(members)} kernels are compiled one at a time")
    folder = os.path.dirname(source[0].get_abspath())
    parts_dir = target[0].get_abspath()[:-len(".o")] + ".parts"
    parts = [env.File(os.path.join(parts_dir, f"{m}.o")) for m in members]
    if "BUILD_RECORD" in env:
        env["BUILD_RECORD"].add([parts_dir] + [p.get_abspath() for p in parts])
    os.makedirs(parts_dir, exist_ok=True)
    alone = env.Override({"KERNELS_IN_UNIT": 0})
    try:
        for member, part in zip(members, parts):
            if _compile_kernel([part], [env.File(os.path.join(folder, f"{member}.cu"))], alone) != 0:
                return 1
        return PARTIAL_LINK(target, parts, env, show=0)
    finally:
        for part in parts:
            if os.path.lexists(part.get_abspath()):
                os.remove(part.get_abspath())
        if os.path.isdir(parts_dir) and not os.listdir(parts_dir):
            os.rmdir(parts_dir)


# What the KernelObject action contributes to an object's signature besides the compile's words:
# a name, where SCons would take _compile_kernel's bytecode, which differs from one Python version
# to the next (an object cached by a build under Python 3.11 would be no hit for one under 3.12).
KERNEL_COMPILE_SIGNATURE = b"kernelgen nvcc KernelObject: $NVCCCOM, or the did-not-compile stub"


def kernel_compile_action():
    """_compile_kernel as an action whose signature is the compile's words ($NVCCCOM) and
    KERNEL_COMPILE_SIGNATURE, the same under any Python."""
    action = SCons.Action.Action(_compile_kernel, "$NVCCCOMSTR", varlist=["NVCCCOM"])
    action.funccontents = bytearray(KERNEL_COMPILE_SIGNATURE)
    return action


def _place(node) -> str:
    """What tells ``node`` from the other targets of its action: its path from the folder they
    share (its name, where it is the only one or they share its folder)."""
    executor = node.get_executor()
    targets = executor.get_all_targets() if executor is not None else [node]
    paths = [target.get_internal_path() for target in targets]
    common = os.path.commonpath(paths) if len(set(paths)) > 1 else os.path.dirname(paths[0])
    return os.path.relpath(node.get_internal_path(), common)


class PlaceFreeCacheDir(SCons.CacheDir.CacheDir):
    """SCons's CacheDir, with a file's folder left out of its key: SCons adds the target's path to
    what it was built from (its children's contents and the action's words), so that the targets
    of one action differ; its place among them (``_place``) does that here, and an object cached
    by a build in one BUILD folder is a hit for a build in another, on this machine or the next
    (CACHE=)."""

    def cachepath(self, node) -> tuple:
        if not self.is_enabled():
            return None, None
        sigs = [child.get_cachedir_csig() for child in node.children()]
        sig = SCons.Util.hash_collect(sigs + [node.get_contents_sig(), _place(node)])
        folder = os.path.join(self.path, sig[:self.config["prefix_len"]].upper())
        return folder, os.path.join(folder, sig)


def generate(env):
    env.SetDefault(
        NVCC="nvcc",
        NVCCFLAGS=[],
        NVCC_GENCODE=[],
        NVCC_SYSTEM_INCLUDES=[],
        NVCC_HOST_FLAGS=["-Xcompiler", "-fPIC"],
        PARTIAL_LINKCOM="ld -r -o $TARGET $SOURCES",
        # what a C compiler tool would set for $_CPPINCFLAGS and $_CPPDEFFLAGS: the build loads none
        INCPREFIX="-I", INCSUFFIX="", CPPDEFPREFIX="-D", CPPDEFSUFFIX="",
    )
    env["_NVCC_ISYSTEM"] = _isystem_flags
    # Where the object and its source are is no part of the signature (``$( $)``) either: the
    # source's text and the headers it includes are, so that a CACHE= shared by builds in other
    # BUILD folders, on other machines, gives each the objects of the same code.
    env["NVCCCOM"] = ("$NVCC -c -o $( $TARGET $) $NVCCFLAGS $NVCC_GENCODE $NVCC_HOST_FLAGS $_CPPDEFFLAGS "
                      "$_CPPINCFLAGS $_NVCC_ISYSTEM $( $SOURCES $)")
    static_obj, _ = SCons.Tool.createObjBuilders(env)
    static_obj.add_action(".cu", SCons.Action.Action("$NVCCCOM", "$NVCCCOMSTR"))
    static_obj.add_emitter(".cu", SCons.Defaults.StaticObjectEmitter)
    SCons.Tool.SourceFileScanner.add_scanner(".cu", SCons.Scanner.C.CScanner())
    # The compile's words are part of the object's signature, as they are of a command action's: a
    # change of NVCCFLAGS (or of the compiler) compiles the kernels again.
    env["BUILDERS"]["KernelObject"] = SCons.Builder.Builder(
        action=kernel_compile_action(), suffix=".o", src_suffix=".cu", source_scanner=SCons.Scanner.C.CScanner())
    env["CACHEDIR_CLASS"] = PlaceFreeCacheDir
    # Link with nvcc too: it knows where the CUDA runtime lives.
    env["LINK"] = "$NVCC"
    env["LINKFLAGS"] = ["$NVCC_GENCODE"]


def exists(env):
    return env.Detect(env.get("NVCC", "nvcc"))
