"""`orch provision` against the simulated herdr: real tmux panes, real git worktrees, the ledger telling the truth."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from typing import Any

import pytest

from herdr_sim import versions
from herdr_sim.testing import eventually
from orchestrator.engine import Engine
from orchestrator.herdr_models import WorktreeListResult
from orchestrator.provision import ProvisionResult, provision, render_provision, start_agent
from provision_world import RUN_ID, prepare_run
from registry import WorkerState

MUTATING = ("worktree create", "worktree open", "pane move", "pane split", "agent start", "workspace close", "tab rename")

THREE = """\
organization = "acme"
repo = "widgets"
base = "{base}"

[[workers]]
task = "api-pagination"
objective = "Add cursor pagination."
deliverable = "Commits."
branch = "feat/api-pagination"
claim = ["src/api/**"]
setup = ["printf ready > .setup-done"]

[[workers]]
task = "api-tests"
objective = "Test pagination."
deliverable = "Tests."
branch = "feat/api-pagination"
claim = ["tests/api/**"]

[[workers]]
task = "pagination-docs"
kind = "claude"
objective = "Document pagination."
deliverable = "Docs."
branch = "docs/pagination-guide"
claim = ["docs/**"]
"""

ONE = """\
organization = "acme"
repo = "widgets"
base = "main"

[[workers]]
task = "api-pagination"
objective = "Add cursor pagination."
deliverable = "Commits."
branch = "feat/api-pagination"
claim = ["src/api/**"]
"""


def mutations(engine: Engine) -> list[str]:
    """The herdr commands that changed something, in call order (argv without the binary)."""
    return [" ".join(c.argv[1:3]) for c in engine.herdr.calls if " ".join(c.argv[1:3]) in MUTATING]


def scrub(text: str, world: Any) -> str:
    """Stable text: the tmp source root as <src> and commit SHAs as <sha>."""
    return re.sub(r"\b[0-9a-f]{40}\b", "<sha>", text.replace(str(world.src_root), "<src>"))


def loose(text: str, world: Any) -> list[str]:
    """Lines with column padding collapsed and racy ids (panes, side-effect workspaces) replaced by placeholders."""
    text = re.sub(r"\bw[1-9A-Z0]+:p[1-9A-Z0]+\b", "<pane>", world.ids(scrub(text, world)))
    text = re.sub(r"workspace w(?!1\b)[1-9A-Z0]+", "workspace <ws>", text)
    return [re.sub(r" {2,}", "  ", line) for line in text.splitlines()]


def tabs(world: Any) -> list[str]:
    return [t["label"] for t in world.herdr("tab", "list", "--workspace", world.env["HERDR_WORKSPACE_ID"])["result"]["tabs"]]


def focus(world: Any) -> tuple[bool, list[str]]:
    """Whether the controller pane is focused, and which workspaces are."""
    controller = world.herdr("pane", "get", world.controller_pane)["result"]["pane"]
    workspaces = world.herdr("workspace", "list")["result"]["workspaces"]
    return controller["focused"], [w["workspace_id"] for w in workspaces if w["focused"]]


def focus_unchanged(world: Any, before: tuple[bool, list[str]] | None = None) -> None:
    """On the simulator the controller's workspace is herdr's only one and focused; a live herdr's focus is the
    person's (``before``, taken when the test began) and must be so still."""
    if world.sim is None:
        assert focus(world) == before
        return
    controller = world.herdr("pane", "get", world.controller_pane)["result"]["pane"]
    workspaces = world.herdr("workspace", "list")["result"]["workspaces"]
    assert controller["focused"] is True
    assert [(w["workspace_id"], w["focused"]) for w in workspaces] == [("w1", True)]


def failure_cause(engine: Engine, task: str) -> dict[str, Any]:
    event = [e for e in engine.ledger.events(RUN_ID, task_label=task) if e.to_state == WorkerState.FAILED][-1]
    cause: dict[str, Any] = event.detail["cause"]
    return cause


@pytest.mark.live_herdr(agents=True)
def test_three_workers_reach_ready_with_the_layout_contract_and_a_rerun_creates_nothing(world: Any) -> None:
    before = focus(world)
    origin = world.src_root.parent / "origin.git"
    world.repo.git("clone", "--quiet", "--bare", str(world.repo.path), str(origin))
    world.repo.git("remote", "add", "origin", str(origin))
    world.repo.git("fetch", "--quiet", "origin")
    engine, run = prepare_run(world, THREE.format(base="origin/main"))

    result = provision(engine, run)

    wt = world.src_root / "acme" / "widgets.worktrees"
    # Concurrent workers race for pane and workspace numbers: those are checked against the ledger below.
    assert loose(render_provision(result), world) == [
        "provision <pane>-20260101T000000Z (workspace w1): 3 ready, 0 failed",
        "task  state  pane  tab  path  done",
        "api-pagination  ready  <pane>  widgets-feat-api-pagination  <src>/acme/widgets.worktrees/widgets-feat-api-pagination  created worktree, tab, agent",
        "api-tests  ready  <pane>  widgets-feat-api-pagination  <src>/acme/widgets.worktrees/widgets-feat-api-pagination  created pane (right of <pane>), agent",
        "pagination-docs  ready  <pane>  widgets-docs-pagination-guide  <src>/acme/widgets.worktrees/widgets-docs-pagination-guide  created worktree, tab, agent",
        "api-pagination: note: fetched origin main",
        "api-pagination: note: workspace <ws> closed (by herdr when its pane moved out)",
        "api-pagination: note: setup: 1 command(s) passed",
        "pagination-docs: note: fetched origin main",
        "pagination-docs: note: workspace <ws> closed (by herdr when its pane moved out)",
    ]
    states = {w.task_label: w for w in engine.ledger.list_workers(RUN_ID)}
    assert {t: w.state for t, w in states.items()} == dict.fromkeys(states, WorkerState.READY)
    assert sorted(tabs(world)[1:]) == ["widgets-docs-pagination-guide", "widgets-feat-api-pagination"]
    for task, folder, branch in (("api-pagination", "widgets-feat-api-pagination", "feat/api-pagination"), ("pagination-docs", "widgets-docs-pagination-guide", "docs/pagination-guide")):
        w = states[task]
        assert (w.worktree_path, w.branch, w.tab_label, w.reply_target) == (str(wt / folder), branch, folder, task)
        assert world.repo.git("rev-parse", "--abbrev-ref", "HEAD", cwd=wt / folder) == branch
        assert w.created_worktree_paths == (str(wt / folder),) and len(w.created_workspace_ids) == 1
        assert w.base_sha == world.repo.head()
    assert (wt / "widgets-feat-api-pagination" / ".setup-done").read_text() == "ready"
    assert states["api-tests"].created_pane_ids == (states["api-tests"].pane_id,)
    # (A live herdr may run agents of the person's own: only the run's names count.)
    agents = {a["name"]: a for a in world.herdr("agent", "list")["result"]["agents"] if a.get("name") in states}
    assert {n: (a["pane_id"], a["agent"]) for n, a in agents.items()} == {t: (w.pane_id, w.kind) for t, w in states.items()}
    focus_unchanged(world, before)

    again = world.engine()
    rerun = provision(again, again.find_run(RUN_ID))
    assert mutations(again) == []
    assert [(w.task, w.state, w.already) for w in rerun.workers] == [(t, "ready", True) for t in states]
    cli = world.orch("provision", "--run", RUN_ID)
    assert (cli.returncode, cli.stderr) == (0, "")
    assert loose(cli.stdout, world)[2:] == [
        "api-pagination  ready  <pane>  widgets-feat-api-pagination  <src>/acme/widgets.worktrees/widgets-feat-api-pagination  already provisioned",
        "api-tests  ready  <pane>  widgets-feat-api-pagination  <src>/acme/widgets.worktrees/widgets-feat-api-pagination  already provisioned",
        "pagination-docs  ready  <pane>  widgets-docs-pagination-guide  <src>/acme/widgets.worktrees/widgets-docs-pagination-guide  already provisioned",
        "Next: dispatch: api-pagination, api-tests, pagination-docs ready for their packets: `orch dispatch --run <pane>-20260101T000000Z`",
    ]


def test_fetch_authentication_failure_stops_isolated_workers_with_gits_exact_error(world: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    helper = tmp_path / "bin" / "git-remote-authfail"
    helper.parent.mkdir()
    helper.write_text("#!/bin/sh\necho \"fatal: Authentication failed for 'https://git.example.invalid/acme/widgets.git/'\" >&2\nexit 128\n")
    helper.chmod(helper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{helper.parent}:{Path('/usr/bin')}:{__import__('os').environ['PATH']}")
    world.repo.git("remote", "add", "origin", "authfail::https://git.example.invalid/acme/widgets.git")
    world.repo.git("update-ref", "refs/remotes/origin/main", world.repo.head())
    engine, run = prepare_run(world, THREE.format(base="origin/main"))

    result = provision(engine, run)

    assert [(w.task, w.state) for w in result.workers] == [("api-pagination", "failed"), ("api-tests", "failed"), ("pagination-docs", "failed")]
    error = result.workers[0].error or ""
    assert error.startswith("fetch gate: git fetch origin main failed with an authentication failure; nothing was created (never provision on a stale checkout): ")
    assert "fatal: Authentication failed for 'https://git.example.invalid/acme/widgets.git/'" in error
    assert failure_cause(engine, "pagination-docs")["error"] == error
    assert result.workers[1].error == "its branch owner api-pagination has no pane (failed): nothing to split"
    assert mutations(engine) == []
    assert tabs(world) == ["1"]
    focus_unchanged(world)


def test_an_existing_checkout_is_reused_and_a_wrong_tab_label_is_mended_before_start(world: Any) -> None:
    path = world.src_root / "acme" / "widgets.worktrees" / "widgets-feat-api-pagination"
    world.repo.git("worktree", "add", "--quiet", "-b", "feat/api-pagination", str(path))
    opened = world.herdr("worktree", "open", "--workspace", "w1", "--path", str(path), "--label", "typo", "--no-focus", "--json")["result"]
    world.herdr("pane", "move", opened["root_pane"]["pane_id"], "--new-tab", "--workspace", "w1", "--label", "widgets-pagination", "--no-focus")
    engine, run = prepare_run(world, ONE)

    result = provision(engine, run)

    outcome = result.workers[0]
    assert (outcome.state, outcome.reused, outcome.created) == ("ready", ("worktree", "tab"), ("agent",))
    assert outcome.notes == ("no remote: fetch skipped", "tab label 'widgets-pagination' mended to 'widgets-feat-api-pagination'")
    assert mutations(engine) == ["tab rename", "agent start"]
    assert tabs(world) == ["1", "widgets-feat-api-pagination"]
    worker = engine.ledger.get_worker(RUN_ID, "api-pagination")
    assert (worker.created_worktree_paths, worker.created_workspace_ids) == ((), ())


def test_worktree_create_already_exists_switches_to_reuse_never_to_another_name(world: Any) -> None:
    engine, run = prepare_run(world, ONE)
    herdr = engine.herdr
    path = world.src_root / "acme" / "widgets.worktrees" / "widgets-feat-api-pagination"
    real_list = herdr.worktree_list
    calls = {"n": 0}

    def stale_then_real(**kwargs: Any) -> WorktreeListResult:
        # Someone else creates the checkout between orch's shared read and its create (a race, made repeatable).
        calls["n"] += 1
        listing = real_list(**kwargs)
        if calls["n"] == 1:
            world.repo.git("worktree", "add", "--quiet", "-b", "feat/api-pagination", str(path))
        return listing

    herdr.worktree_list = stale_then_real  # type: ignore[method-assign]
    result = provision(engine, run)

    outcome = result.workers[0]
    assert (outcome.state, outcome.reused, outcome.created) == ("ready", ("worktree",), ("workspace", "tab", "agent"))
    assert outcome.notes[1] == "worktree create said already exists: reusing the checkout"
    assert mutations(engine) == ["worktree create", "worktree open", "pane move", "agent start"]
    assert [w["path"] for w in world.herdr("worktree", "list", "--workspace", "w1", "--json")["result"]["worktrees"]] == [str(world.repo.path), str(path)]


def test_a_path_that_exists_but_is_not_the_branch_checkout_fails_with_gits_message(world: Any) -> None:
    path = world.src_root / "acme" / "widgets.worktrees" / "widgets-feat-api-pagination"
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("someone's work\n")
    engine, run = prepare_run(world, ONE)

    result = provision(engine, run)

    error = result.workers[0].error or ""
    assert result.workers[0].state == "failed"
    assert error.startswith("worktree create failed: ") and "already exists" in error
    assert error.endswith(f"; {path} is not a checkout of feat/api-pagination, and orch never retries with another name")
    assert mutations(engine) == ["worktree create"]
    assert (path / "notes.txt").read_text() == "someone's work\n"


def test_a_create_response_without_root_pane_fails_with_nowhere_to_start(world: Any) -> None:
    world.sim.add_fault("worktree create", drop_root_pane=True)
    engine, run = prepare_run(world, ONE)

    result = provision(engine, run)

    worker = engine.ledger.get_worker(RUN_ID, "api-pagination")
    path = world.src_root / "acme" / "widgets.worktrees" / "widgets-feat-api-pagination"
    assert result.workers[0].error == (
        f"worktree create made {path} (workspace {worker.created_workspace_ids[0]}) but its response has no root_pane: "
        "there was nowhere to start the agent; open that workspace and re-run (orch never substitutes a pane)"
    )
    assert (worker.state, worker.pane_id, worker.created_worktree_paths) == (WorkerState.FAILED, None, (str(path),))
    assert mutations(engine) == ["worktree create"]
    assert world.herdr("agent", "list")["result"]["agents"] == []


def test_an_agent_is_refused_in_the_primary_checkout(world: Any) -> None:
    plan = ONE + '\n[[workers]]\ntask = "api-tests"\nobjective = "Test."\ndeliverable = "Tests."\nbranch = "feat/api-pagination"\nclaim = ["tests/**"]\n'
    engine, run = prepare_run(world, plan)
    # A stale ledger entry points the sibling at the controller's own pane, in the primary checkout.
    engine.ledger.update_worker(RUN_ID, "api-tests", pane_id=world.controller_pane)

    result = provision(engine, run)

    assert [(w.task, w.state) for w in result.workers] == [("api-pagination", "ready"), ("api-tests", "failed")]
    assert result.workers[1].error == (
        f"refusing to start api-tests in pane {world.controller_pane} ({world.repo.path}): it is the repo's primary checkout; "
        "workers run only in their own worktree"
    )
    assert [a["name"] for a in world.herdr("agent", "list")["result"]["agents"]] == ["api-pagination"]
    assert failure_cause(engine, "api-tests")["step"] == "guard"


def test_agent_pane_busy_on_a_fresh_pane_is_waited_out(world: Any) -> None:
    world.sim.add_fault("agent start", code="agent_pane_busy", message="pane is not at an idle shell prompt", times=2)
    engine, run = prepare_run(world, ONE)

    result = provision(engine, run)

    assert result.workers[0].state == "ready"
    assert mutations(engine) == ["worktree create", "pane move", "agent start", "agent start", "agent start"]


def test_plan_first_without_a_known_plan_mode_fails_before_anything_starts(world: Any) -> None:
    engine, run = prepare_run(world, ONE.replace('claim = ["src/api/**"]', 'claim = ["src/api/**"]\nmode = "plan-first"'))

    result = provision(engine, run)

    assert result.workers[0].error == (
        'plan-first needs a plan mode orch can enter and confirm on screen; codex has no known plan mode (use mode = "direct" or a kind with one: claude)'
    )
    assert mutations(engine) == []
    out = world.orch("provision", "--json")
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    doc.pop("next")  # the door's next steps ride beside the phase's result
    assert [(w.state, w.already) for w in ProvisionResult.model_validate(doc).workers] == [("failed", True)]


DIALOG = "Do you trust the contents of this directory?"


def test_an_agent_blocked_at_start_up_is_diagnosed_from_its_screen_and_a_rerun_picks_it_up(world: Any) -> None:
    """../herdr-0.8.2/DELTA.md row 6: 0.8.2+ answer agent_not_ready and keep the name; 0.7.5 calls the agent ready.

    A dialog orch does not know is never answered blindly (orchestrator/dialogs.py): the worker fails with the screen.
    The agent keeps its name, so once the person answers it, starting the worker again picks up that agent."""
    plan = ONE.replace('claim = ["src/api/**"]', f'claim = ["src/api/**"]\nagent_args = ["--sim-start-dialog", "{DIALOG}"]')
    engine, run = prepare_run(world, plan)

    result = provision(engine, run)

    worker = result.workers[0]
    pane = worker.pane_id
    assert worker.state == "failed"  # 0.7.5 calls the agent ready, orch still sees it blocked and reads the dialog
    assert worker.error == (
        "api-pagination (codex) is blocked at start-up by a dialog orch does not know; nothing was typed. "
        f"Screen: $ codex --sim-start-dialog '{DIALOG}' / {DIALOG} / Press Enter to continue"
    )
    agent = world.herdr("agent", "get", "api-pagination")["result"]["agent"]
    pending = versions.current().start_blocked_not_ready
    assert (agent["pane_id"], agent["agent_status"], agent.get("launch_pending", False)) == (pane, "blocked", pending)  # the name is kept
    assert pane is not None
    planned = engine.plan_for(run).workers[0]
    if pending:
        with pytest.raises(Exception, match=r"^api-pagination is blocked at start-up, at a dialog in pane"):
            start_agent(engine, run, planned, pane, timeout_ms=20000)  # still at its dialog: diagnosed, nothing started

    world.herdr("pane", "send-keys", pane, "Enter")  # the person answers the dialog
    eventually(lambda: world.herdr("agent", "get", "api-pagination")["result"]["agent"].get("interactive_ready"), what="the agent ready after its dialog")
    before = len(mutations(engine))

    again = start_agent(engine, run, planned, pane, timeout_ms=20000)

    assert (again.name, again.pane_id, again.interactive_ready, again.reused) == ("api-pagination", pane, True, True)
    assert "agent start" not in mutations(engine)[before:]


def test_an_agent_that_is_not_installed_is_named_instead_of_a_bare_timeout(world: Any) -> None:
    (world.sim.paths.bin / "pi").unlink()  # this machine has no `pi`
    plan = ONE.replace('claim = ["src/api/**"]', 'claim = ["src/api/**"]\nkind = "pi"') + "\n[defaults]\nagent_start_timeout_s = 4\n"
    engine, run = prepare_run(world, plan)

    result = provision(engine, run)

    worker = result.workers[0]
    assert (worker.state, worker.error) == (
        "failed",
        f'pi is not installed on this machine: herdr typed `pi` into pane {worker.pane_id} and its shell said "bash: pi: command not found"',
    )
