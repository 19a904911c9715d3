"""Runs a plan's verification and setup commands: each is a shell command line, so it runs as ``bash -c``."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import time
from pathlib import Path

CHECK_TIMEOUT_S = 600.0
TAIL_LINES = 20


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckRun:
    """One command run by the controller; ``exit_code`` is None when it could not run or timed out.

    A plain record (stored as JSON inside a verification and a setup effect's result: `registry.records.plain` writes
    it, `registry.records.build` reads it back checked)."""

    command: str
    exit_code: int | None
    seconds: float
    output_tail: str
    error: str | None = None

    @property
    def passed(self) -> bool:
        """A check passes only when it ran to completion with exit 0 (fail closed otherwise)."""
        return self.exit_code == 0


def _tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def run_command(command: str, *, cwd: Path, timeout: float = CHECK_TIMEOUT_S, env: dict[str, str] | None = None) -> CheckRun:
    """Run one plan command line in ``cwd``; output is stdout and stderr interleaved, kept as a tail."""
    # Plan commands are shell command lines written by a person (pipes, &&), so bash parses them;
    # the argv itself is still a list and nothing is interpolated into it.
    argv = ["bash", "-c", command]
    started = time.monotonic()
    try:
        # A session of its own, so a timeout can kill the whole process group (pipelines, test runners'
        # children), not just bash, whose orphans would otherwise keep the output pipe open.
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True,
        )
    except OSError as exc:
        return CheckRun(command=command, exit_code=None, seconds=time.monotonic() - started, output_tail="", error=f"could not run: {exc.strerror or exc}")
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return CheckRun(command=command, exit_code=None, seconds=time.monotonic() - started, output_tail=_tail(out or ""), error=f"timed out after {timeout:g}s")
    return CheckRun(command=command, exit_code=proc.returncode, seconds=time.monotonic() - started, output_tail=_tail(out))


def run_command_on(command: str, *, ssh: str, cwd: str, timeout: float = CHECK_TIMEOUT_S) -> CheckRun:
    """``run_command`` on another host, over ssh, in ``cwd`` there: ``bash -c`` under ``timeout`` on that host, since
    ending the local ssh would not end the remote process group. ssh's own failure raises HostUnreachable."""
    from orchestrator import remote
    from orchestrator.errors import HostUnreachable

    # The command line is one argv word to `bash -c` there (quoted for the remote shell by remote.ssh_argv); `cd` and
    # `eval` happen in that bash, never in the login shell that reads the quoted string.
    argv = ["timeout", "--kill-after=10", f"{timeout:g}", "bash", "-c", 'cd -- "$1" && eval "$2"', "orch-setup", cwd, command]
    started = time.monotonic()
    done = remote.run_remote(ssh, argv, timeout=timeout + 30)
    seconds = time.monotonic() - started
    if done.unreachable:
        raise HostUnreachable(f"ssh {ssh} {command}: ssh failed: {done.detail()}", hint=f"orch needs `ssh -o BatchMode=yes {ssh} true` to work without a prompt")
    out = _tail(done.stdout + done.stderr)
    if done.returncode in (124, 137):  # timeout(1): the command ran out of time (137: killed after the grace period)
        return CheckRun(command=command, exit_code=None, seconds=seconds, output_tail=out, error=f"timed out after {timeout:g}s")
    return CheckRun(command=command, exit_code=done.returncode, seconds=seconds, output_tail=out)
