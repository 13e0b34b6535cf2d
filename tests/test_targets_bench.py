"""bench/targets.py: the issues' targets from the sets' compares: network totals, layers over 1.10
(1.25 under 5 us), depthwise and grouped geometric means, depthwise time against its floor."""

import math
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import targets  # noqa: E402

HEAD = "workload,layer,count,kernel,kernel_ms,library,library_ms,floor_ms,measured_at\n"


def compare(results, name, rows):
    folder = results / name / "nvidia_h200"
    folder.mkdir(parents=True)
    (folder / "compare.csv").write_text(HEAD + "".join(
        f'w{i},"{layer}",{count},k,{kernel},cudnn,{library},{floor},2026-12-0{i % 9 + 1}T00:00:00Z\n'
        for i, (layer, count, kernel, library, floor) in enumerate(rows)))


@pytest.mark.parametrize("layer, kind", [
    ("32,56,56,64,64,3,3,1,1", "dense"),
    ("32,56,56,64,64,3,3,1,1,bias+relu", "dense"),
    ("32,56,56,162,162,3,3,1,1,g162", "depthwise"),
    ("32,56,56,96,96,7,7,3,1,g96,bias", "depthwise"),
    ("32,28,28,208,208,3,3,1,2,g26", "grouped"),
    ("32,28,28,64,128,3,3,1,1,g64", "grouped"),  # a channel multiplier: K = 2C
])
def test_a_layer_is_depthwise_where_its_groups_are_c_and_k(layer, kind):
    assert targets.layer_kind(layer) == kind


def test_the_figures_of_each_set_and_of_all(tmp_path, capsys):
    compare(tmp_path, "a", [("1,8,8,16,16,3,3,1,1", 2, 0.010, 0.020, 0.001),       # 0.5
                            ("1,8,8,16,16,3,3,1,1,g16", 1, 0.012, 0.010, 0.004),   # 1.2: over 1.10
                            ("1,8,8,32,32,3,3,1,1,g32", 1, 0.006, 0.012, 0.002)])  # 0.5
    compare(tmp_path, "b", [("1,8,8,64,64,3,3,1,1,g8", 1, 0.0048, 0.0040, 0.001)])  # 1.2 under 5 us: not over
    assert targets.main(["--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    dw_geomean = math.sqrt(1.2 * 0.5)
    assert out[0] == (f"a: 3 layers, network {(0.020 + 0.012 + 0.006) / (0.040 + 0.010 + 0.012):.2f} of the library, "
                      f"1 over 1.10; depthwise 2: geometric mean {dw_geomean:.2f}, summed {0.018 / 0.006:.2f}x their "
                      "floor (compared 2026-12-03)")
    assert out[1] == "b: 1 layers, network 1.20 of the library, 0 over 1.10; grouped 1: geometric mean 1.20 (compared 2026-12-01)"
    assert out[2].startswith("all 2 sets: 4 layers,") and "1 over 1.10; depthwise 2:" in out[2]


def test_a_set_without_a_compare_is_refused_in_one_line(tmp_path):
    compare(tmp_path, "a", [("1,8,8,16,16,3,3,1,1", 1, 0.01, 0.02, 0.001)])
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "targets.py"), "a", "missing", "--results",
                          str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr == f"{tmp_path / 'missing' / 'nvidia_h200' / 'compare.csv'}: no such file (scons compare WORKLOADS=missing writes it)\n"
