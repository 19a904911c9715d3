"""Report files a worker names, read safely: roots pinned before the worker starts, no symlink followed, one bounded open.

A worker has a shell: between orch's check of a path and its read it can swap any component for a symlink, a FIFO or
a device, or replace its whole worktree by a link to `/`. So a report is never checked by name and then read by name:
its roots' real paths are pinned in the run folder when the worker's packet is saved (before the worker runs), and the
file is opened once, component by component from `/` with `O_NOFOLLOW` through directory descriptors, then judged on
the open descriptor (a regular file, one link, at most the limit) and read with a deadline. Standard library only: the
callback path (`orchestrator.intake`) reads the pinned roots too.
"""

from __future__ import annotations

import errno
import json
import os
import posixpath
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOTS_FILE = "report_roots.json"
# What one report may hold, what one result may name, and what all its reports together may hold.
REPORT_LIMIT_BYTES = 256 * 1024
MAX_REPORTS = 8
TOTAL_LIMIT_BYTES = 4 * REPORT_LIMIT_BYTES
READ_TIMEOUT_S = 5.0
_CHUNK = 64 * 1024
_PINNING = threading.Lock()


def report_dir(folder: Path, task: str) -> Path:
    """A worker's report directory in its run's folder (named in its packet): the one place outside its checkout it may write."""
    return folder / "reports" / task


def named_roots(folder: Path, task: str, worktree_path: str | None) -> list[str]:
    """Where a worker may write reports, as its packet names them: its checkout, then its report directory."""
    found = [str(report_dir(folder, task))]
    if worktree_path:
        found.insert(0, worktree_path)
    return [posixpath.normpath(root) for root in found]


def pin_roots(folder: Path, task: str, worktree_path: str | None) -> None:
    """Record, once, where a worker may write reports: each root as its packet names it and its real path now.

    Called when the packet is saved, before the worker ever runs, so no worker has had a chance to move a root; a
    later call (a resumed run, a follow-up packet) keeps what was pinned first.
    """
    path = folder / ROOTS_FILE
    folder.mkdir(parents=True, exist_ok=True)
    # Dispatch saves several workers' packets at once (one thread each): the file is read, added to and replaced under
    # one lock, else two threads each write back what they read and one worker's roots are lost. (Another process
    # cannot pin for the same run at the same time: a run has one driver, `orchestrator.driver`.)
    with _PINNING:
        pinned = _load(path)
        if task in pinned:
            return
        pinned[task] = [[root, os.path.realpath(root)] for root in named_roots(folder, task, worktree_path)]
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(pinned, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)


def _load(path: Path) -> dict[str, list[list[str]]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(task): [[str(pair[0]), str(pair[1])] for pair in pairs if isinstance(pair, list) and len(pair) == 2]
        for task, pairs in data.items()
        if isinstance(pairs, list)
    }


def pinned_roots(folder: Path, task: str, worktree_path: str | None) -> tuple[tuple[str, str], ...]:
    """(as named, real path) of each root: as pinned, or (a run from before pinning) as resolved now."""
    pinned = _load(folder / ROOTS_FILE).get(task)
    if pinned:
        return tuple((named, real) for named, real in pinned)
    return tuple((root, os.path.realpath(root)) for root in named_roots(folder, task, worktree_path))


@dataclass(frozen=True, slots=True)
class Opened:
    """What reading one report gave: its text, or why it was not read (and, read, which file it was)."""

    text: str | None = None
    reason: str | None = None
    identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the file read


def _within(path: str, roots: Sequence[tuple[str, str]]) -> str | None:
    """The path under a root's real path (a path given under the root's packet name is moved onto its real path)."""
    for named, real in roots:
        for base in (real, named):
            if path == base or path.startswith(base.rstrip("/") + "/"):
                return real + path[len(base) :]
    return None


def _why(error: OSError) -> str:
    if error.errno in (errno.ELOOP, errno.EMLINK):
        return "a symbolic link on its way (orch follows none)"
    if error.errno == errno.ENOTDIR:
        return "a symbolic link or a file on its way where a directory should be (orch follows no link)"
    if error.errno == errno.ENXIO:
        return "not a regular file (a FIFO or socket with no writer)"
    return error.strerror or type(error).__name__


def open_report(
    path: str, roots: Sequence[tuple[str, str]], *, limit: int = REPORT_LIMIT_BYTES, timeout_s: float = READ_TIMEOUT_S,
    clock: Callable[[], float] = time.monotonic,
) -> Opened:  # fmt: skip
    """Read one report a worker named, or say why not; never follows a symlink, never blocks on a FIFO, never raises."""
    if not posixpath.isabs(path):
        return Opened(reason="not an absolute path")
    if ".." in path.split("/") or "\x00" in path:
        return Opened(reason='contains ".." or a NUL')
    target = _within(posixpath.normpath(path), roots)
    if target is None:
        return Opened(reason="outside the worker's checkout and its report directory")
    parts = [part for part in target.split("/") if part]
    if not parts:
        return Opened(reason="not a regular file")
    deadline = clock() + timeout_s
    fds: list[int] = []
    try:
        fds.append(os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        for part in parts[:-1]:
            fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fds[-1]))
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        try:
            fd = os.open(parts[-1], flags, dir_fd=fds[-1])
        except OSError as error:
            if error.errno == errno.ELOOP:
                return Opened(reason="a symbolic link (orch follows none)")
            raise
        fds.append(fd)
        info = os.fstat(fd)
        if stat.S_ISLNK(info.st_mode):
            return Opened(reason="a symbolic link (orch follows none)")
        if not stat.S_ISREG(info.st_mode):
            return Opened(reason="not a regular file (a directory, FIFO, socket or device)")
        if info.st_nlink > 1:
            return Opened(reason=f"a file with {info.st_nlink} hard links (a report is a file of its own)")
        if info.st_size > limit:
            return Opened(reason=f"{info.st_size} bytes, more than the {limit}-byte limit")
        data = bytearray()
        while len(data) <= limit:
            if clock() > deadline:
                return Opened(reason=f"not read within {timeout_s:g} s")
            try:
                chunk = os.read(fd, min(_CHUNK, limit + 1 - len(data)))
            except BlockingIOError:
                return Opened(reason="not readable without waiting")
            if not chunk:
                break
            data += chunk
        if len(data) > limit:
            return Opened(reason=f"more than the {limit}-byte limit (it grew while being read)")
        return Opened(text=bytes(data).decode("utf-8", errors="replace"), identity=(info.st_dev, info.st_ino))
    except OSError as error:
        return Opened(reason=_why(error))
    finally:
        for fd in reversed(fds):
            os.close(fd)
