import json
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FAKES = Path(__file__).resolve().parent / "fakes"

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
requires_nvcc = _marked(pytest.mark.nvcc, pytest.mark.skipif(shutil.which("nvcc") is None,
                                                             reason="needs nvcc on PATH"))


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
