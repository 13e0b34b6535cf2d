"""Each layer's candidates: the kernels of the listed families and the generated space, ranked by
the cost model, the first ``top`` distinct ones of each layer kept. Their union, with what the
set chose before, is what a build compiles (``commands.build_plan``); ``scons candidates``
writes them to ``BUILD/candidates.csv`` (workload, kernel, rank, predicted_ms) and
``BUILD/candidates.txt`` (a kernel list for ``KERNELS=@``).
"""

import csv
import functools
import hashlib
import io
import json
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from .cost_model import MEASURED_TOP, measured_by_rank, serves, theta_group
from .errors import WorkloadError
from .fusion import fused, reads_c
from .ops.common import OPTIONAL_RELU, epilogue_steps, epilogue_suffix, optional_relu_computes
from .ops import serves as serves_op
from .families.conv2d_2x import Conv2dFprop2x
from .families.gemm_sm90 import GemmSm90
from .vocab import verify_tolerance


@dataclass
class Proposal:
    problem: object
    ranked: list  # [(predicted ms, kernel)], fastest first
    unranked: frozenset = frozenset()  # names of those proposed beside the top, not for their rank
    untried: frozenset = frozenset()  # those of ``unranked`` of a tile K the model has no rows of for their group
    beyond: frozenset = frozenset()  # those of ``unranked`` for a layer beyond their group's rows (``Model.beyond``)


def variant_of(kernel) -> tuple:
    """What a kernel is apart from its launch and its epilogue's source operand: kernels alike
    but for those differ by a microsecond at most, so a layer's candidates hold one of them; and
    apart from how its output is stored (``widest``: a layer's candidates hold the widest)."""
    if isinstance(kernel, GemmSm90):
        return (type(kernel).__name__, kernel.tile, kernel.cluster, kernel.schedule, kernel.scheduler, kernel.splits,
                kernel.epilogue_tile, kernel.store_stages, kernel.searched, kernel.fusion)  # the fusion last: ``unfused_key``
    return (widest(kernel).name,)  # a 2.x kernel of narrow output accesses: its widest twin's


def widest(kernel):
    """``kernel`` at the widest output accesses of its kind: a 2.x kernel without narrow output
    accesses, an SM90 kernel storing D by TMA; ``kernel`` itself if it is so already."""
    if isinstance(kernel, GemmSm90) and kernel.store != "tma":
        return replace(kernel, store="tma")
    if isinstance(kernel, Conv2dFprop2x) and kernel.output_alignment:
        return replace(kernel, output_alignment=0)
    return kernel


def distinct(ranked: list, top: int, taken=()) -> list:
    """The first ``top`` of ``ranked`` that are not a variant of one before them or of ``taken``;
    of a kernel whose variant of wider output accesses (``widest``) is ranked too, that one (it
    serves the layer, and none narrower was faster where both ran: the model's per-kernel
    corrections, fitted on the layers only the narrow ones serve, may still rank it first)."""
    seen, out, by_name = {variant_of(k) for _, k in taken}, [], None
    for ms, kernel in ranked:
        key = variant_of(kernel)
        if key not in seen:
            seen.add(key)
            wide = widest(kernel)
            if wide is not kernel:
                by_name = by_name or {k.name: (t, k) for t, k in ranked}
                ms, kernel = by_name.get(wide.name, (ms, kernel))
            out.append((ms, kernel))
            if len(out) == top:
                break
    return sorted(out, key=lambda t: (t[0], t[1].name)) if by_name else out


@functools.cache
def code_digest() -> str:
    """A digest of this package's Python sources, part of every memo key: entries that code which
    ranks or proposes otherwise made are not taken."""
    digest = hashlib.sha1()
    for path in sorted(Path(__file__).resolve().parent.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


class Memo:
    """Each layer's proposal as an earlier run made it, kept in BUILD (``outputs.PROPOSALS``) so that
    a run whose inputs are the same ranks nothing again: keyed by what the ranking depends on (the
    code, the model, the kernels with their families, the layer, ``top``, the kernels refused on
    the layer), valued (predicted ms, kernel name, proposed as ``unfitted``) fastest first. A file
    that is not one reads as empty."""

    LIMIT = 4096  # entries kept: this run's first, then the most recent others

    def __init__(self, text: str = ""):
        try:
            entries = json.loads(text) if text else {}
        except ValueError:
            entries = {}
        self.entries = entries if isinstance(entries, dict) else {}
        self.used, self.changed = {}, False

    @staticmethod
    def key(model_text: str, kernels_text: str, problem, top: int, gone) -> str:
        words = [code_digest(), model_text, kernels_text, problem.name, str(top), *sorted(gone)]
        return hashlib.sha1("\0".join(words).encode()).hexdigest()

    def get(self, key: str, by_name: dict) -> tuple | None:
        """(chosen, unranked) as ``put`` was given them, or None."""
        value = self.entries.get(key)
        try:
            chosen = [(float(ms), by_name[name]) for ms, name, _ in value] if isinstance(value, list) else None
            unranked = frozenset(name for _, name, flag in value if flag)
        except (KeyError, TypeError, ValueError):
            chosen = None
        if chosen:
            self.used[key] = value
            return chosen, unranked
        return None

    def put(self, key: str, chosen: list, unranked=frozenset()) -> None:
        self.used[key] = [[ms, k.name, int(k.name in unranked)] for ms, k in chosen]
        self.changed = True

    def text(self) -> str:
        """The memo to keep: this run's entries, then the others, at most LIMIT."""
        kept = dict(self.used)
        for key, value in self.entries.items():
            if len(kept) >= self.LIMIT:
                break
            kept.setdefault(key, value)
        return json.dumps(kept, sort_keys=True) + "\n"


def unfitted(model, kernel, problem=None) -> bool:
    """Whether ``kernel`` is of a family quick to compile (``measure_unfitted``) of whose group the
    model was fitted on no measured row: its prediction is a guess the model cannot order the
    family's kernels by, so every layer it serves measures each of them, until rows of it are
    committed and the model is fitted again. So is one of such a family on ``problem`` where the
    layer lies beyond its group's rows (``Model.beyond``: more than twice the outputs of the
    largest). So is a kernel of a family of no measured row whose class is measured so
    (``measure_new_family``: a few CUTLASS 2.x kernels, tiles for a class of layers that the
    group's rows, of other tiles, may rank low there) on ``problem`` where the kernel says it is of
    that class (``explores``: the layers of its accesses' width)."""
    if getattr(kernel, "measure_unfitted", False) and (theta_group(kernel) not in model.theta or (
            problem is not None and getattr(model, "beyond", None) and model.beyond(kernel, problem))):
        return True
    families = getattr(model, "families", None)
    return (getattr(kernel, "measure_new_family", False) and families is not None and kernel.family not in families
            and problem is not None and kernel.explores(problem))


def chosen_for(ranked: list, model, top: int, problem=None) -> tuple:
    """(candidates, the names of those proposed unranked) of a layer from ``ranked``
    [(predicted ms, kernel)], fastest first: its ``top`` best-ranked distinct kernels
    (``distinct``) of those the model can order, and besides them the ``unfitted`` ones (their
    guessed times would push the model's proposals out) and, where the model ranks first a kernel
    of a tile K its group has no rows of (``Model.untried_depth``), that kernel: measured, so a fit
    learns the depth, but in place of none of the kernels of depths it has rows of (held out, the
    transposed kernels of tile K 32, ranked first to fifth on Inception-v3's 35x35 96 -> 96 layer
    of stride 2, pushed out the 0.0091 ms winner and took 0.0105; the first alone, beside the
    others' top: 6,767 kernels for the committed sets' builds where 6,659 before those tiles)."""
    unranked = {k.name for _, k in ranked if unfitted(model, k, problem)}
    fitted = [(ms, k) for ms, k in ranked if k.name not in unranked]
    untried = getattr(model, "untried_depth", None) or (lambda kernel: False)
    chosen = distinct([(ms, k) for ms, k in fitted if not untried(k)], top)
    if len(chosen) < top:  # too few of the depths it has rows of (a narrowed KERNELS=): the others fill the top
        chosen = sorted(chosen + distinct([(ms, k) for ms, k in fitted if untried(k)], top - len(chosen), chosen),
                        key=lambda t: (t[0], t[1].name))
    elif untried(fitted[0][1]):
        first = distinct(fitted, 1)[0]
        chosen.append(first)
        unranked.add(first[1].name)
    if unranked:
        names = {k.name for _, k in chosen}
        chosen = sorted(chosen + [(ms, k) for ms, k in ranked if k.name in unranked and k.name not in names],
                        key=lambda t: (t[0], t[1].name))
    return chosen, frozenset(unranked)


def companion(model, kernel) -> bool:
    """Whether ``kernel`` is one of searched launch settings (``searched``) of a family the model was
    fitted on no row of: it ranks it as its fixed twin (``features`` reads no setting), so it is
    proposed beside that twin wherever the twin is (``companions``), not ranked in its place."""
    families = getattr(model, "families", None)
    return getattr(kernel, "searched", False) and families is not None and kernel.family not in families


def companions(kernels, model) -> dict:
    """The ``companion`` kernels of ``kernels`` by their fixed twin's ``variant_of`` (its launch and
    source operand aside, as the variants are)."""
    out = {}
    for kernel in kernels:
        if companion(model, kernel):
            out.setdefault(variant_of(replace(kernel, searched=False)), []).append(kernel)
    return out


def with_companions(chosen: list, unranked: frozenset, twins: dict, problem) -> tuple:
    """(chosen, unranked) of ``chosen_for`` with the companions (``twins``, ``companions``) of the
    kernels chosen that serve ``problem``, each at its twin's predicted time, unranked."""
    extra = [(ms, k) for ms, twin in chosen if isinstance(twin, GemmSm90) for k in twins.get(variant_of(twin), ())
             if serves(k, problem) is None]
    if not extra:
        return chosen, unranked
    extra = list({k.name: (ms, k) for ms, k in extra}.values())
    return (sorted(chosen + extra, key=lambda t: (t[0], t[1].name)),
            unranked | frozenset(k.name for _, k in extra))


def propose(problems, kernels, model, top: int, workload_file="", refused=None, memo=None) -> list:
    """Each problem's candidates (``chosen_for``, with their ``companions``) of the kernels that
    serve it; kernels ``refused`` (workload name -> kernel names that ran on it and did not pass)
    are left out. A problem no kernel serves is an error naming it and why each kernel refused it."""
    # OPTIONAL_RELU's kernels are no layer's proposal: they stand in for the proposals (``merged``)
    twins = companions(kernels, model)
    proposals, rank = [], model.ranking([k for k in kernels if getattr(k, "fusion", "") != OPTIONAL_RELU
                                         and not companion(model, k)])
    if memo is not None:
        model_text, by_name = model.to_json(), {k.name: k for k in kernels}
        kernels_text = "\n".join(f"{k.name} {k.family}" for k in kernels)
    for problem in problems:
        gone = (refused or {}).get(problem.name, ())
        if memo is not None:
            key = Memo.key(model_text, kernels_text, problem, top, gone)
            chosen = memo.get(key, by_name)
            if chosen is not None:
                proposals.append(_proposal(problem, *chosen, model))
                continue
        ranked = rank(problem)
        if gone:
            ranked = [(ms, k) for ms, k in ranked if k.name not in gone]
        if not ranked:
            # the reasons of the kernels of the problem's op and dtype first: they say what is missing
            near = Counter(serves(k, problem) for k in kernels if serves_op(k, problem))
            far = Counter(serves(k, problem) for k in kernels if not serves_op(k, problem))
            why = "; ".join(f"{n} {reason}" for reason, n in (near.most_common(4) + far.most_common(4))[:4])
            raise WorkloadError(workload_file or problem.name, f"no kernel of the space serves {problem.name} "
                                f"({len(kernels)} refused it: {why})", problem.line or None)
        chosen, unranked = chosen_for(ranked, model, top, problem)
        if twins:
            here = twins if not gone else {key: [k for k in found if k.name not in gone] for key, found in twins.items()}
            chosen, unranked = with_companions(chosen, unranked, here, problem)
        if memo is not None:
            memo.put(key, chosen, unranked)
        proposals.append(_proposal(problem, chosen, unranked, model))
    return proposals


def _proposal(problem, chosen: list, unranked: frozenset, model) -> Proposal:
    """The Proposal of ``chosen_for``'s (and ``with_companions``') answer, its ``untried`` and
    ``beyond`` named."""
    untried, beyond = getattr(model, "untried_depth", None), getattr(model, "beyond", None)
    return Proposal(problem, chosen, unranked,
                    frozenset(k.name for _, k in chosen if untried and k.name in unranked and untried(k)),
                    frozenset(k.name for _, k in chosen if beyond and k.name in unranked and beyond(k, problem)))




def measured_pairs(proposals: list, kernels: list, model, top: int = MEASURED_TOP) -> dict:
    """Workload name -> the kernels a profile measures on it: its own proposals and, of the build's
    ``kernels`` that serve it, the ``top`` the model ranks best for it and the first of each group
    after them (``cost_model.measured_by_rank``). A kernel compiled for other
    layers is worth measuring on this one only where the model thinks it might win: on the sets
    profiled with every pair measured, this policy's choices cost 0.01 to 0.21% of the network time
    with a third of the pairs (docs/search.md, ``bench/measured_pairs.py``)."""
    rank, built = model.ranking(kernels), {k.name for k in kernels}
    return {p.problem.name: sorted({k.name for _, k in p.ranked}
                                   | {k.name for k in measured_by_rank([k for _, k in rank(p.problem)], built, top)})
            for p in proposals}


def build_measures(layers: list, model, top: int, measured_top: int = MEASURED_TOP) -> list:
    """For each layer of a set (its measured rows as [(predicted ms, (kernel, problem, ms))],
    ranked by ``model``, fastest first), the rows a build of ``top`` candidates a layer measures on
    it: its candidates as ``propose`` chooses them (``chosen_for``) and of the kernels other
    layers' candidates hold, those ``measured_by_rank`` takes; chosen among the rows measured on
    the layer (the kernels no such build compiles among them: a floor on what a build measures).
    ``record.record``'s "a build measures" column."""
    own = [{k.name for _, k in chosen_for([(ms, row[0]) for ms, row in ranked], model, top, ranked[0][1][1])[0]}
           for ranked in layers]
    built = set().union(*own)
    out = []
    for ranked, mine in zip(layers, own):
        kept = mine | {k.name for k in measured_by_rank([row[0] for _, row in ranked], built, measured_top)}
        out.append([row for _, row in ranked if row[0].name in kept])
    return out


def union(proposals: list) -> list:
    """The kernels some layer proposes, by name."""
    return sorted({k.name for p in proposals for _, k in p.ranked})


def to_csv_text(proposals: list) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["workload", "kernel", "rank", "predicted_ms"])
    for p in proposals:
        for rank, (ms, kernel) in enumerate(p.ranked, 1):
            writer.writerow([p.problem.name, kernel.name, rank, f"{ms:.6g}"])
    return out.getvalue()


def measured(frames: dict, tolerances: dict) -> tuple:
    """(chosen, refused) from the rows measured so far (``frames``: workload name -> its CSV's
    validated columns, ``commands.measured_frames``): the kernels of each workload's fastest ok
    row within its kernel's tolerance (``tolerances``: name -> tolerance; ``reduce.within_tolerance``,
    ``reduce.fastest_position``), which stay among a set's candidates so that a profile of
    the model's proposals never leaves it slower than before; and for each workload the kernels
    that ran on it and did not pass (unsupported, incorrect, failed, ...), which are no
    candidates of it again: the next profile proposes the next-ranked instead."""
    from .reduce import fastest_position, within_tolerance

    chosen, refused = set(), {}
    for workload, columns in frames.items():
        kernels, statuses = columns["kernel"], columns["status"]
        l2, worst = columns["rel_l2_error"], columns["rel_max_error"]
        rows = [i for i, k in enumerate(kernels) if k in tolerances]
        passed = [i for i in rows if statuses[i] == "ok" and within_tolerance(l2[i], worst[i], tolerances[kernels[i]])]
        refused[workload] = {kernels[i] for i in set(rows) - set(passed)}
        if passed:
            chosen.add(kernels[fastest_position(columns, passed)])
    return chosen, refused


def shared(proposals: list, first=()) -> list:
    """``proposals`` with each candidate that has a twin in the build already (a kernel alike but
    for its launch, or for its epilogue's source operand where both have one: ``variant_of``, at
    the same output alignment) replaced by that twin where it serves the layer: the twins differ
    by a microsecond at most, and each costs the build a compile. A kernel without a source
    operand C is no twin of one with C: C's buffers take the main loop's stages (a kernel with C
    in place of one without ran ResNet-50's downsampling layers 1.15 and 1.45 times as long,
    docs/results.md). The twins taken are ``first``'s (the set's measured choices), then the
    layers' in their order."""
    built = {}
    for kernel in first:
        built.setdefault(_twin_key(kernel), kernel)
    out = []
    for proposal in proposals:
        ranked = []
        for ms, kernel in proposal.ranked:
            twin = built.setdefault(_twin_key(kernel), kernel)
            if twin.name != kernel.name and serves(twin, proposal.problem) is None:
                kernel = twin
            ranked.append((ms, kernel))
        out.append(replace(proposal, ranked=ranked))
    return out


def _twin_key(kernel) -> tuple:
    return variant_of(kernel), getattr(kernel, "k_alignment", None), reads_c(kernel)


def unfused_key(kernel) -> tuple | None:
    """What a fused kernel is apart from its epilogue, its launch and its source operand (the
    kernels ``merged`` puts one kernel of OPTIONAL_RELU in place of), and whether its epilogue adds a
    residual (those that do not take the one without a source operand C where there is one: C's
    buffers cost the main loop stages); None for another kernel."""
    fusion = getattr(kernel, "fusion", "")
    if fusion == OPTIONAL_RELU or not optional_relu_computes(fusion):
        return None
    adds = "add" in epilogue_steps(fusion)
    if isinstance(kernel, GemmSm90):
        return variant_of(kernel)[:-1], kernel.k_alignment, adds
    return type(kernel).__name__, kernel.name[:-len(epilogue_suffix(fusion))], adds


def stand_in_of(kernel, adds: bool, by_name: dict):
    """The OPTIONAL_RELU kernel of ``by_name`` that stands in for fused ``kernel``: without C where
    its epilogue adds nothing and such a kernel is there, else with C as the kernel has it."""
    plain = replace(kernel, fusion="")
    if not adds and getattr(plain, "source", "void") is None:
        found = by_name.get(fused(replace(plain, source="void"), OPTIONAL_RELU).name)
        if found is not None:
            return found
    return by_name.get(fused(plain, OPTIONAL_RELU).name)


def merged(proposals: list, everything: list, first=()) -> list:
    """``proposals`` with the fused kernels alike but for their epilogue (``unfused_key``) that the
    layers' candidates hold of two or more epilogues a kernel of OPTIONAL_RELU computes (those with a
    residual add apart from those without) each replaced by that kernel (``stand_in_of``, where
    ``everything`` holds it and it serves the layer): one compile for them all. The set's measured
    choices (``first``) are compiled anyway, so they stay."""
    keep = {k.name for k in first}
    keys = [[unfused_key(k) if k.name not in keep else None for _, k in p.ranked] for p in proposals]
    epilogues = {}
    for proposal, proposal_keys in zip(proposals, keys):
        for (_, kernel), key in zip(proposal.ranked, proposal_keys):
            if key is not None:
                epilogues.setdefault(key, set()).add(kernel.fusion)
    if not any(len(e) > 1 for e in epilogues.values()):
        return proposals
    by_name = {k.name: k for k in everything if getattr(k, "fusion", "") == OPTIONAL_RELU}
    out, stand_ins = [], {}  # key -> the kernel of OPTIONAL_RELU made first for it (of its launch)
    for proposal, proposal_keys in zip(proposals, keys):
        ranked = []
        for (ms, kernel), key in zip(proposal.ranked, proposal_keys):
            if key is not None and len(epilogues[key]) > 1:
                if key not in stand_ins:
                    stand_ins[key] = stand_in_of(kernel, key[-1], by_name)
                stand_in = stand_ins[key]
                if stand_in is not None and serves(stand_in, proposal.problem) is None:
                    kernel = stand_in
            ranked.append((ms, kernel))
        out.append(replace(proposal, ranked=ranked))
    return out


def pool(problems, everything: list, model, top: int, frames=None, workload_file="", memo=None) -> tuple:
    """(proposals, kernels): each layer's ``top`` candidates (``shared``: one of twins; ``merged``:
    one kernel for the epilogues of a tile), and the kernels to build: their union and the set's
    measured choices (``measured``, from ``frames``), sorted by name."""
    chosen, refused = measured(frames or {}, {k.name: verify_tolerance(k) for k in everything})
    proposals = propose(problems, everything, model, top, workload_file, refused, memo)
    first = [k for k in everything if k.name in chosen]
    proposals = merged(shared(proposals, first), everything, first)
    names = set(union(proposals)) | chosen
    return proposals, [k for k in everything if k.name in names]
