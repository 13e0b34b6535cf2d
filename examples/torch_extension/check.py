"""Checks best_conv.conv2d against torch.nn.functional.conv2d on every problem of best_kernels.h
and on a few it was not profiled on, and best_conv.linear against torch.nn.functional.linear on its
GEMM problems, and times both with CUDA events; a bad input must raise.

    python check.py [--repeats N]      (after python setup.py build_ext --inplace; needs a GPU)

Prints one row per problem; exit status 0 when every output matched (relative L2 error and the
largest element error, relative to the largest reference element, both within the profiler's
tolerance: 1e-3 for float16, 8e-3 for bfloat16), every layer shaped to run on its own output did
so right behind itself (the check a kernel of programmatic dependent launch must pass: it waits
for the kernel before it), and every bad input raised. The tensors are of the header's element
type (best_conv.element()). Times are taken as the profiler takes them: operands rotated over
copies that cover four times the L2 cache, laid out in one allocation as the profiler's are; the
median over batches of about 1 ms, each batch sized from the time per call measured as it is
timed, each timing after the GPU rested (REST_S). `ms` is the GPU's time with each batch of calls
captured once in a CUDA graph and replayed (each call writing its set's output through `out=`),
beside the profiler's; `torch ms` the same for torch.nn.functional.conv2d; `calls ms` the calls
one after another from Python, PyTorch's and the extension's cost per call included.
"""

import argparse
import sys
import time

import torch
import torch.nn.functional as F

import best_conv

# The header's element type, and the tolerance the profiler verified its kernels with.
DTYPE = {"f16": torch.half, "bf16": torch.bfloat16}[best_conv.element()]
TOLERANCE = {"f16": 1e-3, "bf16": 8e-3}[best_conv.element()]


def operands(n, h, w, c, k, r, s, groups=1):
    x = torch.empty(n, c, h, w, device="cuda").uniform_(-1, 1).to(DTYPE).to(memory_format=torch.channels_last)
    wt = torch.empty(k, c // groups, r, s, device="cuda").uniform_(-1, 1).to(DTYPE).to(
        memory_format=torch.channels_last)
    return x, wt


def unpack(problem):
    """(the 13 sizes of a problem, its groups): best_conv.profiled()'s problems end with groups."""
    return tuple(problem[:13]), (problem[13] if len(problem) > 13 else 1)


def operand_sets(n, h, w, c, k, r, s, p, q, groups=1):
    """Copies of (x, w, y) covering four times the L2 cache (at least one), laid out as the profiler
    lays them: one allocation, each set's x, w and y back to back, each 256-byte aligned."""
    l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    shapes = [(n, h, w, c), (k, r, s, c // groups), (n, p, q, k)]  # NHWC, KRS(C/groups), NPQK
    sizes = [2 * a * b * e * f for a, b, e, f in shapes]
    offsets = [0]
    for size in sizes:
        offsets.append(offsets[-1] + -(-size // 256) * 256)
    set_bytes = offsets[-1]
    count = max(1, min(64, -(-4 * l2 // set_bytes)))
    pool = torch.empty(count * set_bytes, dtype=torch.uint8, device="cuda")
    sets = []
    for i in range(count):
        # each a channels_last view (N, C, H, W) of its NHWC bytes
        x, wt, y = (pool[i * set_bytes + o:i * set_bytes + o + size].view(DTYPE).view(shape).permute(0, 3, 1, 2)
                    for o, size, shape in zip(offsets, sizes, shapes))
        x.copy_(torch.empty(x.shape, device="cuda").uniform_(-1, 1))
        wt.copy_(torch.empty(wt.shape, device="cuda").uniform_(-1, 1))
        sets.append((x, wt, y))
    return sets


# Before each timing the GPU rests this long: the profiler's timing of a kernel follows its
# reference convolution and the check of the output, a light load, so that its launches start at
# the clocks of a GPU under its power limit's average; timed back to back after other heavy work,
# large layers run at the lower clocks the power limit then sets.
REST_S = 0.5


def time_ms(function, sets, repeats, graph):
    """The median over `repeats` batches of about 1 ms of the time per call of function(i), i
    cycling over `sets`: each batch replayed from a CUDA graph (`graph`), or called from Python.
    The batch's size comes from the time per call measured the same way (one pass over the sets,
    replayed, or called), as the profiler sizes its batches from the kernel's own time: sized from
    Python's slower calls, a graph of small kernels would hold fewer of them, and the start of
    each replay would weigh on each call."""
    for i in range(10):
        function(i % sets)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def elapsed(run, count):
        start.record()
        run()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / count

    def calls(count):
        for i in range(count):
            function(i % sets)

    def batch(count):
        """run() of a batch of `count` calls: replayed from a graph, or called."""
        if not graph:
            return lambda: calls(count)
        replay = torch.cuda.CUDAGraph()
        with torch.cuda.graph(replay, capture_error_mode="relaxed"):
            calls(count)
        replay.replay()
        return replay.replay

    per_call = elapsed(batch(sets), sets)
    count = -(-max(1, round(1.0 / max(per_call, 1e-4))) // sets) * sets  # whole passes over the sets
    run = batch(count)
    torch.cuda.synchronize()
    time.sleep(REST_S)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for begin, end in events:  # queued back to back, read after the last, as the profiler times
        begin.record()
        run()
        end.record()
    torch.cuda.synchronize()
    return sorted(begin.elapsed_time(end) / count for begin, end in events)[repeats // 2]


def measure(label, problem, profiled_ms, repeats) -> dict:
    """Times one problem: the launcher (replayed and call by call) and torch.nn.functional.conv2d;
    keeps its first output for verify(), whose float32 reference runs once every problem is
    timed: no timing follows a reference convolution, the heaviest work of this script, which
    can leave the GPU at the lower clocks of its power limit."""
    (n, h, w, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w), groups = unpack(problem)
    p = (h + 2 * pad_h - dil_h * (r - 1) - 1) // stride_h + 1
    q = (w + 2 * pad_w - dil_w * (s - 1) - 1) // stride_w + 1
    sets = operand_sets(n, h, w, c, k, r, s, p, q, groups)
    x, wt, _ = sets[0]
    args = ((stride_h, stride_w), (pad_h, pad_w), (dil_h, dil_w))
    kernel = best_conv.kernel_for(x, wt, *args, groups=groups)
    y = best_conv.conv2d(x, wt, *args, groups=groups)
    written = best_conv.conv2d(x, wt, *args, out=sets[0][2], groups=groups)
    same = written.data_ptr() == sets[0][2].data_ptr() and torch.equal(written, y)  # out= writes the same output
    # Each call writes its set's output, as the profiler's launches do.
    ours = lambda i: best_conv.conv2d(sets[i][0], sets[i][1], *args, out=sets[i][2], groups=groups)  # noqa: E731
    ours_ms, calls_ms = (time_ms(ours, len(sets), repeats, graph) for graph in (True, False))
    torch_ms = time_ms(lambda i: F.conv2d(sets[i][0], sets[i][1], None, *args, groups), len(sets), repeats, True)
    return {"label": label, "x": x, "w": wt, "args": args, "groups": groups, "y": y, "same": same, "kernel": kernel,
            "ms": ours_ms, "calls_ms": calls_ms, "torch_ms": torch_ms, "profiled_ms": profiled_ms}


def verify(m: dict) -> bool:
    """Prints a measured problem's row, its output checked against the float32 reference."""
    expected = F.conv2d(m["x"].float(), m["w"].float(), None, *m["args"], m["groups"])
    error = (m["y"].float() - expected)
    rel_l2 = (error.norm() / expected.norm()).item()
    rel_max = (error.abs().max() / expected.abs().max()).item()
    ok = bool(torch.isfinite(m["y"]).all()) and rel_l2 <= TOLERANCE and rel_max <= TOLERANCE and m["same"]
    profiled_ms = m["profiled_ms"]
    shown = f"{profiled_ms:.4f}" if profiled_ms else "-"
    ratio = f"{m['ms'] / profiled_ms:.2f}" if profiled_ms else "-"
    print(f"{m['label']:<22} {m['ms']:8.4f} {shown:>8} {ratio:>5} {m['calls_ms']:8.4f} {m['torch_ms']:8.4f} "
          f"{rel_l2:9.2e} {rel_max:9.2e} {'ok' if ok else 'MISMATCH'} {m['kernel']}", flush=True)
    return ok


def chained(label, problem, rounds=20) -> bool:
    """A layer whose output is shaped as its input, run on its own output right after: y2 =
    conv(conv(x)), `rounds` such pairs captured in one CUDA graph and replayed, so that each call
    follows the one before it on the GPU with no gap. A kernel launched with programmatic
    dependent launch (a _pdl kernel) may start while the first still writes y1; it must wait for
    it. Each y2 is checked against the float32 convolution of the y1 it was given."""
    (n, h, w, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w), groups = unpack(problem)
    x, wt = operands(n, h, w, c, k, r, s, groups)
    wt = wt / (r * s * c // groups) ** 0.5  # keeps y1 and y2 of the order of x
    args = ((stride_h, stride_w), (pad_h, pad_w), (dil_h, dil_w))
    pairs = [(torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))) for _ in range(rounds)]
    best_conv.conv2d(x, wt, *args, groups=groups)  # prepared once outside the capture
    replay = torch.cuda.CUDAGraph()
    with torch.cuda.graph(replay, capture_error_mode="relaxed"):
        for y1, y2 in pairs:
            best_conv.conv2d(x, wt, *args, out=y1, groups=groups)
            best_conv.conv2d(y1, wt, *args, out=y2, groups=groups)
    replay.replay()
    torch.cuda.synchronize()
    errors = []
    for y1, y2 in pairs:
        expected = F.conv2d(y1.float(), wt.float(), None, *args, groups)
        errors.append(((y2.float() - expected).norm() / expected.norm()).item())
    ok = all(e <= TOLERANCE for e in errors)  # a NaN left in y1 or y2 fails it too
    worst = max(errors, key=lambda e: e if e == e else float("inf"))
    print(f"{label:<40} {'ok' if ok else 'MISMATCH'}: worst relative L2 error {worst:.2e} over {rounds} "
          f"back-to-back pairs, {best_conv.kernel_for(x, wt, *args, groups=groups)}", flush=True)
    return ok


def linear_checked(label, problem, profiled_ms, repeats) -> bool:
    """best_conv.linear on a GEMM problem of the header (m, n, k), timed as measure() times a
    convolution and checked against torch.nn.functional.linear in float32."""
    m, n, k = problem
    x = torch.empty(m, k, device="cuda").uniform_(-1, 1).to(DTYPE)
    wt = torch.empty(n, k, device="cuda").uniform_(-1, 1).to(DTYPE)
    y = best_conv.linear(x, wt)
    ours_ms = time_ms(lambda i: best_conv.linear(x, wt, out=y), 1, repeats, True)
    torch_ms = time_ms(lambda i: F.linear(x, wt), 1, repeats, True)
    expected = F.linear(x.float(), wt.float())
    error = y.float() - expected
    rel_l2, rel_max = (error.norm() / expected.norm()).item(), (error.abs().max() / expected.abs().max()).item()
    ok = bool(torch.isfinite(y).all()) and rel_l2 <= TOLERANCE and rel_max <= TOLERANCE
    shown = f"{profiled_ms:.4f}" if profiled_ms else "-"
    ratio = f"{ours_ms / profiled_ms:.2f}" if profiled_ms else "-"
    print(f"{label:<22} {ours_ms:8.4f} {shown:>8} {ratio:>5} {'-':>8} {torch_ms:8.4f} {rel_l2:9.2e} {rel_max:9.2e} "
          f"{'ok' if ok else 'MISMATCH'} {best_conv.linear_kernel_for(x, wt)}", flush=True)
    return ok


def refuses(label, call) -> bool:
    try:
        call()
    except (RuntimeError, ValueError, TypeError) as e:
        print(f"{label:<40} refused: {str(e).splitlines()[0]}")
        return True
    print(f"{label:<40} NOT REFUSED")
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    repeats = max(1, parser.parse_args().repeats)
    torch.backends.cudnn.allow_tf32 = False  # the fp32 reference in fp32
    profiled = best_conv.profiled()
    print(f"{'problem':<22} {'ms':>8} {'profiled':>8} {'ratio':>5} {'calls ms':>8} {'torch ms':>8} {'rel_l2':>9} "
          f"{'rel_max':>9} result kernel")
    measured = [measure(f"conv {i}", problem, ms, repeats) for i, (problem, ms) in enumerate(profiled)]
    # problems not profiled: the launcher's fallback kernels, where the header has one that takes them
    unprofiled = [("3x3, 96 channels", (2, 20, 20, 96, 128, 3, 3, 1, 1, 1, 1, 1, 1)),
                  ("3 channels", (1, 32, 32, 3, 64, 3, 3, 1, 1, 1, 1, 1, 1))]  # only a few-channel kernel takes 3
    if profiled:
        unprofiled.insert(0, ("conv 0, batch 3", (3, *profiled[0][0][1:])))
    refused = []
    for label, problem in unprofiled:
        (n, h, w, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w), groups = unpack(problem)
        x, wt = operands(n, h, w, c, k, r, s, groups)
        args = ((stride_h, stride_w), (pad_h, pad_w), (dil_h, dil_w))
        if best_conv.kernel_for(x, wt, *args, groups=groups) is None:
            refused.append(refuses(f"{label} (no kernel takes it)",
                                   lambda: best_conv.conv2d(x, wt, *args, groups=groups)))
        else:
            measured.append(measure(label, problem, 0, repeats))
    ok = refused + [verify(m) for m in measured]
    for i, (problem, _) in enumerate(profiled):  # layers that can run on their own output
        (n, h, w, c, k, r, s, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w), _ = unpack(problem)
        if c == k and stride_h == stride_w == 1 and 2 * pad_h == dil_h * (r - 1) and 2 * pad_w == dil_w * (s - 1):
            ok.append(chained(f"conv {i} on its own output", problem))

    gemms = [(problem, ms) for problem, epilogue, ms in best_conv.profiled_gemms() if epilogue == (False, False, "none")]
    ok += [linear_checked(f"linear {i}", problem, ms, repeats) for i, (problem, ms) in enumerate(gemms)]

    x, wt = operands(2, 16, 16, 64, 64, 3, 3)
    rows = torch.zeros(4, 64, device="cuda", dtype=DTYPE)
    ok += [
        refuses("linear: features of x and w differ", lambda: best_conv.linear(rows, torch.zeros(
            8, 32, device="cuda", dtype=DTYPE))),
        refuses("linear: w not contiguous", lambda: best_conv.linear(rows, torch.zeros(
            64, 8, device="cuda", dtype=DTYPE).t())),
        refuses("float32 x", lambda: best_conv.conv2d(x.float(), wt, 1, 1)),
        refuses("out of the wrong shape", lambda: best_conv.conv2d(
            x, wt, 1, 1, out=torch.empty(2, 64, 15, 16, device="cuda", dtype=DTYPE).to(memory_format=torch.channels_last))),
        refuses("x of the other 16-bit type", lambda: best_conv.conv2d(
            x.to(torch.bfloat16 if DTYPE == torch.half else torch.half), wt, 1, 1)),
        refuses("x not channels_last", lambda: best_conv.conv2d(x.contiguous(), wt, 1, 1)),
        refuses("x on the CPU", lambda: best_conv.conv2d(x.cpu(), wt, 1, 1)),
        refuses("channels of x and w differ", lambda: best_conv.conv2d(x, wt[:, :32].contiguous(
            memory_format=torch.channels_last), 1, 1)),
        refuses("stride 0", lambda: best_conv.conv2d(x, wt, 0, 1)),
        refuses("groups not dividing the channels", lambda: best_conv.conv2d(x, wt[:, :2].contiguous(
            memory_format=torch.channels_last), 1, 1, groups=3)),
        refuses("groups 0", lambda: best_conv.conv2d(x, wt, 1, 1, groups=0)),
        refuses("padding of three values", lambda: best_conv.conv2d(x, wt, 1, (1, 1, 1))),
        refuses("filter larger than the input", lambda: best_conv.conv2d(x, wt, 1, 0, 9)),
        refuses("x 2 bytes off 16-byte alignment", lambda: best_conv.conv2d(
            torch.empty(1 * 16 * 16 * 64 + 1, device="cuda", dtype=DTYPE)[1:].view(1, 16, 16, 64)
            .permute(0, 3, 1, 2), wt, 1, 1)),
    ]
    print(f"{sum(ok)} of {len(ok)} checks passed")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
