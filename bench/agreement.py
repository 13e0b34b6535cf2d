#!/usr/bin/env python3
"""Benchmark: do two measurements of the same pairs agree? (issue target: within 2% on >= 90% of
the pairs measured at least an hour apart, or on two GPUs.)

    python bench/agreement.py FIRST SECOND [--within 0.02]

FIRST and SECOND are folders of one set's CSVs on one GPU (`profile_results/<set>/<gpu>`), e.g.
the committed ones and a run of the same set into `RESULTS=/tmp/again`. A pair counts where both
rows are `ok` and have the same `kernel_hash` (the same code: rows of changed code are not the
same measurement). Prints, per folder pair, how many pairs agree within the bound, the
distribution of SECOND/FIRST, the time between the two, and the pairs furthest apart.
"""

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "site_scons"))

from kernelgen import results  # noqa: E402

NOT_PAIRS = ("compare.csv", "model.csv")  # a set's folder holds these beside its workloads' CSVs
KEY = ["workload", "kernel"]


def read_folder(folder: Path) -> pd.DataFrame:
    paths = sorted(p for p in folder.glob("*.csv") if p.name not in NOT_PAIRS)
    if not paths:
        raise SystemExit(f"agreement.py: {folder}: no workload CSVs")
    frame = pd.concat([results.read_csv(p) for p in paths], ignore_index=True)
    return frame[frame["status"] == "ok"]


def agreement(first: pd.DataFrame, second: pd.DataFrame, within: float) -> dict:
    both = first.merge(second, on=KEY, suffixes=("_1", "_2"))
    same_code = both[both["kernel_hash_1"] == both["kernel_hash_2"]]
    ratio = same_code["runtime_ms_2"] / same_code["runtime_ms_1"]
    agree = (ratio - 1).abs() <= within
    apart = (pd.to_datetime(same_code["measured_at_2"]) - pd.to_datetime(same_code["measured_at_1"])).abs()
    return {"pairs": len(same_code), "other_code": len(both) - len(same_code), "agree": int(agree.sum()),
            "ratio": ratio, "apart_h": apart.dt.total_seconds() / 3600, "rows": same_code.assign(ratio=ratio)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--within", type=float, default=0.02, help="relative bound (default 0.02)")
    args = parser.parse_args()
    got = agreement(read_folder(args.first), read_folder(args.second), args.within)
    if not got["pairs"]:
        raise SystemExit("agreement.py: no ok pair of the same code in both folders")
    ratio = got["ratio"]
    print(f"{args.first} -> {args.second}")
    print(f"pairs ok in both, same code: {got['pairs']} ({got['other_code']} more measured on other code, left out)")
    print(f"within {args.within:.0%}: {got['agree']} of {got['pairs']} ({got['agree'] / got['pairs']:.1%})")
    print(f"second/first: median {ratio.median():.4f}, 5th-95th percentile {ratio.quantile(0.05):.4f}-"
          f"{ratio.quantile(0.95):.4f}, min {ratio.min():.4f}, max {ratio.max():.4f}")
    print(f"hours apart: {got['apart_h'].min():.2f}-{got['apart_h'].max():.2f}")
    rows = got["rows"]
    far = rows.loc[(rows["ratio"] - 1).abs().sort_values(ascending=False).index[:5]]
    for _, row in far.iterrows():
        print(f"  {row['ratio']:.3f}  {row['runtime_ms_1']:.4f} -> {row['runtime_ms_2']:.4f} ms  "
              f"{row['workload']}  {row['kernel']}")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # the reader stopped (| head): what it read is what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
