"""Side by side, in one run on one GPU: each workload's chosen kernel, cuDNN, and the floor.

    python -m kernelgen.compare --manifest generated/kernels.json --profiler generated/profiler \\
        --workloads resnet50 --sets-dir kernel_specs/workloads --results profile_results

The chosen kernels (from the set's CSVs) are timed again by the profiler; the library
PyTorch would use is timed through it, cuDNN for a convolution (``torch.nn.functional.conv2d``
on channels_last fp16 tensors, benchmark mode), cuBLAS for a GEMM workload
(``torch.nn.functional.linear``, D = A B^T), the way the profiler times kernels: operands
rotated through four times the L2,
warm-up, calibration, 20 batches of about 1 ms, the median per call; and again with each batch
captured in a CUDA graph and replayed, which leaves out the host's cost per call (PyTorch's
dispatch, the library's plan lookup) where a call is too short to hide it. The floor of a layer
is max(FLOPs / tensor rate, bytes / copy bandwidth), both ceilings measured in the same run
(a device-to-device copy, an 8192^3 fp16 matrix product). Writes ``compare.csv``,
``compare.md`` and ``compare.png`` beside the set's CSVs of this GPU; in ``compare.csv``, ``cudnn_ms``
is the library's time call by call, ``cudnn_graph_ms`` in a graph, and ``library`` names it
(``cudnn`` or ``cublas``).
"""

import argparse
import json
import math
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from .errors import KernelgenError
from .profile import NoGpuError, Runner, device_of, query_gpu
from .reduce import load_set, select_best
from .render import write_generated
from .report import layer
from .results import gpu_dir
from .workloads import load_workloads

LIBRARY_NAMES = {"cudnn": "cuDNN", "cublas": "cuBLAS"}
REPEATS = 20
BATCH_MS = 1.0
WARMUP = 5


class NoTorchError(KernelgenError):
    pass


def import_torch():
    try:
        import torch
    except ImportError:
        raise NoTorchError("scons compare needs PyTorch (pip install torch), which is not installed here") from None
    if not torch.cuda.is_available():
        raise NoGpuError("PyTorch sees no CUDA GPU")
    return torch


def _batch(torch, call, sets: int) -> int:
    """Warm up, then the number of calls that takes about BATCH_MS."""
    for i in range(WARMUP):
        call(i % sets)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(3):
        call(i % sets)
    stop.record()
    stop.synchronize()
    return max(1, min(10000, round(BATCH_MS / max(start.elapsed_time(stop) / 3, 1e-4))))


def _per_call(torch, events, batch: int) -> tuple[float, float, float]:
    torch.cuda.synchronize()
    per_call = sorted(b.elapsed_time(e) / batch for b, e in events)
    mid = len(per_call) // 2
    median = per_call[mid] if len(per_call) % 2 else 0.5 * (per_call[mid - 1] + per_call[mid])
    return median, per_call[0], per_call[-1]


def _events(torch) -> list:
    return [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(REPEATS)]


def time_calls(torch, call, sets: int) -> tuple[float, float, float]:
    """(median, min, max) ms per call of call(i) over rotating operand sets, as the profiler times."""
    batch = _batch(torch, call, sets)
    events = _events(torch)
    n = 0
    for begin, end in events:
        begin.record()
        for _ in range(batch):
            call(n % sets)
            n += 1
        end.record()
    return _per_call(torch, events, batch)


def time_graph(torch, call, sets: int) -> tuple[float, float, float]:
    """As time_calls, with each batch of calls captured once in a CUDA graph and replayed: the
    library's time on the GPU without the host's cost per call (PyTorch's dispatch, the library's
    plan lookup), which a call too short to hide it adds to time_calls' figure."""
    batch = _batch(torch, call, sets)
    side = torch.cuda.Stream()  # capture needs work on a side stream first
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):
            call(i % sets)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(batch):
            call(i % sets)
    graph.replay()
    events = _events(torch)
    for begin, end in events:
        begin.record()
        graph.replay()
        end.record()
    return _per_call(torch, events, batch)


def _sets(operand_bytes: int, l2_bytes: int) -> int:
    """Operand copies to rotate through: four times the L2, as the profiler does."""
    return max(1, min(64, math.ceil(4 * l2_bytes / operand_bytes)))


def time_library(torch, problem, l2_bytes: int) -> tuple[str, float, float]:
    """(library, ms, ms in a CUDA graph): what PyTorch runs ``problem`` with, cuDNN for a
    convolution, cuBLAS for a GEMM, timed call by call (time_calls) and replayed (time_graph)."""
    if problem.op == "gemm":
        return ("cublas", *time_cublas(torch, problem, l2_bytes))
    return ("cudnn", *time_cudnn(torch, problem, l2_bytes))


def _time_both(torch, call, sets: int) -> tuple[float, float]:
    with torch.no_grad():
        return time_calls(torch, call, sets)[0], time_graph(torch, call, sets)[0]


def time_cublas(torch, problem, l2_bytes: int) -> tuple[float, float]:
    m, n, k = problem.m, problem.n, problem.k
    sets = _sets(2 * (m * k + n * k + m * n), l2_bytes)
    a = [torch.empty(m, k, device="cuda", dtype=torch.half).uniform_(-1, 1) for _ in range(sets)]
    b = [torch.empty(n, k, device="cuda", dtype=torch.half).uniform_(-1, 1) for _ in range(sets)]
    return _time_both(torch, lambda i: torch.nn.functional.linear(a[i], b[i]), sets)


def time_cudnn(torch, problem, l2_bytes: int) -> tuple[float, float]:
    torch.backends.cudnn.benchmark = True
    F = torch.nn.functional
    sets = _sets(2 * (problem.n * problem.h * problem.w * problem.c + problem.k * problem.r * problem.s * problem.c
                      + problem.n * problem.p * problem.q * problem.k), l2_bytes)
    fmt = torch.channels_last
    xs = [torch.empty(problem.n, problem.c, problem.h, problem.w, device="cuda", dtype=torch.half,
                      memory_format=fmt).uniform_(-1, 1) for _ in range(sets)]
    ws = [torch.empty(problem.k, problem.c, problem.r, problem.s, device="cuda", dtype=torch.half,
                      memory_format=fmt).uniform_(-1, 1) for _ in range(sets)]
    args = dict(stride=(problem.stride_h, problem.stride_w), padding=(problem.pad_h, problem.pad_w),
                dilation=(problem.dilation_h, problem.dilation_w))
    return _time_both(torch, lambda i: F.conv2d(xs[i], ws[i], **args), sets)


def measure_ceilings(torch) -> tuple[float, float]:
    """(copy bandwidth in bytes/s counting read + write, fp16 tensor rate in FLOP/s)."""
    src = torch.empty(2 << 30, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    copy_ms = time_calls(torch, lambda i: dst.copy_(src), 1)[0]
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.half)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.half)
    mm_ms = time_calls(torch, lambda i: a @ b, 1)[0]
    del src, dst, a, b
    torch.cuda.empty_cache()
    return 2 * (2 << 30) / (copy_ms * 1e-3), 2 * 8192 ** 3 / (mm_ms * 1e-3)


def retime_chosen(manifest: dict, profiler, problems, chosen: list, log) -> dict:
    """Time each workload's chosen kernel again, in this run; workload -> ms."""
    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(manifest, profiler, Path(tmp), timeout=120.0, extra_args=[], log=log)
        runner.device = device_of(profiler, query_gpu()[1])
        states = runner.plan(problems)
        for state, kernel in zip(states, chosen):
            state.pending = [kernel]
        runner.run(states)
        timed = {}
        for state in states:
            row = state.kept[0]
            if row["status"] != "ok":
                raise KernelgenError(f"{row['kernel']} on {row['workload']} was ok when profiled but is "
                                     f"{row['status']} now: {row['message']}")
            timed[row["workload"]] = row["runtime_ms"]
        return timed


def libraries(rows: list[dict]) -> str:
    """The libraries the rows were compared with, as the report names them: "cuDNN", "cuDNN / cuBLAS"."""
    used = {r["library"] for r in rows}
    return " / ".join(name for key, name in LIBRARY_NAMES.items() if key in used)


def report(rows: list[dict], ceilings: tuple, device, versions: dict, title: str) -> str:
    copy, rate = ceilings
    lib = libraries(rows)
    lines = [f"# {title}", "",
             f"Measured {rows[0]['measured_at']} on {device.gpu} (driver {device.driver}, CUDA {device.cuda}, "
             f"CUTLASS {device.cutlass}, PyTorch {versions['torch']}, cuDNN {versions['cudnn']}). Ceilings "
             f"measured in the same run: copy {copy / 1e12:.2f} TB/s, fp16 tensor {rate / 1e12:.0f} TFLOP/s. "
             f"{lib} is timed call by call, as PyTorch runs it, and replayed in a CUDA graph, without the "
             "host's cost per call.", "",
             f"| # | layer | chosen kernel | kernel ms | {lib} ms | in a graph ms | floor ms | kernel / {lib} | "
             f"{lib} % of floor |",
             "|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows):
        lines.append(f"| {i} | {r['layer']} | `{r['kernel']}` | {r['kernel_ms']:.4f} | {r['cudnn_ms']:.4f} | "
                     f"{r['cudnn_graph_ms']:.4f} | {r['floor_ms']:.4f} | {r['kernel_vs_cudnn']:.2f} | "
                     f"{100 * r['floor_ms'] / r['cudnn_ms']:.0f}% |")
    k, c, g, f = (sum(r[x] for r in rows) for x in ("kernel_ms", "cudnn_ms", "cudnn_graph_ms", "floor_ms"))
    lines.append(f"| sum | | | {k:.3f} | {c:.3f} | {g:.3f} | {f:.3f} | {k / c:.2f} | {100 * f / c:.0f}% |")
    lines += ["", summary(rows, "cudnn_ms", lib), summary(rows, "cudnn_graph_ms", f"{lib} in a graph")]
    return "\n".join(lines) + "\n"


def summary(rows: list[dict], library_ms: str, lib: str) -> str:
    """How the kernels fare against one of the library's timings: sum, wins, geometric mean, worst layer."""
    ratios = [r["kernel_ms"] / r[library_ms] for r in rows]
    total = sum(r["kernel_ms"] for r in rows) / sum(r[library_ms] for r in rows)
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    return (f"Against {lib}: sum {total:.2f}; kernels faster on {sum(x < 1 for x in ratios)} of {len(rows)} "
            f"layers; geometric mean {geo:.2f}; worst layer {max(ratios):.2f}.")


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = range(len(rows))
    width = 0.28
    fig, ax = plt.subplots(figsize=(12, 4.5), dpi=110)
    ax.bar([i - width for i in x], [r["kernel_ms"] for r in rows], width, label="chosen CUTLASS kernel")
    ax.bar(list(x), [r["cudnn_ms"] for r in rows], width, label=libraries(rows))
    ax.bar([i + width for i in x], [r["floor_ms"] for r in rows], width, label="floor")
    ax.set_xticks(list(x))
    ax.set_xticklabels([str(i) for i in x])
    ax.set_xlabel("layer")
    ax.set_ylabel("ms")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def compare(manifest_path, profiler, workloads, sets_dir, results_root, log=print) -> Path:
    torch = import_torch()
    manifest = json.loads(Path(manifest_path).read_text())
    set_name, _, problems = load_workloads(workloads, sets_dir)
    out_dir = gpu_dir(results_root, set_name, query_gpu()[0])
    hashes = {name: info["hash"] for name, info in manifest["kernels"].items()}
    best = select_best(load_set(out_dir, problems), problems, hashes)
    chosen = list(best["kernel"])
    log(f"timing the {len(problems)} chosen kernels again")
    kernel_ms = retime_chosen(manifest, profiler, problems, chosen, log)
    device = device_of(profiler, query_gpu()[1])
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    log("measuring the copy bandwidth and the fp16 tensor rate")
    ceilings = measure_ceilings(torch)
    versions = {"torch": torch.__version__, "cudnn": str(torch.backends.cudnn.version())}
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    rows = []
    for problem, kernel in zip(problems, chosen):
        library, cudnn_ms, graph_ms = time_library(torch, problem, l2)
        floor_ms = 1e3 * max(problem.flops / ceilings[1], problem.min_bytes() / ceilings[0])
        ms = kernel_ms[problem.name]
        rows.append({"workload": problem.name, "layer": layer(problem), "kernel": kernel, "kernel_ms": ms,
                     "cudnn_ms": cudnn_ms, "cudnn_graph_ms": graph_ms, "library": library, "floor_ms": floor_ms,
                     "kernel_vs_cudnn": ms / cudnn_ms, "kernel_vs_cudnn_graph": ms / graph_ms,
                     "gpu": device.gpu, "driver": device.driver, "cuda": device.cuda, "cutlass": device.cutlass,
                     "torch": versions["torch"], "cudnn": versions["cudnn"], "copy_tbps": ceilings[0] / 1e12,
                     "tensor_tflops": ceilings[1] / 1e12, "measured_at": stamp})
        log(f"  {problem.name}: kernel {ms:.4f} ms, {LIBRARY_NAMES[library]} {cudnn_ms:.4f} ms "
            f"({graph_ms:.4f} ms in a CUDA graph), floor {floor_ms:.4f} ms")
    text = pd.DataFrame(rows).to_csv(index=False, float_format="%.6g", lineterminator="\n")
    write_generated(out_dir / "compare.csv", text)
    title = f"{set_name}: chosen kernels vs {libraries(rows)} vs floor"
    write_generated(out_dir / "compare.md", report(rows, ceilings, device, versions, title))
    plot(rows, out_dir / "compare.png", title)
    log((out_dir / "compare.md").read_text())
    return out_dir


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelgen.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--profiler", required=True)
    parser.add_argument("--workloads", required=True)
    parser.add_argument("--sets-dir", required=True)
    parser.add_argument("--results", required=True)
    args = parser.parse_args(argv)
    try:
        compare(args.manifest, args.profiler, args.workloads, args.sets_dir, args.results,
                log=lambda m: print(m, flush=True))
    except (NoGpuError, NoTorchError) as e:
        print(f"scons compare: {e}", file=sys.stderr)
        return 2
    except KernelgenError as e:
        print(f"scons compare: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
