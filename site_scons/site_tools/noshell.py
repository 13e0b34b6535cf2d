"""SCons tool: run every command as an argument vector, with no shell between.

SCons's POSIX default joins a command's words and runs ``sh -c`` on the result, where a path or a
flag holding ``$(...)``, a backtick, ``;``, ``|`` or a quote is shell syntax. Here each word is one
argument of the program, as it is:

  SPAWN, ESCAPE      a command line SCons substituted runs without a shell; a word from a user
                     enters it only as a node (a path) or a Literal (kernelgen.variables.Word),
                     which SCons neither substitutes nor splits, and ESCAPE leaves untouched
  env.ArgvAction(argv, shown=None)   an action that runs ``argv`` itself: no substitution at all,
                     for commands whose every word is known when SConstruct is read
"""

import shlex
import subprocess
import sys

import SCons.Action


def spawn(sh, escape, cmd, args, env):
    """SPAWN: run ``args`` (already one word each) directly; 127 when the program cannot start,
    as a shell would say."""
    try:
        return subprocess.run([str(a) for a in args], env=env).returncode
    except OSError as e:
        sys.stderr.write(f"scons: {args[0]}: {e.strerror}\n")
        return 127


def as_it_is(word):
    """ESCAPE: a literal word (a node, a Literal) is passed on unquoted, there being no shell."""
    return word


def argv_action(argv: list, shown: str = None):
    """An action running ``argv`` in the construction environment's ENV; shown as ``shown``, or
    as a shell would quote it (what a dry run prints can be pasted into one)."""
    argv = [str(a) for a in argv]

    def run(target, source, env):
        return spawn(None, None, argv[0], argv, env["ENV"])

    return SCons.Action.Action(run, strfunction=lambda target, source, env: shown or shlex.join(argv))


def generate(env):
    env["SPAWN"] = spawn
    env["ESCAPE"] = as_it_is
    env.AddMethod(lambda env, argv, shown=None: argv_action(argv, shown), "ArgvAction")


def exists(env):
    return True
