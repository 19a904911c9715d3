"""Test support: `SimServer`, an isolated simulated herdr server started in the background for one test."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from herdr_sim import faults, procs
from herdr_sim.paths import Paths
from herdr_sim.state import Store


class SimServer:
    """`with SimServer(tmp_path / "sim") as sim:` starts `herdr-sim server`, waits for readiness, and on exit
    stops it and asserts that no tmux server or pane/agent process survived.

    `sim.env()` is what a client needs (HERDR_SIM_HOME, HERDR_SOCKET_PATH, PATH with `<home>/bin` so `herdr`
    resolves to the simulator); `sim.run([...])` runs one simulated `herdr` command with that env.
    `env_overrides` reach the server and so every pane and agent (e.g. HERDR_SIM_SETTLE_MS, HERDR_SIM_SCENARIOS).
    """

    def __init__(self, home: Path, env_overrides: Mapping[str, str] | None = None, ready_timeout: float = 15.0,
                 session: str | None = None):
        self.home = Path(home).absolute()
        self.session = session  # a named session (`herdr-sim server --session NAME`); None is the default one
        self.paths = Paths(self.home)
        self.overrides = dict(env_overrides or {})
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self._pane_pids: list[int] = []

    def env(self) -> dict[str, str]:
        """Environment for a client process of this simulated server."""
        env = dict(os.environ)
        env.update(self.overrides)
        for leaky in ("HERDR_ENV", "HERDR_PANE_ID", "HERDR_TAB_ID", "HERDR_WORKSPACE_ID", "HERDR_SESSION", "TMUX"):
            env.pop(leaky, None)
        env["HERDR_SIM_HOME"] = str(self.home)
        env["HERDR_SOCKET_PATH"] = str(self.paths.socket_for(self.session))
        if self.session is not None:
            env["HERDR_SESSION"] = self.session
        env["PATH"] = f"{self.paths.bin}:{env.get('PATH', '/usr/bin:/bin')}"
        return env

    def run(self, argv: list[str], timeout: float = 60.0, **env: str) -> subprocess.CompletedProcess[str]:
        """Run `herdr-sim <argv>` against this server; returns the completed process (text mode)."""
        full = self.env()
        full.update(env)
        return subprocess.run([sys.executable, "-m", "herdr_sim.cli", *argv], capture_output=True, text=True,
                              timeout=timeout, env=full)

    def add_fault(self, command: str, **kwargs: object) -> None:
        """Queue an injected failure (see herdr_sim.faults.add)."""
        faults.add(self.home, command, **kwargs)  # type: ignore[arg-type]

    def __enter__(self) -> SimServer:
        self.home.mkdir(parents=True, exist_ok=True)
        log = open(self.paths.home / "server.out", "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "herdr_sim.cli", "server"], env=self.env(),
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + self.ready_timeout
        while not self.paths.ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self._kill()
                raise RuntimeError(f"herdr-sim server did not become ready: "
                                   f"{(self.paths.home / 'server.out').read_text(errors='replace')}")
            time.sleep(0.02)
        return self

    def focus_history(self) -> list[str]:
        """Every pane that has had the UI focus since the server started, in order (consecutive repeats folded)."""
        return list(Store(self.paths).load().focus_history)

    def pane_pids(self) -> list[int]:
        """Shell pids of the live simulated panes and their descendants (for leak checks)."""
        pids = []
        for pane in Store(self.paths).load().panes.values():
            pids.append(pane.shell_pid)
            pids += procs.descendants(pane.shell_pid)
        return pids

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        """Stop the server and wait for its tear-down."""
        watched = self.pane_pids()
        # What `herdr-sim server stop` does, in this process: a cold interpreter for it cost ~0.1 s of CPU per server.
        from herdr_sim.server import stop_server

        stop_server(self.paths, quiet=True)
        if self.proc is not None:
            self.proc.wait(timeout=30)
        self._pane_pids = watched

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        if exc_type is None:
            assert_no_strays(self.paths, self._pane_pids)


def assert_no_strays(paths: Paths, pids: list[int]) -> None:
    """No pane or agent process and no tmux server may outlive the simulated server."""
    deadline = time.monotonic() + 5
    while True:
        alive = [p for p in pids if _alive(p)]
        tmux_up = subprocess.run(["tmux", "-S", str(paths.tmux_socket), "list-sessions"], capture_output=True,
                                 timeout=10).returncode == 0
        if not alive and not tmux_up:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"stray processes after server stop: pids={alive} tmux_up={tmux_up}")
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


T = TypeVar("T")


def eventually(probe: Callable[[], T], what: str | Callable[[], str], timeout_s: float = 60, interval_s: float = 0.2) -> T:
    """Poll ``probe`` (real processes move on their own time) until it returns something truthy; return that.

    The one polling loop of the end-to-end tests: bounded by a deadline, it fails with ``what`` (or what it returns)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what() if callable(what) else what} within {timeout_s:g}s")
        time.sleep(interval_s)
