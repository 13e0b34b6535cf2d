"""The cost model's record on the committed measurements: for each set, the rank the model gives
each layer's measured winner among the kernels measured on it, and the regret of its top k and of
what a build measures (the best measured among them against the best measured), fitted on every
set and fitted without the set it ranks (docs/search.md, "The model's record on the committed
sets").

    PYTHONPATH=site_scons python -m kernelgen.record
"""

import argparse
import sys

import numpy as np

from .candidates import build_measures
from .cost_model import SM_COUNTS, committed_fit, committed_samples, fit, load_model, options
from .errors import KernelgenError, one_line
from .results import gpu_slug
from .variables import DEFAULT_TOP

RECORD_TOPS = (1, 3, 5, 10)


def record(model_for, samples: list, top: int | None = None) -> list:
    """Per set: [set, layers, then per k of RECORD_TOPS (layers whose measured winner is in the
    model's top k among the kernels measured on it, regret: the best measured of that top k
    against the best measured, summed over the set's calls, in % of the best), the same for what a
    build of ``top`` (default: the default TOP) measures (``candidates.build_measures``), and the
    median rank of the winners. ``model_for(set)`` is the model that ranks the set's layers."""
    by_layer = {}
    for kernel, problem, ms, stem in samples:
        by_layer.setdefault((stem, problem.name), []).append((kernel, problem, ms))
    ranked_layers = {}
    for (stem, _), rows in sorted(by_layer.items()):
        model, problem = model_for(stem), rows[0][1]
        predicted = sorted(((model.predict(r[0], problem), r[0].name, r) for r in rows), key=lambda t: t[:2])
        ranked_layers.setdefault(stem, []).append([(ms, r) for ms, _, r in predicted])
    out = []
    for stem, layers in ranked_layers.items():
        built = build_measures(layers, model_for(stem), int(DEFAULT_TOP) if top is None else top)
        entry = {"best": 0.0, "ranks": [], **{k: [0, 0.0] for k in (*RECORD_TOPS, "build")}}
        for predicted, measured in zip(layers, built):
            ranked = [r for _, r in predicted]
            count, best = ranked[0][1].count, min(r[2] for r in ranked)
            winner = next(i for i, r in enumerate(ranked) if r[2] == best)
            entry["best"] += best * count
            entry["ranks"].append(winner + 1)
            for k, taken in [(k, ranked[:k]) for k in RECORD_TOPS] + [("build", measured)]:
                entry[k][0] += any(r[2] == best for r in taken)
                entry[k][1] += (min(r[2] for r in taken) - best) * count
        out.append([stem, len(layers), *[(entry[k][0], 100 * entry[k][1] / entry["best"]) for k in (*RECORD_TOPS, "build")],
                    float(np.median(entry["ranks"]))])
    return out


def record_markdown(rows: list) -> str:
    head = ("| set | layers | " + " | ".join(f"top {k}: winner in, regret" for k in RECORD_TOPS)
            + " | a build measures: winner in, regret | winner's median rank |\n|---|---|"
            + "---|" * (len(RECORD_TOPS) + 1) + "---|\n")
    return head + "".join(f"| `{r[0]}` | {r[1]} | " + " | ".join(f"{n}, {reg:.1f}%" for n, reg in r[2:-1])
                          + f" | {r[-1]:g} |\n" for r in rows)


def fit_held_out(samples: list, stems: list, gpu: str) -> dict:
    """set -> the model fitted to ``samples`` [(kernel, problem, ms, set)] without that set's rows."""
    return {stem: fit([s[:3] for s in samples if s[3] != stem], gpu, SM_COUNTS[gpu]) for stem in stems}


def main(argv=None) -> int:
    parser = options(argparse.ArgumentParser(
        prog="python -m kernelgen.record",
        description="how the cost model ranks the measured kernels of each set, fitted on every set and "
                    "fitted without the set it ranks"))
    parser.add_argument("--model", metavar="GPU", help="rank with the model fitted for GPU (kernel_specs/models/) "
                                                       "as it is, fitting none: the rows of --gpu ranked as a build "
                                                       "of COST_MODEL=GPU ranks their candidates")
    args = parser.parse_args(argv)
    if args.model:
        try:
            slug = gpu_slug(args.model)
            if not slug:
                raise KernelgenError("names no GPU")
            model = load_model(slug)
        except KernelgenError as e:
            parser.exit(1, f"--model={args.model!r}: {one_line(str(e))}\n")
        samples = committed_samples(parser, args)
        print(f"Ranked by the model fitted for {model.gpu} ({len(samples)} rows of {args.gpu}):\n")
        print(record_markdown(record(lambda stem: model, samples)))
        return 0
    args, samples, model = committed_fit(parser, argv)
    print(f"Fitted on every set ({len(samples)} rows):\n")
    print(record_markdown(record(lambda stem: model, samples)))
    held_out = fit_held_out(samples, sorted({s[3] for s in samples}), args.gpu)
    print("Fitted without the set it ranks:\n")
    print(record_markdown(record(held_out.__getitem__, samples)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
