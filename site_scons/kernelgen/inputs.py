"""Read the files a user hands in: regular files only, bounded in size, strict UTF-8.

Workload sets, kernel family specs, kernel lists (``KERNELS=@FILE``) and results CSVs are
read through ``read_text``. A FIFO, a device, a directory or a file over the size limit is
refused before anything is read from it (a FIFO is opened without blocking), and a byte that
is not UTF-8 is reported with its line. A leading byte-order mark is dropped. A line of a
workload set or a kernel list holds no control character (``control_character``).
"""

import codecs
import errno
import fcntl
import os
import re
import stat

from .errors import InputError

MIB = 1 << 20
TEXT_LIMIT = 1 * MIB  # a workload set, a spec, a kernel list
CSV_LIMIT = 64 * MIB  # one workload's results: a row is about 400 bytes
MODEL_LIMIT = 16 * MIB  # a fitted cost model: its constants and each kernel's residuals (1.2 MB for 38,000 rows)

# What would end a line, move the cursor or hide text in a message or a comment; a tab is text.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]")

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _size(n: int) -> str:
    return f"{n / MIB:.0f} MiB" if n >= MIB else f"{n} bytes"


def read_bytes(path, limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them; InputError otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise InputError(path, e.strerror or errno.errorcode.get(e.errno, str(e))) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(path, f"not a regular file ({kind_of(mode)}); only regular files are read")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, MIB))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise InputError(path, f"larger than the {_size(limit)} an input file may hold")
        return b"".join(chunks)
    except OSError as e:
        raise InputError(path, e.strerror or str(e)) from None
    finally:
        os.close(fd)


def decode(data: bytes, path) -> str:
    """``data`` as UTF-8 without a leading byte-order mark; InputError naming the line otherwise."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise InputError(path, f"not UTF-8 text (byte 0x{data[e.start]:02x} at column {column})", line) from None


def read_text(path, limit: int = TEXT_LIMIT) -> str:
    return decode(read_bytes(path, limit), path)


def file_kind(path) -> str | None:
    """None for a regular file (symbolic links followed); else what is there instead, "missing"
    included. A folder that cannot be searched reads as "unreadable (...)", not an exception."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except NotADirectoryError:
        return "missing"
    except OSError as e:
        return f"unreadable ({e.strerror})"
    return None if stat.S_ISREG(mode) else kind_of(mode)


def control_character(line: str) -> str | None:
    """The first control or line-separator character of ``line`` (a line of a file, its ``\\r``
    line end removed), or None."""
    bad = _CONTROL.search(line)
    return bad.group() if bad else None


def lock_exclusively(fd: int, waiting) -> bool:
    """Lock ``fd`` (an open lock file) for this process, with flock: the lock goes with the
    process however it ends. While another process holds it, ``waiting(pid)`` is called once with
    the pid the holder wrote, and the lock is waited for. This process's pid is then written in
    (where the file can be written). True if it waited."""
    waited = False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        waiting(os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown")
        fcntl.flock(fd, fcntl.LOCK_EX)
        waited = True
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:  # a lock file of another user's may be read-only here
        pass
    return waited
