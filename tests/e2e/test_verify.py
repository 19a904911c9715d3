"""Verify and integrate after real scripted agents worked in simulated herdr panes: dispositions checked against git log."""

from __future__ import annotations

import json
from typing import Any

from orchestrator.dispatch import dispatch
from orchestrator.engine import Engine
from registry import Run, WorkerState
from herdr_sim.testing import eventually

PLAN = """
organization = "acme"
repo = "widgets"
base = "main"

[[workers]]
task = "feature-a"
objective = "Add greeting A."
deliverable = "A commit on feat/a."
branch = "feat/a"
claim = ["src/a/**"]
verify = ["test -f src/a/sim-feature-a.txt"]

[[workers]]
task = "feature-b"
objective = "Add greeting B."
deliverable = "A commit on feat/b."
branch = "feat/b"
claim = ["src/b/**"]
verify = ["grep -q formal src/b/hello.txt"]
"""

# feature-a runs the default scenario (write its claim file, commit, run the checks, report them truthfully).
SCENARIOS = """
[[task.feature-b]]
do = "write"
path = "src/b/hello.txt"
content = "hello\\n"

[[task.feature-b]]
do = "write"
path = "README.md"
content = "drive-by edit\\n"
append = true

[[task.feature-b]]
do = "commit"
message = "{task}: greeting"

[[task.feature-b]]
do = "result"
checks = "claimed"
"""


def provisioned(world: Any) -> tuple[Engine, Run]:
    """Both workers ready in their own worktrees with an idle codex, as provisioning leaves them."""
    engine = world.engine()
    engine.controller = "run"  # callbacks go through `orch inbox add`: the controller pane is a plain shell
    run_id = f"{world.controller_pane}-20261130T080000Z"
    run_dir = engine.run_dir(run_id)
    run_dir.mkdir(parents=True)
    (run_dir / "plan.toml").write_text(PLAN)
    base = world.repo.head()
    run = engine.ledger.create_run(run_id, controller_target=world.controller_pane, organization="acme", repo="widgets",
                                   repo_path=str(world.repo.path), base_ref="main", base_sha=base, plan_path="plan.toml")  # fmt: skip
    for planned in engine.plan_for(run).workers:
        engine.ledger.add_worker(run_id, planned.task, name=planned.name, kind=planned.kind, objective=planned.worker.objective,
                                 claimed_files=planned.worker.claim, branch=planned.worktree.branch, base_sha=base)  # fmt: skip
        created = world.herdr("worktree", "create", "--cwd", str(world.repo.path), "--branch", planned.worktree.branch,
                              "--path", str(planned.worktree.path), "--no-focus", "--json")["result"]  # fmt: skip
        pane = created["root_pane"]["pane_id"]
        world.herdr("agent", "start", planned.name, "--kind", "codex", "--pane", pane)
        engine.ledger.transition(run_id, planned.task, WorkerState.PROVISIONING, WorkerState.READY, cause={"test": "setup"},
                                 pane_id=pane, worktree_path=str(planned.worktree.path))  # fmt: skip
    return engine, run


def wait_for_state(engine: Engine, run: Run, state: WorkerState, timeout_s: float = 90) -> None:
    eventually(
        lambda: all(w.state is state for w in engine.ledger.list_workers(run.run_id)),
        lambda: f"workers not all {state}: {[(w.task_label, w.state) for w in engine.ledger.list_workers(run.run_id)]}",
        timeout_s,
    )


def test_a_truthful_worker_is_accepted_and_a_lying_drive_by_editor_is_blocked(world: Any) -> None:
    world.write_scenarios(SCENARIOS)
    engine, run = provisioned(world)
    dispatch(engine, run)
    wait_for_state(engine, run, WorkerState.RESULT)

    verified = world.orch("verify", "--run", run.run_id, "--json")
    integrated = world.orch("integrate", "--run", run.run_id)

    assert (verified.returncode, verified.stderr.splitlines()) == (0, ["verify: feature-a", "verify: feature-b"])
    verdicts = {v["task"]: v["verification"] for v in json.loads(verified.stdout)["verdicts"]}
    head_a = world.repo.git("rev-parse", "feat/a")
    head_b = world.repo.git("rev-parse", "feat/b")
    assert world.repo.git("log", "--format=%s", "main..feat/a") == "feature-a: Add greeting A."
    assert (verdicts["feature-a"]["disposition"], verdicts["feature-a"]["commits"], verdicts["feature-a"]["reasons"]) == ("accepted", [head_a], [])
    assert (verdicts["feature-b"]["disposition"], verdicts["feature-b"]["head_sha"], verdicts["feature-b"]["reasons"]) == (
        "blocked",
        head_b,
        [
            "edited outside its claim: README.md (integration paused for a decision)",
            "check `grep -q formal src/b/hello.txt` failed on re-run (exit 1)",
            "worker reported `grep -q formal src/b/hello.txt` passing, but it does not pass on re-run",
        ],
    )
    assert (integrated.returncode, integrated.stdout) == (
        0,
        f"integrate {run.run_id}: integration is off in the plan; nothing merged, accepted work:\n"
        f"  feature-a  feat/a  {head_a}\n"
        "not accepted: feature-b (blocked)\n"
        # feature-b's block pauses only accepted work that touches what it touched (docs/ARCHITECTURE.md, Integration).
        "blocked by verification: feature-b; holds back no accepted work (none touches the same files)\n",
    )
