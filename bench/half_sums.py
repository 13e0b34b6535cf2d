"""The error of a depthwise output's sums in fp16 (profiler/depthwise_half.h), simulated.

Operands as the profiler draws them (uniform in [-1, 1), rounded to fp16); for R*S products an
output (9, 25, 49), the output's relative L2 error and its largest error over the largest output
against an exact sum, for: every product added in fp16 (``sums = "f16"``: each HFMA2 rounds once),
each filter row's in fp16 and the rows in fp32 (``sums = "rows"``), and fp32 sums (the fp32 kernels),
each rounded to the fp16 output. Prints one row a filter and sums.

    python bench/half_sums.py [--outputs 200000] [--seed 0]
"""

import argparse

import numpy as np


def fp16(v):
    return v.astype(np.float16).astype(np.float64)


def sums(x, w, taps: int, mode: str):
    """The outputs of ``x`` * ``w`` (outputs x taps, exact fp16 values) summed as ``mode`` sums them."""
    if mode == "f32":
        return (x * w).astype(np.float32).sum(1, dtype=np.float32).astype(np.float64)
    side = int(round(taps ** 0.5))
    if mode == "f16":
        acc = np.zeros(len(x))
        for t in range(taps):
            acc = fp16(acc + x[:, t] * w[:, t])  # a fused multiply-add: one rounding
        return acc
    acc = np.zeros(len(x), dtype=np.float32)
    for r in range(side):
        part = np.zeros(len(x))
        for s in range(side):
            part = fp16(part + x[:, r * side + s] * w[:, r * side + s])
        acc = acc + part.astype(np.float32)
    return acc.astype(np.float64)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outputs", type=int, default=200000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print("filter  sums  relative L2 error  largest error / largest output")
    for side in (3, 5, 7):
        taps = side * side
        x = fp16(rng.random((args.outputs, taps)) * 2 - 1)
        w = fp16(rng.random((args.outputs, taps)) * 2 - 1)
        exact = (x * w).sum(1)
        for mode in ("f16", "rows", "f32"):
            y = fp16(sums(x, w, taps, mode))
            l2 = np.linalg.norm(y - exact) / np.linalg.norm(exact)
            worst = np.abs(y - exact).max() / np.abs(exact).max()
            print(f"{side}x{side}     {mode:4}  {l2:.1e}            {worst:.1e}")


if __name__ == "__main__":
    main()
