"""The crash matrix's seam: stop this process, or lose a herdr call's answer, at call N; off unless asked.

tests/crash/matrix.py sets the variables below on the orch processes it starts; nothing else does. The herdr boundary
(`orchestrator.herdr`) runs every herdr process through `around`, and so do the calls that reach another host without
herdr (`orchestrator.remote.run_remote`, `orchestrator.git.run_git` on a host, `git fetch`): one numbering for all of
them, so a remote worker's spool collection and acknowledgement, its fetch by SHA and its checkout's removal are
crash points like its herdr calls. A call with no ``lost`` answer (those) is never lost, only counted and crashed at.
Off, the seam costs one dictionary read a call.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")


class CrashSeam:
    """The seam as this process's environment set it.

    ``ORCH_TEST_CRASH_AT=N:before|after:KILL|TERM|INT`` signals this process just before call N of the process (a
    herdr call, or an ssh or git call to another host) is made, or just after it returned and before orch saw its
    answer (INT goes to the whole process group, as a terminal's Ctrl-C does); ``K:before|after:KILL|TERM|INT:TEXT`` does
    it at the K-th call whose argv, joined with spaces, holds TEXT. ``K:before|after:LOSE:GROUP SUB`` kills
    the K-th ``herdr GROUP SUB`` call instead, orch alive (the unknown-outcome matrix; counted per command, whichever
    host's herdr it goes to, since reads interleave differently from run to run): before, the call never reaches herdr;
    after, herdr has acted but its answer is lost. Either way orch sees a herdr process dead of SIGKILL.
    ``ORCH_TEST_HERDR_CALLS=FILE`` appends one JSON line (n, pid, argv) per
    call as it starts, so the matrix knows which call each N is.
    """

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.log = environ.get("ORCH_TEST_HERDR_CALLS") or None
        crash = (environ.get("ORCH_TEST_CRASH_AT") or "").split(":", 3)
        self.at = int(crash[0]) if crash[0] else 0
        self.when = crash[1] if len(crash) > 1 else "before"
        self.how = crash[2] if len(crash) > 2 else "KILL"
        self.lose_command = crash[3] if len(crash) > 3 and self.how == "LOSE" else None
        self.lose_count = 0
        self.lose_number = 0
        # A signal at the N-th call whose argv holds TEXT (N:when:KILL:TEXT), not at call N of all: reads interleave
        # differently from run to run, the order of the calls one text names much less.
        self.text = crash[3] if len(crash) > 3 and self.how != "LOSE" else None
        self.text_count = 0
        self.crash_number = 0 if self.text is not None else self.at
        self.count = 0
        self.lock = threading.Lock()
        self.active = bool(self.log or self.at)

    def before(self, argv: Sequence[str], losable: bool = True) -> int:
        """Count (and log) the call about to start; stop here if it is the one. Its number. Only a ``losable`` call
        (a herdr one) counts toward a LOSE point."""
        with self.lock:
            self.count += 1
            number = self.count
            if self.how == "LOSE" and losable:
                words = list(argv[1:])
                if words[:1] in (["--session"], ["--machine"]):
                    words = words[2:]  # a call to another host's herdr (`--machine LABEL`) counts as its command too
                if self.lose_command is None or " ".join(words[:2]) == self.lose_command:
                    self.lose_count += 1
                    if self.lose_count == self.at:
                        self.lose_number = number
            if self.text is not None and self.text in " ".join(argv):
                self.text_count += 1
                if self.text_count == self.at:
                    self.crash_number = number
        if number == self.crash_number and self.when == "before" and self.how != "LOSE":
            self._crash()
        if self.log:
            line = json.dumps({"n": number, "pid": os.getpid(), "argv": list(argv)}) + "\n"
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        return number

    def after(self, number: int) -> None:
        """Call ``number`` returned: stop here, before orch reads its answer, if it is the one."""
        if number == self.crash_number and self.when == "after" and self.how != "LOSE":
            self._crash()

    def lost(self, number: int, when: str) -> bool:
        """Whether call ``number`` is the one to kill at ``when`` (LOSE: orch lives on)."""
        return self.how == "LOSE" and number == self.lose_number and self.when == when

    def _crash(self) -> None:
        if self.how == "INT":
            os.killpg(os.getpgrp(), signal.SIGINT)
        else:
            os.kill(os.getpid(), signal.SIGTERM if self.how == "TERM" else signal.SIGKILL)
        if self.how == "KILL":
            time.sleep(60)  # SIGKILL lands at once; never run on


_SEAM: CrashSeam | None = None
_SEAM_LOCK = threading.Lock()


def current() -> CrashSeam:
    """This process's crash seam, read from the environment at its first herdr call (not at import: no module of
    orch reads the process's environment while it is being imported)."""
    global _SEAM
    with _SEAM_LOCK:
        if _SEAM is None:
            _SEAM = CrashSeam(os.environ)
        return _SEAM


def around(argv: Sequence[str], run: Callable[[], T], lost: Callable[[], T] | None = None) -> T:
    """One call through the seam: ``run`` makes it; ``lost`` is what orch sees when the seam kills it (a herdr call;
    without it the call is only counted and crashed at: an ssh or git call to another host)."""
    seam = current()
    if not seam.active:
        return run()
    number = seam.before(argv, losable=lost is not None)
    if lost is not None and seam.lost(number, "before"):
        return lost()  # killed before it reached herdr
    result = run()
    seam.after(number)
    if lost is not None and seam.lost(number, "after"):
        return lost()  # herdr acted; the answer is lost
    return result
