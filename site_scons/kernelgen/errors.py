"""Typed errors: each names the file (and entry, key or line) that was wrong.

Every message is one line: a character that would start a new line or move the cursor
(a control character, U+2028, ...) is shown escaped, so that what a file or a variable
holds cannot forge more output. Every message is short: a token quoted from a file or a
variable is shown by its ends (``shorten``), and so is any word of a message longer than
the longest path (``LONGEST_WORD``), so that a megabyte a file holds is never echoed whole.
"""

import re

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
LONGEST_TOKEN = 120  # a token quoted from a file or a variable is shown whole up to this length
LONGEST_WORD = 400  # a word of a message (a path, a name) is shown whole up to this length
_LONG_WORD = re.compile(r"\S{%d,}" % (LONGEST_WORD + 1))
_HEAD, _TAIL = 60, 20


def one_line(text: str) -> str:
    """``text`` with every control or line-separator character written as an escape."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def shorten(text, longest: int = LONGEST_TOKEN) -> str:
    """``text``, or, when longer than ``longest``, its first 60 and last 20 characters with the
    count between: what a message quotes may be a megabyte of a file or a variable."""
    text = str(text)
    if len(text) <= longest:
        return text
    return f"{text[:_HEAD]}... ({len(text)} characters) ...{text[-_TAIL:]}"


def _where(path) -> str:
    """A path as a message names it: whole, unless no real path is that long."""
    return shorten(path, LONGEST_WORD)


class KernelgenError(Exception):
    """Base class of every error this package raises on bad input."""

    def __init__(self, message=""):
        short = _LONG_WORD.sub(lambda m: shorten(m.group()), str(message))
        super().__init__(one_line(short))


class SpecError(KernelgenError):
    """A kernel family spec is malformed."""

    def __init__(self, path, message, entry=None, key=None):
        where = _where(path)
        if entry is not None:
            where += f", entry {entry}"
        if key is not None:
            where += f", key '{shorten(key)}'"
        super().__init__(f"{where}: {message}")
        self.path, self.entry, self.key, self.message = path, entry, key, message


class WorkloadError(KernelgenError):
    """A workload file or set name is malformed."""

    def __init__(self, path, message, line=None):
        where = _where(path) + ("" if line is None else f":{line}")
        super().__init__(f"{where}: {message}")
        self.path, self.line = path, line


class ResultsError(KernelgenError):
    """A profile-results CSV cannot be trusted, or a workload has no usable kernel."""

    def __init__(self, path, message):
        super().__init__(f"{_where(path)}: {message}")
        self.path = path


class InputError(KernelgenError):
    """An input file cannot be read as text: missing, not a regular file, too large, not UTF-8."""

    def __init__(self, path, reason, line=None):
        where = _where(path) + ("" if line is None else f":{line}")
        super().__init__(f"{where}: {reason}")
        self.path, self.reason, self.line = path, reason, line

    @property
    def detail(self) -> str:
        """The reason with its line, without the path (for an error that names the path itself)."""
        return self.reason if self.line is None else f"line {self.line}: {self.reason}"


class TemplateError(KernelgenError):
    """A Mako template failed to render for a given spec."""
