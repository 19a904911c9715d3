"""`orch retire` against the simulated herdr: real panes, real scripted agents, real git worktrees."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from registry import WorkerState

S = WorkerState
RUN = "w1:p1-20261130T080000Z"
TO_ACCEPTED = [S.READY, S.DISPATCHED, S.RESULT, S.VERIFYING, S.ACCEPTED]


def herdr_error(world: Any, *argv: str) -> str:
    """The error code of a herdr command expected to fail."""
    proc = subprocess.run([world.binary, *argv], env=world.env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout
    code: str = json.loads(proc.stderr)["error"]["code"]
    return code


def focused_panes(world: Any) -> list[str]:
    return [p["pane_id"] for p in world.herdr("pane", "list")["result"]["panes"] if p["focused"]]


def start_run(world: Any) -> Any:
    engine = world.engine()
    engine.ledger.create_run(RUN, controller_target=world.controller_pane, repo_path=world.repo.path)
    return engine


def worktree_worker(world: Any, branch: str) -> tuple[str, str, str]:
    """provision's shape: a worktree (where orch puts it, not in herdr's own dir), its root pane moved into the repo
    workspace as a new tab. (pane, path, linked ws)"""
    path = world.src_root / "acme" / "widgets.worktrees" / f"widgets-{branch.replace('/', '-')}"
    created = world.herdr("worktree", "create", "--cwd", str(world.repo.path), "--branch", branch, "--path", str(path), "--no-focus", "--json")["result"]
    moved = world.herdr("pane", "move", created["root_pane"]["pane_id"], "--new-tab", "--workspace", world.env["HERDR_WORKSPACE_ID"], "--no-focus")["result"]
    return moved["move_result"]["pane"]["pane_id"], created["worktree"]["path"], created["workspace"]["workspace_id"]


def add_worker(engine: Any, world: Any, task: str, pane: str, *, accepted: bool = True, **fields: Any) -> None:
    world.herdr("agent", "start", task, "--kind", "codex", "--pane", pane)
    engine.ledger.add_worker(RUN, task, name=task, kind="codex", objective="do it", pane_id=pane, **fields)
    current = S.PROVISIONING
    for step in TO_ACCEPTED if accepted else []:
        engine.ledger.transition(RUN, task, current, step, cause={"test": True})
        current = step


@pytest.mark.live_herdr(agents=True)
def test_full_ladder_exits_the_agent_closes_the_pane_and_removes_the_worktree(world: Any) -> None:
    engine = start_run(world)
    pane, path, linked = worktree_worker(world, "feat/a")
    add_worker(engine, world, "feature-a", pane, created_pane_ids=(pane,), worktree_path=path,
               created_worktree_paths=(path,), created_workspace_ids=(linked,), branch="feat/a")  # fmt: skip
    focus = focused_panes(world)

    done = world.orch("retire", "--json")

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "run_id": RUN,
        "workers": [{
            "task": "feature-a", "name": "feature-a", "before": "accepted", "state": "retired", "outcome": "retired", "reason": None,
            "items": [{"kind": "agent", "id": pane, "action": "exited", "reason": None},
                      {"kind": "pane", "id": pane, "action": "closed", "reason": None},
                      {"kind": "worktree", "id": path, "action": "removed", "reason": None},
                      {"kind": "workspace", "id": linked, "action": "gone", "reason": None}],
        }],
        "workspaces": [],
        "integration": None,
    }  # fmt: skip
    assert herdr_error(world, "agent", "get", "feature-a") == "agent_not_found"
    assert herdr_error(world, "pane", "get", pane) == "pane_not_found"
    assert not Path(path).exists() and world.repo.git("branch", "--list", "feat/a") == "feat/a"
    assert focused_panes(world) == focus
    if world.sim is not None:  # a live herdr's focus is the person's own
        assert focus == [world.controller_pane]


def test_dirty_worktree_kept_worker_and_foreign_pane(world: Any) -> None:
    engine = start_run(world)
    pane_b, path_b, linked_b = worktree_worker(world, "feat/b")
    add_worker(engine, world, "feature-b", pane_b, created_pane_ids=(pane_b,), worktree_path=path_b,
               created_worktree_paths=(path_b,), created_workspace_ids=(linked_b,), branch="feat/b")  # fmt: skip
    (Path(path_b) / "notes.txt").write_text("unsaved work\n")
    pane_c, path_c, linked_c = worktree_worker(world, "feat/c")
    add_worker(engine, world, "feature-c", pane_c, created_pane_ids=(pane_c,), worktree_path=path_c,
               created_worktree_paths=(path_c,), created_workspace_ids=(linked_c,), branch="feat/c")  # fmt: skip
    # A pane the person split off the controller: the run may exit its agent but never closes it.
    foreign = world.herdr("pane", "split", world.controller_pane, "--direction", "right", "--no-focus")["result"]["pane"]["pane_id"]
    add_worker(engine, world, "feature-d", foreign)
    focus = focused_panes(world)

    done = world.orch("retire", "--keep", "feature-c")

    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"Retire {RUN}\n"
        f"feature-b (feature-b): retained: worktree {path_b}: 1 untracked file\n"
        f"  agent {pane_b}: exited\n"
        f"  pane {pane_b}: closed\n"
        f"  worktree {path_b}: kept (1 untracked file)\n"
        f"  workspace {linked_b}: gone\n"
        "feature-c (feature-c): retained: kept on request\n"
        "feature-d (feature-d): retired\n"
        f"  agent {foreign}: exited\n"
        f"  pane {foreign}: untouched (not created by this run)\n"
    )
    assert (Path(path_b) / "notes.txt").read_text() == "unsaved work\n"
    assert world.herdr("agent", "get", "feature-c")["result"]["agent"]["pane_id"] == pane_c
    assert world.herdr("pane", "get", foreign)["result"]["pane"]["agent_status"] == "unknown"
    assert [w.state for w in engine.ledger.list_workers(RUN)] == [S.RETAINED, S.RETAINED, S.RETIRED]
    assert focused_panes(world) == focus


def test_confirmation_required_stops_the_ladder_and_keeps_the_group(make_world: Any) -> None:
    world = make_world(controller_in_repo=False)
    engine = start_run(world)
    # No workspace is open on the repo, so herdr makes an unfocused parent workspace for it (w2) beside the linked one.
    created = world.herdr("worktree", "create", "--cwd", str(world.repo.path), "--branch", "feat/e", "--no-focus", "--json")["result"]
    linked, path = created["workspace"]["workspace_id"], created["worktree"]["path"]
    parent = next(w["workspace_id"] for w in world.herdr("workspace", "list")["result"]["workspaces"]
                  if w["workspace_id"] not in ("w1", linked))  # fmt: skip
    parent_pane = world.herdr("pane", "list", "--workspace", parent)["result"]["panes"][0]["pane_id"]
    add_worker(engine, world, "feature-e", parent_pane, created_pane_ids=(parent_pane,), created_workspace_ids=(parent, linked))
    focus = focused_panes(world)

    done = world.orch("retire")

    reason = "pane close needs confirmation (it would close a worktree group); the ladder stops here"
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"Retire {RUN}\n"
        f"feature-e (feature-e): retained: pane {parent_pane}: {reason}\n"
        f"  agent {parent_pane}: exited\n"
        f"  pane {parent_pane}: kept ({reason})\n"
        f"  workspace {parent}: kept (the ladder stopped at the worker's pane)\n"
        f"  workspace {linked}: kept (the ladder stopped at the worker's pane)\n"
    )
    assert world.herdr("workspace", "get", parent)["result"]["workspace"]["workspace_id"] == parent
    assert world.herdr("workspace", "get", linked)["result"]["workspace"]["workspace_id"] == linked
    assert Path(path).exists()
    assert focused_panes(world) == focus
