"""A workload set resolved once: the problems of a workload file, each with its op, dtype, count
and line, written by SConstruct as ``BUILD/workloads.json`` beside ``kernels.json`` and read by
the profile driver, compare and the header builder instead of parsing the file again.

    {"set": "resnet50", "workload_file": "kernel_specs/workloads/resnet50.txt",
     "workloads": [{"op": "conv2d_fprop", "name": "...", "line": 3, "count": 1,
                    "values": {"n": 256, ..., "dtype": "f16"}}, ...]}

The text is byte-identical for the same set (sorted keys, the file's order of workloads).
"""

import json
from dataclasses import fields

from . import inputs
from .errors import InputError, WorkloadError
from .ops import OPS
from .workloads import check_set_name

_META = ("count", "line")
_OPTIONAL_TEXT = ("epilogue", "conv3d")  # left out where empty


def as_json(set_name: str, workload_file, problems) -> str:
    workloads = [{"op": p.op, "name": p.name, "line": p.line, "count": p.count,
                  "values": {f.name: getattr(p, f.name) for f in fields(p)
                             if f.name not in _META and not (f.name in _OPTIONAL_TEXT and not getattr(p, f.name))}}
                 for p in problems]
    return json.dumps({"set": set_name, "workload_file": str(workload_file), "workloads": workloads},
                      indent=1, sort_keys=True) + "\n"


def problems_of(data: dict, path) -> list:
    """The problems of a resolved set (``data``, as ``as_json`` wrote it); WorkloadError naming
    ``path`` and the entry when an entry does not rebuild the workload it names."""
    problems = []
    for index, entry in enumerate(data.get("workloads", ())):
        where = f"workloads[{index}]"
        try:
            module = OPS[entry["op"]]
            problem = module.PROBLEM(**entry["values"], count=entry["count"], line=entry["line"])
        except (KeyError, TypeError) as e:
            raise WorkloadError(path, f"{where}: not a resolved workload ({type(e).__name__}: {e}); "
                                "run scons again to rewrite it") from None
        if problem.name != entry.get("name"):
            raise WorkloadError(path, f"{where}: names {entry.get('name')!r} but holds {problem.name}; "
                                "run scons again to rewrite it")
        problems.append(problem)
    if not problems:
        raise WorkloadError(path, "no workloads")
    return problems


def load(path) -> tuple[str, str, list]:
    """(set name, workload file, problems) of a resolved set's file."""
    try:
        data = json.loads(inputs.read_text(path))
    except InputError as e:
        raise WorkloadError(path, f"cannot read: {e.detail}") from None
    except json.JSONDecodeError as e:
        raise WorkloadError(path, f"not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("set"), str):
        raise WorkloadError(path, "not a resolved workload set (no 'set'); run scons again to rewrite it")
    check_set_name(data["set"], path)  # it names the results folder
    return data["set"], data.get("workload_file", ""), problems_of(data, path)
