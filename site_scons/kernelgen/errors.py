"""Typed errors: each names the file (and entry, key or line) that was wrong.

Every message is one line: a character that would start a new line or move the cursor
(a control character, U+2028, ...) is shown escaped, so that what a file or a variable
holds cannot forge more output.
"""

import re

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with every control or line-separator character written as an escape."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


class KernelgenError(Exception):
    """Base class of every error this package raises on bad input."""

    def __init__(self, message=""):
        super().__init__(one_line(message))


class SpecError(KernelgenError):
    """A kernel family spec is malformed."""

    def __init__(self, path, message, entry=None, key=None):
        where = str(path)
        if entry is not None:
            where += f", entry {entry}"
        if key is not None:
            where += f", key '{key}'"
        super().__init__(f"{where}: {message}")
        self.path, self.entry, self.key = path, entry, key


class WorkloadError(KernelgenError):
    """A workload file or set name is malformed."""

    def __init__(self, path, message, line=None):
        where = str(path) if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {message}")
        self.path, self.line = path, line


class ResultsError(KernelgenError):
    """A profile-results CSV cannot be trusted, or a workload has no usable kernel."""

    def __init__(self, path, message):
        super().__init__(f"{path}: {message}")
        self.path = path


class InputError(KernelgenError):
    """An input file cannot be read as text: missing, not a regular file, too large, not UTF-8."""

    def __init__(self, path, reason, line=None):
        where = str(path) if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {reason}")
        self.path, self.reason, self.line = path, reason, line

    @property
    def detail(self) -> str:
        """The reason with its line, without the path (for an error that names the path itself)."""
        return self.reason if self.line is None else f"line {self.line}: {self.reason}"


class TemplateError(KernelgenError):
    """A Mako template failed to render for a given spec."""
