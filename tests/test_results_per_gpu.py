"""Results per GPU: RESULTS/<set>/<gpu>/, which GPU's results a header is built from (GPU=,
this machine's GPU, the only GPU with results), and the errors that list the GPUs found."""

import os
import re

import pytest

import scons_runs
from conftest import FAKES, ROOT
from kernelgen import report
from kernelgen.errors import ResultsError
from kernelgen.results import choose_gpu, gpu_dir, gpu_slug, gpus_with_results


@pytest.mark.parametrize("name, slug", [
    ("NVIDIA H200", "nvidia_h200"),
    ("nvidia_h200", "nvidia_h200"),
    ("NVIDIA H100 80GB HBM3", "nvidia_h100_80gb_hbm3"),
    ("NVIDIA GeForce RTX 4090", "nvidia_geforce_rtx_4090"),
    ("  Tesla V100-SXM2-16GB  ", "tesla_v100_sxm2_16gb"),
    ("../../etc", "etc"),
    ("${HOME}", "home"),
    ("---", ""),
])
def test_a_gpu_name_becomes_a_plain_folder_name(name, slug):
    assert gpu_slug(name) == slug
    assert gpu_slug(slug) == slug


def results_tree(root, layout: dict):
    """layout: folder under the set -> file names; a folder ending in / is made empty."""
    for folder, files in layout.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        for name in files:
            (root / folder / name).write_text("workload\n")
    return root


ONE = {"nvidia_h200": ["a.csv"]}
TWO = {"nvidia_h200": ["a.csv"], "nvidia_h100": ["a.csv", "compare.md"]}
CHOICES = [
    # (case, layout, GPU=, this machine's GPU, the folder chosen or the error's text)
    ("GPU= a slug", TWO, "nvidia_h100", None, "nvidia_h100"),
    ("GPU= a name", TWO, "NVIDIA H200", "NVIDIA H100", "nvidia_h200"),
    ("this machine's GPU", TWO, None, "NVIDIA H100", "nvidia_h100"),
    ("the only GPU with results", ONE, None, None, "nvidia_h200"),
    ("GPU= without results", ONE, "NVIDIA H100", None,
     "GPU=NVIDIA H100 (nvidia_h100) has no results here (GPUs with results: nvidia_h200)"),
    ("GPU= naming nothing", ONE, "--", None, "GPU='--' names no GPU (GPUs with results here: nvidia_h200)"),
    ("this machine's GPU without results", ONE, None, "NVIDIA A100-SXM4-80GB",
     "this machine's GPU, NVIDIA A100-SXM4-80GB (nvidia_a100_sxm4_80gb), has no results here (GPUs with results: "
     "nvidia_h200): run scons profile, or name one with GPU="),
    ("several GPUs and none here", TWO, None, None,
     "results of several GPUs (nvidia_h100, nvidia_h200) and no GPU here: name one with GPU="),
    ("no results at all", {}, None, None, "no GPU has results for this set here: run scons profile on a GPU"),
    ("an empty GPU folder", {"nvidia_h200": []}, None, None, "no GPU has results for this set here"),
    ("a folder that is no slug", {"NVIDIA H200": ["a.csv"]}, None, None, "no GPU has results for this set here"),
    ("CSVs of the layout before", {".": ["a.csv"]}, None, None,
     "holds CSVs outside a GPU folder (e.g. a.csv): results live in"),
]


@pytest.mark.parametrize("layout, requested, machine, expected", [c[1:] for c in CHOICES], ids=[c[0] for c in CHOICES])
def test_which_gpus_results_a_header_is_built_from(tmp_path, layout, requested, machine, expected):
    set_dir = results_tree(tmp_path / "resnet50", layout)
    if expected.startswith("nvidia_"):
        assert choose_gpu(set_dir, requested, machine) == expected
        return
    with pytest.raises(ResultsError) as info:
        choose_gpu(set_dir, requested, machine)
    assert str(info.value).startswith(f"{set_dir}: ") and expected in str(info.value)


def test_a_gpus_results_live_in_its_own_folder(tmp_path):
    assert gpu_dir(tmp_path, "resnet50", "NVIDIA H200") == tmp_path / "resnet50" / "nvidia_h200"
    assert gpus_with_results(ROOT / "profile_results" / "resnet50") == ["nvidia_h200"]
    assert gpus_with_results(ROOT / "profile_results" / "resnet50_fc") == ["nvidia_h200"]
    assert not list((ROOT / "profile_results" / "resnet50").glob("*.csv")), "no CSV outside a GPU folder"


def scons_header(tmp_path, *args, gpu_name=None):
    env = dict(os.environ)
    if gpu_name is not None:  # a fake nvidia-smi naming this machine's GPU
        env.update(PATH=f"{FAKES}{os.pathsep}{os.environ['PATH']}", FAKE_GPU=gpu_name)
    else:  # no nvidia-smi at all
        env.update(PATH=os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                        if not os.path.exists(os.path.join(p, "nvidia-smi"))))
    return scons_runs.run(["best_kernels.h", f"BUILD={tmp_path}", *args], cwd=ROOT, env=env, timeout=600)


@pytest.mark.parametrize("args, gpu_name, message", [
    (["GPU=NVIDIA H100"], None, "GPU=NVIDIA H100 (nvidia_h100) has no results here (GPUs with results: nvidia_h200)"),
    ([], "NVIDIA H100 PCIe", "this machine's GPU, NVIDIA H100 PCIe (nvidia_h100_pcie), has no results here"),
    (["GPU=../.."], None, "GPU='../..' names no GPU"),
], ids=["GPU= without results", "this machine's GPU without results", "GPU= naming nothing"])
def test_scons_names_the_gpus_with_results_when_it_cannot_choose(tmp_path, args, gpu_name, message):
    out = scons_header(tmp_path, *args, gpu_name=gpu_name)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert f"scons best_kernels.h: {ROOT / 'profile_results' / 'resnet50'}: {message}" in out.stderr
    assert not (tmp_path / "sets" / "resnet50" / "best_kernels.h").exists()


def test_scons_builds_the_header_of_this_machines_gpu(tmp_path):
    out = scons_header(tmp_path, gpu_name="NVIDIA H200")
    assert out.returncode == 0, out.stderr
    assert "(scons best_kernels.h from profile_results/resnet50/nvidia_h200)" in (tmp_path / "sets" / "resnet50" / "best_kernels.h").read_text()


def test_the_report_reads_the_only_gpus_results(capsys):
    assert report.main(["resnet50"]) == 0
    table = capsys.readouterr().out
    assert len(re.findall(r"^\| \d+ \| 256,", table, re.MULTILINE)) == 19 and "| sum | | |" in table
    assert report.main(["resnet50", "--gpu", "NVIDIA H200"]) == 0
    assert capsys.readouterr().out == table
    assert report.main(["resnet50", "--gpu", "nvidia_b200"]) == 1
    assert "--gpu nvidia_b200 (nvidia_b200) has no results here (GPUs with results: nvidia_h200)" in capsys.readouterr().err
