"""The kernels a build may hold: the family specs' (``specs.load_catalog``), the generated space's
(``space.load_space``, merged) and the fused variants of those for a set's epilogues
(``fusion.with_fused``), made once a process for the same files."""

from pathlib import Path

from .fusion import epilogues, with_fused
from .space import load_space, merged
from .specs import load_catalog

_BASE = [None, None, {}, {}]  # the last files' key, their kernels, those kernels' fused variants by epilogue, and
# the catalogs made of them by the epilogues of a set (the committed sets have about a dozen combinations)
_CATALOGS_KEPT = 16


def kernel_catalog(specs_dir, spaces_dir, problems) -> list:
    """The kernels of the family specs under ``specs_dir``, the space's under ``spaces_dir`` (None:
    none) and the fused variants of those for the epilogues of ``problems``, sorted by name. Made
    once a process for the same files (SConstruct and the header's build both need them: a fused
    set's catalog is tens of thousands of descriptors); a set of other epilogues reuses the
    variants of those it shares."""
    folders = [Path(specs_dir)] + ([] if spaces_dir is None else [Path(spaces_dir)])
    try:
        files = tuple((str(p), st.st_mtime_ns, st.st_size) for d in folders for p in sorted(d.glob("*.toml"))
                      for st in [p.stat()])
    except OSError:
        files = None  # a file that went away: load_catalog or load_space says which
    base_key = (tuple(map(str, folders)), files)
    if files is None or base_key != _BASE[0]:
        listed = load_catalog(specs_dir)
        base = listed if spaces_dir is None else merged(listed, load_space(spaces_dir))
        if files is None:
            return with_fused(base, problems)
        _BASE[:] = [base_key, base, {}, {}]
    key = tuple(epilogues(problems))
    made = _BASE[3].get(key)
    if made is None:
        made = with_fused(_BASE[1], problems, _BASE[2])
        if len(_BASE[3]) >= _CATALOGS_KEPT:
            _BASE[3].pop(next(iter(_BASE[3])))
        _BASE[3][key] = made
    return list(made)
