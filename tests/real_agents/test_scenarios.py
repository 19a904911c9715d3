"""Scenarios with real agents: a false claim rejected on re-run, a silent worker, an approval through `orch approve`."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from real_world import RealWorld, lane_kinds, stable_report

from herdr_sim.model.brains import Spec

pytestmark = pytest.mark.real_agents

ONE_WORKER = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
checkin_interval_s = 1

[[workers]]
task = "usage-docs"
kind = "{kind}"
objective = "Write a usage guide for the widgets package."
deliverable = "docs/usage.md committed on docs/usage."
branch = "docs/usage"
claim = ["docs/"]
verify = ["grep -q 'Python 3.11' docs/usage.md"]
"""


@pytest.mark.parametrize("kind", lane_kinds("pi", "claude", "codex", "opencode"))
def test_a_false_claim_is_rejected_on_re_run(real_world: Callable[..., RealWorld], kind: str) -> None:
    world = real_world(kind, {"usage-docs": Spec(brain="false-claim")})

    done = world.orch("run", str(world.write_plan(ONE_WORKER.format(kind=kind))), "--json")

    outcome = json.loads(done.stdout)
    assert (outcome["finished"], outcome["exit_code"]) == (True, 11), world.diagnose(done)
    check = "`grep -q 'Python 3.11' docs/usage.md`"
    text = stable_report(world, outcome["run_id"])
    assert text == (
        "Herdr: FAIL\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: usage-docs=retired/rejected\n"
        "Callbacks: run <run>; usage-docs 1 accepted (result); missing result: none\n"
        f"Verification: usage-docs: {check} exit 2 -> rejected (no commits on docs/usage since base <base>, but the task "
        f"had to change files; cited file docs/usage.md does not exist at <base>; check {check} failed on re-run (exit 2); "
        f"worker reported {check} passing, but it does not pass on re-run)\n"
        "Retired: usage-docs pane w1:pN closed; usage-docs worktree <root>/src/acme/widgets.worktrees/widgets-docs-usage "
        "removed; usage-docs workspace wN closed\n"
        "Blockers: none\n"
    ), text
    assert world.agent_processes() == [], world.diagnose(done)


@pytest.mark.parametrize("kind", lane_kinds("pi", "claude", "codex", "opencode"))
def test_a_silent_worker_is_asked_for_its_result_once_then_failed(real_world: Callable[..., RealWorld], kind: str) -> None:
    world = real_world(kind, {"usage-docs": Spec(brain="silent")})

    done = world.orch("run", str(world.write_plan(ONE_WORKER.format(kind=kind))), "--json")

    outcome = json.loads(done.stdout)
    assert outcome["finished"], world.diagnose(done)
    text = stable_report(world, outcome["run_id"])
    # Asked once for its missing result (spec §5), it stayed silent: failed, nothing of it kept.
    assert text == (
        "Herdr: FAIL\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: usage-docs=retired/failed\n"
        "Callbacks: run <run>; usage-docs 0 accepted; missing result: usage-docs\n"
        "Verification: usage-docs: not verified\n"
        "Retired: usage-docs pane w1:pN closed; usage-docs worktree <root>/src/acme/widgets.worktrees/widgets-docs-usage "
        "removed; usage-docs workspace wN closed\n"
        "Blockers: usage-docs failed: done without a result after being asked for it once; no change of state or output "
        "across 3 consecutive check-ins\n"
    ), text
    prompts = [e for e in world.model.requests() if e.get("task") == "usage-docs"]
    assert "kind=follow-up" in json.dumps(prompts[-1]["request"]), world.diagnose(done)
    assert world.agent_processes() == [], world.diagnose(done)


@pytest.mark.parametrize("kind", lane_kinds("claude", "codex", "opencode"))  # pi has no permission form
def test_approvals_at_the_agents_own_form_are_answered_through_orch_approve(real_world: Callable[..., RealWorld], kind: str) -> None:
    world = real_world(kind, ask=True)
    plan = world.write_plan(ONE_WORKER.format(kind=kind))

    done = world.orch("run", str(plan), "--json")
    outcome = json.loads(done.stdout)
    run_id = outcome["run_id"]
    rounds = 0
    while not outcome["finished"]:
        assert outcome["stopped_at"] == "waiting for the person: usage-docs", world.diagnose(done)
        assert "usage-docs waits at an approval form" in done.stderr, world.diagnose(done)
        approved = world.orch("approve", "usage-docs", "--run", run_id)
        assert approved.returncode == 0, approved.stderr
        assert approved.stdout.startswith("usage-docs: approved the "), approved.stdout  # its form, by the form's name
        rounds += 1
        assert rounds <= 8, "more approvals than the worker's tool calls"
        done = world.orch("resume", run_id, "--json")
        outcome = json.loads(done.stdout)

    assert (outcome["report"]["verdict"], rounds > 0) == ("PASS", True), world.diagnose(done)
    assert world.agent_processes() == [], world.diagnose(done)
