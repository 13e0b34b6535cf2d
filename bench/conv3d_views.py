#!/usr/bin/env python3
"""Benchmark: PyTorch's 3-D convolutions of a video model against the 2-D ones of the same memory.

    python bench/conv3d_views.py [--model r2plus1d_18] [--batch 8] [--input 3x16x112x112]

`scons workloads` writes a 3-D convolution of a 1xRxS or Rx1x1 filter as the 2-D one of the same
NDHWC memory (``importer.as_conv2d``), and `scons compare` times PyTorch's conv2d of that view as the
library's time. A network calls conv3d. For each such distinct call of the model's forward pass
(torchvision's, built without weights), this prints the GPU time of F.conv3d on channels_last_3d
fp16 operands and of F.conv2d on the view's channels_last ones, each as compare times a library
call (``compare.time_graph``: CUDA-graph replay, operand sets rotated past the L2, cuDNN's benchmark
mode), and the sums weighed by the calls' counts: where conv3d is the slower, compare's baseline is
the harder one. Needs a GPU.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "site_scons"))

from kernelgen import compare, importer  # noqa: E402
from kernelgen.ops.common import operand_sets  # noqa: E402


def distinct_views(torch, model, shape, device="cuda") -> list:
    """[(conv3d call, its conv2d view, count)] of one forward pass, in order of first use."""
    calls = importer.record_calls(torch, model, torch.zeros(shape, device=device))
    seen = {}
    for call in calls:
        view = importer.as_conv2d(call)
        if view is not None:
            key = (call.input, call.weight, call.stride, call.padding, call.dilation, call.groups)
            seen.setdefault(key, [call, view, 0])[2] += 1
    return list(seen.values())


def timed(torch, call, dims: int, l2_bytes: int) -> float:
    """ms of one F.conv2d / F.conv3d of ``call``'s shapes (``dims`` spatial dimensions), fp16."""
    F = torch.nn.functional
    layout = torch.channels_last_3d if dims == 3 else torch.channels_last
    x_elements = 1
    for d in call.input:
        x_elements *= d
    w_elements = 1
    for d in call.weight:
        w_elements *= d
    sets = operand_sets(2 * (2 * x_elements + w_elements), l2_bytes)
    operands = [(torch.empty(call.input, device="cuda", dtype=torch.half).uniform_(-1, 1).contiguous(memory_format=layout),
                 torch.empty(call.weight, device="cuda", dtype=torch.half).uniform_(-1, 1).contiguous(memory_format=layout))
                for _ in range(sets)]
    conv = F.conv3d if dims == 3 else F.conv2d
    args = {"stride": call.stride, "padding": call.padding, "dilation": call.dilation, "groups": call.groups}
    with torch.no_grad():
        return compare.time_graph(torch, lambda i: conv(*operands[i], **args), sets)[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="r2plus1d_18")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--input", default="3x16x112x112", help="CxTxHxW")
    args = parser.parse_args()
    import torch
    import torchvision

    torch.backends.cudnn.benchmark = True
    shape = (args.batch, *importer.parse_input(args.input))
    model = torchvision.models.get_model(args.model, **importer.no_weights(torchvision, args.model)).eval().cuda()
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    for call, view, count in distinct_views(torch, model, shape):
        ms3, ms2 = timed(torch, call, 3, l2_bytes), timed(torch, view, 2, l2_bytes)
        rows.append((call, view, count, ms3, ms2))
        print(f"{importer.describe(call)[:90]:90s} x{count}: conv3d {ms3:.4f} ms, conv2d of the view {ms2:.4f} ms "
              f"({ms3 / ms2:.2f}x)", flush=True)
    total3 = sum(r[2] * r[3] for r in rows)
    total2 = sum(r[2] * r[4] for r in rows)
    slower = sum(1 for r in rows if r[3] > r[4])
    print(f"{args.model} batch {args.batch} {args.input}: {len(rows)} distinct 3-D convolutions "
          f"({sum(r[2] for r in rows)} calls): conv3d {total3:.4f} ms, conv2d of the views {total2:.4f} ms "
          f"({total3 / total2:.2f}x); conv3d the slower on {slower} of {len(rows)} ({torch.cuda.get_device_name()}, "
          f"torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
