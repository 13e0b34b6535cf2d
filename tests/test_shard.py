"""SHARD=i/n and scons merge: n shards of a set, each measured into a results root of its own (as
on n machines of a job array), joined by `scons merge FROM=`, give the CSVs one run gives; each
shard compiles its own kernels only, and a shard that holds none says so and succeeds (the fake
nvcc and GPU of tests/test_hostile_build.py)."""

import pandas as pd
import pytest

from kernelgen import results
from kernelgen.commands import shard_of
from kernelgen.config import parse_shard
from kernelgen.errors import KernelgenError
from kernelgen.workloads import parse_workloads
from test_hostile_build import KERNELS, LAYERS, fake_build, run  # noqa: F401  (fixture)

COUNT = 3  # the two kernels fall in shards 2 and 0 of 3 (shard_of): shard 1 holds none


def rows(root) -> pd.DataFrame:
    """Every row of the set's CSVs under ``root``, sorted, less when it was measured."""
    frames = [results.read_csv(root / "pair" / "nvidia_h200" / f"{p.name}.csv")
              for p in parse_workloads("\n".join(LAYERS) + "\n")]
    frame = pd.concat(frames).drop(columns=["measured_at"])
    return frame.sort_values(["workload", "kernel"]).reset_index(drop=True)


def compiled_kernels(toolchain, since: int) -> list:
    return sorted(a[-1].rsplit("/", 1)[-1][:-3] for a in toolchain.argvs()[since:] if "-c" in a and "/kernels/" in a[-1])


def test_n_shards_merged_give_the_csvs_of_one_run(fake_build, tmp_path):
    project, toolchain = fake_build
    assert sorted(shard_of(k, COUNT) for k in KERNELS) == [0, 2], "the split this test is written for"
    common = ["profile", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}"]
    run(project, *common, f"RESULTS={tmp_path / 'one'}", f"BUILD={tmp_path / 'b-one'}")
    for i in range(COUNT):
        before = len(toolchain.argvs())
        out = run(project, *common, f"SHARD={i}/{COUNT}", f"RESULTS={tmp_path / f'shard{i}'}",
                  f"BUILD={tmp_path / f'b{i}'}")
        mine = sorted(k for k in KERNELS if shard_of(k, COUNT) == i)
        assert compiled_kernels(toolchain, before) == mine, "a shard compiles its own kernels only"
        if not mine:
            assert f"SHARD={i}/{COUNT}: none of the build's kernels is this shard's" in out.stdout
            assert not (tmp_path / f"shard{i}").exists()
    sources = ",".join(str(tmp_path / f"shard{i}") for i in range(COUNT) if (tmp_path / f"shard{i}").exists())
    out = run(project, "merge", f"FROM={sources}", f"RESULTS={tmp_path / 'merged'}")
    assert "4 row(s) added and 0 replaced" in out.stdout, out.stdout
    pd.testing.assert_frame_equal(rows(tmp_path / "merged"), rows(tmp_path / "one"))
    again = run(project, "merge", f"FROM={sources}", f"RESULTS={tmp_path / 'merged'}")
    assert "0 row(s) added and 0 replaced" in again.stdout, "merging twice changes nothing"
    header = run(project, "best_kernels.h", "WORKLOADS=pair", f"RESULTS={tmp_path / 'merged'}", "GPU=nvidia_h200",
                 f"NVCC={toolchain.nvcc}", f"BUILD={tmp_path / 'b-header'}")
    assert "2 workloads" in header.stdout


@pytest.mark.parametrize("text", ["1", "2/2", "-1/2", "a/b", "1/0", "0/1000001", "１/2"])
def test_a_shard_that_is_not_i_of_n_is_refused(text):
    with pytest.raises(KernelgenError, match=r"SHARD=.*: expected i/n with 0 <= i < n"):
        parse_shard(text)


def test_merge_refuses_what_is_no_results_root(fake_build, tmp_path):
    project, toolchain = fake_build
    out = run(project, "merge", f"FROM={tmp_path / 'nowhere'}", check=False)
    assert out.returncode != 0 and "is not a folder of results" in out.stderr
    out = run(project, "merge", "FROM=", check=False)
    assert out.returncode != 0 and "scons merge needs FROM=" in out.stderr


@pytest.mark.parametrize("column, value, message", [
    ("cuda", "12.4", "different software or timing ("),
    ("kernel_hash", "0" * 16, f"in one and {'0' * 16} in the other"),
], ids=["another CUDA", "other code"])
def test_shards_of_different_builds_are_refused_naming_both_and_nothing_is_merged(fake_build, tmp_path, column, value,
                                                                                  message):
    project, toolchain = fake_build
    run(project, "profile", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"SHARD=0/{COUNT}",
        f"RESULTS={tmp_path / 'shard0'}", f"BUILD={tmp_path / 'b0'}")
    # the same rows as another build would have measured them
    other = tmp_path / "other" / "pair" / "nvidia_h200"
    other.mkdir(parents=True)
    for path in sorted((tmp_path / "shard0" / "pair" / "nvidia_h200").glob("*.csv")):
        frame = results.read_csv(path)
        frame[column] = value
        results.write_csv(other / path.name, results.rows_of(frame))
    out = run(project, "merge", f"FROM={tmp_path / 'shard0'},{tmp_path / 'other'}", f"RESULTS={tmp_path / 'merged'}",
              check=False)
    assert out.returncode != 0
    line, = [line for line in out.stderr.splitlines() if "different builds" in line]
    assert line == line.strip() and line.startswith(f"scons merge: {tmp_path / 'shard0'} and {tmp_path / 'other'} hold "
                                                    "rows of different builds for pair/nvidia_h200: ")
    assert message in line and value in line
    assert not (tmp_path / "merged").exists(), "nothing merged"


@pytest.mark.parametrize("column, value", [("timing", "graph-rest50"), ("cuda", "12.4"), ("driver", "570.0")],
                         ids=["another timing", "another CUDA", "another driver"])
def test_rows_of_another_stack_than_the_sets_rows_in_results_are_refused_and_nothing_is_merged(fake_build, tmp_path,
                                                                                                column, value):
    """The reducer takes a set's rows from one GPU, software stack and timing: rows measured
    otherwise than those RESULTS holds for the set are refused, naming a file of each, before
    anything is written (a set held rows timed after a rest of the GPU, the shard's by plain graphs;
    or under another CUDA or driver)."""
    project, toolchain = fake_build
    run(project, "profile", "WORKLOADS=pair", f"NVCC={toolchain.nvcc}", f"SHARD=0/{COUNT}",
        f"RESULTS={tmp_path / 'shard0'}", f"BUILD={tmp_path / 'b0'}")
    held = tmp_path / "held" / "pair" / "nvidia_h200"
    held.mkdir(parents=True)
    shard = sorted((tmp_path / "shard0" / "pair" / "nvidia_h200").glob("*.csv"))
    assert shard and all(value not in set(results.read_csv(p)[column]) for p in shard), "the test's premise"
    for path in shard:
        frame = results.read_csv(path)
        frame[column], frame["kernel"] = value, frame["kernel"] + "_older"
        results.write_csv(held / path.name, results.rows_of(frame))
    before = {p.name: p.read_bytes() for p in held.glob("*.csv")}
    out = run(project, "merge", f"FROM={tmp_path / 'shard0'}", f"RESULTS={tmp_path / 'held'}", check=False)
    assert out.returncode != 0
    line, = [line for line in out.stderr.splitlines() if "one GPU, software stack and timing" in line]
    assert f"pair/nvidia_h200/{shard[0].name} holds rows measured with " in line and line.count(shard[0].name) == 2
    assert line.split(", but RESULTS' ")[1].count(value) == 1 and "Traceback" not in out.stderr
    assert {p.name: p.read_bytes() for p in held.glob("*.csv")} == before, "nothing merged"
    # rows of the same stack merge
    for path in held.glob("*.csv"):
        path.unlink()
    out = run(project, "merge", f"FROM={tmp_path / 'shard0'}", f"RESULTS={tmp_path / 'held'}")
    assert "row(s) added" in out.stdout
