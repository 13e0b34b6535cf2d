"""Side by side, in one run on one GPU: each workload's chosen kernel, the library, and the floor,
each on GPU time, per layer and for the whole network.

    python -m kernelgen.compare --manifest generated/kernels.json --profiler generated/profiler \\
        --workloads resnet50 --sets-dir kernel_specs/workloads --results profile_results

The chosen kernels (from the set's CSVs) are timed again by the profiler with ``--graph``:
each timed batch of launches captured once in a CUDA graph and replayed between the events,
so a kernel shorter than a launch is not charged for the launch. The library PyTorch would
use, cuDNN for a convolution (``torch.nn.functional.conv2d`` on channels_last fp16 tensors,
benchmark mode), cuBLAS for a GEMM workload (``torch.nn.functional.linear``, D = A B^T), is
timed the way the profiler times kernels (operands rotated through four times the L2,
warm-up, calibration, a rest of 50 ms, 20 batches of about 1 ms, the median per call) three ways:
``library_ms``, each batch captured in a CUDA graph and replayed (the figure the ratios
use: GPU time against GPU time); ``library_kernel_ms``, the cross-check, the durations of the
kernels and memsets one call runs from torch.profiler, the median over calls; and
``library_calls_ms``, call by call as PyTorch runs it, which adds the host's cost per call
(PyTorch's dispatch, the library's plan lookup) where a call is too short to hide it.
The floor of a layer is max(FLOPs / tensor rate, bytes / copy bandwidth), both ceilings
measured in the same run (a device-to-device copy, an 8192^3 fp16 matrix product). The
network total of a column is the sum over layers of ``count`` (how many times the network
runs the layer) times its time. Writes ``compare.csv``, ``compare.md`` and ``compare.png``
beside the set's CSVs of this GPU; ``library`` names the library (``cudnn`` or ``cublas``),
``library_kernels`` what it ran for the layer (torch.profiler's names of the kernels and
memsets of one call, `` + ``-joined): the library's choice, which can change from run to run.
"""

import argparse
import json
import math
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from .errors import KernelgenError
from .ops import check_served, op_of
from .profile import NoGpuError, Runner, device_of, load_set_of, parse_set_arguments, query_gpu, set_arguments
from .reduce import choose, load_set
from .render import write_generated
from .report import layer
from .results import gpu_dir

# What each baseline path (ops' BASELINE, and for a problem of an epilogue those of time_library) is called.
LIBRARY_NAMES = {"cudnn": "cuDNN", "cublas": "cuBLAS", "cudnn + torch": "cuDNN + PyTorch's epilogue ops",
                 "cudnn fused": "cuDNN fused", "cublas + torch": "cuBLAS + PyTorch's epilogue ops",
                 "cublaslt epilogue": "cuBLASLt epilogue", "cudnn conv3d": "cuDNN conv3d (the network's 3-D call)",
                 "cudnn conv3d + torch": "cuDNN conv3d + PyTorch's epilogue ops"}
REPEATS = 20
BATCH_MS = 1.0
WARMUP = 5
REST_S = 0.05  # the GPU idles this long before the timed batches, as the profiler's default --rest-ms 50
PROFILED_CALLS = 50  # calls whose kernels torch.profiler records, for the median
MARK = "kernelgen_call_"  # torch.profiler annotation of one timed call


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


def _rested_events(torch) -> list:
    """REPEATS pairs of timing events, returned once the GPU has finished its work and idled REST_S."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(REPEATS)]
    torch.cuda.synchronize()
    time.sleep(REST_S)
    return events


def time_calls(torch, call, sets: int) -> tuple[float, float, float]:
    """(median, min, max) ms per call of call(i) over rotating operand sets, as the profiler times."""
    batch = _batch(torch, call, sets)
    events = _rested_events(torch)
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
    events = _rested_events(torch)
    for begin, end in events:
        begin.record()
        graph.replay()
        end.record()
    return _per_call(torch, events, batch)


ATTRIBUTED_EXCESS = 1.05  # the most attributed / recorded GPU time accepted


def launched(event, cpu):
    """The GPU work (kernels and memsets, torch.profiler's records with a name and a duration)
    the operators under ``event`` launched, in the order recorded."""
    yield from (k for k in event.kernels if not k.name.startswith(MARK))
    for child in event.cpu_children:
        if child.device_type == cpu:
            yield from launched(child, cpu)


def kernel_us(event, cpu) -> float:
    """Microseconds of GPU work the operators under ``event`` launched."""
    return sum(k.duration for k in launched(event, cpu))


def library_kernels(events, cpu) -> str:
    """What one call runs, as torch.profiler names it: the kernels and memsets of the annotated
    calls' most frequent sequence, joined by " + " (empty when no call launched any)."""
    runs = [" + ".join(k.name for k in launched(e, cpu)) for e in events
            if e.device_type == cpu and e.name.startswith(MARK)]
    return max(sorted(set(runs)), key=runs.count) if runs else ""


def kernel_ms_per_call(events, calls: int, cpu) -> float:
    """The median over the annotated calls of each call's GPU work, from torch.profiler's events
    (``cpu``: torch.autograd.DeviceType.CPU). Every GPU event of the profile must be attributed
    to some call, or the figure would leave work out: KernelgenError otherwise."""
    marks = [e for e in events if e.device_type == cpu and e.name.startswith(MARK)]
    if len(marks) != calls:
        raise KernelgenError(f"torch.profiler recorded {len(marks)} of the {calls} annotated calls")
    per_call = sorted(kernel_us(e, cpu) / 1e3 for e in marks)
    device = sum(e.time_range.elapsed_us() for e in events
                 if e.device_type != cpu and not e.name.startswith(MARK)) / 1e3
    # The kernels' own durations run about 2% over their events' time ranges on the H200 (torch
    # 2.11), so the sum may exceed what was recorded by a little; less than recorded means work
    # that no call accounts for.
    if not per_call[0] > 0 or not 0.99 * device <= sum(per_call) <= ATTRIBUTED_EXCESS * device:
        raise KernelgenError(f"torch.profiler attributed {sum(per_call):.4f} ms of GPU work to the calls, of "
                             f"{device:.4f} ms recorded (least per call: {per_call[0]:.4f} ms)")
    mid = len(per_call) // 2
    return per_call[mid] if len(per_call) % 2 else 0.5 * (per_call[mid - 1] + per_call[mid])


def time_kernels(torch, call, sets: int, calls: int = PROFILED_CALLS) -> tuple[float, str]:
    """(ms of GPU work per call of call(i), what a call runs), from torch.profiler: the kernels
    and memsets each call runs, summed, the median over ``calls`` calls (no launch gaps, no host
    cost); and their names (``library_kernels``)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    for i in range(WARMUP):
        call(i % sets)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            with record_function(f"{MARK}{i}"):
                call(i % sets)
        torch.cuda.synchronize()
    events = prof.events()
    return kernel_ms_per_call(events, calls, DeviceType.CPU), library_kernels(events, DeviceType.CPU)


def time_library(torch, problem, l2_bytes: int, log=print) -> tuple[str, float, float, float, str]:
    """(library, ms call by call, ms in a CUDA graph, kernel ms from torch.profiler, the kernels a
    call runs): what PyTorch runs ``problem`` with, cuDNN for a convolution, cuBLAS for a GEMM;
    for a problem of an epilogue, the fastest in a CUDA graph of that followed by PyTorch's ops and
    the library's own fused calls for it (``fused_baselines``: cuDNN's, cuBLASLt's); for a 3-D
    convolution's 2-D view, the fastest of those and the network's conv3d (``view_baselines``). The kernel
    time is NaN and the kernels empty, with the reason logged, when torch.profiler's events cannot
    be attributed to the calls."""
    op = op_of(problem)
    paths = [(op.BASELINE, *op.baseline_call(torch, problem, l2_bytes))]
    if getattr(problem, "epilogue", ""):
        paths[0] = (f"{op.BASELINE} + torch", *paths[0][1:])
        paths += op.fused_baselines(torch, problem, l2_bytes)
    paths += getattr(op, "view_baselines", lambda *args: [])(torch, problem, l2_bytes)
    with torch.no_grad():
        timed = []
        for library, call, sets in paths:
            timed.append((time_graph(torch, call, sets)[0], library, call, sets))
        graph_ms, library, call, sets = min(timed, key=lambda t: t[0])
        calls_ms = time_calls(torch, call, sets)[0]
        try:
            kernel_ms, kernels = time_kernels(torch, call, sets)
        except KernelgenError as e:
            log(f"  {problem.name}: no kernel time from torch.profiler: {e}")
            kernel_ms, kernels = math.nan, ""
    return library, calls_ms, graph_ms, kernel_ms, kernels


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


def retime_chosen(manifest: dict, profiler, problems, chosen: list, log, settings=None) -> dict:
    """Time each workload's chosen kernel again, in this run, each batch of launches replayed
    from a CUDA graph (the profiler's --graph), with the launch setting its row records
    (``settings``, one a workload; "" for none); workload -> ms."""
    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(manifest, profiler, Path(tmp), timeout=120.0, extra_args=["--graph"], log=log)
        runner.device = device_of(profiler, query_gpu()[1])
        states = runner.plan(problems)
        for state, kernel, setting in zip(states, chosen, settings or [""] * len(chosen)):
            state.pending = [kernel]
            state.settings = {kernel: setting} if setting else {}
        runner.run(states)
        timed = {}
        for state in states:
            row = state.kept[0]
            if row["status"] != "ok":
                raise KernelgenError(f"{row['kernel']} on {row['workload']} was ok when profiled but is "
                                     f"{row['status']} now: {row['message']}")
            timed[row["workload"]] = row["runtime_ms"]
        return timed


PLAIN = ("cudnn", "cublas")  # the libraries a layer of no epilogue is compared with


def libraries(rows: list[dict]) -> str:
    """The libraries the rows were compared with, as the report names them: "cuDNN", "cuDNN / cuBLAS"."""
    used = {r["library"] for r in rows}
    return " / ".join(name for key, name in LIBRARY_NAMES.items() if key in used)


def library_label(rows: list[dict]) -> str:
    """The report's name of the rows' library column: the libraries (``libraries``) where the rows
    are of plain layers, "library" where fused layers were compared with several paths."""
    return libraries(rows) if {r["library"] for r in rows} <= set(PLAIN) else "library"


def _ms(value: float, digits: int = 4) -> str:
    return "–" if math.isnan(value) else f"{value:.{digits}f}"


def network_total(rows: list[dict], column: str) -> float:
    """The network's time in ``column``: each layer's time times how many times the network runs it."""
    return sum(r["count"] * r[column] for r in rows)


def report(rows: list[dict], ceilings: tuple, device, versions: dict, title: str) -> str:
    copy, rate = ceilings
    col = library_label(rows)  # the table's name of the library
    lib = "the library" if col == "library" else col  # the prose's
    calls = sum(r["count"] for r in rows)
    lines = [f"# {title}", "",
             f"Measured {rows[0]['measured_at']} on {device.gpu} (driver {device.driver}, CUDA {device.cuda}, "
             f"CUTLASS {device.cutlass}, PyTorch {versions['torch']}, cuDNN {versions['cudnn']}). Ceilings "
             f"measured in the same run: copy {copy / 1e12:.2f} TB/s, fp16 tensor {rate / 1e12:.0f} TFLOP/s.", "",
             "GPU time against GPU time: the chosen kernels are timed by the profiler with each batch of "
             f"launches replayed from a CUDA graph (`--graph`), {lib} with each batch of calls replayed from a "
             f"CUDA graph (`library_ms`, the figure the ratios use). Cross-check: {lib}'s kernel time from "
             "torch.profiler, the kernels and memsets of one call summed, the median over "
             f"{PROFILED_CALLS} calls. Call by call, as PyTorch runs it, {lib} also pays the host's cost per call. "
             "The network total of a column is the sum over layers of count x time."
             + (f" `library` is, for each layer, the fastest of the paths it was timed with ({libraries(rows)}; "
                "each layer's is named in the list at the end)." if col == "library" else ""), "",
             f"| # | layer | count | chosen kernel | kernel ms | {col} ms | {col} kernels ms | "
             f"{col} call by call ms | floor ms | kernel / {col} | {col} % of floor |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows):
        lines.append(f"| {i} | {r['layer']} | {r['count']} | `{r['kernel']}` | {r['kernel_ms']:.4f} | "
                     f"{r['library_ms']:.4f} | {_ms(r['library_kernel_ms'])} | {r['library_calls_ms']:.4f} | "
                     f"{r['floor_ms']:.4f} | {r['kernel_vs_library']:.2f} | "
                     f"{100 * r['floor_ms'] / r['library_ms']:.0f}% |")
    k, g, t, c, f = (network_total(rows, x) for x in
                     ("kernel_ms", "library_ms", "library_kernel_ms", "library_calls_ms", "floor_ms"))
    lines.append(f"| network | | {calls} | | {k:.3f} | {g:.3f} | {_ms(t, 3)} | {c:.3f} | {f:.3f} | {k / g:.2f} | "
                 f"{100 * f / g:.0f}% |")
    lines += ["", f"Network total ({calls} layer calls): chosen kernels {k:.3f} ms, {lib} {g:.3f} ms in a CUDA "
                  f"graph, floor {f:.3f} ms; kernels / {col} {k / g:.2f}, kernels / floor {k / f:.2f}.", "",
              summary(rows, "library_ms", f"{lib} in a CUDA graph")]
    if not math.isnan(t):
        lines.append(summary(rows, "library_kernel_ms", f"{lib}'s kernel time (torch.profiler)"))
    lines.append(summary(rows, "library_calls_ms", f"{lib} call by call"))
    ran = [(i, r) for i, r in enumerate(rows) if r.get("library_kernels") or col == "library"]
    if ran:
        lines += ["", f"What {lib} ran, per layer (torch.profiler's names of one call's kernels and memsets):", ""]
        lines += [f"- {i}" + (f" ({LIBRARY_NAMES.get(r['library'], r['library'])})" if col == "library" else "")
                  + (f": `{r['library_kernels'].replace('`', '')}`" if r.get("library_kernels") else "")
                  for i, r in ran]
    return "\n".join(lines) + "\n"


def summary(rows: list[dict], library_ms: str, lib: str) -> str:
    """How the kernels fare against one of the library's timings: the network total (count x time),
    wins, geometric mean and worst of the per-layer ratios."""
    ratios = [r["kernel_ms"] / r[library_ms] for r in rows]
    total = network_total(rows, "kernel_ms") / network_total(rows, library_ms)
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    return (f"Against {lib}: network {total:.2f}; kernels faster on {sum(x < 1 for x in ratios)} of {len(rows)} "
            f"layers; geometric mean {geo:.2f}; worst layer {max(ratios):.2f}.")


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = range(len(rows))
    width = 0.28
    fig, ax = plt.subplots(figsize=(12, 4.5), dpi=110)
    ax.bar([i - width for i in x], [r["kernel_ms"] for r in rows], width, label="chosen kernel (CUDA graph)")
    ax.bar(list(x), [r["library_ms"] for r in rows], width, label=f"{library_label(rows)} (CUDA graph)")
    ax.bar([i + width for i in x], [r["floor_ms"] for r in rows], width, label="floor")
    ax.set_xticks(list(x))
    ax.set_xticklabels([str(i) for i in x])
    ax.set_xlabel("layer")
    ax.set_ylabel("ms per call")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def chosen_kernels(manifest: dict, out_dir, problems) -> tuple[list[str], list[str]]:
    """(kernels, settings): the kernel the header of this build would choose for each workload,
    among the manifest's kernels that serve it the fastest whose errors are within that kernel's
    own tolerance (reduce.choose), and the launch setting its row records ("" for none)."""
    kernels = manifest["kernels"]
    hashes = {name: info["hash"] for name, info in kernels.items()}
    best = choose(load_set(out_dir, problems), problems, hashes, kernels)
    return list(best["kernel"]), list(best["setting"])


def compare(manifest_path, profiler, workloads, sets_dir, results_root, log=print, resolved_file=None) -> Path:
    torch = import_torch()
    manifest = json.loads(Path(manifest_path).read_text())
    set_name, workload_file, problems = load_set_of(workloads, sets_dir, resolved_file)
    check_served(problems, manifest["kernels"].values(), workload_file)
    out_dir = gpu_dir(results_root, set_name, query_gpu()[0])
    chosen, settings = chosen_kernels(manifest, out_dir, problems)
    log(f"timing the {len(problems)} chosen kernels again")
    kernel_ms = retime_chosen(manifest, profiler, problems, chosen, log, settings)
    device = device_of(profiler, query_gpu()[1])
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    log("measuring the copy bandwidth and the fp16 tensor rate")
    ceilings = measure_ceilings(torch)
    versions = {"torch": torch.__version__, "cudnn": str(torch.backends.cudnn.version())}
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    rows = []
    for problem, kernel in zip(problems, chosen):
        library, calls_ms, graph_ms, library_kernel_ms, kernels = time_library(torch, problem, l2, log)
        floor_ms = 1e3 * max(problem.flops / ceilings[1], problem.min_bytes() / ceilings[0])
        ms = kernel_ms[problem.name]
        rows.append({"workload": problem.name, "layer": layer(problem), "count": problem.count, "kernel": kernel,
                     "kernel_ms": ms, "library": library, "library_ms": graph_ms,
                     "library_kernel_ms": library_kernel_ms, "library_calls_ms": calls_ms, "floor_ms": floor_ms,
                     "kernel_vs_library": ms / graph_ms, "library_kernels": kernels,
                     "gpu": device.gpu, "driver": device.driver, "cuda": device.cuda, "cutlass": device.cutlass,
                     "torch": versions["torch"], "cudnn": versions["cudnn"], "copy_tbps": ceilings[0] / 1e12,
                     "tensor_tflops": ceilings[1] / 1e12, "measured_at": stamp})
        log(f"  {problem.name} (x{problem.count}): kernel {ms:.4f} ms, {LIBRARY_NAMES[library]} {graph_ms:.4f} ms "
            f"in a CUDA graph ({_ms(library_kernel_ms)} ms of kernels by torch.profiler, {calls_ms:.4f} ms call "
            f"by call), floor {floor_ms:.4f} ms")
    text = pd.DataFrame(rows).to_csv(index=False, float_format="%.6g", lineterminator="\n")
    write_generated(out_dir / "compare.csv", text)
    title = f"{set_name}: chosen kernels vs {library_label(rows)} vs floor"
    write_generated(out_dir / "compare.md", report(rows, ceilings, device, versions, title))
    plot(rows, out_dir / "compare.png", title)
    log((out_dir / "compare.md").read_text())
    return out_dir


def main(argv=None) -> int:
    args = parse_set_arguments(set_arguments(argparse.ArgumentParser(
        prog="python -m kernelgen.compare", description=__doc__.split("\n\n")[0])), argv)
    try:
        compare(args.manifest, args.profiler, args.workloads, args.sets_dir, args.results,
                log=lambda m: print(m, flush=True), resolved_file=args.resolved)
    except (NoGpuError, NoTorchError) as e:
        print(f"scons compare: {e}", file=sys.stderr)
        return 2
    except KernelgenError as e:
        print(f"scons compare: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
