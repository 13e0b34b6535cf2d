"""A whole model through best_kernels.h: the model with every convolution chain the header covers
swapped for one fused call (swap.py), checked against PyTorch's output, and its forward pass timed
in a CUDA graph against PyTorch eager and torch.compile, each timed the same way.

    python run_model.py --model resnet50 --batch 256 [--set resnet50_b256] [--size 224 | --input CxHxW | --input CxTxHxW]
        [--compile both|model|swapped|none] [--breakdown N]

(after python setup.py build_ext --inplace with the set's library; needs a GPU.) The model is
torchvision's, built without weights (none is downloaded), in eval mode, channels_last, of the
header's element type (best_conv.element(); a video model's, of a CxTxHxW --input, channels_last_3d:
NDHWC), its parameters of one value throughout (zero biases,
a zero classifier, layer scales, batch norms' weights) and its batch norms' statistics drawn again,
seeded (varied()), so that the output check exercises every bias, scale and fold. The input is
uniform in [-1, 1). PyTorch eager runs with cuDNN's benchmark mode; torch.compile with mode="max-autotune-no-cudagraphs" (its own CUDA
graphs would nest in the timing's), of the model (compiled_ms) and of the swapped model
(swapped_compiled_ms: swapped through swap.compilable, the header's calls opaque to the compiler,
which compiles what is left to PyTorch around them; --compile says which, default both). Each forward pass is captured once in a CUDA graph and replayed;
the figure is the median over --repeats batches of replays (each batch about 20 ms), after a rest
of REST_S. The output check: the largest element difference against eager's, relative to eager's
largest element (max_rel_error: the swapped model's, and the compiled swapped model's where run, the
larger), within TOLERANCE. --breakdown N then prints, for each forward pass timed, its N longest GPU
kernels (torch.profiler over graph replays): where a pass's time goes.

One row a (model, batch) is written into profile_results/<set>/<gpu>/model.csv (a row of the same
model and batch replaced): model, batch, swapped_ms, eager_ms, compiled_ms, swapped_compiled_ms,
max_rel_error, and what
it ran on and what was swapped. Exit status 0 when the output matched.
"""

import argparse
import csv
import datetime
import sys
import time
from pathlib import Path

import torch

import best_conv
from swap import compilable, swap

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "site_scons"))
from kernelgen.errors import KernelgenError  # noqa: E402
from kernelgen.importer import no_weights, parse_input  # noqa: E402
from kernelgen.results import gpu_dir  # noqa: E402

DTYPE = {"f16": torch.half, "bf16": torch.bfloat16}[best_conv.element()]
TOLERANCE = {"f16": 2e-2, "bf16": 8e-2}[best_conv.element()]  # a whole network's rounding, not one layer's
REST_S = 0.5
COLUMNS = ["model", "batch", "swapped_ms", "eager_ms", "compiled_ms", "swapped_compiled_ms", "max_rel_error", "swapped", "left",
           "gpu", "torch", "dtype", "measured_at"]


def build(name: str, batch: int, shape: tuple = (3, 224, 224)):
    """The model and its input of ``batch`` x ``shape`` (CxHxW, or CxTxHxW for a video model)."""
    import torchvision

    torch.manual_seed(0)
    layout = torch.channels_last_3d if len(shape) == 4 else torch.channels_last
    model = varied(torchvision.models.get_model(name, **no_weights(torchvision, name)).eval())
    model = model.to(device="cuda", dtype=DTYPE, memory_format=layout)
    x = torch.empty(batch, *shape, device="cuda", dtype=DTYPE).uniform_(-1, 1)
    return model, x.contiguous(memory_format=layout)


def varied(model):
    """``model`` with every parameter whose elements are all one value drawn again (seeded by the
    caller): a zero one in [-0.1, 0.1), one of a small value (a layer scale of 1e-6) in [0.5, 1.0)
    of its sign, any other within 20% of its value; and its batch norms' statistics made other than
    the identity. An untrained model's zero biases, zero classifier (ViT's, whose output is then all
    zeros) and tiny layer scales would hide from the output check a bias, a scale or a whole branch
    that the swap got wrong."""
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 1 and p.is_floating_point() and bool((p == p.flatten()[0]).all()):
                value = float(p.flatten()[0])
                if value == 0:
                    p.uniform_(-0.1, 0.1)
                elif abs(value) < 0.01:
                    p.uniform_(0.5, 1.0).mul_(1.0 if value > 0 else -1.0)
                else:
                    p.uniform_(0.8, 1.2).mul_(value)
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
                m.running_mean.uniform_(-0.1, 0.1), m.running_var.uniform_(0.8, 1.2)
    return model


def relative_error(got, expected) -> float:
    """The largest element difference of ``got`` from ``expected``, relative to ``expected``'s
    largest element; a ValueError when ``expected`` is all zeros (nothing to compare against)."""
    largest = float(expected.abs().max())
    if largest == 0:
        raise ValueError("PyTorch's output is all zeros: the output check has nothing to compare against")
    return float((got - expected).abs().max()) / largest


def captured(forward, x):
    """``forward(x)`` captured in a CUDA graph (after three warm-up passes); call under no_grad."""
    for _ in range(3):
        forward(x)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        forward(x)
    return graph


def graph_ms(forward, x, repeats: int) -> float:
    """The median time of one replay of ``forward(x)`` captured in a CUDA graph."""
    with torch.no_grad():
        graph = captured(forward, x)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        torch.cuda.synchronize()
        count = max(1, int(20.0 / max(start.elapsed_time(stop), 1e-3)))
        time.sleep(REST_S)
        times = []
        for _ in range(repeats):
            start.record()
            for _ in range(count):
                graph.replay()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / count)
    times.sort()
    return times[len(times) // 2]


def kernel_table(kernels, replays: int, top: int) -> list:
    """(name, launches a pass, ms a pass) of the ``top`` kernels by GPU time, and ("(the other N)",
    launches, ms) for the rest, from ``kernels``: (name, launches, microseconds) over ``replays``
    passes, a name possibly more than once."""
    totals = {}
    for name, launches, us in kernels:
        count, total = totals.get(name, (0, 0.0))
        totals[name] = (count + launches, total + us)
    ranked = sorted(totals.items(), key=lambda item: (-item[1][1], item[0]))
    rows = [(name, count / replays, us / 1000 / replays) for name, (count, us) in ranked[:top]]
    rest = ranked[top:]
    if rest:
        rows.append((f"(the other {len(rest)})", sum(c for _, (c, _) in rest) / replays,
                     sum(us for _, (_, us) in rest) / 1000 / replays))
    return rows


def breakdown(forward, x, top: int, replays: int = 20) -> list:
    """kernel_table of the GPU kernels of ``forward(x)``'s CUDA graph, from torch.profiler over
    ``replays`` replays (the profiler's figures: each kernel alone, not the graph's overlap)."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        graph = captured(forward, x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(replays):
                graph.replay()
            torch.cuda.synchronize()
    timed = [(e.key, e.count, getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0))
             for e in prof.key_averages()]
    return kernel_table([kernel for kernel in timed if kernel[2] > 0], replays, top)


def print_breakdown(label: str, rows: list) -> None:
    total = sum(ms for _, _, ms in rows)
    print(f"  {label}: {total:.4f} ms of kernels a pass (torch.profiler)")
    for name, launches, ms in rows:
        print(f"    {ms:8.4f} ms {100 * ms / max(total, 1e-12):5.1f}% {launches:6.1f}x  {name[:150]}")


def write_row(path: Path, row: dict) -> None:
    rows = []
    if path.is_file():
        with path.open(newline="") as f:
            rows = [r for r in csv.DictReader(f) if (r["model"], r["batch"]) != (row["model"], str(row["batch"]))]
    rows.append(row)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)


def parse_args(argv=None) -> tuple:
    """(the parsed arguments, the input's shape: CxHxW or CxTxHxW); a bad value ends the process
    with argparse's one-line error naming the option."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--set", default=None, help="the set whose results folder gets model.csv "
                        "(default: <model>_b<batch>)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--size", type=int, default=224, help="the input's height and width (inception_v3: 299)")
    parser.add_argument("--input", default=None, metavar="CxHxW",
                        help="the input's shape instead of 3x<size>x<size>: CxHxW, or CxTxHxW for a video model")
    parser.add_argument("--compile", choices=["both", "model", "swapped", "none"], default="both",
                        help="what torch.compile compiles and times: the model, the swapped model, both or neither "
                        "(the model's autotuning is long)")
    parser.add_argument("--no-compile", dest="compile", action="store_const", const="none", help="--compile none")
    parser.add_argument("--breakdown", type=int, default=0, metavar="N",
                        help="after timing, print each timed forward pass's N longest GPU kernels (torch.profiler)")
    args = parser.parse_args(argv)
    for name in ("batch", "size", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.breakdown < 0:
        parser.error(f"--breakdown must be 0 or more, got {args.breakdown}")
    shape = (3, args.size, args.size)
    if args.input is not None:
        try:
            shape = parse_input(args.input)
        except KernelgenError as e:
            parser.error(str(e).replace("INPUT=", "--input "))
        if len(shape) not in (3, 4):
            parser.error(f"--input {args.input!r}: expected CxHxW or CxTxHxW")
    return args, shape


def main() -> int:
    args, shape = parse_args()
    torch.backends.cudnn.benchmark = True
    model, x = build(args.model, args.batch, shape)
    swapped, report = swap(model, best_conv, x)
    with torch.no_grad():
        expected, got = model(x).float(), swapped(x).float()
    try:
        error = relative_error(got, expected)
    except ValueError as e:
        sys.exit(f"run_model.py: --model {args.model}: {e}")
    print(f"{args.model} batch {args.batch}: swapped {sum(report['swapped'].values())} convolution chains "
          f"({', '.join(f'{n} {e}' for e, n in sorted(report['swapped'].items()))}) and "
          f"{sum(report['linear'].values())} linear ({', '.join(f'{n} {e}' for e, n in sorted(report['linear'].items()))}"
          f"{'; the projections of ' + str(report['attention']) + ' attentions among them' if report['attention'] else ''}), "
          f"{len(report['left'])} convolutions and {len(report['linear_left'])} linear layers left to PyTorch; "
          f"max_rel_error {error:.2e}", flush=True)
    for target, why in report["left"] + report["linear_left"]:
        print(f"  left: {target}: {why}")
    eager_ms = graph_ms(model, x, args.repeats)
    swapped_ms = graph_ms(swapped, x, args.repeats)
    timed = {"eager": model, "swapped": swapped}
    compiled_ms = swapped_compiled_ms = float("nan")
    if args.compile in ("both", "model"):
        compiled = timed["compiled"] = torch.compile(model, mode="max-autotune-no-cudagraphs")
        compiled_ms = graph_ms(compiled, x, args.repeats)
    if args.compile in ("both", "swapped"):
        swapped_compiled = torch.compile(swap(model, compilable(best_conv), x)[0], mode="max-autotune-no-cudagraphs")
        with torch.no_grad():
            compiled_error = relative_error(swapped_compiled(x).float(), expected)
        print(f"  swapped and compiled: max_rel_error {compiled_error:.2e}", flush=True)
        error = max(error, compiled_error)
        swapped_compiled_ms = graph_ms(swapped_compiled, x, args.repeats)
        timed["swapped and compiled"] = swapped_compiled
    print(f"  swapped {swapped_ms:.4f} ms, eager {eager_ms:.4f} ms ({swapped_ms / eager_ms:.2f}x), compiled "
          f"{compiled_ms:.4f} ms ({swapped_ms / compiled_ms:.2f}x), swapped and compiled {swapped_compiled_ms:.4f} ms "
          f"({swapped_compiled_ms / compiled_ms:.2f}x compiled)")
    gpu = torch.cuda.get_device_name()
    row = {"model": args.model, "batch": args.batch, "swapped_ms": f"{swapped_ms:.6g}", "eager_ms": f"{eager_ms:.6g}",
           "compiled_ms": f"{compiled_ms:.6g}", "swapped_compiled_ms": f"{swapped_compiled_ms:.6g}",
           "max_rel_error": f"{error:.3g}",
           "swapped": " ".join([f"{e}:{n}" for e, n in sorted(report["swapped"].items())]
                               + [f"linear/{e}:{n}" for e, n in sorted(report["linear"].items())]),
           "left": len(report["left"]) + len(report["linear_left"]),
           "gpu": gpu, "torch": torch.__version__, "dtype": best_conv.element(),
           "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    out = gpu_dir(ROOT / "profile_results", args.set or f"{args.model}_b{args.batch}", gpu) / "model.csv"
    write_row(out, row)
    print(f"  -> {out}")
    ok = error <= TOLERANCE
    if not ok:
        print(f"  output differs from PyTorch's: max_rel_error {error:.2e} > {TOLERANCE}")
    if args.breakdown:  # after every timing, and the row written: the profiler's passes time nothing
        for label, forward in timed.items():
            print_breakdown(label, breakdown(forward, x, args.breakdown))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
