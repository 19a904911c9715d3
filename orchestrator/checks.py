"""Runs a plan's verification and setup commands: each is a shell command line, so it runs as ``bash -c``."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from orchestrator import remote
from orchestrator.errors import HostUnreachable

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


# What the remote bash runs: stderr into stdout (one interleaved output, as locally), the command line in a subshell (an
# `exit` in it ends only that), then its exit code on a line of its own. ssh exits 255 for its own failures, and so may
# a command: a run whose output ends with the mark finished on the host, whatever its code.
_REMOTE_SCRIPT = 'exec 2>&1; cd -- "$1" || exit; (eval "$2"); s=$?; printf "\\n%s %s\\n" orch-exit "$s"; exit "$s"'
_EXIT_MARK = re.compile(r"\n?orch-exit ([0-9]+)\n?\Z")


def remote_argv(command: str, cwd: str, timeout: float = CHECK_TIMEOUT_S) -> list[str]:
    """The argv ``run_command_on`` runs on the host (`orch plan check --commands` shows it inside its ssh)."""
    # The command line is one argv word to `bash -c` there (quoted for the remote shell by remote.ssh_argv); `cd` and
    # `eval` happen in that bash, never in the login shell that reads the quoted string.
    return ["timeout", "--kill-after=10", f"{timeout:g}", "bash", "-c", _REMOTE_SCRIPT, "orch-command", cwd, command]


def run_command_on(
    command: str, *, ssh: str, cwd: str, timeout: float = CHECK_TIMEOUT_S, runner: remote.Runner | None = None
) -> CheckRun:
    """``run_command`` on another host, over ssh, in ``cwd`` there: ``bash -c`` under ``timeout`` on that host, since
    ending the local ssh would not end the remote process group. ssh's own failure raises HostUnreachable."""
    started = time.monotonic()
    done = remote.run_remote(ssh, remote_argv(command, cwd, timeout), timeout=timeout + 30, runner=runner or remote.run_process)
    seconds = time.monotonic() - started
    marked = _EXIT_MARK.search(done.stdout)
    if done.unreachable and marked is None:
        raise HostUnreachable(f"ssh {ssh} {command}: ssh failed: {done.detail()}", hint=f"orch needs `ssh -o BatchMode=yes {ssh} true` to work without a prompt")
    out = _tail((done.stdout if marked is None else done.stdout[: marked.start()]) + done.stderr)
    if marked is None and done.returncode in (124, 137):  # timeout(1): out of time (137: killed after the grace period)
        return CheckRun(command=command, exit_code=None, seconds=seconds, output_tail=out, error=f"timed out after {timeout:g}s")
    return CheckRun(command=command, exit_code=done.returncode if marked is None else int(marked.group(1)), seconds=seconds, output_tail=out)
