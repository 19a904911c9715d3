"""Dispatch against the simulated herdr with real scripted agents: acceptance, one prompt each, stalls, callbacks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.dispatch import dispatch, render_dispatch
from orchestrator.engine import Engine
from orchestrator.herdr import HerdrCli
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
verify = ["true"]

[[workers]]
task = "feature-b"
objective = "Add greeting B."
deliverable = "A commit on feat/b."
branch = "feat/b"
claim = ["src/b/**"]
verify = ["true"]
"""


# Dispatch reports the state it left each worker in: `working` once herdr saw the packet taken. A worker that went
# on to send its result first (`orch inbox add` moves it to `result`) would be reported there instead, so each
# agent here waits, once it took its packet, until the test says dispatch returned (the gate file), then works as
# the default scenario does (docs/scenarios.md).
def gated(gate: Path, *tasks: str) -> str:
    """Scenarios for ``tasks``: wait for ``gate``, then update, write the claim file, commit, verify, result."""
    steps = (
        f'do = "run"\ncommand = "until test -e {gate}; do sleep 0.1; done"\n',
        'do = "update"\nmessage = "Starting {task}: {objective_line}"\n',
        'do = "write"\npath = "{claim_file}"\ncontent = "{task}: {objective_line}\\n"\n',
        'do = "commit"\nmessage = "{task}: {objective_line}"\n',
        'do = "verify"\n',
        'do = "result"\n',
    )
    return "".join(f"\n[[task.{task}]]\n{step}" for task in tasks for step in steps)


def provisioned(world: Any, tasks: tuple[str, ...]) -> tuple[Engine, Run]:
    """A run whose workers sit ready in their own worktrees with an idle codex (what provisioning leaves behind)."""
    engine = world.engine()
    engine.controller = "run"  # callbacks go through `orch inbox add`: the controller pane is a plain shell
    run_id = f"{world.controller_pane}-20261130T080000Z"
    run_dir = engine.run_dir(run_id)
    run_dir.mkdir(parents=True)
    (run_dir / "plan.toml").write_text(PLAN)
    run = engine.ledger.create_run(run_id, controller_target=world.controller_pane, organization="acme", repo="widgets",
                                   repo_path=str(world.repo.path), base_ref="main", base_sha=world.repo.head(), plan_path="plan.toml")
    for planned in engine.plan_for(run).workers:
        engine.ledger.add_worker(run_id, planned.task, name=planned.name, kind=planned.kind, objective=planned.worker.objective,
                                 claimed_files=planned.worker.claim)
        if planned.task not in tasks:
            continue
        created = world.herdr("worktree", "create", "--cwd", str(world.repo.path), "--branch", planned.worktree.branch,
                              "--path", str(planned.worktree.path), "--no-focus", "--json")["result"]
        pane = created["root_pane"]["pane_id"]
        world.herdr("agent", "start", planned.name, "--kind", "codex", "--pane", pane)
        engine.ledger.transition(run_id, planned.task, WorkerState.PROVISIONING, WorkerState.READY, cause={"test": "setup"},
                                 pane_id=pane, worktree_path=str(planned.worktree.path))
    return engine, run


def prompts(engine: Engine) -> list[str]:
    assert isinstance(engine.herdr, HerdrCli)
    return [call.argv[3] for call in engine.herdr.calls if call.argv[1:3] == ("agent", "prompt")]


def wait_for_results(engine: Engine, run: Run, count: int, timeout_s: float = 60) -> list[Any]:
    def results() -> list[Any]:
        found = [m for m in engine.ledger.list_inbox(run.run_id) if m.kind == "result"]
        return found if len(found) >= count else []

    return eventually(results, lambda: f"no {count} result callbacks: {engine.ledger.list_inbox(run.run_id)}", timeout_s)


@pytest.mark.live_herdr(agents=True)
def test_fleet_is_accepted_with_one_prompt_each_and_runs_its_packets(world: Any, tmp_path: Path) -> None:
    gate = tmp_path / "dispatched"
    world.write_scenarios(gated(gate, "feature-a", "feature-b"))
    engine, run = provisioned(world, ("feature-a", "feature-b"))

    result = dispatch(engine, run)

    assert [(w.task, w.outcome, w.state) for w in result.workers] == [("feature-a", "accepted", "working"), ("feature-b", "accepted", "working")]
    gate.touch()
    # Sent concurrently: one prompt each, in whatever order the threads reached herdr.
    assert (result.path, result.prompts_sent, sorted(prompts(engine))) == ("fleet", 2, ["feature-a", "feature-b"])
    results = wait_for_results(engine, run, 2)
    assert sorted((m.task_label, m.sender, str(m.verdict)) for m in results) == [
        ("feature-a", "feature-a", "accepted"), ("feature-b", "feature-b", "accepted")]

    again = dispatch(engine, run)

    assert (again.prompts_sent, [w.outcome for w in again.workers]) == (0, ["skipped", "skipped"])
    assert sorted(prompts(engine)) == ["feature-a", "feature-b"]


@pytest.mark.live_herdr(agents=True)
def test_cli_dispatch_single_worker_json(world: Any, tmp_path: Path) -> None:
    world.write_scenarios(gated(tmp_path / "dispatched", "feature-a"))  # never opened: the agent stays at work
    engine, run = provisioned(world, ("feature-a",))

    proc = world.orch("dispatch", "--run", run.run_id, "--task", "feature-a", "--json")

    assert (proc.returncode, proc.stderr) == (0, "")
    doc = json.loads(proc.stdout)
    assert (doc["path"], doc["prompts_sent"]) == ("single", 1)
    assert [(w["task"], w["outcome"], w["state"]) for w in doc["workers"]] == [("feature-a", "accepted", "working")]
    assert doc["workers"][0]["acceptance"]["via"] == "agent prompt --wait"
    sent = Path(doc["workers"][0]["packet"]).read_text()
    shown = world.orch("packet", "show", "feature-a", "--run", run.run_id)
    assert (shown.returncode, shown.stdout) == (0, sent)


def test_stalled_prompt_is_diagnosed_from_one_read_and_never_resent(world: Any) -> None:
    world.write_scenarios('[[task.feature-a]]\ndo = "ignore"\n')
    engine, run = provisioned(world, ("feature-a",))

    result = dispatch(engine, run, ["feature-a"])

    worker = result.workers[0]
    assert (worker.outcome, worker.state) == ("stalled", "dispatched")
    assert worker.detail.startswith("submitted, not accepted (herdr agent prompt: agent_prompt_stalled: agent prompt produced no observed state change within 5000 ms")
    assert worker.diagnosis is not None and worker.diagnosis.suggests in ("agent_prompt", "unrecognised")
    assert render_dispatch(result).splitlines()[0] == f"dispatch run {run.run_id}: 1 stalled; 1 prompt(s) sent (one target, prompt --wait)"
    assert isinstance(engine.herdr, HerdrCli)
    reads = [c.argv[1:] for c in engine.herdr.calls if c.argv[1:3] == ("agent", "read")]
    # One look before pasting (a dialog or an undrawn screen gets no packet), one read for the diagnosis.
    assert reads == [("agent", "read", "feature-a", "--source", "visible"), ("agent", "read", "feature-a", "--source", "recent-unwrapped", "--lines", "60")]

    again = dispatch(engine, run, ["feature-a"])

    assert again.prompts_sent == 0
    assert prompts(engine) == ["feature-a"]


@pytest.mark.parametrize("code", ["agent_not_ready"])
def test_prompt_refused_by_herdr_is_not_sent_and_can_be_retried(world: Any, code: str, tmp_path: Path) -> None:
    world.write_scenarios(gated(tmp_path / "dispatched", "feature-a"))  # never opened: the agent stays at work
    engine, run = provisioned(world, ("feature-a",))
    world.sim.add_fault("agent prompt", code=code, message="agent feature-a is not an active named agent")

    first = dispatch(engine, run, ["feature-a"])
    second = dispatch(engine, run, ["feature-a"])

    assert [(w.outcome, w.state) for w in first.workers] == [("skipped", "ready")]
    assert first.workers[0].detail == f"not sent: herdr agent prompt: {code}: agent feature-a is not an active named agent"
    assert [(w.outcome, w.state) for w in second.workers] == [("accepted", "working")]
