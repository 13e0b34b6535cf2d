"""Typed errors: each names the file (and entry, key or line) that was wrong."""


class KernelgenError(Exception):
    """Base class of every error this package raises on bad input."""


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


class TemplateError(KernelgenError):
    """A Mako template failed to render for a given spec."""
