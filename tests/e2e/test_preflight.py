"""`orch preflight` against the simulated herdr: the exact checklist, the ledger rows, the repo workspace and tab."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from herdr_sim import versions
from herdr_sim.testing import SimServer
from orchestrator.clock import FakeClock
from orchestrator.engine import Engine
from orchestrator.herdr import features_of
from orchestrator.preflight import feature_summary, preflight
from registry import Ledger, WorkerState

pytestmark = pytest.mark.e2e

ORCH = [sys.executable, "-m", "orchestrator"]

PLAN = """\
organization = "acme"
repo = "widgets"
base = "main"

[[workers]]
task = "api-pagination"
objective = "Add cursor pagination to GET /widgets."
deliverable = "Commits on feat/api-pagination."
branch = "feat/api-pagination"
claim = ["src/widgets/api/**"]

[[workers]]
task = "pagination-docs"
kind = "claude"
objective = "Document cursor pagination."
deliverable = "docs/pagination.md."
branch = "docs/pagination-guide"
claim = ["docs/pagination.md"]
"""


@dataclass
class SessionWorld:
    """A simulated herdr running the named session `acme` (the plan's organization), a repo, a controller pane."""

    sim: SimServer
    repo: Any
    root: Path
    env: dict[str, str]
    controller_pane: str

    def herdr(self, *argv: str) -> Any:
        proc = subprocess.run(["herdr", *argv], env=self.env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["result"]

    def orch(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*ORCH, *args], env=self.env, capture_output=True, text=True, timeout=300)

    def plan(self, text: str = PLAN) -> Path:
        path = self.root / "plan.toml"
        path.write_text(text)
        return path

    def ledger(self) -> Ledger:
        return Ledger.open(Path(self.env["ORCH_HOME"]) / "ledger.sqlite3")

    def normalize(self, text: str, *, keep_version: bool = False) -> str:
        """Stable text for golden files: the temp root, run-id timestamps and (for the goldens every CI lane shares:
        HERDR_SIM_VERSION picks the release) the herdr version and protocol replaced."""
        text = text.replace(str(self.root), "<tmp>")
        if not keep_version:
            profile = versions.current()
            text = text.replace(f"herdr {profile.version} client, protocol {profile.protocol}", "herdr <version> client, protocol <protocol>")
            text = text.replace(f"running herdr {profile.version}, protocol {profile.protocol}", "running herdr <version>, protocol <protocol>")
            text = text.replace(feature_summary(features_of(profile.version), trust_repository=False), "<features>")
            text = re.sub(r"(current|outdated|needs repair) \((v\d+|legacy)( < v\d+)?\)", lambda m: f"{m[1]} (<v>{' < <v>' if m[3] else ''})", text)
        return re.sub(r"\d{8}T\d{6}Z", "<time>", text)


@pytest.fixture
def session_world(make_world: Callable[..., Any]) -> Callable[..., SessionWorld]:
    """The e2e world (tests/e2e/conftest.py) seen through this module's helpers."""

    def build(*, session: str | None = "acme", integrations: str | None = None, controller_in_repo: bool = True) -> SessionWorld:
        w = make_world(session=session, integrations=integrations, controller_in_repo=controller_in_repo)
        return SessionWorld(sim=w.sim, repo=w.repo, root=w.src_root.parent, env=w.env, controller_pane=w.controller_pane)

    return build


def focused(world: SessionWorld) -> tuple[str, str]:
    """(active workspace, its focused pane): what a person attached to herdr would be looking at."""
    workspace = next(ws for ws in world.herdr("workspace", "list")["workspaces"] if ws["focused"])
    pane = next(p for p in world.herdr("pane", "list", "--workspace", workspace["workspace_id"])["panes"] if p["focused"])
    return workspace["workspace_id"], pane["pane_id"]


def test_happy_path_pins_checklist_registers_workers_and_labels_repo_tab(session_world: Callable[..., SessionWorld], golden: Callable[[str, str], None]) -> None:
    world = session_world()
    plan = world.plan()

    result = world.orch("preflight", str(plan))

    run_id = result.stdout.splitlines()[-1]  # the run id stays stdout's last line; the next step goes to stderr
    assert (result.returncode, result.stderr) == (
        0, f"Next: provision: the run is recorded: create its workers' tabs and start their agents: `orch provision --run {run_id}`\n")
    golden("preflight_happy.txt", world.normalize(result.stdout))
    with world.ledger() as ledger:
        run = ledger.get_run(run_id)
        workers = ledger.list_workers(run_id)
    assert run_id.startswith(f"{world.controller_pane}-")
    assert (run.controller_target, run.session, run.workspace_id, run.repo_tab_id, run.controller_workspace_id, run.controller_tab_id) == (
        "w1:p1", "acme", "w1", "w1:t1", "w1", "w1:t1",
    )
    assert (run.default_branch, run.base_ref, run.base_sha, run.created_workspace_ids) == ("main", "main", world.repo.head(), ())
    assert [(w.task_label, w.name, w.kind, w.state, w.claimed_files, w.branch, w.tab_label, w.worktree_path) for w in workers] == [
        ("api-pagination", "api-pagination", "codex", WorkerState.QUEUED, ("src/widgets/api/**",), "feat/api-pagination",
         "widgets-feat-api-pagination", str(world.root / "src/acme/widgets.worktrees/widgets-feat-api-pagination")),
        ("pagination-docs", "pagination-docs", "claude", WorkerState.QUEUED, ("docs/pagination.md",), "docs/pagination-guide",
         "widgets-docs-pagination-guide", str(world.root / "src/acme/widgets.worktrees/widgets-docs-pagination-guide")),
    ]  # fmt: skip
    snapshot = Path(world.env["ORCH_HOME"]) / "runs" / run_id.replace(":", "_") / "plan.toml"
    assert snapshot.read_text() == plan.read_text()
    assert [(t["tab_id"], t["label"]) for t in world.herdr("tab", "list")["tabs"]] == [("w1:t1", "widgets")]
    assert focused(world) == ("w1", world.controller_pane)


def test_json_output_has_checks_run_controller_and_repo(session_world: Callable[..., SessionWorld], golden: Callable[[str, str], None]) -> None:
    world = session_world()

    result = world.orch("preflight", str(world.plan()), "--json")

    assert result.returncode == 0, result.stderr
    golden("preflight_happy.json", world.normalize(result.stdout))
    # The next step, as every door command says it (`next[]`), in the caller's own form.
    run_id = json.loads(result.stdout)["run_id"]
    assert json.loads(result.stdout)["next"] == [{
        "do": "provision", "task": None, "command": f"orch provision --run {run_id} --json",
        "why": "the run is recorded: create its workers' tabs and start their agents"}]


@pytest.mark.live_herdr
def test_outside_herdr_stops_before_touching_anything(session_world: Callable[..., SessionWorld]) -> None:
    world = session_world()
    world.env.pop("HERDR_ENV")

    result = world.orch("preflight", str(world.plan()))

    assert (result.returncode, result.stdout, result.stderr) == (
        1,
        "FAIL herdr env       HERDR_ENV is unset\n",
        "orch: this agent is outside herdr (HERDR_ENV is not 1); stop: orch orchestrates only from a herdr pane\n"
        "hint: run orch from a shell or agent inside a herdr pane\n",
    )
    assert not (Path(world.env["ORCH_HOME"]) / "ledger.sqlite3").exists()


def test_kind_without_current_integration_names_the_install_command(session_world: Callable[..., SessionWorld], golden: Callable[[str, str], None]) -> None:
    world = session_world(integrations="codex:outdated,pi")

    result = world.orch("preflight", str(world.plan()))

    assert result.returncode == 1
    golden("preflight_integrations.txt", world.normalize(result.stdout + "--- stderr\n" + result.stderr))
    with world.ledger() as ledger:
        assert ledger.list_runs() == []


def test_wrong_session_says_how_to_open_the_organizations_session(session_world: Callable[..., SessionWorld], golden: Callable[[str, str], None]) -> None:
    world = session_world(session=None)

    result = world.orch("preflight", str(world.plan()))

    assert result.returncode == 1
    golden("preflight_wrong_session.txt", world.normalize(result.stdout + "--- stderr\n" + result.stderr))
    with world.ledger() as ledger:
        assert ledger.list_runs() == []


def test_controller_outside_repo_creates_repo_workspace_without_focus_then_reuses_it(session_world: Callable[..., SessionWorld]) -> None:
    world = session_world(controller_in_repo=False)
    plan = world.plan()
    clock = FakeClock()
    first_engine = Engine.from_env(world.env, clock=clock)

    first = preflight(first_engine, plan)
    clock.advance(1)
    second_engine = Engine.from_env(world.env, clock=clock)
    second = preflight(second_engine, plan)

    assert (first.ok, second.ok) == (True, True)
    assert [c.evidence for c in first.checks if c.name in ("repo workspace", "repo tab")] == [
        f"w2 \"widgets\" created on {world.repo.path} without focus",
        "w2:t1 renamed \"1\" -> \"widgets\"",
    ]
    assert [c.evidence for c in second.checks if c.name in ("repo workspace", "repo tab")] == [
        f"w2 \"widgets\" (an existing workspace) serves {world.repo.path}",
        "w2:t1 is labelled \"widgets\"",
    ]
    creates = [call.argv[1:] for engine in (first_engine, second_engine) for call in engine.herdr.calls if call.argv[1:3] == ("workspace", "create")]
    assert creates == [("workspace", "create", "--cwd", str(world.repo.path), "--label", "widgets", "--no-focus")]
    assert (first.run_id, second.run_id) == ("w1:p1-20261130T080000Z", "w1:p1-20261130T080001Z")
    assert [(r.run_id, r.workspace_id, r.repo_tab_id, r.created_workspace_ids) for r in first_engine.ledger.list_runs()] == [
        ("w1:p1-20261130T080000Z", "w2", "w2:t1", ("w2",)),
        ("w1:p1-20261130T080001Z", "w2", "w2:t1", ()),
    ]
    assert focused(world) == ("w1", world.controller_pane)
    first_engine.close()
    second_engine.close()


@pytest.mark.parametrize("version", ["0.7.5", "0.8.2", "0.9", "0.9.5"])
def test_the_checklist_names_each_releases_client_and_server(
    version: str, session_world: Callable[..., SessionWorld], golden: Callable[[str, str], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Preflight on each release the simulator plays: client and server version and protocol, no warning."""
    monkeypatch.setenv("HERDR_SIM_VERSION", version)
    world = session_world()
    world.env["HERDR_SIM_VERSION"] = version
    result = world.orch("preflight", str(world.plan()))
    run_id = result.stdout.splitlines()[-1]
    assert (result.returncode, result.stderr) == (
        0, f"Next: provision: the run is recorded: create its workers' tabs and start their agents: `orch provision --run {run_id}`\n")
    golden(f"preflight_{version}.txt", world.normalize(result.stdout, keep_version=True))


@pytest.mark.parametrize(("client", "server"), [("0.9", "0.9.0"), ("0.9", "1.0.0"), ("0.8.2", "0.9"), ("0.9", "0.8.2")])
def test_a_client_and_server_of_different_releases(
    client: str, server: str, session_world: Callable[..., SessionWorld], golden: Callable[[str, str], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """herdr 0.9 lets the CLI and a running server differ (../herdr-0.9.1/DELTA.md rows 11-12): preflight names both
    and judges by the server; a pair that cannot talk stops at the server check with herdr's own advice."""
    monkeypatch.setenv("HERDR_SIM_SERVER_VERSION", server)
    monkeypatch.setenv("HERDR_SIM_VERSION", versions.server_release().profile.name)  # the world is built by a fitting client
    world = session_world()
    world.env["HERDR_SIM_VERSION"] = client
    result = world.orch("preflight", str(world.plan()))
    assert result.returncode == (0 if server in ("0.9.0", "1.0.0") else 1)
    golden(f"preflight_client_{client}_server_{server}.txt", world.normalize(result.stdout + "--- stderr\n" + result.stderr, keep_version=True))
