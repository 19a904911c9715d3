"""`orch cancel RUN` on the simulator: every worker abandoned through retire's ladder, every piece of work kept."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from registry import RunStatus, WorkerState

S = WorkerState
RUN = "w1:p1-20261130T080000Z"


def worktree_worker(world: Any, engine: Any, task: str, branch: str) -> tuple[str, str]:
    """A worker as provision leaves it, then dispatched and working: (pane, worktree path)."""
    created = world.herdr("worktree", "create", "--cwd", str(world.repo.path), "--branch", branch, "--no-focus", "--json")["result"]
    moved = world.herdr("pane", "move", created["root_pane"]["pane_id"], "--new-tab", "--workspace", "w1", "--no-focus")["result"]
    pane, path = moved["move_result"]["pane"]["pane_id"], created["worktree"]["path"]
    world.herdr("agent", "start", task, "--kind", "codex", "--pane", pane)
    engine.ledger.add_worker(RUN, task, name=task, kind="codex", objective="do it", pane_id=pane, branch=branch, worktree_path=path,
                             created_pane_ids=(pane,), created_worktree_paths=(path,),
                             created_workspace_ids=(created["workspace"]["workspace_id"],))  # fmt: skip
    state = S.PROVISIONING
    for step in (S.READY, S.DISPATCHED, S.WORKING):
        engine.ledger.transition(RUN, task, state, step, cause={"test": True})
        state = step
    return pane, path


def test_cancel_gives_up_every_worker_keeps_uncommitted_work_and_finishes_the_run(world: Any) -> None:
    engine = world.engine()
    engine.ledger.create_run(RUN, controller_target=world.controller_pane, repo_path=world.repo.path)
    pane_a, path_a = worktree_worker(world, engine, "committed", "feat/committed")
    pane_b, path_b = worktree_worker(world, engine, "dirty", "feat/dirty")
    (Path(path_a) / "done.txt").write_text("work\n")
    world.repo.git("-C", path_a, "add", "done.txt")
    world.repo.git("-C", path_a, "commit", "-q", "-m", "committed: work")
    (Path(path_b) / "draft.txt").write_text("half done\n")

    done = world.orch("cancel", RUN, "--reason", "wrong base branch")

    assert done.returncode == 11, done.stderr  # FAIL: nothing was accepted
    text = done.stdout.replace(path_a, "<a>").replace(path_b, "<b>").replace(pane_a, "<pa>").replace(pane_b, "<pb>")
    text = re.sub(r"workspace w\d+", "workspace wN", re.sub(r"\b[0-9a-f]{7}\b", "<sha>", text))
    assert text == (
        f"cancelled run {RUN}: wrong base branch\n"
        f"Retire {RUN}\n"
        "committed (committed): retired\n"
        "  agent <pa>: exited\n  pane <pa>: closed\n  worktree <a>: removed\n  workspace wN: gone\n"
        "dirty (dirty): retained: worktree <b>: 1 untracked file\n"
        "  agent <pb>: exited\n  pane <pb>: closed\n  worktree <b>: kept (1 untracked file)\n  workspace wN: gone\n"
        "\n"
        "Herdr: FAIL\n"
        "Controller: -/-/-/w1:p1\n"
        "Workers: committed=retired/superseded, dirty=retained/superseded\n"
        f"Callbacks: run {RUN}; committed 0 accepted; dirty 0 accepted; missing result: none\n"
        "Verification: committed: not verified; dirty: not verified\n"
        "Retired: committed pane <pa> closed; committed worktree <a> removed; committed workspace wN closed; "
        "dirty pane <pb> closed; dirty worktree <b> retained (1 untracked file); dirty workspace wN closed\n"
        "Blockers: none\n"
    )
    # The committed work stays on its branch (the checkout goes); the uncommitted draft keeps its checkout.
    assert not Path(path_a).exists() and world.repo.git("log", "--format=%s", "-1", "feat/committed") == "committed: work"
    assert (Path(path_b) / "draft.txt").read_text() == "half done\n"
    workers = {w.task_label: w for w in engine.ledger.list_workers(RUN)}
    assert {task: w.state for task, w in workers.items()} == {"committed": S.RETIRED, "dirty": S.RETAINED}
    run = engine.ledger.get_run(RUN)
    assert (run.status, run.stopped_at) == (RunStatus.FINISHED, "cancelled")
    assert (world.orch_home / "runs" / RUN.replace(":", "_") / "report.md").is_file()
    panes = {p["pane_id"] for p in world.herdr("pane", "list")["result"]["panes"]}
    assert pane_a not in panes and pane_b not in panes
    again = world.orch("cancel", RUN, "--json")
    assert (again.returncode, json.loads(again.stdout)["reason"]) == (1, f"run {RUN} is already finished")
