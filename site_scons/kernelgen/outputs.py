"""What the build writes in BUILD: its record of the files it wrote, the lock that lets one scons
run at a time use the folder, and the removal ``scons -c`` does.

The record (``BUILD/.kernelgen-outputs``) lists each file the build wrote, one JSON string (its
path relative to BUILD) a line, appended before the file is first written: a build interrupted at
any point, SIGKILL included, leaves a record of everything it wrote. ``scons -c`` removes what the
record lists and nothing else, never by a name's pattern; each file is reached from BUILD without
following a symbolic link, so a linked folder, a linked file or a path that leads out of BUILD is
left as it is.

The lock (``BUILD/.lock``, which holds the pid of the run that has it) is taken before anything
reads or writes BUILD, SCons's signature database included, and held until the scons process ends,
however it ends (flock). It is never removed: a run waiting on it would otherwise go on with a lock
no other run sees.
"""

import errno
import json
import os
import stat
import threading
from pathlib import Path, PurePosixPath

from .errors import KernelgenError, one_line
from .inputs import lock_exclusively
from .render import replace_with

RECORD = ".kernelgen-outputs"
LOCK = ".lock"
# BUILD/sets/<set>/: one set's header files (what the header build writes: the header, the CUTLASS
# types, the launcher's source, the CMake package file), its launcher's object and libbest_kernels.a.
SETS_FOLDER = "sets"
HEADER_FILES = ("best_kernels.h", "best_kernels_cutlass.h", "best_kernels_launcher.cu", "best_kernels-config.cmake")
SCONSIGN = ".sconsign"  # SCons's signature database in BUILD: .sconsign.dblite, written through .sconsign.tmp
SCONSIGN_FILES = (".sconsign.dblite", ".sconsign.tmp")
# BUILD/proposals.json: the cost model's proposal for each layer as the last runs made them
# (kernelgen.candidates.Memo), so that a run with the same inputs ranks nothing again.
PROPOSALS = "proposals.json"
_NO_LINK = os.O_NOFOLLOW | os.O_CLOEXEC
_NOT_THERE = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)  # missing, or reached only through a link or a file


def hold(build: Path, log=print) -> bool:
    """Take BUILD for this process, after the run that holds it ends; True if it had to wait."""
    path = build / LOCK
    try:
        build.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | _NO_LINK, 0o666)
    except OSError as e:
        raise KernelgenError(f"{path}: cannot open BUILD's lock ({e.strerror}); the build keeps it there as "
                             "a file") from None
    # fd stays open, and BUILD held, until the process ends
    return lock_exclusively(fd, lambda pid: log(f"scons: waiting for the scons run (pid {one_line(pid)}) that "
                                                f"holds BUILD={build}"))


def read_record(build: Path) -> list:
    """The paths (relative to BUILD) the record lists. A line cut short by an interrupted append
    is not a path the build wrote, and neither is anything but a JSON string."""
    path = build / RECORD
    try:
        fd = os.open(path, os.O_RDONLY | _NO_LINK)
    except FileNotFoundError:
        return []
    except OSError as e:
        raise KernelgenError(f"{path}: cannot read the build's record ({e.strerror}); the build keeps it "
                             "there as a file") from None
    with os.fdopen(fd, "rb") as f:
        lines = f.read().decode("utf-8", "replace").split("\n")[:-1]
    listed = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, str) and entry not in listed:
            listed.append(entry)
    return listed


class Record:
    """BUILD's record, appended to as the build writes; one scons run at a time holds BUILD, and
    the actions of that run (threads, with -j) append through one lock."""

    def __init__(self, build: Path):
        self.build = build
        self.listed = set(read_record(build))
        self._lock = threading.Lock()

    def add(self, paths) -> None:
        """Record ``paths`` (absolute, inside BUILD) before they are written."""
        with self._lock:
            new = []
            for path in paths:
                relative = Path(path).relative_to(self.build).as_posix()
                if relative not in self.listed and relative not in new:
                    new.append(relative)
            if new:
                _append(self.build / RECORD, "".join(json.dumps(p) + "\n" for p in new).encode())
                self.listed.update(new)


def _append(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NO_LINK, 0o666)
    try:
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def write(record: Record, path: Path, text: str) -> None:
    """Write ``text`` to ``path`` in BUILD atomically (a reader never sees half a file), through a
    temporary of a fixed name beside it: both are in the record before either exists, and the
    name is this run's alone, as BUILD is."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp")
    record.add([path, temporary])
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_with(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NO_LINK, 0o666), temporary, path, text)


def clean(build: Path, log=print) -> None:
    """Remove every regular file the record lists. The record then lists only what could not be
    removed (and goes once it lists nothing); an entry that is missing, or reached only through a
    link or out of BUILD, is dropped from it and left as it is."""
    kept = []
    for relative in read_record(build):
        try:
            if _remove(build, relative):
                log(f"Removed {build / relative}")
        except OSError as e:
            log(f"scons: {one_line(build / relative)}: cannot remove ({e.strerror}); it stays in the build's record")
            kept.append(relative)
    record = build / RECORD
    if os.path.lexists(record):
        os.unlink(record)
    if kept:
        _append(record, "".join(json.dumps(p) + "\n" for p in kept).encode())


def _remove(build: Path, relative: str) -> bool:
    """Unlink BUILD/relative if it is a regular file reached from BUILD through folders only (no
    symbolic link followed, no ``..``); False if there is none such."""
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or any(p in (".", "..") for p in parts):
        return False
    folder = os.open(build, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | _NO_LINK, dir_fd=folder)
            os.close(folder)
            folder = inner
        if not stat.S_ISREG(os.lstat(parts[-1], dir_fd=folder).st_mode):
            return False
        os.unlink(parts[-1], dir_fd=folder)
        return True
    except OSError as e:
        if e.errno in _NOT_THERE:
            return False
        raise
    finally:
        os.close(folder)
