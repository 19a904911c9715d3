"""One driver per run: an advisory lock in the run's folder, held by the orch process driving the run, gone with it.

`orch run`, `orch resume` and every door call that acts on a run (provision, dispatch, observe, answer, verify,
finish, `inbox add --check-in`…) take it before they change anything; a second driver is refused in one line naming
the holder, so nothing is created or sent twice. A worker's callback (`orch inbox add --run RUN ENVELOPE`) only
appends to the inbox and never takes it. The lock is `flock(2)` on ``<run folder>/driver.lock``: the kernel drops it
when its holder exits, however it exits (a crash, SIGKILL), so a stale lock cannot outlive its process. The file
also says who holds it (pid, command, since when), for the refusal's message only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import OrchError

LOCK_FILE = "driver.lock"

# Locks this process holds: path -> (fd, how many engines use it). flock locks belong to an open file, so a second
# open in the same process would conflict with the first: one process is one driver, whichever Engine asks (the demo
# and tests may build several, one after the other).
_HELD: dict[str, tuple[int, int]] = {}
_GUARD = threading.Lock()


class RunDriven(OrchError):
    """Another orch process drives this run right now; this one did nothing."""


@dataclass(frozen=True)
class Holder:
    """Who holds a run's lock, as its holder wrote it (any part may be unknown: it may be starting)."""

    pid: int | None
    command: str | None
    since: str | None

    def describe(self) -> str:
        """`pid 123 (`orch resume`, since 2026-01-01T00:00:00Z)`, or what is known of it."""
        about = [f"`{self.command}`"] if self.command else []
        if self.since:
            about.append(f"since {self.since}")
        who = f"pid {self.pid}" if self.pid is not None else "a process that is starting"
        return f"{who} ({', '.join(about)})" if about else who


def acquire(path: Path, run_id: str, *, command: str, since: str, doing: str | None = None) -> None:
    """Hold the lock at ``path`` for this process (again, if it already does); RunDriven when another process holds it.

    ``doing``: what the holder is doing, for the refusal (default: driving run ``run_id``)."""
    key = str(path)
    with _GUARD:
        if key in _HELD:
            fd, users = _HELD[key]
            _HELD[key] = (fd, users + 1)
            return
        fd = _locked(path, doing or f"run {run_id} is being driven")
        _HELD[key] = (fd, 1)
    note = json.dumps({"pid": os.getpid(), "command": command, "since": since}) + "\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, note.encode(), 0)


def _locked(path: Path, doing: str) -> int:
    """An open descriptor of ``path`` holding its flock. A lock file that was removed (``release(remove=True)``)
    between our open and our flock is a stale inode nobody else will lock: open the path afresh and try again."""
    for _ in range(5):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except FileNotFoundError:  # its folder went as the last holder tidied it: make it again
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                return fd
        except BlockingIOError:
            os.close(fd)
            raise _refusal(path, doing) from None
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    raise OrchError(f"cannot lock {path}: it keeps being removed under orch", hint="another program is deleting orch's files under ORCH_HOME: stop it, then run the command again")


def release(path: Path, *, remove: bool = False) -> None:
    """One user of this process's lock at ``path`` is done; the last one lets it go. ``remove``: a lock that
    guards a moment, not a run (the start lock), goes with its folder when empty, so nothing is left behind."""
    key = str(path)
    with _GUARD:
        if key not in _HELD:
            return
        fd, users = _HELD[key]
        if users > 1:
            _HELD[key] = (fd, users - 1)
            return
        del _HELD[key]
        if remove:  # unlinked while still held, so whoever opens the path next makes a new file and locks that
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            with contextlib.suppress(OSError):
                path.parent.rmdir()
        os.close(fd)  # closing the only descriptor of the open file drops its flock


def holder(path: Path) -> Holder | None:
    """Who drives the run whose lock is at ``path`` (this process included), or None when nobody does. Creates nothing."""
    if str(path) in _HELD:
        return Holder(os.getpid(), None, None)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder_note(path)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _holder_note(path: Path) -> Holder:
    try:
        note = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        note = {}
    if not isinstance(note, dict):
        note = {}
    pid = note.get("pid") if isinstance(note.get("pid"), int) else None
    if pid is not None and not Path(f"/proc/{pid}").exists():
        pid = None  # the note of an earlier holder: the one holding it now has not written its own yet
        note = {}
    command = note.get("command") if isinstance(note.get("command"), str) else None
    since = note.get("since") if isinstance(note.get("since"), str) else None
    return Holder(pid, command, since)


def _refusal(path: Path, doing: str) -> RunDriven:
    found = _holder_note(path)
    for _ in range(50):
        if found.pid is not None:
            break
        # The holder writes its note just after it takes the lock: two processes started at the same instant
        # meet in that gap, and the refusal should still name the holder.
        time.sleep(0.01)
        found = _holder_note(path)
    stop = f"`kill -INT {found.pid}`" if found.pid is not None else "Ctrl-C in its pane"
    return RunDriven(
        f"{doing} by another orch process: {found.describe()}",
        hint=f"one orch process drives a run at a time, so nothing is sent twice: wait for it to end (or stop it: {stop}), then try again",
    )
