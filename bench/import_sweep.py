"""Benchmark: many networks through the importer and the candidates, no GPU needed.

    python bench/import_sweep.py OUT_DIR MODEL [MODEL ...] [--batch 32] [--epilogues 1] [--scons-python PY]
    python bench/import_sweep.py OUT_DIR --torchvision [--timm-sample N]

For each model: ``python -m kernelgen.importer`` (batch 32, epilogues written) into OUT_DIR as
``sweep_<model>_b<batch>.txt`` (its own process, a time limit; no committed set's name, so no set's
earlier choices join its candidates), then ``scons candidates`` on that file, ranked by the H200's model (``--scons-python``:
a Python with the project's requirements; the importer's needs PyTorch, torchvision, timm). Prints
a line a model: the importer's one-line error, or the lines written, the share of the recorded
convolution and linear FLOPs they cover, the convolution calls it says the tool cannot profile, and how
many kernels a cold build would compile, and how many of them are CUTLASS 3.x kernels (30-50 s of
a core each; the others take seconds to 20 s), or the candidates' one-line error (a layer no
kernel serves); the totals last. It changes nothing but OUT_DIR.
"""

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def torchvision_models() -> list:
    """torchvision's classification, segmentation, detection and video models (not quantized
    ones, not optical flow: their inputs are pairs of images)."""
    from torchvision import models
    names = []
    for module in (models, models.segmentation, models.detection, models.video):
        names += [n for n in models.list_models(module=module) if n not in names]
    return names


def timm_sample(count: int) -> list:
    """``count`` timm architectures spread over its families: the first model of each family
    prefix (the name's part before its first digit or underscore), in timm's order."""
    import timm
    seen, out = set(), []
    for name in timm.list_models():
        family = re.split(r"[\d_]", name, maxsplit=1)[0]
        if family not in seen:
            seen.add(family)
            out.append("timm.models:" + name)
    return out[:count]


def import_one(model: str, out_dir: Path, batch: str, epilogues: str, seconds: int) -> tuple:
    """(seconds, exit status, the importer's output, the file it writes) of importing ``model``."""
    name = "sweep_" + re.sub(r"[^A-Za-z0-9_]", "_", model.split(":")[-1]) + f"_b{batch}"  # no committed set's name
    args = [sys.executable, "-m", "kernelgen.importer", "--model", model, "--batch", batch, "--name", name,
            "--sets-dir", str(out_dir), "--replace", "--epilogues", epilogues, "--results", str(out_dir / "results")]
    start = time.monotonic()
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=seconds, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT / "site_scons")})
        status, text = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired:
        status, text = -1, f"timed out after {seconds} s"
    return time.monotonic() - start, status, text, out_dir / f"{name}.txt"


def candidates(python: str, path: Path, build: Path) -> tuple:
    """(exit status, last line) of ``scons candidates WORKLOADS=path``: the layers the space and the
    listed families serve, each layer's proposals, or the one-line error of a layer none serves."""
    done = subprocess.run([python, "-m", "SCons", "-Q", "candidates", f"WORKLOADS={path}", f"BUILD={build}",
                           "COST_MODEL=nvidia_h200"], capture_output=True, text=True, cwd=ROOT)
    text = done.stdout + done.stderr
    if done.returncode == 0:
        found = re.search(r", (\d+) for ", text)
        try:  # the kernel list it wrote: how many are CUTLASS 3.x kernels, which weigh most on a compile
            heavy = sum(1 for l in (build / "candidates.txt").read_text().splitlines() if l.startswith("cutlass3x_sm90"))
        except OSError:
            heavy = "?"
        return 0, f"{found.group(1) if found else '?'} kernels proposed ({heavy} CUTLASS 3.x)"
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return done.returncode, lines[-1] if lines else "no output"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("models", nargs="*")
    parser.add_argument("--torchvision", action="store_true", help="every torchvision model (above)")
    parser.add_argument("--timm-sample", type=int, default=0, help="that many timm families' first models")
    parser.add_argument("--batch", default="32")
    parser.add_argument("--epilogues", default="1")
    parser.add_argument("--seconds", type=int, default=300, help="each import's time limit")
    parser.add_argument("--scons-python", default=sys.executable,
                        help="the Python that runs scons candidates (one with the project's requirements)")
    args = parser.parse_args()
    models = list(args.models) + (torchvision_models() if args.torchvision else []) + timm_sample(args.timm_sample)
    out_dir = Path(args.out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)

    failed, written, lines, gaps = [], 0, 0, 0
    for name in models:
        seconds, status, text, path = import_one(name, out_dir, args.batch, args.epilogues, args.seconds)
        if status != 0 or not path.is_file():
            last = [l for l in text.strip().splitlines() if l.strip()][-1:] or ["no output"]
            failed.append(name)
            print(f"{name}: FAILED ({status}, {seconds:.0f} s): {last[0][:300]}", flush=True)
            continue
        written += 1
        body = path.read_text()
        count = sum(1 for l in body.splitlines() if l and not l.startswith("#"))
        share = re.search(r"The lines cover ([\d.]+%)", body)
        cannot = sum(int(n) for n in re.findall(r"(\d+) the tool cannot profile", body))
        status, said = candidates(args.scons_python, path, out_dir / "build")
        lines, gaps = lines + count, gaps + (status != 0)
        print(f"{name}: {count} lines, {seconds:.0f} s, {share.group(1) if share else 'no share line'} of the FLOPs"
              + (f", {cannot} calls it cannot profile" if cannot else "")
              + (f"; {said}" if status == 0 else f"; CANDIDATES FAILED: {said[:300]}"),
              flush=True)
    print(f"\n{len(models)} models: {written} imported, {len(failed)} failed"
          + (f" ({', '.join(failed)})" if failed else "") + f"; {lines} layer lines; candidates failed on {gaps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
