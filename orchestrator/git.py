"""The one module that runs git for the orchestrator: argv lists, timeouts, failures that carry argv and output."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import OrchError

GIT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class GitResult:
    """One finished git process."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


class GitError(OrchError):
    """git exited non-zero, timed out or is missing; carries the whole call for the log."""

    def __init__(self, message: str, result: GitResult | None = None) -> None:
        super().__init__(message)
        self.result = result


def run_git(args: list[str], *, cwd: Path | str | None = None, check: bool = True, timeout: float = GIT_TIMEOUT_S) -> GitResult:
    """Run ``git <args>``; with ``check`` a non-zero exit raises GitError carrying git's stderr."""
    argv = ("git", *args) if cwd is None else ("git", "-C", str(cwd), *args)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git timed out after {timeout:g}s: {' '.join(argv)}") from exc
    result = GitResult(argv, proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        detail = proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}"
        raise GitError(f"{' '.join(argv)} failed: {detail}", result)
    return result
