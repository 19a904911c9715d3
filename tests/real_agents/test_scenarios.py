"""Scenarios with real agents: a false claim rejected on re-run, a silent worker, an approval through `orch approve`,
a question the person answers, a trust dialog surfaced untouched, a slow worker and a large report; each ends with the
worker's agent exited by its own exit command (docs/real-agents.md, "Status", says which kind runs which and why)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

import pytest
from real_world import RealWorld, lane_kinds, paced, stable_report

from orchestrator.herdr_models import AT_REST
from orchestrator.quirks import quirks

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


def one_worker(kind: str) -> str:
    """The one-worker plan for ``kind``. It checks in every second, but opencode every 30 s: opencode's busy bar rests
    on one frame, and it takes 30-60 s from a prompt to its first model request on a loaded machine, longer than three
    one-second check-ins, which would read a stall (tests/helpers/real_world.py, REAL_CHECKIN_S)."""
    plan = ONE_WORKER.format(kind=kind)
    return paced(plan, kind) if kind == "opencode" else plan


def exited(world: RealWorld, done: subprocess.CompletedProcess[str], run_id: str, kind: str, *tasks: str) -> None:
    """Each task's agent left by the kind's own exit command, typed at rest, and orch saw the shell come back."""
    exits = world.agent_exits(run_id)
    assert exits == {task: [f"exited by {quirks(kind).exit_command}"] for task in tasks}, f"{exits}\n{world.diagnose(done)}"
    assert world.agent_processes() == [], world.diagnose(done)


@pytest.mark.parametrize("kind", lane_kinds("pi", "claude", "codex", "opencode"))
def test_a_false_claim_is_rejected_on_re_run(real_world: Callable[..., RealWorld], kind: str) -> None:
    world = real_world(kind, {"usage-docs": Spec(brain="false-claim")})

    done = world.orch("run", str(world.write_plan(one_worker(kind))), "--json")

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
        "removed; usage-docs workspace wN closed (by herdr when its pane moved out)\n"
        "Blockers: none\n"
    ), text
    exited(world, done, outcome["run_id"], kind, "usage-docs")


# A silent worker is failed after three unchanged check-ins: one second apart, but 30 s for opencode (one_worker).
@pytest.mark.parametrize("kind", lane_kinds("pi", "claude", "codex", "opencode"))
def test_a_silent_worker_is_asked_for_its_result_once_then_failed(real_world: Callable[..., RealWorld], kind: str) -> None:
    world = real_world(kind, {"usage-docs": Spec(brain="silent")})

    done = world.orch("run", str(world.write_plan(one_worker(kind))), "--json")

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
        "removed; usage-docs workspace wN closed (by herdr when its pane moved out)\n"
        "Blockers: usage-docs failed: done without a result after being asked for it once; no change of state or output "
        "across 3 consecutive check-ins\n"
    ), text
    prompts = [e for e in world.model.requests() if e.get("task") == "usage-docs"]
    assert "kind=follow-up" in json.dumps(prompts[-1]["request"]), world.diagnose(done)
    exited(world, done, outcome["run_id"], kind, "usage-docs")


# pi has no permission form (pi 0.73.1 runs every tool call it is asked for).
@pytest.mark.parametrize("kind", lane_kinds("claude", "codex", "opencode"))
def test_approvals_at_the_agents_own_form_are_answered_through_orch_approve(real_world: Callable[..., RealWorld], kind: str) -> None:
    world = real_world(kind, ask=True)
    plan = world.write_plan(one_worker(kind))

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
    exited(world, done, run_id, kind, "usage-docs")


@pytest.mark.parametrize("kind", lane_kinds("pi", "claude", "codex", "opencode"))
def test_a_question_the_person_answers_through_orch_answer(real_world: Callable[..., RealWorld], kind: str) -> None:
    question = "Which Python version should the guide name as the minimum?"
    world = real_world(kind, {"usage-docs": Spec(brain="question", question=question)})

    done = world.orch("run", str(world.write_plan(paced(ONE_WORKER.format(kind=kind), kind))), "--json")

    # The plan has no answer for it: the run stops, resumable, and names the door the person uses.
    outcome = json.loads(done.stdout)
    run_id = outcome["run_id"]
    assert (outcome["finished"], outcome["stopped_at"]) == (False, "waiting for the person: usage-docs"), world.diagnose(done)
    # The worker asked from inside its turn, and the agent may still be ending that turn (opencode's footer says so for
    # seconds after its last request on a loaded machine): `orch answer` goes only to a worker at rest. As the person
    # would, answer once it rests: herdr's own `agent wait` until idle or done.
    engine = world.engine()
    try:
        asking = next(w for w in engine.ledger.list_workers(run_id) if w.task_label == "usage-docs")
        engine.herdr_of(asking).agent_wait(asking.name, until=AT_REST, timeout_ms=120_000)
    finally:
        engine.close()
    answered = world.orch("answer", "--run", run_id, "usage-docs", "Python 3.11 or newer.")
    assert answered.returncode == 0, answered.stderr
    done = world.orch("resume", run_id, "--json")

    outcome = json.loads(done.stdout)
    assert outcome["finished"], world.diagnose(done)
    text = stable_report(world, run_id)
    assert text == (
        "Herdr: PASS\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: usage-docs=retained/accepted\n"
        "Callbacks: run <run>; usage-docs 2 accepted (question, result); missing result: none\n"
        "Verification: usage-docs: `grep -q 'Python 3.11' docs/usage.md` exit 0 -> accepted\n"
        # Without [integration] accepted work stays on its branch, and so its worktree is kept (README, "Integration").
        "Retired: usage-docs pane w1:pN closed; usage-docs worktree <root>/src/acme/widgets.worktrees/widgets-docs-usage "
        "retained (not integrated: commit <sha> exists only on docs/usage); usage-docs workspace wN closed (by herdr when its pane moved out)\n"
        "Blockers: none\n"
    ), text + world.diagnose(done)
    # The real agent received the person's words in an `answer` envelope, and worked them into the guide.
    last = json.dumps([e["request"] for e in world.model.requests() if e.get("task") == "usage-docs"][-1])
    assert "kind=answer" in last and "Python 3.11 or newer." in last, last[-2000:]
    exited(world, done, run_id, kind, "usage-docs")


# pi and opencode show no trust dialog at their pinned versions (pi 0.73.1 and opencode 1.18.33 start at their editor
# in a folder never seen: ../shared/real-agents pi-3, opencode-3, and every demo of the lane).
@pytest.mark.parametrize("kind", lane_kinds("claude", "codex"))
def test_a_trust_dialog_with_policy_off_is_surfaced_untouched(real_world: Callable[..., RealWorld], kind: str) -> None:
    world = real_world(kind)
    plan = ONE_WORKER.format(kind=kind).replace("[defaults]", "[policy]\ntrust_run_worktrees = false\n\n[defaults]")

    done = world.orch("run", str(world.write_plan(plan)), "--json")

    outcome = json.loads(done.stdout)
    run_id = outcome["run_id"]
    assert outcome["finished"], world.diagnose(done)
    text = stable_report(world, run_id)
    # The worker failed with the dialog's words, and its pane, worktree and workspace are kept for the person.
    assert text == DIALOG_REPORT[kind], world.diagnose(done)
    engine = world.engine()
    try:
        typed = [(e.kind, e.key) for e in engine.ledger.list_effects(run_id) if e.kind in ("dialog_keys", "pane_send_text", "pane_send_keys", "agent_prompt")]
        pane = engine.ledger.get_worker(run_id, "usage-docs").pane_id
    finally:
        engine.close()
    assert typed == [], "orch typed into the dialog"
    # The dialog is still on the agent's screen, as the person will find it; the model never saw the packet.
    screen = world.sim.run(["pane", "read", str(pane), "--source", "visible"]).stdout
    assert DIALOG_LINE[kind] in screen, screen
    assert [e for e in world.model.requests() if e.get("task")] == []


DIALOG_LINE = {"claude": "Yes, I trust this folder", "codex": "Trust this folder?"}
KEPT = "retained (failed before its agent started; kept for inspection (`orch retire --run <run> --abandon usage-docs --reason TEXT` removes it))"
# The dialog's own words, as the report quotes them (claude 2.1.328, codex 0.169.0: ../shared/real-agents claude-3, codex-19).
SCREEN = {
    "claude": "Quick safety check: Is this a project you created or one you trust? (Like your own code, a well-known open "
              "source / project, or work from your team). If not, take a moment to review what's in this folder first. / "
              "Claude Code'll be able to read, edit, and execute files here. / Security guide / ❯ No, exit / "
              "Yes, I trust this folder / Enter to confirm · Esc to cancel",
    "codex": "Note: You’re in a subdirectory of a Git project. Trusting will apply to the repository root: / "
             "<root>/src/acme/widgets / Trust this folder? Codex can read, edit, and run files here, subject to your "
             "permission settings. Folder settings / can run code automatically, even without a model request. Continue "
             "only if you trust these files. Your trust / decision will be saved. / › 1. Trust and continue / "
             "2. Back to Agent Command Center / enter continue · esc back",
}
DIALOG_REPORT = {kind: (
    "Herdr: FAIL\n"
    "Controller: acme/w1/w1:t1/w1:p1\n"
    "Workers: usage-docs=retained/failed\n"
    "Callbacks: run <run>; usage-docs 0 accepted; missing result: usage-docs\n"
    "Verification: usage-docs: not verified\n"
    f"Retired: usage-docs pane w1:pN {KEPT}; usage-docs worktree <root>/src/acme/widgets.worktrees/widgets-docs-usage "
    f"{KEPT}; usage-docs workspace wN {KEPT}\n"
    f"Blockers: usage-docs failed: usage-docs ({kind}) stopped at its trust folder dialog and nothing was typed (policy "
    f"trust_run_worktrees is off, from plan [policy]). Screen: {screen}\n"
) for kind, screen in SCREEN.items()}


@pytest.mark.parametrize("kind", lane_kinds("pi", "claude", "codex", "opencode"))
def test_a_slow_worker_with_long_output_and_a_large_report_pass(real_world: Callable[..., RealWorld], kind: str) -> None:
    world = real_world(kind, {"usage-docs": Spec(brain="report"), "build-notes": Spec(brain="slow")})
    plan = paced(ONE_WORKER.format(kind=kind), kind) + SLOW_WORKER.format(kind=kind)

    done = world.orch("run", str(world.write_plan(plan)), "--json")

    outcome = json.loads(done.stdout)
    run_id = outcome["run_id"]
    assert (done.returncode, outcome["report"]["verdict"]) == (0, "PASS"), world.diagnose(done)
    report = world.run_dir(run_id) / "reports" / "usage-docs" / "usage-docs-report.md"
    assert len(report.read_text().splitlines()) == 2002
    # The worker's result named it on its `Report:` line, and orch took it (the report's reported checks carry it).
    markdown = (world.run_dir(run_id) / "report.md").read_text()
    reported = [line for line in markdown.split("## usage-docs", 1)[1].splitlines() if line.startswith("- Reported checks: ")]
    assert json.loads(reported[0].removeprefix("- Reported checks: ").strip("` "))["reports"] == [str(report)], markdown
    # Each worker's transcript was saved before its pane closed (claude folds a long tool output to its first lines and
    # "… +N lines", so the transcript shows the agent's screen, not every line the build printed).
    for task in ("usage-docs", "build-notes"):
        transcript = (world.run_dir(run_id) / "transcripts" / f"{task}.txt").read_text()
        assert "herdr-orchestration" in transcript, transcript[-2000:]
    exited(world, done, run_id, kind, "usage-docs", "build-notes")


SLOW_WORKER = """
[[workers]]
task = "build-notes"
kind = "{kind}"
objective = "Write build notes for the widgets package after a full build."
deliverable = "notes/build.md committed on docs/build-notes."
branch = "docs/build-notes"
claim = ["notes/"]
verify = ["test -s notes/build.md"]
"""
