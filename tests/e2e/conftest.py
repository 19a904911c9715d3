"""The e2e world: an isolated simulated herdr (real tmux, scripted agents), a real git repo, and a controller pane."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from herdr_sim.testing import SimServer
from orchestrator.engine import Engine

pytestmark = pytest.mark.e2e

ORCH = [sys.executable, "-m", "orchestrator"]


@dataclass
class World:
    """Everything an e2e test drives: `herdr(...)` and `orch(...)` run as real processes with the controller's env."""

    sim: SimServer
    repo: Any  # tests/conftest.py GitRepo at <src_root>/acme/widgets
    src_root: Path
    orch_home: Path
    scenarios: Path
    controller_pane: str
    env: dict[str, str] = field(default_factory=dict)

    def herdr(self, *argv: str) -> Any:
        """Run one simulated herdr command as the controller; parsed JSON (or raw text) on success."""
        proc = subprocess.run(["herdr", *argv], env=self.env, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise AssertionError(f"herdr {' '.join(argv)} exited {proc.returncode}: {proc.stderr}")
        out = proc.stdout
        return json.loads(out) if out.startswith("{") else out

    def orch(self, *args: str, input: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run `orch ARGS` as the controller would (a real process inside the controller pane's environment)."""
        return subprocess.run([*ORCH, *args], env=self.env, capture_output=True, text=True, input=input, timeout=timeout)

    def engine(self, **kwargs: Any) -> Engine:
        """An in-process engine wired exactly like the CLI's, for tests that call phases directly."""
        return Engine.from_env(self.env, **kwargs)

    def write_plan(self, text: str, name: str = "plan.toml") -> Path:
        """Write a plan file next to the repo (not inside it, so it never shows up in a diff)."""
        path = self.src_root.parent / name
        path.write_text(text)
        return path

    def write_scenarios(self, text: str) -> None:
        """The scripted agents' scenario file (read by each agent when it receives its packet)."""
        self.scenarios.write_text(text)


def _short_tmp(tmp_path: Path) -> Path:
    # tmux and herdr sockets must fit in ~108 bytes: keep the simulator's home short. The pid names this session's
    # homes, so tests/conftest.py can check at the end that it left none.
    return Path(os.environ.get("ORCH_E2E_TMP", "/tmp")) / f"orch-e2e-{os.getpid()}-{abs(hash(str(tmp_path))) % 10**8}"


@pytest.fixture
def make_world(tmp_path: Path, git_repo_factory: Callable[[Path], Any]) -> Iterator[Callable[..., World]]:
    """Build a World; options: settle_ms, integrations (comma list), controller_in_repo (default True), session.

    The simulated server runs the herdr session named after the plan's organization (`acme`), as the Layout
    Contract requires; pass ``session=None`` for herdr's default session.
    """
    servers: list[SimServer] = []

    def build(
        *, settle_ms: int = 300, integrations: str | None = None, controller_in_repo: bool = True, session: str | None = "acme"
    ) -> World:
        src_root = tmp_path / "src"
        repo = git_repo_factory(src_root / "acme" / "widgets")
        scenarios = tmp_path / "scenarios.toml"
        scenarios.write_text("")
        overrides = {"HERDR_SIM_SETTLE_MS": str(settle_ms), "HERDR_SIM_SCENARIOS": str(scenarios)}
        if integrations is not None:
            overrides["HERDR_SIM_INTEGRATIONS"] = integrations
        home = _short_tmp(tmp_path)
        sim = SimServer(home, overrides, session=session)
        try:
            sim.__enter__()
        except BaseException:
            shutil.rmtree(home, ignore_errors=True)  # a server that never became ready leaves its home (server.out) behind
            raise
        servers.append(sim)
        env = sim.env()
        cwd = str(repo.path) if controller_in_repo else str(tmp_path)
        created = json.loads(sim.run(["workspace", "create", "--cwd", cwd, "--no-focus"]).stdout)["result"]
        pane = created["root_pane"]
        env.update(
            HERDR_ENV="1",
            HERDR_PANE_ID=pane["pane_id"],
            HERDR_TAB_ID=pane["tab_id"],
            HERDR_WORKSPACE_ID=pane["workspace_id"],
            ORCH_HOME=str(tmp_path / "orch-home"),
            ORCH_SRC_ROOT=str(src_root),
        )
        return World(sim=sim, repo=repo, src_root=src_root, orch_home=tmp_path / "orch-home", scenarios=scenarios,
                     controller_pane=pane["pane_id"], env=env)

    yield build
    failures: list[BaseException] = []
    for sim in servers:
        try:
            sim.__exit__(None, None, None)
        except BaseException as failure:  # a stray process fails the test; every server still stops, every home goes
            failures.append(failure)
        finally:
            shutil.rmtree(sim.home, ignore_errors=True)  # the short home sits in /tmp, outside pytest's tmp_path
    if failures:
        raise failures[0]


@pytest.fixture
def world(make_world: Callable[..., World]) -> World:
    """The default world: the controller pane is the root pane of a workspace opened on the repo's checkout."""
    return make_world()
