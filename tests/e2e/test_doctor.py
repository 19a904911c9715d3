"""`orch doctor PLAN` on the simulator: a healthy setup passes; each broken piece fails with its one line."""

from __future__ import annotations

import json
import re
from typing import Any

PLAN = """
organization = "acme"
repo = "widgets"
base = "main"
{policy}
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


def _timed(text: str) -> str:
    """Probe times vary: every `in N.Ns` reads `in T`."""
    return re.sub(r" in [0-9]+\.[0-9]s$", " in T", text, flags=re.MULTILINE)


def test_doctor_passes_on_a_healthy_setup_and_leaves_nothing_behind(world: Any) -> None:
    world.write_scenarios(TRUSTING)
    plan = world.write_plan(PLAN.format(policy=""))
    workspaces_before = world.herdr("workspace", "list")["result"]["workspaces"]

    done = world.orch("doctor", str(plan))

    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert _timed(done.stdout) == (
        f"orch doctor {plan}: 2 agent kinds\n"
        "codex: PASS in T\n"
        "  installed: yes (`codex`)\n"
        "  integration: current (v6)\n"
        "  trust dialog: trust directory, answered with enter\n"
        "  prompt: accepted\n"
        "  callback: update #1 accepted\n"
        "  cleanup: agent exited, workspace closed, scratch worktree removed\n"
        "claude: PASS in T\n"
        "  installed: yes (`claude`)\n"
        "  integration: current (v7)\n"
        "  trust dialog: trust folder, answered with enter\n"
        "  prompt: accepted\n"
        "  callback: update #2 accepted\n"
        "  cleanup: agent exited, workspace closed, scratch worktree removed\n"
        "doctor: every agent kind passed (codex, claude); the fleet can start\n"
    )
    # Nothing of the probes is left: no workspace, no agent, no worktree, no run in the person's ledger.
    assert world.herdr("workspace", "list")["result"]["workspaces"] == workspaces_before
    assert world.herdr("agent", "list")["result"]["agents"] == []
    assert len(world.repo.git("worktree", "list").splitlines()) == 1
    assert not (world.orch_home / "ledger.sqlite3").exists()
