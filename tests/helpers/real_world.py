"""The real-agents lane's world: real agent CLIs in the simulator's panes on the scripted model (tests/real_agents)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from herdr_sim.model.agents import KINDS, cache_dir, install
from herdr_sim.model.server import ModelServer
from herdr_sim.testing import SimServer
from orchestrator.demo import demo_data


ORCH = [sys.executable, "-m", "orchestrator"]
# Read before tests/conftest.py's isolation replaces HOME and the XDG dirs: the cache outlives every test (and session).
CACHE = cache_dir(dict(os.environ))
SETTLE_MS = 3000  # herdr's own readiness delay: no longer one for real agents (issue 20: no help from the world)
_installed: dict[str, Path] = {}
_problems: dict[str, str] = {}


def agent(kind: str) -> Path:
    """The installed executable of ``kind``, installing the pinned version once a session; skips the test when it cannot."""
    if kind not in _installed and kind not in _problems:
        found, problems = install(CACHE, (kind,), say=lambda line: sys.stderr.write(line + "\n"))
        _installed.update(found)
        for line in problems:
            _problems[kind] = line
    if kind in _problems:
        pytest.skip(f"real agents: {_problems[kind]}")
    return _installed[kind]


def demo_plan(kind: str) -> str:
    """The `orch demo` plan with every worker of one kind."""
    text = demo_data("plan.toml")
    for other in KINDS:
        text = text.replace(f'kind = "{other}"', f'kind = "{kind}"')
    return text


@dataclass
class RealWorld:
    """A simulated herdr whose panes run the real agents, the scripted model they talk to, the demo repository."""

    kind: str
    root: Path
    sim: SimServer
    model: ModelServer
    repo: Path
    env: dict[str, str]
    launchers: Path

    def orch(self, *args: str, timeout: float = 420) -> subprocess.CompletedProcess[str]:
        """`orch ARGS` as the controller pane runs it."""
        return subprocess.run([*ORCH, *args], env=self.env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def write_plan(self, text: str) -> Path:
        path = self.root / "plan.toml"
        path.write_text(text)
        return path

    def run_dir(self, run_id: str) -> Path:
        return Path(self.env["ORCH_HOME"]) / "runs" / run_id.replace(":", "_")

    def agent_processes(self) -> list[int]:
        """Live processes whose HOME is one of this world's agent homes (the real agents and anything they started)."""
        needle = f"HOME={self.launchers / 'homes'}/".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = (entry / "environ").read_bytes()
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if any(item.startswith(needle) for item in environ.split(b"\0")) and stat[stat.rindex(")") + 2] != "Z":
                found.append(int(entry.name))
        return found


def packets_received(world: RealWorld, task: str) -> list[str]:
    """The packet texts the model saw for ``task``: the first user text naming it in each logged request."""
    seen = []
    for entry in world.model.requests():
        if entry.get("task") == task:
            seen.append(json.dumps(entry["request"]))
    return seen


def first_request(world: RealWorld, task: str) -> dict[str, Any] | None:
    """The first logged request that carried ``task``'s packet."""
    return next((e for e in world.model.requests() if e.get("task") == task), None)
