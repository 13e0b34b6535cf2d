"""scons compare's report: each workload is compared with the library PyTorch runs it with."""

import contextlib
import dataclasses
import json
import math
import types

import pytest

from conftest import TWO_LAYERS, invocations, write_manifest
from kernelgen import compare, ops, results
from kernelgen.errors import KernelgenError
from kernelgen.workloads import Conv2dProblem, GemmProblem, parse_workloads


class Device:
    gpu, driver, cuda, cutlass = "NVIDIA H200", "580", "13.0", "4.2.0"


def row(library, kernel_ms, library_ms, calls_ms=None, kernel_time=None, count=1):
    return {"layer": "l", "count": count, "kernel": "k", "kernel_ms": kernel_ms, "library": library,
            "library_ms": library_ms, "library_calls_ms": library_ms if calls_ms is None else calls_ms,
            "library_kernel_ms": library_ms if kernel_time is None else kernel_time, "floor_ms": 0.5,
            "kernel_vs_library": kernel_ms / library_ms, "measured_at": "2026-11-30T00:00:00Z"}


def report(rows):
    return compare.report(rows, (4e12, 7e14), Device(), {"torch": "2.11", "cudnn": "91900"}, "t")


def test_the_report_names_the_library_each_set_was_compared_with():
    conv = report([row("cudnn", 1.0, 2.0), row("cudnn", 3.0, 2.0)])
    assert "| kernel ms | cuDNN ms | cuDNN kernels ms | cuDNN call by call ms |" in conv
    assert "cuBLAS" not in conv
    assert ("Against cuDNN in a CUDA graph: network 1.00; kernels faster on 1 of 2 layers; geometric mean 0.87; "
            "worst layer 1.50.") in conv
    gemm = report([row("cublas", 1.0, 2.0)])
    assert "| kernel ms | cuBLAS ms |" in gemm and "Against cuBLAS in a CUDA graph: network 0.50; kernels faster on 1 of 1" in gemm
    assert "| kernel ms | cuDNN / cuBLAS ms |" in report([row("cublas", 1.0, 2.0), row("cudnn", 1.0, 2.0)])


def test_the_network_total_weighs_each_layer_by_its_count_and_ratios_use_the_graph_time():
    text = report([row("cudnn", 1.0, 2.0, calls_ms=4.0, kernel_time=1.9, count=3),
                   row("cudnn", 1.0, 0.8, calls_ms=1.0, kernel_time=0.7)])
    assert "| 0 | l | 3 | `k` | 1.0000 | 2.0000 | 1.9000 | 4.0000 | 0.5000 | 0.50 | 25% |" in text
    assert "| 1 | l | 1 | `k` | 1.0000 | 0.8000 | 0.7000 | 1.0000 | 0.5000 | 1.25 | 62% |" in text
    # kernels 3 x 1.0 + 1.0 = 4.0; library 3 x 2.0 + 0.8 = 6.8; floor 4 x 0.5 = 2.0
    assert "| network | | 4 | | 4.000 | 6.800 | 6.400 | 13.000 | 2.000 | 0.59 | 29% |" in text
    assert ("Network total (4 layer calls): chosen kernels 4.000 ms, cuDNN 6.800 ms in a CUDA graph, "
            "floor 2.000 ms; kernels / cuDNN 0.59, kernels / floor 2.00.") in text
    assert "Against cuDNN in a CUDA graph: network 0.59; kernels faster on 1 of 2 layers" in text
    assert "Against cuDNN's kernel time (torch.profiler): network 0.62; kernels faster on 1 of 2" in text
    assert "Against cuDNN call by call: network 0.31; kernels faster on 1 of 2 layers; geometric mean 0.50" in text
    assert "worst layer 1.25." in text and "worst layer 1.43." in text


def test_the_report_lists_what_the_library_ran_for_each_layer_that_recorded_it():
    rows = [row("cudnn", 1.0, 1.0), row("cudnn", 1.0, 1.0)]
    rows[1]["library_kernels"] = "Memset (Device) + sm90_xmma_fprop"
    text = report(rows)
    assert "What cuDNN ran, per layer" in text and "- 1: `Memset (Device) + sm90_xmma_fprop`" in text
    assert "- 0:" not in text and "What cuDNN ran" not in report(rows[:1])


def test_a_layer_without_a_profiler_kernel_time_shows_a_dash_not_a_number():
    text = report([row("cudnn", 1.0, 2.0, kernel_time=math.nan), row("cudnn", 1.0, 2.0)])
    assert "| 0 | l | 1 | `k` | 1.0000 | 2.0000 | – | 2.0000 |" in text
    assert "| network | | 2 | | 2.000 | 4.000 | – | 4.000 |" in text
    assert "kernel time (torch.profiler)" not in text


def test_a_gemm_workload_is_timed_with_cublas_a_convolution_with_cudnn(monkeypatch):
    made, timed = [], []
    monkeypatch.setattr(ops.gemm, "baseline_call", lambda torch, p, l2: made.append(("cublas", p)) or ("gemm", 2))
    monkeypatch.setattr(ops.conv2d_fprop, "baseline_call",
                        lambda torch, p, l2: made.append(("cudnn", p)) or ("conv", 3))
    monkeypatch.setattr(compare, "time_calls", lambda torch, call, sets: timed.append(call) or (1.0, 0.9, 1.1))
    monkeypatch.setattr(compare, "time_graph", lambda torch, call, sets: (0.5, 0.4, 0.6))
    monkeypatch.setattr(compare, "time_kernels", lambda torch, call, sets: (0.45, "nvjet_gemm"))
    gemm, conv = GemmProblem(m=256, n=1000, k=2048), Conv2dProblem(n=1, h=8, w=8, c=8, k=8, r=3, s=3)
    torch = types.SimpleNamespace(no_grad=contextlib.nullcontext)
    assert compare.time_library(torch, gemm, 1 << 20) == ("cublas", 1.0, 0.5, 0.45, "nvjet_gemm")
    assert compare.time_library(torch, conv, 1 << 20) == ("cudnn", 1.0, 0.5, 0.45, "nvjet_gemm")
    assert made == [("cublas", gemm), ("cudnn", conv)] and timed == ["gemm", "conv"]


def test_a_profiler_kernel_time_that_cannot_be_attributed_is_logged_and_left_empty(monkeypatch):
    def unattributed(torch, call, sets):
        raise KernelgenError("torch.profiler recorded 49 of the 50 annotated calls")
    monkeypatch.setattr(ops.conv2d_fprop, "baseline_call", lambda torch, p, l2: ("conv", 3))
    monkeypatch.setattr(compare, "time_calls", lambda torch, call, sets: (1.0, 0.9, 1.1))
    monkeypatch.setattr(compare, "time_graph", lambda torch, call, sets: (0.5, 0.4, 0.6))
    monkeypatch.setattr(compare, "time_kernels", unattributed)
    logs = []
    conv = Conv2dProblem(n=1, h=8, w=8, c=8, k=8, r=3, s=3)
    library, calls, graph, kernel_ms, kernels = compare.time_library(
        types.SimpleNamespace(no_grad=contextlib.nullcontext), conv, 1 << 20, logs.append)
    assert (library, calls, graph, kernels) == ("cudnn", 1.0, 0.5, "") and math.isnan(kernel_ms)
    assert logs == [f"  {conv.name}: no kernel time from torch.profiler: torch.profiler recorded 49 of the 50 "
                    "annotated calls"]


# torch.profiler's events, as the tree it builds: annotations (CPU) over operators (CPU) that
# own the kernels and memsets they launched; the GPU events themselves, and the GPU-side copy
# of each annotation.
CPU, CUDA = "cpu", "cuda"


def event(name, device=CPU, kernels=(), children=(), us=0.0):
    return types.SimpleNamespace(name=name, device_type=device, cpu_children=list(children),
                                 kernels=[types.SimpleNamespace(name=n, duration=d) for n, d in kernels],
                                 time_range=types.SimpleNamespace(elapsed_us=lambda: us))


def profiled(per_call: list, extra_gpu: float = 0.0, annotations_as_kernels=True) -> list:
    """Events of one profile: call i runs a memset and a kernel whose durations sum to per_call[i] us."""
    events = []
    for i, us in enumerate(per_call):
        mark = f"{compare.MARK}{i}"
        op = event("aten::cudnn_convolution", kernels=[("Memset (Device)", 1.0), ("sm90_xmma_fprop", us - 1.0)])
        own = [(mark, us + 0.5)] if annotations_as_kernels else []  # the GPU-side annotation's span
        events += [event(mark, kernels=own, children=[event("aten::conv2d", children=[op])]),
                   event("aten::conv2d", children=[op]), op,
                   event("Memset (Device)", CUDA, us=1.0), event("sm90_xmma_fprop", CUDA, us=us - 1.0),
                   event(mark, CUDA, us=us + 0.5)]
    if extra_gpu:
        events.append(event("stray kernel", CUDA, us=extra_gpu))
    return events


def test_the_library_kernel_time_is_the_median_call_memsets_included():
    events = profiled([10.0, 30.0, 20.0, 12.0, 11.0])
    assert compare.kernel_ms_per_call(events, 5, CPU) == 0.012
    assert compare.kernel_ms_per_call(profiled([4.0, 6.0], annotations_as_kernels=False), 2, CPU) == 0.005


def test_the_library_kernels_are_what_most_calls_ran_in_launch_order():
    events = profiled([10.0, 30.0, 20.0])
    assert compare.library_kernels(events, CPU) == "Memset (Device) + sm90_xmma_fprop"
    odd = event(f"{compare.MARK}3", children=[event("aten::conv2d", kernels=[("implicit_gemm", 5.0)])])
    assert compare.library_kernels(events + [odd], CPU) == "Memset (Device) + sm90_xmma_fprop"
    assert compare.library_kernels([odd], CPU) == "implicit_gemm"
    assert compare.library_kernels([], CPU) == ""


def test_kernel_durations_a_little_over_their_recorded_spans_are_accepted():
    events = profiled([10.0, 30.0, 20.0])
    for e in events:
        if e.device_type == CUDA and not e.name.startswith(compare.MARK):
            recorded = e.time_range.elapsed_us() / 1.02  # as torch.profiler reports on the H200
            e.time_range = types.SimpleNamespace(elapsed_us=lambda us=recorded: us)
    assert compare.kernel_ms_per_call(events, 3, CPU) == 0.02


@pytest.mark.parametrize("events, calls, message", [
    (profiled([10.0, 10.0], extra_gpu=-2.0), 2, "attributed 0.0200 ms of GPU work to the calls, of 0.0180 ms"),
    (profiled([10.0, 10.0]), 3, "torch.profiler recorded 2 of the 3 annotated calls"),
    (profiled([10.0, 10.0], extra_gpu=5.0), 2, "attributed 0.0200 ms of GPU work to the calls, of 0.0250 ms"),
    ([event(f"{compare.MARK}0")], 1, "attributed 0.0000 ms of GPU work to the calls, of 0.0000 ms"),
])
def test_a_kernel_time_the_profile_does_not_account_for_is_refused(events, calls, message):
    with pytest.raises(KernelgenError, match=message):
        compare.kernel_ms_per_call(events, calls, CPU)


def test_the_chosen_kernels_are_timed_again_replayed_from_a_cuda_graph(tmp_path, fake_gpu, monkeypatch):
    profiler, log = fake_gpu
    monkeypatch.setenv("FAKE_BEHAVIOUR", '{"kernel_b": 0.25}')
    seen = []

    class Runner(compare.Runner):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            seen.append(self.extra_args)

    monkeypatch.setattr(compare, "Runner", Runner)
    manifest = json.loads(write_manifest(tmp_path / "kernels.json", {"kernel_a": "a", "kernel_b": "b"}).read_text())
    problems = parse_workloads(TWO_LAYERS)
    timed = compare.retime_chosen(manifest, profiler, problems, ["kernel_a", "kernel_b"], log=lambda m: None)
    assert seen == [["--graph"]]
    assert timed == {problems[0].name: 1.0, problems[1].name: 0.25}
    assert invocations(log) == [["kernel_a", "kernel_b"]]
    # a kernel of launch settings is timed with the one its row records, only that one (fake: its
    # time is 0.125 ms where the job names a setting)
    monkeypatch.setenv("FAKE_BEHAVIOUR", '{"kernel_b": 0.25, "kernel_b raster=m swizzle=4": 0.125}')
    timed = compare.retime_chosen(manifest, profiler, problems, ["kernel_a", "kernel_b"], log=lambda m: None,
                                  settings=["", "raster=m swizzle=4"])
    assert timed == {problems[0].name: 1.0, problems[1].name: 0.125}


class FakeCuda:
    """A GPU that runs each call's kernel in KERNEL_MS, fed by a host that spends HOST_MS per call
    (PyTorch's dispatch); events time the GPU, idle or not, as CUDA's do."""

    KERNEL_MS, HOST_MS, REPLAY_MS = 0.02, 0.05, 0.01

    def __init__(self):
        self.host = self.gpu = 0.0
        self.capturing = None
        fake = self

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

            def record(self):
                fake.gpu = max(fake.gpu, fake.host)
                self.at = fake.gpu

            def synchronize(self):
                fake.host = max(fake.host, fake.gpu)

            def elapsed_time(self, end):
                return end.at - self.at

        class Stream:
            def wait_stream(self, other):
                pass

        class CUDAGraph:
            def __init__(self):
                self.kernels = 0

            def replay(self):
                fake.host += fake.REPLAY_MS
                fake.gpu = max(fake.gpu, fake.host) + self.kernels * fake.KERNEL_MS

        class Capture:
            def __init__(self, graph):
                self.graph = graph

            def __enter__(self):
                fake.capturing = self.graph

            def __exit__(self, *exc):
                fake.capturing = None

        self.Event, self.Stream, self.CUDAGraph = Event, Stream, CUDAGraph
        self.graph = Capture
        self.stream = lambda s: Capture(None)
        self.current_stream = Stream

    def synchronize(self):
        self.host = max(self.host, self.gpu)

    def launch(self):
        self.host += self.HOST_MS
        if self.capturing is not None:
            self.capturing.kernels += 1
        else:
            self.gpu = max(self.gpu, self.host) + self.KERNEL_MS


class FakeTorch:
    def __init__(self):
        self.cuda = FakeCuda()


def test_a_graph_times_the_library_without_the_hosts_cost_per_call():
    torch = FakeTorch()
    eager = compare.time_calls(torch, lambda i: torch.cuda.launch(), 4)
    graphed = compare.time_graph(torch, lambda i: torch.cuda.launch(), 4)
    assert abs(eager[0] - FakeCuda.HOST_MS) < 1e-6, "call by call, the GPU waits on the host"
    assert abs(graphed[0] - FakeCuda.KERNEL_MS) < 1e-3, "replayed, only the kernels count"


def test_compare_chooses_as_the_header_does_each_kernel_at_its_own_tolerance(tmp_path):
    # a bf16 set: bf16 rounding errors of 3e-3 pass the bf16 kernels' tolerance (8e-3), not fp16's
    problems = parse_workloads("conv2d_fprop n=2 h=8 w=8 c=64 k=64 r=1 s=1 dtype=bf16\n"
                               "conv2d_fprop n=2 h=8 w=8 c=64 k=128 r=1 s=1 dtype=bf16\n")
    manifest = json.loads(write_manifest(tmp_path / "kernels.json", {"fast": "a", "slow": "b"}).read_text())
    for info in manifest["kernels"].values():
        info.update(element="bf16", tolerance=8e-3)
    errors = {"fast": (3e-3, 9e-3), "slow": (3e-3, 5e-3)}  # fast is over its tolerance on the first layer
    for i, problem in enumerate(problems):
        rows = []
        for kernel, ms in (("fast", 0.1), ("slow", 0.2)):
            row = {c: None for c in results.COLUMNS}
            l2, worst = errors[kernel] if i == 0 else (3e-3, 5e-3)
            row.update(workload=problem.name, kernel=kernel, status="ok", runtime_ms=ms, rel_l2_error=l2,
                       rel_max_error=worst, kernel_hash=manifest["kernels"][kernel]["hash"], gpu="NVIDIA H200",
                       driver="580.159.04", cuda="13.0", cutlass="4.2.0", timing="graph")
            rows.append(row)
        results.write_csv(tmp_path / f"{problem.name}.csv", rows)
    assert compare.chosen_kernels(manifest, tmp_path, problems) == (["slow", "fast"], ["", ""])


def test_a_fused_layer_is_timed_against_the_fastest_of_the_librarys_paths(monkeypatch):
    paths = {"unfused": 0.9, "fused": 0.6}
    monkeypatch.setattr(ops.conv2d_fprop, "baseline_call", lambda torch, p, l2: ("unfused", 3))
    monkeypatch.setattr(ops.conv2d_fprop, "fused_baselines", lambda torch, p, l2: [("cudnn fused", "fused", 3)])
    monkeypatch.setattr(compare, "time_graph", lambda torch, call, sets: (paths[call], 0, 0))
    monkeypatch.setattr(compare, "time_calls", lambda torch, call, sets: (2 * paths[call], 0, 0))
    monkeypatch.setattr(compare, "time_kernels", lambda torch, call, sets: (paths[call] - 0.1, call))
    torch = types.SimpleNamespace(no_grad=contextlib.nullcontext)
    fused = Conv2dProblem(n=1, h=8, w=8, c=8, k=8, r=3, s=3, epilogue="bias+add+relu")
    assert compare.time_library(torch, fused, 1 << 20) == ("cudnn fused", 1.2, 0.6, 0.5, "fused")
    paths["unfused"] = 0.5
    assert compare.time_library(torch, fused, 1 << 20)[:3] == ("cudnn + torch", 1.0, 0.5)
    plain = Conv2dProblem(n=1, h=8, w=8, c=8, k=8, r=3, s=3)
    assert compare.time_library(torch, plain, 1 << 20)[0] == "cudnn", "a plain layer: the library's one path"
    monkeypatch.setattr(ops.conv2d_fprop, "view_baselines", lambda torch, p, l2: [("cudnn conv3d + torch", "conv3d", 3)]
                        if p.conv3d else [])
    paths["conv3d"] = 0.4
    video = dataclasses.replace(fused, conv3d="frames:1")
    assert compare.time_library(torch, video, 1 << 20)[:3] == ("cudnn conv3d + torch", 0.8, 0.4)
    assert compare.time_library(torch, fused, 1 << 20)[0] == "cudnn + torch", "no conv3d path for a 2-D line"
    paths["conv3d"] = 0.7
    assert compare.time_library(torch, video, 1 << 20)[0] == "cudnn + torch", "the fastest path, the 2-D view's too"
    labels = {"cudnn + torch", "cublas + torch", "cudnn fused", "cublaslt epilogue", "cudnn", "cublas",
              "cudnn conv3d", "cudnn conv3d + torch"}
    assert labels <= set(compare.LIBRARY_NAMES), "every path the report may name"


def test_fused_layers_compared_with_several_paths_name_the_column_library_and_each_layers_path():
    rows = [row("cudnn fused", 1.0, 2.0), row("cudnn + torch", 1.0, 4.0), row("cublas + torch", 1.0, 1.0)]
    rows[0]["library_kernels"] = "nvjet_relubias"
    text = report(rows)
    assert "| kernel ms | library ms | library kernels ms | library call by call ms |" in text
    assert ("`library` is, for each layer, the fastest of the paths it was timed with (cuDNN + PyTorch's epilogue "
            "ops / cuDNN fused / cuBLAS + PyTorch's epilogue ops; each layer's is named in the list at the end).") in text
    assert "- 0 (cuDNN fused): `nvjet_relubias`" in text and "- 1 (cuDNN + PyTorch's epilogue ops)\n" in text
    assert "Against the library in a CUDA graph: network 0.43;" in text and "What the library ran" in text
    plain = report([row("cudnn", 1.0, 2.0), row("cublas", 1.0, 2.0)])
    assert "`library` is" not in plain and "| kernel ms | cuDNN / cuBLAS ms |" in plain


@pytest.mark.parametrize("line", [
    "conv2d_fprop n=4 h=6 w=5 c=8 k=16 r=3 s=3 pad=1 stride=2 epilogue=bias+add+relu dtype=f32 conv3d=frames:2",
    "conv2d_fprop n=2 h=5 w=12 c=8 k=8 r=3 s=1 pad_h=1 pad_w=0 stride_h=2 stride_w=1 epilogue=bias+relu dtype=f32 "
    "conv3d=time:3",
])
def test_a_3d_convolutions_view_is_timed_against_the_networks_conv3d_too(monkeypatch, line):
    """A line of conv3d= has, beside the 2-D view's baselines, the network's own call:
    torch.nn.functional.conv3d on channels_last_3d operands, then PyTorch's epilogue ops; on the
    same memory it computes what the 2-D view does. A 2-D line has none."""
    torch = pytest.importorskip("torch", reason="needs PyTorch (pip install torch): the library baselines are PyTorch calls")
    from kernelgen.ops import common, conv2d_fprop

    monkeypatch.setattr(common, "DEVICE", "cpu")
    problem = parse_workloads(line + "\n")[0]
    calls = []
    monkeypatch.setattr(torch.nn.functional, "conv3d", lambda *a, _f=torch.nn.functional.conv3d, **k:
                        calls.append(a[0].shape) or _f(*a, **k))
    [(library, call, sets)] = conv2d_fprop.view_baselines(torch, problem, 1 << 10)
    assert library == "cudnn conv3d + torch" and call(0).dim() == 5 and calls == [problem.view_3d()[0]]
    assert conv2d_fprop.baseline_call(torch, problem, 1 << 10)[0](0).dim() == 4, "the 2-D view's call stays"
    assert [lib for lib, _, _ in conv2d_fprop.fused_baselines(torch, problem, 1 << 10)] == ["cudnn fused"]
    assert conv2d_fprop.view_baselines(torch, dataclasses.replace(problem, conv3d=""), 1 << 10) == []
    _, operands, args = conv2d_fprop._baseline_operands(torch, problem, 1 << 10, three_d=True)
    x, w, bias, residual = operands[0]
    assert x.is_contiguous(memory_format=torch.channels_last_3d)
    flat_x = x.permute(0, 2, 3, 4, 1).reshape(problem.n, problem.h, problem.w, problem.c).permute(0, 3, 1, 2)
    flat = torch.nn.functional.conv2d(flat_x, w.reshape(problem.k, problem.c, problem.r, problem.s),
                                      stride=(problem.stride_h, problem.stride_w), padding=(problem.pad_h, problem.pad_w))
    expected = torch.nn.functional.conv3d(x, w, **args)
    assert torch.allclose(flat.permute(0, 2, 3, 1).reshape(-1), expected.permute(0, 2, 3, 4, 1).reshape(-1), atol=1e-5)
