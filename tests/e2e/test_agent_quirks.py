"""Real agents' habits end to end: trust dialogs at first start, approval forms mid-turn, screen-only and
idle-while-working agents, transcripts kept at retire (herdr_sim.agent behaviours, orchestrator/quirks.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

PLAN = """
organization = "acme"
repo = "widgets"
base = "main"
{policy}
[defaults]
checkin_interval_s = 1

[[workers]]
task = "api-docs"
kind = "codex"
objective = "Document the widgets API."
deliverable = "docs/api.md committed on docs/api-guide."
branch = "docs/api-guide"
claim = ["docs/"]
verify = ["ls docs"]

[[workers]]
task = "cli-help"
kind = "claude"
objective = "Improve the CLI help text."
deliverable = "src/cli/ changes committed on feat/cli-help."
branch = "feat/cli-help"
claim = ["src/cli/"]
verify = ["ls src/cli"]
"""

TRUSTING = """
[agents.codex]
trust_dialog = true

[agents.claude]
trust_dialog = true
"""


def _ledger_facts(world: Any, run_id: str, kind: str) -> list[dict[str, Any]]:
    engine = world.engine()
    try:
        return [{"task": e.task_label, **e.detail} for e in engine.ledger.events(run_id) if e.kind == kind]
    finally:
        engine.close()


# Claude Code (2.1.328, ../shared/real-agents claude-3) opens its trust menu on "No, exit" above "Yes, I trust this
# folder": Enter alone would quit, so orch moves the cursor first. A codex menu opening on "Back …" is moved up.
TRUSTING_CURSOR_ON_NO = TRUSTING.replace("[agents.codex]\ntrust_dialog = true\n", "[agents.codex]\ntrust_dialog = true\ntrust_focus_decline = true\n")


@pytest.mark.parametrize("scenarios, codex_keys", [(TRUSTING, ["enter"]), (TRUSTING_CURSOR_ON_NO, ["up", "enter"])], ids=["codex on yes", "codex on no"])
def test_trust_dialogs_at_first_start_are_answered_and_recorded_when_policy_allows(world: Any, scenarios: str, codex_keys: list[str]) -> None:
    world.write_scenarios(scenarios)
    plan = world.write_plan(PLAN.format(policy=""))

    done = world.orch("run", str(plan), "--json")

    outcome = json.loads(done.stdout)
    assert (done.returncode, outcome["report"]["verdict"]) == (0, "PASS"), done.stderr
    facts = sorted(_ledger_facts(world, outcome["run_id"], "dialog"), key=lambda f: f["task"])
    assert [(f["task"], f["kind"], f["dialog"], f["answered"], f["keys"]) for f in facts] == [
        ("api-docs", "codex", "trust folder", True, codex_keys),
        ("cli-help", "claude", "trust folder", True, ["down", "enter"]),
    ]
    assert "  Trust this folder? Codex can read, edit, and run files here, subject to your" in facts[0]["screen"].splitlines()
    # Every worker's terminal history was saved before its pane closed, and the report names the file.
    engine = world.engine()
    run_dir = engine.run_dir(outcome["run_id"])
    engine.close()
    for task in ("api-docs", "cli-help"):
        transcript = run_dir / "transcripts" / f"{task}.txt"
        assert "Sent result." in transcript.read_text()
    markdown = (run_dir / "report.md").read_text()
    assert f"- Transcript: {run_dir}/transcripts/api-docs.txt" in markdown.splitlines()
    assert f"- Dialogs: codex trust folder answered with {' '.join(codex_keys)} (policy trust_run_worktrees, from default: a worktree this run created)" in markdown.splitlines()
    status = world.orch("status", "--run", outcome["run_id"]).stdout
    assert status.endswith(f"transcripts:\n  api-docs: {run_dir}/transcripts/api-docs.txt\n  cli-help: {run_dir}/transcripts/cli-help.txt\n")


def test_trust_dialogs_are_surfaced_and_nothing_is_typed_when_policy_says_no(world: Any) -> None:
    world.write_scenarios(TRUSTING)
    plan = world.write_plan(PLAN.format(policy="[policy]\ntrust_run_worktrees = false\n"))

    done = world.orch("run", str(plan), "--json")

    outcome = json.loads(done.stdout)
    assert outcome["report"]["verdict"] == "FAIL", done.stderr
    run_id = outcome["run_id"]
    facts = sorted(_ledger_facts(world, run_id, "dialog"), key=lambda f: f["task"])
    assert [(f["task"], f["dialog"], f["answered"], f["reason"]) for f in facts] == [
        ("api-docs", "trust folder", False, "policy trust_run_worktrees is off, from plan [policy]"),
        ("cli-help", "trust folder", False, "policy trust_run_worktrees is off, from plan [policy]"),
    ]
    engine = world.engine()
    try:
        assert [e.kind for e in engine.ledger.list_effects(run_id) if e.kind == "dialog_keys"] == []
        blockers = {b["task"]: b["text"] for b in outcome["report"]["blockers"]}
    finally:
        engine.close()
    assert blockers["api-docs"].startswith(
        "api-docs (codex) stopped at its trust folder dialog and nothing was typed "
        "(policy trust_run_worktrees is off, from plan [policy]). Screen: "
    )
    assert blockers["api-docs"].endswith("› 1. Trust and continue / 2. Back to Agent Command Center / enter continue · esc back")
    assert blockers["cli-help"].endswith("❯ No, exit / Yes, I trust this folder / Enter to confirm · Esc to cancel")
    # The agents still wait at their dialogs: no key reached them (the simulator remembers every trusted directory).
    assert not list((world.sim.home / "agents").glob("trusted-*.txt"))


ONE_WORKER = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
checkin_interval_s = 1

[[workers]]
task = "cli-help"
kind = "{kind}"
objective = "Improve the CLI help text."
deliverable = "src/cli/ changes committed on feat/cli-help."
branch = "feat/cli-help"
claim = ["src/cli/"]
verify = ["ls src/cli"]
"""

APPROVAL = """
[agents.claude]
trust_dialog = true

[[task.cli-help]]
do = "write"
path = "src/cli/help.txt"
content = "usage: widgets [--help]\\n"

[[task.cli-help]]
do = "approval"
command = "make deploy"

# Approved, it waits for the test's word (the gate file) before it goes on to its result: a result landing before
# `orch approve` recorded the worker back at work would move it to `result` first, and approve would say so.
[[task.cli-help]]
do = "run"
command = "until test -e {gate}; do sleep 0.1; done"

[[task.cli-help]]
do = "commit"
message = "cli: help text"

[[task.cli-help]]
do = "result"
"""


def test_an_approval_form_mid_turn_is_a_blocked_worker_answered_through_orch(world: Any, tmp_path: Path) -> None:
    gate = tmp_path / "approved"
    world.write_scenarios(APPROVAL.replace("{gate}", str(gate)))
    plan = world.write_plan(ONE_WORKER.format(kind="claude"))

    stopped = world.orch("run", str(plan), "--json")

    outcome = json.loads(stopped.stdout)
    run_id = outcome["run_id"]
    assert (outcome["finished"], outcome["stopped_at"]) == (False, "waiting for the person: cli-help"), stopped.stderr
    waits = [line.split(" ", 1)[1] for line in stopped.stderr.splitlines() if "waits at an approval form" in line]
    assert waits == [
        "cli-help waits at an approval form: claude permission prompt: Run a command / │ make deploy / This command requires approval / "
        "Do you want to proceed? / ❯ 1. Yes / "
        "2. Yes, and don't ask again for this command / 3. No / "
        f"Esc to cancel · Tab to amend -> `orch approve --run {run_id} cli-help` or `orch approve --run {run_id} cli-help --deny`, then `orch resume {run_id}`"
    ]
    # Nothing was typed into the form while it waited.
    engine = world.engine()
    try:
        assert [e.kind for e in engine.ledger.list_effects(run_id) if e.kind == "dialog_keys"] == ["dialog_keys"]  # the trust dialog only
    finally:
        engine.close()

    approved = world.orch("approve", "cli-help", "--run", run_id)
    assert (approved.returncode, approved.stdout) == (0, "cli-help: approved the permission prompt with enter (worker working)\n"), approved.stderr
    again = world.orch("approve", "cli-help", "--run", run_id)
    # The worker went back to work: there is no form to answer twice.
    assert (again.returncode, again.stderr) == (1, (
        "orch: cli-help is not waiting at an approval form (state working)\n"
        f"hint: `orch status --run {run_id}` shows what each worker waits for\n"))
    gate.touch()

    resumed = world.orch("resume", run_id, "--json")
    assert json.loads(resumed.stdout)["report"]["verdict"] == "PASS", resumed.stderr
    assert world.repo.git("show", "feat/cli-help:src/cli/help.txt") == "usage: widgets [--help]"
    facts = _ledger_facts(world, run_id, "dialog")
    assert [(f["dialog"], f["answered"], f["keys"], f["reason"]) for f in facts] == [
        ("trust folder", True, ["down", "enter"], "policy trust_run_worktrees, from default: a worktree this run created"),
        ("permission prompt", True, ["enter"], "approved through `orch approve`"),
    ]


SCREEN_ONLY = """
[agents.{kind}]
hooks = false
"""


def test_a_worker_without_hook_integration_is_tracked_from_its_screen_alone(world: Any) -> None:
    world.write_scenarios(SCREEN_ONLY.format(kind="pi"))
    plan = world.write_plan(ONE_WORKER.format(kind="pi"))

    done = world.orch("run", str(plan), "--json")

    outcome = json.loads(done.stdout)
    assert (done.returncode, outcome["report"]["verdict"]) == (0, "PASS"), done.stderr
    # The agent never reported a state: herdr (the simulator) knew it only from its screen.
    logs = "".join(p.read_text() for p in (world.sim.home / "agents").glob("*.log"))
    assert "report-agent" not in logs
    assert "screen only: no hook reports" in logs


BLANK_START = """
[agents.opencode]
hooks = false
blank_start_ms = 6000
"""


def test_an_agent_drawing_its_input_late_gets_its_packet_only_once_it_shows_it_is_ready(world: Any) -> None:
    """opencode draws its input ~10 s after start and herdr reads the blank screen as idle (../shared/real-agents
    opencode-1): a packet pasted then is lost. Provisioning waits for the kind's ready sign (`Ask anything`)."""
    world.write_scenarios(BLANK_START)
    plan = world.write_plan(ONE_WORKER.format(kind="opencode"))

    done = world.orch("run", str(plan), "--json")

    outcome = json.loads(done.stdout)
    assert (done.returncode, outcome["report"]["verdict"]) == (0, "PASS"), done.stderr
    logs = "".join(p.read_text() for p in (world.sim.home / "agents").glob("*.log"))
    assert "blank start: 6000 ms" in logs


IDLE_WHILE_WORKING = """
[agents.claude]
idle_while_working = true

[[task.cli-help]]
do = "write"
path = "src/cli/help.txt"
content = "usage\\n"

[[task.cli-help]]
do = "commit"

[[task.cli-help]]
do = "run"
command = "sleep 5"

[[task.cli-help]]
do = "result"
checks = "claimed"
"""


def test_an_agent_idle_while_still_working_is_not_asked_for_its_result(world: Any) -> None:
    world.write_scenarios(IDLE_WHILE_WORKING)
    plan = world.write_plan(ONE_WORKER.format(kind="claude"))

    done = world.orch("run", str(plan), "--json")

    outcome = json.loads(done.stdout)
    assert outcome["report"]["verdict"] == "PASS", done.stderr
    engine = world.engine()
    try:
        asked = [e.key for e in engine.ledger.list_effects(outcome["run_id"]) if "ask-result" in e.key]
    finally:
        engine.close()
    assert asked == []
    # (without the screen check, the idle report during `sleep 5` earns an ask-result follow-up)
