"""Real agents' habits end to end: trust dialogs at first start, approval forms mid-turn, screen-only and
idle-while-working agents, transcripts kept at retire (herdr_sim.agent behaviours, orchestrator/quirks.py)."""

from __future__ import annotations

import json
from typing import Any

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


def test_trust_dialogs_at_first_start_are_answered_and_recorded_when_policy_allows(world: Any) -> None:
    world.write_scenarios(TRUSTING)
    plan = world.write_plan(PLAN.format(policy=""))

    done = world.orch("run", str(plan), "--json")

    outcome = json.loads(done.stdout)
    assert (done.returncode, outcome["report"]["verdict"]) == (0, "PASS"), done.stderr
    facts = sorted(_ledger_facts(world, outcome["run_id"], "dialog"), key=lambda f: f["task"])
    assert [(f["task"], f["kind"], f["dialog"], f["answered"], f["keys"]) for f in facts] == [
        ("api-docs", "codex", "trust directory", True, ["enter"]),
        ("cli-help", "claude", "trust folder", True, ["enter"]),
    ]
    assert facts[0]["screen"].splitlines()[0].startswith("> You are in ")
    # Every worker's terminal history was saved before its pane closed, and the report names the file.
    engine = world.engine()
    run_dir = engine.run_dir(outcome["run_id"])
    engine.close()
    for task in ("api-docs", "cli-help"):
        transcript = run_dir / "transcripts" / f"{task}.txt"
        assert "Sent result." in transcript.read_text()
    markdown = (run_dir / "report.md").read_text()
    assert f"- Transcript: {run_dir}/transcripts/api-docs.txt" in markdown.splitlines()
    assert "- Dialogs: codex trust directory answered with enter (policy trust_run_worktrees, from default: a worktree this run created)" in markdown.splitlines()
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
        ("api-docs", "trust directory", False, "policy trust_run_worktrees is off, from plan [policy]"),
        ("cli-help", "trust folder", False, "policy trust_run_worktrees is off, from plan [policy]"),
    ]
    engine = world.engine()
    try:
        assert [e.kind for e in engine.ledger.list_effects(run_id) if e.kind == "dialog_keys"] == []
        blockers = {b["task"]: b["text"] for b in outcome["report"]["blockers"]}
    finally:
        engine.close()
    assert blockers["api-docs"].startswith(
        "api-docs (codex) stopped at its trust directory dialog and nothing was typed "
        "(policy trust_run_worktrees is off, from plan [policy]). Screen: > You are in "
    )
    assert blockers["cli-help"].endswith("❯ 1. Yes, I trust this folder / 2. No, exit / Enter to confirm · Esc to cancel")
    # The agents still wait at their dialogs: no key reached them (the simulator remembers every trusted directory).
    assert not list((world.sim.home / "agents").glob("trusted-*.txt"))
