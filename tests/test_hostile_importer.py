"""Hostile input to scons workloads, to workload values, family specs and kernel lists: each case
a row. An existing set file is written again only when asked; a factory is the user's code, and
whatever it raises or calls (exit, breakpoint, a shell) ends in one line naming MODEL=, never in
exit status 0 without a file; a number of thousands of digits is refused before int() reads it;
a megabyte-long token is echoed by its ends; a kernel list names a file and holds no control
character. Most rows run without PyTorch, on a stand-in for the little of torch the importer
touches; the same rows with PyTorch itself skip where it is not installed."""

import os
import re
import subprocess
import sys
import types

import pytest

from conftest import ROOT, sm80_family
from kernelgen import commands, importer
from kernelgen.errors import SpecError, WorkloadError
from kernelgen.importer import ModelError, parse_request
from kernelgen.specs import globs_of, load_family
from kernelgen.workloads import load_workloads, parse_workloads
from test_hostile_input import refused
from test_importer import NETWORK, fake_record, scons

SETS = ROOT / "kernel_specs" / "workloads"
LAYER = "h=8 w=8 c=8 k=8 r=1 s=1"
X = "x" * 900_000  # a token of 900 KB


def short(message: str) -> str:
    assert len(message) < 400, f"a message of {len(message)} characters"
    return message


# ---- an existing set file is written again only with REPLACE=1 --------------------------------

def set_file(tmp):
    (tmp / "sets").mkdir(exist_ok=True)
    (tmp / "sets" / "tinynet_b8.txt").write_text("gemm m=1 n=2 k=3\n")


def measured(tmp):
    set_file(tmp)
    (tmp / "results" / "tinynet_b8" / "nvidia_h200").mkdir(parents=True)
    (tmp / "results" / "tinynet_b8" / "nvidia_h200" / "gemm_f16_m1_n2_k3.csv").write_text("measured\n")


def empty_results(tmp):
    set_file(tmp)
    (tmp / "results" / "tinynet_b8" / "nvidia_h200").mkdir(parents=True)


def dangling_link(tmp):
    (tmp / "sets").mkdir()
    (tmp / "sets" / "tinynet_b8.txt").symlink_to(tmp / "nowhere.txt")


def folder(tmp):
    (tmp / "sets" / "tinynet_b8.txt").mkdir(parents=True)


DESTINATIONS = [
    # (case, what is there, --replace, refusal regex or None where the file is written)
    ("R1 exists", set_file, False,
     r"^NAME=tinynet_b8: \S*/sets/tinynet_b8\.txt already exists; give REPLACE=1 to replace it, or choose "
     r"another NAME=$"),
    ("R1 exists with results", measured, False,
     r"tinynet_b8\.txt already exists, and \S*/results/tinynet_b8/ holds results measured for the workloads it "
     r"lists; give REPLACE=1 to replace it"),
    ("a results folder without a CSV", empty_results, False, r"tinynet_b8\.txt already exists; give REPLACE=1"),
    ("a link to nothing", dangling_link, False, r"tinynet_b8\.txt already exists; give REPLACE=1"),
    ("a folder, even with REPLACE=1", folder, True,
     r"tinynet_b8\.txt is a directory, not a workload file; choose another NAME=$"),
    ("exists, REPLACE=1", set_file, True, None),
    ("exists with results, REPLACE=1", measured, True, None),
    ("a link to nothing, REPLACE=1", dangling_link, True, None),
]


def snapshot(tmp):
    return {p: (p.read_bytes() if p.is_file() else None) for p in sorted(tmp.rglob("*"))}


@pytest.mark.parametrize("make, replace, match", [c[1:] for c in DESTINATIONS], ids=[c[0] for c in DESTINATIONS])
def test_an_existing_set_file_is_written_again_only_with_replace(tmp_path, monkeypatch, capsys, make, replace, match):
    make(tmp_path)
    before = snapshot(tmp_path)
    monkeypatch.setattr(importer, "torch_versions", lambda: "PyTorch 2.11.0")
    recorded = fake_record(calls=NETWORK) if match is None else fake_record(error=AssertionError("model built"))
    monkeypatch.setattr(importer, "record_model", recorded)
    argv = ["--model", "tinynet", "--batch", "8", "--input", "3x32x32", "--sets-dir", str(tmp_path / "sets"),
            "--results", str(tmp_path / "results")] + (["--replace"] if replace else [])
    code = importer.main(argv)
    err = capsys.readouterr().err
    if match is None:
        assert code == 0 and err == ""
        _, path, problems = load_workloads("tinynet_b8", tmp_path / "sets")
        assert [p.count for p in problems] == [1, 3, 3, 2, 1, 1]
        assert path.is_file() and not path.is_symlink(), "a link is replaced by the file, not written through"
        return
    assert code == 1 and err.count("\n") == 1 and err.startswith("scons workloads: "), err
    assert re.search(match, err.removeprefix("scons workloads: ").rstrip("\n")), err
    assert snapshot(tmp_path) == before, "nothing written, the model never built"


def test_a_committed_set_with_results_is_not_replaced_by_accident():
    """`scons workloads ... NAME=resnet50` would replace the seed set its committed results are for."""
    message = refused(lambda: importer.destination(parse_request("resnet50", 1, name="resnet50"), SETS,
                                                   ROOT / "profile_results"), ModelError,
                      r"kernel_specs/workloads/resnet50\.txt already exists, and \S*profile_results/resnet50/ holds "
                      r"results measured for the workloads it lists; give REPLACE=1 to replace it")
    assert message.startswith("NAME=resnet50: ")


REPLACE_VALUES = [
    ("1", True), ("0", False), ("", False), (" 1 ", True), (True, True), (False, False),
    ("yes", r"REPLACE='yes': expected 1 \(write NAME\.txt again\) or 0$"),
    ("2", r"REPLACE='2': expected 1"),
    ("1" * 5000, r"REPLACE='1{60}\.\.\. \(5000 characters\) \.\.\.1{20}': expected 1"),
]


@pytest.mark.parametrize("value, expected", REPLACE_VALUES, ids=[repr(v)[:12] for v, _ in REPLACE_VALUES])
def test_replace_is_1_or_0(value, expected):
    if isinstance(expected, bool):
        assert parse_request("resnet50", 1, replace=value).replace is expected
    else:
        refused(lambda: parse_request("resnet50", 1, replace=value), ModelError, expected)


@pytest.mark.parametrize("env, flag", [({"REPLACE": "1"}, True), ({"REPLACE": "0"}, False), ({}, False)])
def test_scons_workloads_passes_replace_to_the_importer(monkeypatch, env, flag):
    monkeypatch.setattr(commands.importlib.util, "find_spec", lambda name: object())  # as if PyTorch were here
    variables = {"MODEL": "nets.zoo:make_net", "BATCH": "1", "INPUT": "3x224x224", "DTYPE": "f16", "NAME": "", **env}
    words = [str(w) for w in commands.workloads_command(variables, ["workloads"])]
    assert (words[-1] == "--replace") is flag and words[words.index("--name") + 1] == "make_net_b1"


# ---- a factory is the user's code ---------------------------------------------------------------

# The little of torch the importer touches, for the rows that run without PyTorch. Also written out
# as a package for the rows that run the importer's process.
STAND_IN = '''
import contextlib
import types

__version__ = "0.0"
float32 = "float32"


class Module:
    """What the importer asks of an nn.Module: eval(), to(), parameters(), a forward pass."""

    def eval(self):
        return self

    def to(self, device):
        return self

    def parameters(self):
        return iter(())

    def __call__(self, x):
        return self.forward(x)


class TorchFunctionMode:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


nn = types.SimpleNamespace(Module=Module, functional=types.SimpleNamespace(
    **{op: object() for op in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                               "conv_transpose3d", "linear")}))
overrides = types.SimpleNamespace(TorchFunctionMode=TorchFunctionMode)
no_grad = contextlib.nullcontext


def device(name):
    return contextlib.nullcontext()


def zeros(shape, dtype, device):
    return ("zeros", shape, device)
'''

NETS = "kernelgen_hostile_nets"
EXITS_ON_IMPORT = "kernelgen_hostile_exits_on_import"
NETS_SOURCE = '''
import collections
import sys
from os import system as run_shell
from pathlib import Path

from torch import nn

CALLED = Path(__file__).with_name("called")  # what is refused unseen never runs


class Weird(Exception):
    def __str__(self):
        raise SystemExit("from __str__")


class ExitsOnForward(nn.Module):
    def forward(self, x):
        sys.exit(0)


class DebugsOnForward(nn.Module):
    def forward(self, x):
        breakpoint()


class Plain:
    def __init__(self):
        CALLED.touch()


def exits():
    sys.exit(0)


def quits():
    raise SystemExit


def interrupted():
    raise KeyboardInterrupt


def debugs():
    breakpoint()
    return nn.Module()


def huge():
    raise RuntimeError("x" * 900_000)


def weird():
    raise Weird()


def exits_on_forward():
    return ExitsOnForward()


def debugs_on_forward():
    return DebugsOnForward()


def returns_a_string():
    return "resnet50"


show = print
OrderedNet = collections.OrderedDict
'''

FACTORIES = [
    # (case, MODEL=, what the one line says after "MODEL=...: ")
    ("F1 sys.exit(0)", f"{NETS}:exits", r"the factory raised SystemExit: 0$"),
    ("F1 SystemExit", f"{NETS}:quits", r"the factory raised SystemExit$"),
    ("F1 Ctrl-C", f"{NETS}:interrupted", r"the factory raised KeyboardInterrupt$"),
    ("F2 breakpoint", f"{NETS}:debugs",
     r"the factory raised RuntimeError: breakpoint\(\) called; scons workloads runs the model without a debugger$"),
    ("F1 exit at import", f"{EXITS_ON_IMPORT}:make", rf"module '{EXITS_ON_IMPORT}' does not import: SystemExit: 3$"),
    ("F1 forward exits", f"{NETS}:exits_on_forward", r"the forward pass on a 2x3x8x8 input \(BATCH x INPUT=\) failed: SystemExit: 0$"),
    ("F2 forward breakpoint", f"{NETS}:debugs_on_forward", r"the forward pass on a 2x3x8x8 input \(BATCH x INPUT=\) failed: "
                                                            r"RuntimeError: breakpoint\(\) called"),
    ("a 900 KB message", f"{NETS}:huge", r"the factory raised RuntimeError: x{60}\.\.\. \(900000 characters\) "
                                         r"\.\.\.x{20}$"),
    ("its __str__ exits", f"{NETS}:weird", r"the factory raised Weird$"),
    ("F3 os.system imported", f"{NETS}:run_shell",
     rf"module '{NETS}': 'run_shell' is (posix|nt)\.system of Python's standard library, not a model factory$"),
    ("F3 print imported", f"{NETS}:show", r"'show' is builtins\.print of Python's standard library"),
    ("F3 a standard class", f"{NETS}:OrderedNet", r"'OrderedNet' is collections\.OrderedDict of Python's standard"),
    ("F3 a class, no Module", f"{NETS}:Plain",
     r"'Plain' is a class that is not a torch\.nn\.Module subclass \(expected a callable returning an nn\.Module\)$"),
    ("not a Module", f"{NETS}:returns_a_string", r"the factory returned str, not a torch\.nn\.Module$"),
]


@pytest.fixture(params=["stand-in", "PyTorch"])
def nets(request, tmp_path, monkeypatch):
    """A folder on sys.path holding the factories of NETS_SOURCE; torch is the stand-in or PyTorch."""
    if request.param == "PyTorch":
        pytest.importorskip("torch", reason="the rows with PyTorch itself need PyTorch (not installed here)")
    else:
        torch = types.ModuleType("torch")
        exec(STAND_IN, torch.__dict__)
        monkeypatch.setitem(sys.modules, "torch", torch)
    path = tmp_path / "nets"
    path.mkdir()
    (path / f"{NETS}.py").write_text(NETS_SOURCE)
    (path / f"{EXITS_ON_IMPORT}.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(path))
    for name in (NETS, EXITS_ON_IMPORT):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return path


def run_importer(model, sets_dir):
    return importer.main(["--model", model, "--batch", "2", "--input", "3x8x8", "--sets-dir", str(sets_dir)])


@pytest.mark.parametrize("model, match", [c[1:] for c in FACTORIES], ids=[c[0] for c in FACTORIES])
def test_whatever_a_factory_raises_or_calls_is_one_line_naming_model(nets, capsys, model, match):
    hook = sys.breakpointhook
    assert run_importer(model, nets / "sets") == 1
    err = capsys.readouterr().err
    assert err.startswith(f"scons workloads: MODEL={model}: ") and err.count("\n") == 1, err
    assert re.search(match, short(err.rstrip("\n"))), err
    assert not (nets / "sets").exists(), "no file"
    assert not (nets / "called").exists(), "what is refused unseen is never called"
    assert sys.breakpointhook is hook, "breakpoint() works again once the model is recorded"


NOT_YOURS = [
    # MODEL= naming Python's own functions or kernelgen's: refused before anything is imported
    ("builtins:breakpoint", "'builtins' is Python's standard library"),
    ("builtins:exit", "'builtins' is Python's standard library"),
    ("sys:exit", "'sys' is Python's standard library"),
    ("os:system", "'os' is Python's standard library"),
    ("os.path:join", r"'os\.path' is Python's standard library"),
    ("subprocess:run", "'subprocess' is Python's standard library"),
    ("pdb:set_trace", "'pdb' is Python's standard library"),
    ("__main__:main", "'__main__' is kernelgen itself"),
    ("kernelgen.importer:main", r"'kernelgen\.importer' is kernelgen itself"),
]


@pytest.mark.parametrize("model, match", NOT_YOURS, ids=[c[0] for c in NOT_YOURS])
def test_a_factory_of_python_or_kernelgen_is_refused_unimported(tmp_path, capsys, model, match):
    refused(lambda: parse_request(model, 1), ModelError,
            rf"^MODEL={re.escape(model)}: {match}, not a module of yours; name a torchvision model")
    assert run_importer(model, tmp_path / "sets") == 1
    assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "sets").exists()


@pytest.mark.parametrize("model", ["builtins:breakpoint", "sys:exit"])
def test_scons_workloads_refuses_them_before_anything_else(model):
    before = sorted(p.name for p in SETS.iterdir())
    out = scons("workloads", f"MODEL={model}", "CUTLASS=/nonexistent")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"scons: MODEL={model}: '{model.partition(':')[0]}' is Python's standard library")
    assert sorted(p.name for p in SETS.iterdir()) == before


EXITING = [c for c in FACTORIES if c[0].startswith(("F1", "F2"))]  # exit, Ctrl-C, breakpoint()


@pytest.mark.parametrize("model, match", [c[1:] for c in EXITING], ids=[c[0] for c in EXITING])
def test_the_importers_process_never_exits_0_without_the_file(tmp_path, model, match):
    """The importer's own process, as scons runs it, PYTHONBREAKPOINT unset (stdin closed, so that
    a debugger's prompt could not wait for input)."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(STAND_IN)
    (tmp_path / f"{NETS}.py").write_text(NETS_SOURCE)
    (tmp_path / f"{EXITS_ON_IMPORT}.py").write_text("import sys\nsys.exit(3)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONBREAKPOINT"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), str(ROOT / "site_scons"), env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-m", "kernelgen.importer", "--model", model, "--batch", "2", "--input",
                          "3x8x8", "--sets-dir", str(tmp_path / "sets")], cwd=tmp_path, env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert re.search(match, out.stderr.rstrip("\n")), out.stderr
    assert not (tmp_path / "sets").exists()


# ---- numbers of thousands of digits ------------------------------------------------------------

WORKLOAD_NUMBERS = [
    ("N1 5000 digits", f"conv2d_fprop n={'1' * 5000} {LAYER}",
     r"'n' must be at most 2147483647 \(a C\+\+ int\), got 1{60}\.\.\. \(5000 characters\) \.\.\.1{20}$"),
    ("N1 5000 digits, negative", f"conv2d_fprop n=1 {LAYER} pad=-{'1' * 5000}",
     r"'pad' must not be negative, got -1{59}\.\.\. \(5001 characters\) \.\.\.1{20}$"),
    ("N1 count of 4301 digits", f"gemm m=1 n=8 k=8 count={'9' * 4301}", "'count' must be at most 2147483647"),
    ("N1 gemm of 4301 digits", f"gemm m=+{'9' * 4301} n=8 k=8", "'m' must be at most 2147483647"),
    ("11 digits", f"conv2d_fprop n=00099999999999 {LAYER}", "'n' must be at most 2147483647 \\(a C\\+\\+ int\\), "
                                                            "got 00099999999999$"),
    ("INT_MAX + 1 after zeros", "gemm m=0002147483648 n=8 k=8", "'m' must be at most 2147483647 \\(a C\\+\\+ int\\), "
                                                                "got 2147483648$"),
]


@pytest.mark.parametrize("line, match", [c[1:] for c in WORKLOAD_NUMBERS], ids=[c[0] for c in WORKLOAD_NUMBERS])
def test_a_workload_number_of_thousands_of_digits_names_file_and_line(line, match):
    message = refused(lambda: parse_workloads(f"# header\n{line}\n", "layers.txt"), WorkloadError, match)
    assert short(message).startswith("layers.txt:2: ")


def test_leading_zeros_do_not_count_as_digits():
    padded, = parse_workloads(f"conv2d_fprop n={'0' * 5000}8 {LAYER} pad=-0\n")
    assert padded == parse_workloads(f"conv2d_fprop n=8 {LAYER} pad=0\n")[0] and padded.n == 8


def stages(value):
    return sm80_family(f"threadblock = [128, 128, 32], warps = [2, 2, 1], stages = {value}")


SPEC_NUMBERS = [
    ("N2 5000 digits", stages("1" * 5000),
     r"family\.toml: not valid TOML: an integer literal of more than 4300 digits \(TOML's are 64-bit\)$"),
    ("N2 hexadecimal of 100000 digits", stages("0x" + "f" * 100000),
     r"family\.toml, entry tiles\[0\], key 'stages': <an integer of 400000 bits> is outside \[2, 10\]$"),
    ("N2 4000 digits", stages("9" * 4000), r"key 'stages': <an integer of 13288 bits> is outside \[2, 10\]$"),
    ("N2 over 64 bits", stages("99999999999999999999"), r"key 'stages': <an integer of 67 bits> is outside"),
    ("int64 max", stages("9223372036854775807"), r"key 'stages': 9223372036854775807 is outside \[2, 10\]$"),
    ("in a list", stages("3").replace("alignments = [8]", "alignments = [0x" + "f" * 100000 + "]"),
     r"key 'alignments': <an integer of 400000 bits> is outside \[1, 16\]$"),
]


@pytest.mark.parametrize("text, match", [c[1:] for c in SPEC_NUMBERS], ids=[c[0] for c in SPEC_NUMBERS])
def test_a_spec_integer_of_thousands_of_digits_is_one_line_naming_the_file(tmp_path, text, match):
    path = tmp_path / "family.toml"
    path.write_text(text)
    assert short(refused(lambda: load_family(path), SpecError, match)).startswith(str(path))


REQUEST_NUMBERS = [
    ("N3 BATCH of 5000 digits", dict(batch="1" * 5000),
     r"^BATCH='1{60}\.\.\. \(5000 characters\) \.\.\.1{20}': must be at most 2147483647 \(a C\+\+ int\)$"),
    ("BATCH INT_MAX + 1", dict(batch="2147483648"), r"^BATCH='2147483648': must be at most 2147483647"),
    ("BATCH of 5000 zeros", dict(batch="0" * 5000), r"^BATCH='0{60}\.\.\. .*': expected a positive integer$"),
    ("N3 INPUT of 5000 digits", dict(input=f"3x{'2' * 5000}x224"),
     r"^INPUT='3x2{58}\.\.\. \(5006 characters\) \.\.\.2{16}x224': C, H and W must each be at most 2147483647"),
    ("INPUT INT_MAX + 1", dict(input="3x224x2147483648"), r"^INPUT='3x224x2147483648': C, H and W must each be at"),
    ("INPUT of zeros", dict(input=f"3x{'0' * 5000}x224"), r"^INPUT='3x0{58}.*': expected CxHxW, three positive"),
    ("a video's INPUT INT_MAX + 1", dict(input="3x2147483648x112x112"),
     r"^INPUT='3x2147483648x112x112': C, T, H and W must each be at most 2147483647"),
    ("a sequence's INPUT INT_MAX + 1", dict(input="80x2147483648"), r"^INPUT='80x2147483648': C and L must each be at most"),
]


@pytest.mark.parametrize("change, match", [c[1:] for c in REQUEST_NUMBERS], ids=[c[0] for c in REQUEST_NUMBERS])
def test_batch_and_input_of_thousands_of_digits_are_refused_in_one_line(tmp_path, capsys, change, match):
    args = dict(model="resnet50", batch="1", input="3x224x224")
    args.update(change)
    message = short(refused(lambda: parse_request(**args), ModelError, match))
    argv = [f"--{k}={v}" for k, v in args.items()] + ["--sets-dir", str(tmp_path)]
    assert importer.main(argv) == 1
    assert capsys.readouterr().err == f"scons workloads: {message}\n" and list(tmp_path.iterdir()) == []


def test_batch_and_input_with_leading_zeros_are_their_numbers():
    request = parse_request("resnet50", "0" * 5000 + "7", "03x0224x224")
    assert (request.batch, request.input, request.name) == (7, (3, 224, 224), "resnet50_b7")


# ---- a 900 KB token is echoed by its ends --------------------------------------------------------

def kernel_list_at(path):
    return lambda tmp: globs_of(f"@{tmp / path}")


def spec_file(text):
    def load(tmp):
        (tmp / "family.toml").write_text(text)
        return load_family(tmp / "family.toml")
    return load


TOKENS = [
    # (case, call(tmp), error, regex)
    ("L1 an operation", lambda t: parse_workloads(f"{X} n=1\n", "layers.txt"), WorkloadError,
     r"^layers\.txt:1: unknown operation 'x{60}\.\.\. \(900000 characters\) \.\.\.x{20}' \(known: "),
    ("L1 a value", lambda t: parse_workloads(f"conv2d_fprop n={X} {LAYER}\n", "layers.txt"), WorkloadError,
     r"^layers\.txt:1: 'n=x+\.\.\. \(900004 characters\) \.\.\.x+' is not an integer$"),
    ("a dtype", lambda t: parse_workloads(f"gemm m=1 n=8 k=8 dtype={X}\n", "layers.txt"), WorkloadError,
     r"dtype 'x+\.\.\. \(900002 characters\) \.\.\.x+' is not one of"),
    ("L1 a key", lambda t: parse_workloads(f"gemm {X}=1 m=1 n=8 k=8\n", "layers.txt"), WorkloadError,
     r"unknown key 'x+\.\.\. \(900002 characters\) \.\.\.x+' \(allowed: count, dtype, epilogue, k, m, n\)$"),
    ("not key=value", lambda t: parse_workloads(f"gemm m=1 {X}\n", "layers.txt"), WorkloadError,
     r"expected key=value, got 'x{60}\.\.\. \(900000 characters\) \.\.\.x{20}'$"),
    ("L1 a spec key with spaces", spec_file('kind = "conv2d_fprop_2x"\n"' + "a b " * 225_000 + '" = 1\n'), SpecError,
     r"family\.toml, key 'a b a .*\.\.\. \(900000 characters\) \.\.\..*a b ': unknown key \(allowed: "),
    ("L1 a spec value", spec_file(f'kind = "conv2d_fprop_2x"\nelement = "{X}"\n'), SpecError,
     r"key 'element': 'x+\.\.\.x+' is not one of"),
    ("KERNELS= of commas", lambda t: globs_of(" ," * 450_000), SpecError,
     r"^KERNELS=' , , .*\.\.\. \(900000 characters\) \.\.\..* ,': names no kernel glob"),
    ("a kernel list's name", lambda t: globs_of(f"@{X}"), SpecError,
     r"^x{60}\.\.\. \(900000 characters\) \.\.\.x{20}: cannot read the kernel list: File name too long$"),
    ("MODEL= with spaces", lambda t: parse_request("my net " * 100_000, 1), ModelError,
     r"^MODEL='my net my .*\.\.\. \(699999 characters\) \.\.\..*my net': not a model name"),
    ("a set name with spaces", lambda t: load_workloads("a b " * 200_000, t), WorkloadError,
     r"the set name 'a b .*\.\.\. \(800000 characters\) \.\.\..*' is not a plain name"),
]


@pytest.mark.parametrize("call, error, match", [c[1:] for c in TOKENS], ids=[c[0] for c in TOKENS])
def test_a_900_kb_token_is_echoed_by_its_ends(tmp_path, call, error, match):
    short(refused(lambda: call(tmp_path), error, match))


# ---- kernel lists: KERNELS=@FILE ---------------------------------------------------------------

NO_FILE = r"^KERNELS=@: names no file \(KERNELS=@FILE reads the globs FILE lists, one a line\)$"
KERNEL_LISTS = [
    # (case, KERNELS=, what list.txt holds, regex)
    ("K1 @ alone", "@", "", NO_FILE),
    ("K1 @ after a glob", "cutlass*,@", "", NO_FILE),
    ("K1 @ and spaces", "cutlass*, @  ,", "", NO_FILE),
    ("K2 NUL", "@{tmp}/list.txt", "cutlass*\nsm90\x00*\n",
     r"list\.txt: line 2: control character '\\x00' in the kernel list$"),
    ("NUL in a comment", "@{tmp}/list.txt", "cutlass*  # \x00\n", r"list\.txt: line 1: control character '\\x00'"),
    ("escape sequence", "@{tmp}/list.txt", "\x1b[2Jcutlass*\n", r"list\.txt: line 1: control character '\\x1b'"),
    ("line separator", "@{tmp}/list.txt", "a*\u2028b*\n", r"list\.txt: line 1: control character '\\u2028'"),
    ("carriage return inside", "@{tmp}/list.txt", "a*\rb*\n", r"list\.txt: line 1: control character '\\r'"),
]


@pytest.mark.parametrize("patterns, listed, match", [c[1:] for c in KERNEL_LISTS], ids=[c[0] for c in KERNEL_LISTS])
def test_a_kernel_list_names_a_file_of_plain_lines(tmp_path, patterns, listed, match):
    (tmp_path / "list.txt").write_text(listed, newline="")
    refused(lambda: globs_of(patterns.replace("{tmp}", str(tmp_path))), SpecError, match)


def test_a_kernel_list_with_crlf_line_ends_and_tabs_reads_as_its_globs(tmp_path):
    (tmp_path / "list.txt").write_text("# chosen\r\ncutlass*\t# a tab is text\r\n\r\nsm90*\r\n", newline="")
    assert globs_of(f"gemm*,@{tmp_path / 'list.txt'}") == ["gemm*", "cutlass*", "sm90*"]
