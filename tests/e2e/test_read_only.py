"""A read-only worker (empty claim) on the simulator: its packet forbids every change, it is dispatched and reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.dispatch import dispatch
from registry import WorkerState
from herdr_sim.testing import eventually

PLAN = """
organization = "acme"
repo = "widgets"
base = "main"

[[workers]]
task = "review-a"
objective = "Review the README."
deliverable = "A result listing what is unclear."
branch = "docs/review-a"
claim = []
verify = ["true"]
"""


@pytest.mark.live_herdr(agents=True)
def test_read_only_worker_is_dispatched_and_reports(world: Any, tmp_path: Path) -> None:
    # The agent reports only once dispatch returned (the gate file): a result sent before dispatch recorded the
    # worker working would move it to `result` first, and dispatch would report it there.
    gate = tmp_path / "dispatched"
    world.write_scenarios(f'[[task.review-a]]\ndo = "run"\ncommand = "until test -e {gate}; do sleep 0.1; done"\n\n[[task.review-a]]\ndo = "result"\n')
    engine = world.engine()
    engine.controller = "run"  # callbacks through `orch inbox add`: the controller pane is a plain shell
    run_id = f"{world.controller_pane}-20261130T080000Z"
    (engine.run_dir(run_id)).mkdir(parents=True)
    (engine.run_dir(run_id) / "plan.toml").write_text(PLAN)
    run = engine.ledger.create_run(run_id, controller_target=world.controller_pane, organization="acme", repo="widgets",
                                   repo_path=str(world.repo.path), base_ref="main", base_sha=world.repo.head(), plan_path="plan.toml")
    [planned] = engine.plan_for(run).workers
    engine.ledger.add_worker(run_id, planned.task, name=planned.name, kind=planned.kind, objective=planned.worker.objective, claimed_files=())
    created = world.herdr("worktree", "create", "--cwd", str(world.repo.path), "--branch", planned.worktree.branch,
                          "--path", str(planned.worktree.path), "--no-focus", "--json")["result"]
    pane = created["root_pane"]["pane_id"]
    world.herdr("agent", "start", planned.name, "--kind", "codex", "--pane", pane)
    engine.ledger.transition(run_id, planned.task, WorkerState.PROVISIONING, WorkerState.READY, cause={"test": "setup"},
                             pane_id=pane, worktree_path=str(planned.worktree.path))

    result = dispatch(engine, run)

    assert [(w.task, w.outcome, w.state) for w in result.workers] == [("review-a", "accepted", "working")]
    gate.touch()
    packet = (engine.run_dir(run_id) / "packets" / "review-a.md").read_text()
    assert "## File claim\nNone: this task is read-only. Do not create, change or delete any file, and make no commits.\n\n" in packet
    results = eventually(lambda: [m for m in engine.ledger.list_inbox(run_id) if m.kind == "result"], "no result callback")
    assert [(m.task_label, str(m.verdict)) for m in results] == [("review-a", "accepted")]
    assert world.repo.git("rev-parse", planned.worktree.branch) == world.repo.head()  # nothing committed
