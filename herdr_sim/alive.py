"""Whether a simulated server is up for a home: pid file, /proc liveness and the readiness marker (no heavy imports)."""

from __future__ import annotations

from pathlib import Path

from herdr_sim.paths import Paths


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid exists (and is not a zombie)."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def server_pid(paths: Paths) -> int | None:
    """The pid recorded by the running server, if any."""
    try:
        return int(paths.pidfile.read_text().strip())
    except (OSError, ValueError):
        return None


def running(paths: Paths) -> bool:
    """A simulated server is up for this home."""
    return paths.ready.exists() and pid_alive(server_pid(paths))
