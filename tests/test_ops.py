"""Ops: the registry (one module per op), the pairing of kernels with workloads by (op, dtype),
and a dtype no kernel of the build serves, refused naming the workload's file, line and dtype
before anything is profiled or reduced."""

import os
from types import SimpleNamespace

import pytest

import scons_runs
from conftest import ROOT, invocations, write_manifest
from kernelgen import ops, results
from kernelgen.errors import WorkloadError
from kernelgen.fusion import with_fused
from kernelgen.profile import Runner, profile
from kernelgen.reduce import build_header, load_set, select_best
from kernelgen.report import layer
from kernelgen.specs import load_catalog
from kernelgen.workloads import Conv2dProblem, GemmProblem, load_workloads, parse_workloads

CATALOG = load_catalog(ROOT / "kernel_specs" / "families")
BY_NAME = {k.name: k for k in CATALOG}
CONV = "conv2d_fprop n=8 h=14 w=14 c=64 k=64 r=3 s=3 pad=1 stride=1"


def kernel(op, element):
    return SimpleNamespace(op=op, element=element)


def test_every_op_module_has_the_whole_interface_and_is_keyed_by_its_problems_op():
    assert list(ops.OPS) == ["conv2d_fprop", "gemm"]  # the header lists conv entries, then GEMM entries
    for name, module in ops.OPS.items():
        assert module.OP == name
        for attribute in ("parse", "job_line", "table_label", "baseline_call", "KERNEL_OPS", "HEADER_SECTION",
                          "BASELINE"):
            assert hasattr(module, attribute), (name, attribute)
    conv, gemm = parse_workloads(f"{CONV}\ngemm m=256 n=1000 k=2048\n")
    assert ops.op_of(conv) is ops.conv2d_fprop and ops.op_of(gemm) is ops.gemm
    assert Conv2dProblem is ops.conv2d_fprop.Conv2dProblem and GemmProblem is ops.gemm.GemmProblem
    assert (conv.line, gemm.line) == (1, 2)


@pytest.mark.parametrize("text, job", [
    (CONV, "workload conv2d_fprop_f16_n8_h14_w14_c64_k64_r3_s3_pad1x1_str1x1_dil1x1 conv2d_fprop f16 "
           "8 14 14 64 64 3 3 1 1 1 1 1 1"),
    ("conv2d_fprop n=1 h=9 w=7 c=3 k=8 r=7 s=5 pad_h=3 pad_w=2 stride_h=2 stride_w=1 dilation_w=2",
     "workload conv2d_fprop_f16_n1_h9_w7_c3_k8_r7_s5_pad3x2_str2x1_dil1x2 conv2d_fprop f16 1 9 7 3 8 7 5 3 2 2 1 1 2"),
    ("gemm m=256 n=1000 k=2048", "workload gemm_f16_m256_n1000_k2048 gemm f16 256 1000 2048"),
    ("gemm m=1 n=8 k=16 dtype=bf16", "workload gemm_bf16_m1_n8_k16 gemm bf16 1 8 16"),
], ids=["conv", "conv, every field its own", "gemm, its own op", "bf16"])
def test_the_job_line_of_each_op_is_what_the_profiler_reads(text, job):
    problem, = parse_workloads(text + "\n")
    assert ops.op_of(problem).job_line(problem) == job


@pytest.mark.parametrize("text, label", [
    (CONV, "8,14,14,64,64,3,3,1,1"),
    ("gemm m=256 n=1000 k=2048", "gemm m=256 n=1000 k=2048"),
])
def test_each_op_labels_its_rows_of_the_report(text, label):
    assert layer(parse_workloads(text + "\n")[0]) == label


@pytest.mark.parametrize("kernel_op, element, text, served", [
    ("conv2d_fprop", "f16", CONV, True),
    ("gemm", "f16", CONV, True),  # GEMM kernels run the 1x1 layers, and report the others unsupported
    ("conv2d_fprop", "f16", CONV + " dtype=bf16", False),
    ("conv2d_fprop", "bf16", CONV, False),
    ("conv2d_fprop", "bf16", CONV + " dtype=bf16", True),
    ("conv2d_fprop", "f16", "gemm m=8 n=16 k=32", True),  # a GEMM is run as a 1x1 convolution
    ("gemm", "f16", "gemm m=8 n=16 k=32", True),
    ("gemm", "f16", "gemm m=8 n=16 k=32 dtype=f32", False),
    ("depthwise", "f16", CONV, False),  # an op no workload op is run with
])
def test_a_kernel_serves_a_workload_of_its_op_and_element_type(kernel_op, element, text, served):
    problem, = parse_workloads(text + "\n")
    assert ops.serves(kernel(kernel_op, element), problem) is served
    assert ops.serves({"op": kernel_op, "element": element}, problem) is served  # a kernels.json entry


# A dtype no kernel serves: the workload text, and the error naming the file, the line and the dtype
# (then the element types the build's kernels take: the catalog's, or a test manifest's).
UNSERVED = [
    (f"{CONV} dtype=f32\n",
     "w.txt:1: workload conv2d_fprop_f32_n8_h14_w14_c64_k64_r3_s3_pad1x1_str1x1_dil1x1: dtype f32: "
     "no kernel of this build computes conv2d_fprop in f32 (its kernels take "),
    ("# a GEMM in fp32\n\ngemm m=8 n=16 k=32 dtype=f32\n",
     "w.txt:3: workload gemm_f32_m8_n16_k32: dtype f32: no kernel of this build computes gemm in f32 "
     "(its kernels take "),
    (f"{CONV}\n{CONV} dtype=f32\n",  # a served dtype, then one no kernel serves
     "w.txt:2: workload conv2d_fprop_f32_n8_h14_w14_c64_k64_r3_s3_pad1x1_str1x1_dil1x1: dtype f32"),
]
UNSERVED_IDS = ["f32 conv", "f32 gemm after a comment", "f16 and f32 of one layer"]


@pytest.mark.parametrize("text, message", UNSERVED, ids=UNSERVED_IDS)
def test_a_dtype_no_kernel_serves_is_refused_naming_the_workload(text, message):
    with pytest.raises(WorkloadError) as error:
        ops.check_served(parse_workloads(text, "w.txt"), CATALOG, "w.txt")
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_every_kernel_of_the_catalog_has_an_op_and_an_element_type_and_serves_the_committed_sets():
    assert {(k.op, k.element) for k in CATALOG} == {(op, e) for op in ("conv2d_fprop", "gemm", "conv2d_fprop_grouped")
                                                    for e in ("f16", "bf16")}
    for path in sorted((ROOT / "kernel_specs" / "workloads").glob("*.txt")):
        problems = load_workloads(str(path), path.parent)[2]
        ops.check_served(problems, with_fused(CATALOG, problems), path)  # a set of epilogues: their fused variants


@pytest.mark.parametrize("text, message", UNSERVED, ids=UNSERVED_IDS)
def test_the_profile_driver_refuses_it_before_the_gpu_runs_anything(tmp_path, fake_gpu, text, message):
    profiler, log = fake_gpu
    workloads = tmp_path / "w.txt"
    workloads.write_text(text)
    with pytest.raises(WorkloadError) as error:
        profile(write_manifest(tmp_path / "kernels.json", {"kernel_a": "aaaa"}), profiler, str(workloads),
                tmp_path, tmp_path / "results", log=lambda m: None)
    assert str(error.value).startswith(f"{workloads}:{message.removeprefix('w.txt:')}")
    assert invocations(log) == [] and not (tmp_path / "results").exists()


@pytest.mark.parametrize("text, message", UNSERVED, ids=UNSERVED_IDS)
def test_the_reducer_refuses_it_before_reading_a_csv(tmp_path, text, message):
    name = "cutlass_tensorop_f16_s16816fprop_optimized_f16_128x128_32x3_nhwc_align8"
    with pytest.raises(WorkloadError) as error:  # the results folder does not exist: it is never read
        build_header(tmp_path / "none", parse_workloads(text, "w.txt"), {name: "h"}, BY_NAME,
                     ROOT / "kernel_specs" / "templates", tmp_path / "out", workload_file="w.txt")
    assert str(error.value).startswith(message)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text, message", UNSERVED, ids=UNSERVED_IDS)
def test_scons_refuses_it_in_one_line(tmp_path, text, message):
    workloads = tmp_path / "w.txt"
    workloads.write_text(text)
    env = dict(os.environ, PATH=os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                                if not os.path.exists(os.path.join(p, "nvidia-smi"))))
    out = scons_runs.run(["best_kernels.h", f"WORKLOADS={workloads}", f"BUILD={tmp_path / 'build'}"], cwd=ROOT, env=env,
                         timeout=600)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert f"scons: {workloads}:{message.removeprefix('w.txt:')}" in out.stderr
    assert not (tmp_path / "build" / "sets").exists()


def test_the_profiler_is_given_each_workload_only_the_kernels_of_its_dtype(tmp_path):
    manifest = {"kernels": {"conv_f16": {"op": "conv2d_fprop", "element": "f16", "hash": "a", "family": "f",
                                         "tolerance": 1e-3},
                            "conv_bf16": {"op": "conv2d_fprop", "element": "bf16", "hash": "b", "family": "f",
                                          "tolerance": 2e-2},
                            "gemm_bf16": {"op": "gemm", "element": "bf16", "hash": "c", "family": "g",
                                          "tolerance": 2e-2}}}
    runner = Runner(manifest, tmp_path / "profiler", tmp_path, 10.0, [], log=lambda m: None)
    runner.device = SimpleNamespace(matches=lambda row: True)
    problems = parse_workloads(f"{CONV}\n{CONV} dtype=bf16\ngemm m=8 n=16 k=32 dtype=bf16\n")
    states = runner.plan(problems)
    assert [s.pending for s in states] == [["conv_f16"], ["conv_bf16", "gemm_bf16"], ["conv_bf16", "gemm_bf16"]]
    runner.write_jobs(states, tmp_path / "jobs.txt")
    kernels = [line.split()[1] for line in (tmp_path / "jobs.txt").read_text().splitlines()
               if line.startswith("kernel ")]
    assert kernels == ["conv_f16", "conv_bf16", "gemm_bf16", "conv_bf16", "gemm_bf16"]


def test_the_reducer_gives_a_workload_only_a_kernel_of_its_dtype(tmp_path):
    f16 = "cutlass_tensorop_f16_s16816fprop_optimized_f16_128x128_32x3_nhwc_align8"
    bf16_kernel = SimpleNamespace(op="conv2d_fprop", element="bf16", accumulator="f32")
    kernels = {f16: BY_NAME[f16], "conv_bf16": bf16_kernel}
    problems = parse_workloads(f"{CONV}\n{CONV} dtype=bf16\n")
    hashes = {f16: "h16", "conv_bf16": "hbf"}
    for problem in problems:  # the f16 kernel is faster on both, and was (wrongly) run on the bf16 workload
        rows = [dict({c: None for c in results.COLUMNS}, workload=problem.name, kernel=k, status="ok",
                     runtime_ms=ms, kernel_hash=hashes[k], gpu="NVIDIA H200", driver="1", cuda="13.0",
                     cutlass="4.2.0", rel_l2_error=1e-4, rel_max_error=1e-4)
                for k, ms in ((f16, 0.1), ("conv_bf16", 0.2))]
        if problem.dtype == "f16":
            rows = rows[:1]
        results.write_csv(tmp_path / f"{problem.name}.csv", rows)
    frame = load_set(tmp_path, problems)
    assert list(select_best(frame, problems, hashes, kernels_by_name=kernels)["kernel"]) == [f16, "conv_bf16"]
    # without the pairing every kernel competes everywhere: the f16 kernel's row on the bf16 workload wins
    assert list(select_best(frame, problems, hashes)["kernel"]) == [f16, f16]


@pytest.mark.parametrize("set_name", ["resnet50", "resnet50_fc", "vgg16_b1", "first_layers"])
def test_pairing_by_op_and_dtype_leaves_the_f16_selections_as_they_were(set_name):
    _, _, problems = load_workloads(set_name, ROOT / "kernel_specs" / "workloads")
    frame = load_set(ROOT / "profile_results" / set_name / "nvidia_h200", problems)
    frame = frame[frame["kernel"].isin(BY_NAME)]
    hashes = dict(frame.drop_duplicates("kernel")[["kernel", "kernel_hash"]].itertuples(index=False))
    paired = select_best(frame, problems, hashes, kernels_by_name=BY_NAME)
    unpaired = select_best(frame, problems, hashes)

    def two_ways(kernels):  # the kernel types chosen compiled two ways (reduce.one_code_a_type)
        codes = {BY_NAME[k].shared_type for k in kernels if getattr(BY_NAME[k], "shared_type", None)}
        return {t for t, _ in codes if sum(t == other for other, _ in codes) > 1}

    moved = [at for at, (a, b) in enumerate(zip(paired["kernel"], unpaired["kernel"])) if a != b]
    assert not two_ways(paired["kernel"])
    assert {BY_NAME[unpaired["kernel"][at]].shared_type[0] for at in moved} <= two_ways(unpaired["kernel"])
    assert bool(moved) == (set_name == "vgg16_b1"), "its 64 -> 64 and 128 -> 256 layers chose one type two ways"
    same = [at for at in range(len(problems)) if at not in moved]
    assert list(paired["runtime_ms"][same]) == list(unpaired["runtime_ms"][same])


# A set of two dtypes: the header takes one element type (and two workloads that differ in dtype
# only would be one lookup defined twice). The kernels serve every dtype here, so that this check,
# not the dtype one, is what refuses them.
EVERY_DTYPE = [kernel(op, dtype) for op in ("conv2d_fprop", "gemm") for dtype in ("f16", "bf16", "f32")]
ONE_TYPE = "a header is built for one element type: profile each dtype as a set of its own"


@pytest.mark.parametrize("text, message", [
    (f"{CONV}\n{CONV} dtype=bf16\n",
     "w.txt:2: workload conv2d_fprop_bf16_n8_h14_w14_c64_k64_r3_s3_pad1x1_str1x1_dil1x1 is bf16, "
     f"conv2d_fprop_f16_n8_h14_w14_c64_k64_r3_s3_pad1x1_str1x1_dil1x1 (line 1) f16; {ONE_TYPE}"),
    ("gemm m=8 n=16 k=32 dtype=bf16 count=2\n# f32\ngemm m=8 n=16 k=32 dtype=f32\n",
     f"w.txt:3: workload gemm_f32_m8_n16_k32 is f32, gemm_bf16_m8_n16_k32 (line 1) bf16; {ONE_TYPE}"),
    (f"gemm m=8 n=16 k=32\n{CONV.replace('k=64', 'k=128')} dtype=bf16\n",
     f"w.txt:2: workload conv2d_fprop_bf16_n8_h14_w14_c64_k128_r3_s3_pad1x1_str1x1_dil1x1 is bf16, "
     f"gemm_f16_m8_n16_k32 (line 1) f16; {ONE_TYPE}"),
], ids=["conv f16 and bf16", "gemm bf16 and f32, counts aside", "two problems, two dtypes"])
def test_a_set_of_two_dtypes_is_refused_naming_both_lines(text, message):
    problems = parse_workloads(text, "w.txt")
    ops.check_served(problems, EVERY_DTYPE, "w.txt")
    with pytest.raises(WorkloadError) as error:
        ops.check_header_keys(problems, "w.txt")
    assert str(error.value).startswith(message)


def test_a_gemm_and_the_1x1_convolution_it_runs_as_are_different_lookups():
    problems = parse_workloads(f"gemm m=8 n=16 k=32 dtype=bf16\nconv2d_fprop n=8 h=1 w=1 c=32 k=16 r=1 s=1 dtype=bf16\n"
                               f"{CONV.replace('k=64', 'k=128')} dtype=bf16\n{CONV} dtype=bf16\n")
    ops.check_header_keys(problems, "w.txt")  # one dtype, no problem twice


def test_every_op_module_is_found_by_its_op_and_nothing_else_is():
    import re
    from pathlib import Path

    modules = sorted(p.stem for p in Path(ops.__file__).parent.glob("*.py")
                     if re.search(r"^OP = ", p.read_text(), re.MULTILINE))
    assert [m.__name__.rsplit(".", 1)[1] for m in ops.OPS.values()] == modules, "all of them, in name order"
    assert "common" not in modules
