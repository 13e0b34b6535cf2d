import fcntl
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAKES = Path(__file__).resolve().parent / "fakes"


def _worker_temporary_folder() -> None:
    """Under pytest-xdist (pytest.ini runs the suite on two workers), each worker keeps its
    temporary files, and so what lives there for a machine (the GPU lock a profile run holds,
    kernelgen.profile.gpu_lock), in a folder of its own: a test of two profile runs taking turns
    on a fake GPU meets no third run from the other worker. Its subprocesses inherit the folder
    (TMPDIR)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    folder = Path(tempfile.gettempdir()) / f"kernelgen-tests-{os.getuid()}" / worker
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = tempfile.tempdir = str(folder)


_MACHINE_TEMPORARY_FOLDER = Path(tempfile.gettempdir())  # the machine's, before the worker's replaces it


def _session_shared_folder() -> None:
    """A folder the session's processes share (what tests/header_builds.py compiles once for all
    of pytest-xdist's workers): made by the process that starts the workers, which inherit its name
    (KERNELGEN_TESTS_SHARED), and removed as it exits."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import atexit

    folder = tempfile.mkdtemp(prefix=f"kernelgen-tests-{os.getuid()}-shared-")
    os.environ["KERNELGEN_TESTS_SHARED"] = folder
    atexit.register(shutil.rmtree, folder, True)


_session_shared_folder()
_worker_temporary_folder()


def _compile_site_scons() -> None:
    """Where Python writes no bytecode (PYTHONDONTWRITEBYTECODE), each scons run in the project
    would compile kernelgen's modules before it starts (about a fifth of a second a run, and the
    suite runs scons a hundred times): its bytecode is written once a session, checked against the
    hash of its source (a module edited since is compiled again), as copies of the project get it
    (tests/test_scons_build.py, compiled_site_scons)."""
    if not sys.flags.dont_write_bytecode or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the first import writes it; pytest-xdist's workers start after the controller wrote it
    import compileall
    import py_compile

    compileall.compile_dir(ROOT / "site_scons", quiet=2, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)


_compile_site_scons()

# The environment as the tests' process set it up, before any test changed a variable: what the
# programs the tests' helpers start run in (tests/scons_runs.py's scons helper; tests/header_builds.py's
# nvcc compiles, started from threads, which would otherwise exec with the process's environment
# while a test in the main thread rebuilds it: "[Errno 14] Bad address: 'nvcc'", seen in a full run).
STARTING_ENVIRONMENT = dict(os.environ)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """Where Python writes no bytecode, pytest writes no rewritten test module either (the asserts
    it explains), and each worker rewrote every test module again on each run (a second and more of
    each worker's start): a module's rewritten bytecode is written, as its collection imports it, to
    tests/__pycache__, where pytest takes it from while its source is unchanged (as it would
    without PYTHONDONTWRITEBYTECODE)."""
    if not (sys.flags.dont_write_bytecode and isinstance(collector, pytest.Module)):
        return (yield)
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = True


def pytest_sessionfinish(session):
    """The helper process of tests/scons_runs.py, where this process started one, ends with the session."""
    runs = sys.modules.get("scons_runs")
    if runs is not None:
        runs.close()


@pytest.fixture(autouse=True)
def _one_gpu_test_at_a_time(request):
    """The tests that need a GPU take turns on it across the workers (each worker's profile runs
    hold a GPU lock of their own, in the worker's folder)."""
    if not (os.environ.get("PYTEST_XDIST_WORKER") and request.node.get_closest_marker("gpu")):
        yield
        return
    with open(_MACHINE_TEMPORARY_FOLDER / f"kernelgen-tests-{os.getuid()}-gpu.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# How pytest-xdist (`--dist loadscope`, pytest.ini) shares the tests out: a test goes to whichever
# worker is free, but the tests of a module whose module-scoped fixture they share stay together
# (the fixture is made once, not once a worker), and so do those of the modules that use what
# tests/header_builds.py makes once a process (the committed header, and the background compiles
# that tests/test_header_compile.py starts and tests/test_using_the_header.py waits for), which go
# first: their compiles take the longest.
_TESTS = Path(__file__).resolve().parent
_HEADER_BUILDS = "header_builds"
_HEADER_BUILDS_STATE = re.compile(r"header_builds\.(committed_header|launcher_header|start_compiles|start|result)\(")
_MODULE_FIXTURE = re.compile(r"fixture\(\s*scope\s*=\s*[\"'](module|class|package)[\"']")


def _module_scopes() -> dict:
    """Test module (as a node id begins) -> the scope its tests share, for the modules above."""
    scopes = {}
    for path in sorted(_TESTS.glob("test_*.py")):
        try:
            source = path.read_text()
        except OSError:
            continue
        name = f"{_TESTS.name}/{path.name}"
        if _HEADER_BUILDS_STATE.search(source):
            scopes[name] = _HEADER_BUILDS
        elif _MODULE_FIXTURE.search(source):
            scopes[name] = name
    return scopes


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    scopes = _module_scopes()

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scopes.get(nodeid.split("::", 1)[0], nodeid)

        def _assign_work_unit(self, node) -> None:
            if _HEADER_BUILDS in self.workqueue:  # the first unit given out
                self.workqueue.move_to_end(_HEADER_BUILDS, last=False)
            super()._assign_work_unit(node)

    return Scheduling(config, log)


TWO_LAYERS = """\
# two small layers
conv2d_fprop n=8 h=14 w=14 c=64 k=64 r=3 s=3 pad=1 stride=1
conv2d_fprop n=8 h=14 w=14 c=64 k=128 r=1 s=1 pad=0 stride=2
"""


def sm80_family(*tiles: str) -> str:
    """A CUTLASS 2.x SM80 family spec (TOML) with the given tile tables, alignment 8."""
    return ('kind = "conv2d_fprop_2x"\nelement = "f16"\naccumulator = "f32"\noutput = "f16"\n'
            'iterator = "optimized"\ninstruction = [16, 8, 16]\nalignments = [8]\ntiles = [\n'
            + "".join(f"  {{ {t} }},\n" for t in tiles) + "]\n")


def sm90_conv_family(kind: str = "conv2d_fprop_sm90", tiles: str = "[[128, 128, 64]]",
                     clusters: str = "[[1, 1, 1]]") -> str:
    """A CUTLASS 3.x SM90 conv family spec (TOML) of ``kind`` (conv2d_sm90's keys), f16, one
    consumer warpgroup, TMA epilogue, with the given tiles and clusters."""
    return (f'kind = "{kind}"\nelement = "f16"\naccumulator = "f32"\noutput = "f16"\n'
            f'schedule = "warpspecialized"\nepilogue = "tma"\ntiles = {tiles}\nclusters = {clusters}\n')


def gpu_available() -> bool:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    return os.system(f"{smi} -L > /dev/null 2>&1") == 0


def _marked(mark, skip):
    """A decorator giving a test ``mark`` (so that `-m "not gpu"` deselects it) and ``skip``."""
    return lambda test: mark(skip(test))


requires_gpu = _marked(pytest.mark.gpu, pytest.mark.skipif(not gpu_available(),
                                                           reason="needs a CUDA GPU (nvidia-smi finds none here)"))
NEEDS_NVCC = (pytest.mark.nvcc, pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH"))
requires_nvcc = _marked(*NEEDS_NVCC)  # (NEEDS_NVCC: the marks of a parametrized case, pytest.param(marks=))


def build_folder(tmp_path) -> str:
    """The BUILD of a GPU test: $KERNELGEN_TEST_BUILD where set (one build shared by several
    tests, its kernels compiled once), else a folder of ``tmp_path``."""
    return os.environ.get("KERNELGEN_TEST_BUILD", str(tmp_path / "build"))


def workload_line(layer: str) -> str:
    """A workload file's line of ``layer``: a whole line, or a conv2d_fprop line less the op."""
    from kernelgen.ops import OPS

    return layer + "\n" if layer.split()[0] in OPS else f"conv2d_fprop {layer}\n"


def assert_table_served(kernels: dict, table: dict) -> None:
    """Without a GPU, a GPU test's ``table`` (kernel name -> (layers it computes, {layer it refuses:
    a word of the reason}), layers as ``profile_layers`` takes them) against the model: each layer
    it computes the kernel (of ``kernels``: name -> descriptor) serves, and where the model refuses
    one it refuses, its reason holds the word."""
    from kernelgen.cost_model import serves
    from kernelgen.workloads import parse_workloads

    for kernel, (computes, refuses) in table.items():
        for layer in computes:
            assert serves(kernels[kernel], *parse_workloads(workload_line(layer))) is None, (kernel, layer)
        for layer, word in refuses.items():
            why = serves(kernels[kernel], *parse_workloads(workload_line(layer)))
            assert why is None or word in why, (kernel, layer, why)


def profile_table_rows(tmp_path, kernel, computes: set, refuses: dict, *arguments: str) -> dict:
    """``profile_layers`` of one kernel (a descriptor) on a table's layers (``assert_table_served``):
    {layer: its CSV's rows} of those the build profiled. A layer the narrowed build left out is
    asserted to be one the table expects refused, the model's reason holding its word."""
    from kernelgen.cost_model import serves
    from kernelgen.workloads import parse_workloads

    profiled = {problem.name: frame for problem, frame in
                profile_layers(tmp_path, sorted(computes | set(refuses)), kernel.name, *arguments)}
    rows = {}
    for layer in sorted(computes | set(refuses)):
        problem, = parse_workloads(workload_line(layer))
        if problem.name in profiled:
            rows[layer] = profiled[problem.name]
        else:  # left out of the build: the model refuses it, for the reason given
            assert layer in refuses and refuses[layer] in serves(kernel, problem), layer
    return rows


def profile_layers(tmp_path, layers: list, kernels: str, *arguments: str) -> list:
    """`scons profile` on the GPU of ``layers`` (conv2d_fprop lines, less the op, or whole workload
    lines) with every kernel KERNELS=``kernels`` selects measured on each (TOP=listed), into
    ``tmp_path``; BUILD ``build_folder``; ``arguments``, more of scons's (PROFILE_TIMEOUT=...).
    [(problem, its CSV's rows)] of the layers a selected kernel serves; a layer none serves the
    narrowed build leaves out (commands.narrowed_problems): asserted here to have no CSV, the build
    having said so."""
    import subprocess
    import sys

    from kernelgen import results
    from kernelgen.arch import parse_arch
    from kernelgen.cost_model import serves
    from kernelgen.profile import query_gpu
    from kernelgen.specs import load_catalog, select
    from kernelgen.targets import DEFAULT_ARCH
    from kernelgen.workloads import parse_workloads

    text = "".join(workload_line(layer) for layer in layers)
    workloads = tmp_path / "odd.txt"
    workloads.write_text(text)
    build = build_folder(tmp_path)
    out = subprocess.run([sys.executable, shutil.which("scons"), "-j16", "profile", f"WORKLOADS={workloads}",
                          "TOP=listed", f"KERNELS={kernels}", f"RESULTS={tmp_path / 'results'}", f"BUILD={build}",
                          *arguments],
                         cwd=ROOT, capture_output=True, text=True, timeout=3600)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-5000:]
    folder = results.gpu_dir(tmp_path / "results", "odd", query_gpu()[0])
    selected = select(load_catalog(ROOT / "kernel_specs" / "families"), kernels, parse_arch(DEFAULT_ARCH))  # the build's
    served = []
    for problem in parse_workloads(text):
        if any(serves(k, problem) is None for k in selected):
            served.append((problem, results.read_csv(folder / f"{problem.name}.csv")))
        else:
            assert not (folder / f"{problem.name}.csv").exists() and " are left out of this build" in out.stdout, \
                problem.name
    return served


def assert_served_rows_verify(problem, frame, kernels: dict, limit: float | dict = 1e-3) -> None:
    """Every row of ``frame`` (a layer's CSV, one row a kernel of ``kernels``: name -> descriptor,
    each kernel of the problem's op and dtype, ops.serves) is verified ok, its errors under ``limit``
    (or ``limit`` of its accumulator), where cost_model.serves says its kernel serves ``problem``, and
    ``unsupported`` elsewhere."""
    from kernelgen.cost_model import serves
    from kernelgen.ops import serves as serves_op

    assert sorted(frame["kernel"]) == sorted(name for name, k in kernels.items() if serves_op(k, problem))
    for row in frame.itertuples():
        kernel = kernels[row.kernel]
        if serves(kernel, problem) is None:
            most = limit[kernel.accumulator] if isinstance(limit, dict) else limit
            assert row.status == "ok", (problem.name, row.kernel, row.message)
            assert 0 < row.rel_l2_error < most and row.rel_max_error < most, (problem.name, row.kernel)
        else:
            assert row.status == "unsupported", (problem.name, row.kernel, row.status, row.message)


def assert_family_verifies(tmp_path, spec, layers: list, least: int) -> None:
    """Every kernel of the family ``spec`` profiled on ``layers`` (workload lines) on a GPU: each
    layer's rows as ``assert_served_rows_verify`` wants them, and at least ``least`` rows ok."""
    from kernelgen.specs import load_family

    kernels = {k.name: k for k in load_family(spec)}
    served = 0
    for problem, frame in profile_layers(tmp_path, layers, ",".join(kernels)):
        assert_served_rows_verify(problem, frame, kernels)
        served += (frame["status"] == "ok").sum()
    assert served >= least


def assert_kernels_compile(tmp_path, kernels: list) -> None:
    """The profiler's translation unit of each of ``kernels`` (kernel.cu.mako: the type, the
    operation, the factory), rendered and compiled for sm_90a in one nvcc run: the device code too,
    which the CPU checks do not build."""
    import subprocess

    from header_builds import MEASURED_FLAGS
    from kernelgen import render
    from kernelgen.variables import default_cutlass_root

    templates = render.lookup(ROOT / "kernel_specs" / "templates")
    sources = []
    for kernel in kernels:
        sources.append(tmp_path / f"{kernel.name}.cu")
        sources[-1].write_text(render.kernel_source(templates, kernel))
    cutlass = default_cutlass_root()
    out = subprocess.run(["nvcc", *MEASURED_FLAGS, "-c", f"-I{ROOT / 'profiler'}", "-isystem", f"{cutlass}/include",
                          "-isystem", f"{cutlass}/tools/util/include", "--output-directory", str(tmp_path), *map(str, sources)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-5000:]
    assert all(source.with_suffix(".o").is_file() for source in sources)


def one_entry_family(kind: str, entry: str, accumulator: str = "f32", extra: str = "") -> str:
    """The text of a family spec of ``kind``, f16 in and out, ``extra`` lines among its keys, whose
    one kernel is ``entry``."""
    return (f'kind = "{kind}"\ndescription = "test"\nelement = "f16"\naccumulator = "{accumulator}"\noutput = "f16"\n'
            f"{extra}kernels = [\n  {entry},\n]\n")


def assert_entry_refused(tmp_path, kind: str, entry: str, key: str, message: str, accumulator: str = "f32",
                         extra: str = "") -> None:
    """``one_entry_family`` of ``entry`` is refused (``assert_family_refused``) at ``kernels[0]``,
    ``key``, saying ``message``."""
    path = tmp_path / "family.toml"
    path.write_text(one_entry_family(kind, entry, accumulator, extra))
    assert_family_refused(path, "kernels[0]", key, message)


def assert_family_refused(path, entry, key, message) -> None:
    """Loading the family spec ``path`` raises one SpecError, of one line, naming the file, the
    entry (``kernels[0]``, ``tiles[0]``, None for the family's own keys) and the key, and saying
    ``message``."""
    from kernelgen.errors import SpecError
    from kernelgen.specs import load_family

    with pytest.raises(SpecError) as caught:
        load_family(path)
    error = caught.value
    assert (error.path, error.entry, error.key) == (path, entry, key)
    assert message in str(error) and str(path) in str(error)
    assert "\n" not in str(error), "one line"


@pytest.fixture
def workload_file(tmp_path) -> Path:
    path = tmp_path / "two.txt"
    path.write_text(TWO_LAYERS)
    return path


@pytest.fixture
def fake_gpu(tmp_path, monkeypatch):
    """A fake nvidia-smi on PATH and a fake profiler; returns (profiler path, log path)."""
    log = tmp_path / "fake_profiler.log"
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.delenv("FAKE_BEHAVIOUR", raising=False)
    return FAKES / "profiler", log


def write_manifest(path: Path, kernels: dict) -> Path:
    """kernels: name -> hash."""
    path.write_text(json.dumps({
        "arch": "90a", "cutlass": "4.2.0",
        "kernels": {n: {"family": "test_family", "hash": h, "op": "conv2d_fprop", "element": "f16",
                        "tolerance": 1e-3} for n, h in kernels.items()},
    }))
    return path


def invocations(log: Path) -> list:
    """The kernels each fake profiler `--jobs` run was asked for."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]
