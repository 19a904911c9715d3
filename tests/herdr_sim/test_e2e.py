"""End to end through herdr-sim subprocesses, real tmux panes and real git (CONTRACT §7-§9, §14)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from herdr_sim.testing import SimServer


def ok(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["result"]


@pytest.mark.e2e
def test_worktree_agent_prompt_exit_and_teardown(sim: SimServer, tmp_path: Path, check_success: Any) -> None:
    repo = tmp_path / "project"
    repo.mkdir()
    for argv in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(["git", "-C", str(repo), *argv], check=True, timeout=30)
    ws = ok(sim.run(["workspace", "create", "--cwd", str(tmp_path)]))
    check_success(sim.run(["pane", "split", ws["root_pane"]["pane_id"], "--direction", "right"]).stdout)
    created = check_success(sim.run(["worktree", "create", "--cwd", str(repo), "--branch", "feat/X_1"]).stdout)
    result = created["result"]
    assert result["type"] == "worktree_created"
    checkout = Path(result["worktree"]["path"])
    assert checkout == Path.home() / ".herdr" / "worktrees" / "project" / "feat-x-1" and (checkout / ".git").exists()
    assert result["workspace"]["workspace_id"] == "w3"  # w2 is the unfocused parent made for the repo root
    assert ok(sim.run(["workspace", "get", "w2"]))["workspace"]["label"] == "project"
    pane = result["root_pane"]["pane_id"]
    started = check_success(sim.run(["agent", "start", "reviewer", "--kind", "codex", "--pane", pane]).stdout)
    agent = started["result"]["agent"]
    assert (agent["name"], agent["interactive_ready"], started["result"]["argv"]) == ("reviewer", True, ["codex"])
    packet = "TASK T1: edit README.md\nthen reply DONE"
    check_success(sim.run(["agent", "prompt", "reviewer", packet]).stdout)
    waited = ok(sim.run(["agent", "wait", "reviewer", "--until", "done", "--until", "idle", "--timeout", "20000"]))
    assert waited["agent"]["agent_status"] in ("done", "idle")
    ok(sim.run(["pane", "wait-output", pane, "--match", "codex got: TASK T1", "--timeout", "10000"]))
    ok(sim.run(["agent", "prompt", "reviewer", "/exit"]))
    ok(sim.run(["pane", "wait-output", pane, "--regex", r"^\$ ?$", "--source", "visible", "--timeout", "10000"]))
    gone = sim.run(["agent", "get", "reviewer"])
    assert json.loads(gone.stderr)["error"]["code"] == "agent_not_found"
    (checkout / "dirty.txt").write_text("work in progress\n")
    refused = sim.run(["worktree", "remove", "--workspace", "w3"])
    assert json.loads(refused.stderr)["error"]["code"] == "dirty_worktree_requires_force"
    assert checkout.exists()
    closing = sim.run(["pane", "close", "w2:p1"])
    assert json.loads(closing.stderr) == {"id": "cli:pane:close", "error": {
        "code": "confirmation_required", "message": "closing this pane would close a worktree group"}}
    assert ok(sim.run(["pane", "close", "w1:p2"])) == {"type": "ok"}
