"""The SSH transport to a plan's other hosts: the one place an ssh argv is built, and the probes herdr and git do not cover.

sshd hands the remote command to the user's shell as one string, so every word of the remote argv is quoted with
``shlex.join`` (free text included: it reaches the remote process as the very words it was here, which
tests/orchestrator/test_remote.py proves through ``sh -c``). BatchMode: a host that would ask for a password or a
host key fails at once instead of waiting on a terminal nobody watches. ssh's own failures exit 255.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from orchestrator import crash_seam
from orchestrator.children import run_child
from orchestrator.errors import HostUnreachable, one_line

# ssh exits 255 for its own errors (no route, refused, authentication, host key): the remote command never ran, or
# its outcome is unknown when the link dropped after it started.
SSH_FAILED = 255
CONNECT_TIMEOUT_S = 10
PROBE_TIMEOUT_S = 30.0


class Runner(Protocol):
    """Runs one argv (no shell) and returns the finished process; raises like ``subprocess.run`` does."""

    def __call__(self, argv: Sequence[str], *, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]: ...


def ssh_argv(target: str, argv: Sequence[str], *, ssh: str = "ssh") -> list[str]:
    """``ssh … TARGET -- '<argv, every word quoted for the remote shell>'``."""
    if not argv:
        raise ValueError("a remote command needs at least one word")
    options = ["-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}"]
    # `--` ends ssh's options: the command string is never read as one of them.
    return [ssh, *options, target, "--", shlex.join(argv)]


@dataclass(frozen=True)
class RemoteResult:
    """One finished remote command: its local ssh argv, exit code (255: ssh itself failed) and output."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def unreachable(self) -> bool:
        """ssh could not run the command (or lost the link while it ran)."""
        return self.returncode == SSH_FAILED

    def detail(self) -> str:
        """ssh's or the command's own words, on one line."""
        return one_line(self.stderr) or one_line(self.stdout) or f"exit {self.returncode}"


def run_process(argv: Sequence[str], *, env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """The default runner: a child that outlives an interrupt (``orchestrator.children.run_child``)."""
    return run_child(argv, env=env, timeout=timeout)


def run_remote(target: str, argv: Sequence[str], *, runner: Runner = run_process, timeout: float = PROBE_TIMEOUT_S) -> RemoteResult:
    """Run ``argv`` on ``target`` over ssh; a missing ssh or a time-out is a result with exit 255, never an exception."""
    local = ssh_argv(target, argv)
    try:
        # The crash matrix may stop orch around it (the spool's listing and acknowledgement, a setup, a read-back).
        proc = crash_seam.around(local, lambda: runner(local, env=os.environ, timeout=timeout))
    except (FileNotFoundError, PermissionError) as exc:
        return RemoteResult(tuple(local), SSH_FAILED, "", f"cannot run ssh: {exc.strerror or exc}")
    except subprocess.TimeoutExpired:
        return RemoteResult(tuple(local), SSH_FAILED, "", f"no answer within {timeout:g}s")
    return RemoteResult(tuple(local), proc.returncode, proc.stdout or "", proc.stderr or "")


def which(target: str, executable: str, *, runner: Runner = run_process) -> RemoteResult:
    """``command -v EXECUTABLE`` in the non-interactive shell a remote command gets (its PATH is the one that counts)."""
    return run_remote(target, ["command", "-v", executable], runner=runner)


def orch_version(target: str, orch: str, *, runner: Runner = run_process) -> RemoteResult:
    """``ORCH --version`` on the host."""
    return run_remote(target, [orch, "--version"], runner=runner)


def exists(target: str, path: str, *, runner: Runner = run_process) -> bool:
    """Whether ``path`` exists on ``target`` (``test -e``); HostUnreachable when the host cannot be asked."""
    found = run_remote(target, ["test", "-e", path], runner=runner)
    if found.unreachable:
        raise HostUnreachable(f"ssh {target} test -e {path}: ssh failed: {found.detail()}", hint=f"orch needs `ssh -o BatchMode=yes {target} true` to work without a prompt")
    return found.returncode == 0


def remove_empty_dir(target: str, path: str, *, runner: Runner = run_process) -> bool:
    """``rmdir PATH`` on ``target``: removed only when empty (rmdir never removes anything inside); False when it was
    not removed (not empty, gone, or the host not reached), which is never an error: the folder stays."""
    return run_remote(target, ["rmdir", "--", path], runner=runner).returncode == 0
