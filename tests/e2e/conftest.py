"""The e2e world: an isolated simulated herdr (real tmux, scripted agents), a real git repo, and a controller pane.

With ORCH_HERDR set (the live lane: `ORCH_HERDR=$(command -v herdr) python3 -m pytest -m live_herdr tests/e2e`, from
a pane of a herdr session named `acme`) the world is built on that herdr instead, and only the scenarios marked
`live_herdr` run: the others need the simulator's faults, knobs or state and are skipped with that reason. Those
marked `live_herdr(agents=True)` run the scripted agents from the dir that session's panes find them in (README).
"""

from __future__ import annotations

import json
import os
import re
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

# Read at import, before tests/conftest.py's isolation drops the real HOME, HERDR_* and ORCH_HERDR for each test.
OUTER = dict(os.environ)
LIVE = shutil.which(OUTER["ORCH_HERDR"]) if OUTER.get("ORCH_HERDR") else None
# What a live world keeps of the shell it was started from: the herdr server it talks to, and (for a simulator named
# by ORCH_HERDR, the lane's own rehearsal) the simulator's home and release.
# HOME too: herdr's `integration status` reads the person's agent configs (HOME, CODEX_HOME, CLAUDE_CONFIG_DIR); orch's
# own state stays in the test's ORCH_HOME and git keeps the test identity.
_LIVE_ENV = ("HERDR_SOCKET_PATH", "HERDR_SESSION", "HERDR_SIM_HOME", "HERDR_SIM_VERSION", "HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR")
SIMULATOR_ONLY = "needs the simulator (its faults, knobs or state): the live lane (ORCH_HERDR) runs only the tests marked live_herdr"
# How the live herdr's panes find the scripted agents (herdr_sim/agent/bin.py); a scenario marked
# live_herdr(agents=True) is skipped with this when a pane of that herdr resolves `codex` elsewhere.
NO_SCRIPTED_AGENTS = ("the live herdr's panes do not find the scripted agents ({found}): start the lane's session as the "
                      "README says (`python3 -m herdr_sim.agent.bin DIR`, then the `PATH=DIR:$PATH herdr --session acme` it prints)")


# The e2e files the older releases' lane runs again (.ci/run: `HERDR_SIM_VERSION=0.7.5|0.8.2 pytest -m every_release
# tests/e2e`; the whole suite plays the newest). What differs by release is what herdr answers and when (docs/simulator.md,
# "herdr releases"; orch's side of it is orchestrator/herdr.py), so these are the files that drive orch's phases through
# herdr and read its answers: the live lane's (each phase against a herdr of any release), preflight and doctor (the
# release checks, integration hooks), the agents' quirks (dialogs, blocked prompts), lost calls and outages (read-back,
# a restart). The rest check orch's own logic (verification, schedule, claims, the ledger, hosts, the demo, hands on the
# layout) over the same herdr calls these make: run on an older release they would prove nothing these do not.
EVERY_RELEASE = (
    "test_world.py", "test_live_herdr.py", "test_read_only.py", "test_dispatch.py", "test_provision.py", "test_retire.py", "test_run.py",
    "test_run_verify.py", "test_run_observe.py", "test_preflight.py", "test_doctor.py", "test_agent_quirks.py", "test_herdr_outage.py",
    "test_lost_calls.py", "test_skill.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the files of EVERY_RELEASE every_release; in the live lane, skip every e2e test not marked live_herdr, saying why."""
    here = Path(__file__).resolve().parent
    missing = [name for name in EVERY_RELEASE if not (here / name).is_file()]
    if missing:  # a renamed file must not drop out of the older releases' lane unnoticed
        raise pytest.UsageError(f"tests/e2e/conftest.py EVERY_RELEASE names files that are not there: {', '.join(missing)}")
    for item in items:
        path = Path(str(item.path)).resolve()
        if path.parent == here and path.name in EVERY_RELEASE:
            item.add_marker(pytest.mark.every_release)
    if LIVE is None:
        return
    for item in items:
        if Path(str(item.path)).resolve().parent == here and item.get_closest_marker("live_herdr") is None:
            item.add_marker(pytest.mark.skip(reason=SIMULATOR_ONLY))


@dataclass
class World:
    """Everything an e2e test drives: `herdr(...)` and `orch(...)` run as real processes with the controller's env."""

    sim: SimServer | None  # None in the live lane: the herdr ORCH_HERDR names, whose server the caller runs
    repo: Any  # tests/conftest.py GitRepo at <src_root>/acme/widgets
    src_root: Path
    orch_home: Path
    scenarios: Path
    controller_pane: str
    env: dict[str, str] = field(default_factory=dict)
    binary: str = "herdr"  # the simulator's `herdr` on the world's PATH, or the live lane's ORCH_HERDR

    def herdr(self, *argv: str) -> Any:
        """Run one herdr command as the controller; parsed JSON (or raw text) on success."""
        proc = subprocess.run([self.binary, *argv], env=self.env, capture_output=True, text=True, timeout=120)
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

    def ids(self, text: str) -> str:
        """``text`` with the controller's workspace, tab and pane named as on a fresh herdr (w1, w1:t1, w1:p1): a live
        herdr has workspaces of its own, so the world's ids there are whatever was free."""
        for real, fresh in ((self.controller_pane, "w1:p1"), (self.env["HERDR_TAB_ID"], "w1:t1"), (self.env["HERDR_WORKSPACE_ID"], "w1")):
            text = re.sub(rf"(?<![\w:]){re.escape(real)}\b", fresh, text)
        return text


def _short_tmp(tmp_path: Path) -> Path:
    # tmux and herdr sockets must fit in ~108 bytes: keep the simulator's home short. The pid names this session's
    # homes, so tests/conftest.py can check at the end that it left none.
    return Path(os.environ.get("ORCH_E2E_TMP", "/tmp")) / f"orch-e2e-{os.getpid()}-{abs(hash(str(tmp_path))) % 10**8}"


@pytest.fixture
def make_world(tmp_path: Path, git_repo_factory: Callable[[Path], Any], request: pytest.FixtureRequest) -> Iterator[Callable[..., World]]:
    """Build a World; options: settle_ms, integrations (comma list), controller_in_repo (default True), session.

    The simulated server runs the herdr session named after the plan's organization (`acme`), as the Layout
    Contract requires; pass ``session=None`` for herdr's default session.
    """
    servers: list[SimServer] = []
    if LIVE is not None:
        marker = request.node.get_closest_marker("live_herdr")
        yield from _live_worlds(tmp_path, git_repo_factory, agents=bool(marker and marker.kwargs.get("agents")))
        return

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


_scripted_agents: dict[str, Path | str] = {}  # the live herdr's answer, asked once a session: our dir, or what a pane found


def _find_scripted_agents(run: Callable[[list[str]], Any], binary: str, env: dict[str, str], tmp_path: Path) -> Path | str:
    """The dir a fresh pane of the live herdr resolves every scripted kind into (`command -v`, as `agent start` types
    the kind's name into that shell: CONTRACT §8.5), or what it found instead."""
    from herdr_sim.agent.bin import KINDS, MARKER  # the lane's own helper, not the simulator's server
    from herdr_sim.testing import eventually

    if "found" in _scripted_agents:
        return _scripted_agents["found"]
    probe = tmp_path / "agents-probe"
    probe.mkdir()
    made = run(["workspace", "create", "--cwd", str(probe), "--label", "orch-live-probe", "--no-focus"])
    try:
        answer = probe / "found"
        names = " ".join(KINDS)
        typed = subprocess.run([binary, "pane", "run", made["root_pane"]["pane_id"],
                                f"for k in {names}; do command -v $k || echo $k: not found; done > {answer}.tmp; mv {answer}.tmp {answer}"],
                               env=env, capture_output=True, text=True, timeout=60)
        assert typed.returncode == 0, f"{binary} pane run exited {typed.returncode}: {typed.stderr}"
        lines = eventually(lambda: answer.read_text().splitlines() if answer.exists() else None, "no answer from the probe pane", 30)
    finally:
        subprocess.run([binary, "workspace", "close", made["workspace"]["workspace_id"]], env=env, capture_output=True, text=True, timeout=60)
    dirs = {Path(line).parent for line in lines if line.startswith("/")}
    found: Path | str
    if len(dirs) == 1 and len(lines) == len(KINDS) and (next(iter(dirs)) / MARKER).is_file():
        found = next(iter(dirs))
    else:
        found = "`command -v` in a pane: " + ", ".join(lines)
    _scripted_agents["found"] = found
    return found


def _live_worlds(tmp_path: Path, git_repo_factory: Callable[[Path], Any], *, agents: bool) -> Iterator[Callable[..., World]]:
    """make_world for the live lane: a repo and a controller workspace of our own on the herdr ORCH_HERDR names;
    every workspace the test leaves on it is closed afterwards. Options it cannot honour skip the test; a scenario
    with scripted agents (``agents``) runs them from the dir the live herdr's panes find them in."""
    assert LIVE is not None
    binary = LIVE
    created: list[str] = []  # our controller workspaces
    kept: set[str] = set()  # what the herdr had before the first world: never closed
    env: dict[str, str] = {}

    def run(argv: list[str]) -> Any:
        done = subprocess.run([binary, *argv], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{binary} {' '.join(argv)} exited {done.returncode}: {done.stderr}"
        return json.loads(done.stdout)["result"]

    def build(*, settle_ms: int = 300, integrations: str | None = None, controller_in_repo: bool = True, session: str | None = "acme") -> World:
        del settle_ms  # the real agents' settle is herdr's own
        if integrations is not None:
            pytest.skip("needs the simulator's integration states (HERDR_SIM_INTEGRATIONS)")
        env.update(os.environ)
        env.update({k: OUTER[k] for k in _LIVE_ENV if k in OUTER})
        status = json.loads(subprocess.run([binary, "status", "--json"], env=env, capture_output=True, text=True, timeout=60).stdout)
        if not status["server"]["running"]:
            pytest.skip(f"the herdr ORCH_HERDR names ({binary}) has no running server: start herdr first")
        current = status["client"]["session"]
        if current != session:
            pytest.skip(f"this scenario runs in the herdr session {session or 'default'}: run the live lane from a pane of "
                        f"`herdr --session {session}`" if session else "this scenario runs in herdr's default session")
        scenarios = tmp_path / "scenarios.toml"
        if agents:
            from herdr_sim.agent.bin import SCENARIOS

            found = _find_scripted_agents(run, binary, env, tmp_path)
            if not isinstance(found, Path):
                pytest.skip(NO_SCRIPTED_AGENTS.format(found=found))
            scenarios = found / SCENARIOS  # baked into the agents there; the lane runs one scenario at a time
        scenarios.write_text("")
        src_root = tmp_path / "src"
        repo = git_repo_factory(src_root / "acme" / "widgets")
        if not created:
            kept.update(w["workspace_id"] for w in run(["workspace", "list"])["workspaces"])
        made = run(["workspace", "create", "--cwd", str(repo.path) if controller_in_repo else str(tmp_path), "--no-focus"])
        created.append(made["workspace"]["workspace_id"])
        pane = made["root_pane"]
        world_env = dict(env)
        world_env.update(
            HERDR_ENV="1",
            HERDR_PANE_ID=pane["pane_id"],
            HERDR_TAB_ID=pane["tab_id"],
            HERDR_WORKSPACE_ID=pane["workspace_id"],
            ORCH_HERDR=binary,
            ORCH_HOME=str(tmp_path / "orch-home"),
            ORCH_SRC_ROOT=str(src_root),
        )
        return World(sim=None, repo=repo, src_root=src_root, orch_home=tmp_path / "orch-home", scenarios=scenarios,
                     controller_pane=pane["pane_id"], env=world_env, binary=binary)

    yield build
    if not created:
        return
    # Our workspaces, and any the scenario made on the repo under tmp_path (orch's repo workspace, worktree workspaces);
    # never another. Linked worktree workspaces first: 0.9 refuses to close a group's primary while they are open.
    listed = run(["workspace", "list"])["workspaces"]
    for ws in sorted(listed, key=lambda ws: not ws.get("worktree", {}).get("is_linked_worktree", False)):
        wid = ws["workspace_id"]
        if wid in kept:
            continue
        panes = run(["pane", "list", "--workspace", wid])["panes"]
        if wid in created or all(str(p.get("cwd", "")).startswith(str(tmp_path)) for p in panes):
            subprocess.run([binary, "workspace", "close", wid], env=env, capture_output=True, text=True, timeout=60)
