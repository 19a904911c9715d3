"""The run's log (`<run folder>/orch.log`): one line per herdr and git call, with its exit code, time and output size.

Fed by the single herdr runner (HerdrCli's ``on_call``) and the single git runner (``git.observe``); -v echoes
herdr calls to stderr, this keeps all of them, git's too, where the run's other files are.
"""

from __future__ import annotations

import re
import shlex
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Calls made before the run exists (preflight's gates) wait here until the run's folder is known; a bound keeps a
# process that never gets a run from growing.
_PENDING_MAX = 2000
_WORD_MAX = 200
_DETAIL_MAX = 500
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _clean(text: str, limit: int) -> str:
    # Worker text (prompts, pane output) goes into the log: escape control characters so `cat orch.log` is inert.
    text = _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode(), text)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _argv(argv: tuple[str, ...] | list[str]) -> str:
    return " ".join(shlex.quote(_clean(word, _WORD_MAX)) for word in argv)


def format_call(tool: str, argv: tuple[str, ...] | list[str], returncode: int | None, seconds: float, stdout: str, stderr: str, at: datetime) -> str:
    """One log line: time, tool, exit code, seconds, argv, output sizes, and (on failure) the start of stderr."""
    code = "-" if returncode is None else str(returncode)
    line = f"{at.isoformat(timespec='milliseconds')} {tool} exit={code} {seconds:.3f}s {_argv(argv)} (stdout {len(stdout)} B, stderr {len(stderr)} B)"
    if returncode != 0:
        detail = " / ".join(part.strip() for part in (stderr or stdout).splitlines() if part.strip())
        if detail:
            line += f": {_clean(detail, _DETAIL_MAX)}"
    return line


class RunLog:
    """Appends call lines to a run's orch.log once ``attach`` names it; thread-safe (provisioning runs workers at once)."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self._pending: list[str] = []
        self._lock = threading.Lock()

    def attach(self, path: Path) -> None:
        """Log to ``path`` from now on (calls made before go there first); a second attach to another run moves on."""
        with self._lock:
            if self.path == path:
                return
            self.path = path
            pending, self._pending = self._pending, []
            self._write(pending)

    def herdr(self, call: Any) -> None:
        """A finished HerdrCall."""
        self.add(format_call("herdr", call.argv, call.returncode, call.seconds, call.stdout, call.stderr, datetime.now(UTC)))

    def git(self, result: Any) -> None:
        """A finished GitResult."""
        self.add(format_call("git", result.argv, result.returncode, result.seconds, result.stdout, result.stderr, datetime.now(UTC)))

    def add(self, line: str) -> None:
        """One line, now (or as soon as the run is known)."""
        with self._lock:
            if self.path is None:
                if len(self._pending) < _PENDING_MAX:
                    self._pending.append(line)
                return
            self._write([line])

    def _write(self, lines: list[str]) -> None:
        if not lines or self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write("".join(f"{line}\n" for line in lines))
        except OSError:
            pass  # the log is a help, never a reason for a run to fail
