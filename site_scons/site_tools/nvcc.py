"""SCons tool: compile .cu files with nvcc through the stock Object builder, link with nvcc.

Construction variables:
  NVCC            the compiler (default: nvcc on PATH)
  NVCCFLAGS       flags for every .cu compile
  NVCC_GENCODE    -gencode flags (set from ARCH by kernelgen.arch)
  NVCC_SYSTEM_INCLUDES  directories passed with -isystem: external headers (CUTLASS) that
                  are versioned as a whole and not scanned header by header
  NVCCCOMSTR      one-line display of a compile

NVCC, each of NVCCFLAGS and each of NVCC_SYSTEM_INCLUDES given as an SCons Literal (such as
kernelgen.variables.Word) reach nvcc as one word each, as they are: SCons neither substitutes
nor splits a Literal, and the noshell tool runs commands without a shell.
"""

import SCons.Action
import SCons.Defaults
import SCons.Scanner.C
import SCons.Tool


def _isystem_flags(target, source, env, for_signature):
    """-isystem DIR for each of NVCC_SYSTEM_INCLUDES (SCons substitutes what this returns once
    more: a DIR given as a Literal stays as it is)."""
    return [flag for d in env.get("NVCC_SYSTEM_INCLUDES", []) for flag in ("-isystem", d)]


def generate(env):
    env.SetDefault(
        NVCC="nvcc",
        NVCCFLAGS=[],
        NVCC_GENCODE=[],
        NVCC_SYSTEM_INCLUDES=[],
    )
    env["_NVCC_ISYSTEM"] = _isystem_flags
    env["NVCCCOM"] = ("$NVCC -c -o $TARGET $NVCCFLAGS $NVCC_GENCODE $_CPPDEFFLAGS $_CPPINCFLAGS "
                      "$_NVCC_ISYSTEM $SOURCES")
    static_obj, _ = SCons.Tool.createObjBuilders(env)
    static_obj.add_action(".cu", SCons.Action.Action("$NVCCCOM", "$NVCCCOMSTR"))
    static_obj.add_emitter(".cu", SCons.Defaults.StaticObjectEmitter)
    SCons.Tool.SourceFileScanner.add_scanner(".cu", SCons.Scanner.C.CScanner())
    # Link with nvcc too: it knows where the CUDA runtime lives.
    env["LINK"] = "$NVCC"
    env["LINKFLAGS"] = ["$NVCC_GENCODE"]


def exists(env):
    return env.Detect(env.get("NVCC", "nvcc"))
