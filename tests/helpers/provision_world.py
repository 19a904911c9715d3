"""A run as preflight leaves it (repo workspace, tab, snapshot, workers) on an e2e World, for phase-level tests."""

from __future__ import annotations

import shutil
from typing import Any

from orchestrator.engine import Engine
from orchestrator.plan import load_plan
from registry import Run

RUN_ID = "w1:p1-20260101T000000Z"

# Two workers on one branch (the second splits the first's pane) and one on a branch of its own.
THREE = """\
organization = "acme"
repo = "widgets"
base = "{base}"

[[workers]]
task = "api-pagination"
objective = "Add cursor pagination."
deliverable = "Commits."
branch = "feat/api-pagination"
claim = ["src/api/**"]

[[workers]]
task = "api-tests"
objective = "Test pagination."
deliverable = "Tests."
branch = "feat/api-pagination"
claim = ["tests/api/**"]

[[workers]]
task = "pagination-docs"
kind = "claude"
objective = "Document pagination."
deliverable = "Docs."
branch = "docs/pagination-guide"
claim = ["docs/**"]
"""


def prepare_run(world: Any, plan_text: str, *, engine: Engine | None = None) -> tuple[Engine, Run]:
    """What preflight leaves behind: the run (repo workspace, tab, default branch, base), the plan snapshot, workers."""
    engine = engine or world.engine()
    plan_path = world.write_plan(plan_text)
    resolved = load_plan(plan_path, engine.settings)
    pane = world.herdr("pane", "get", world.controller_pane)["result"]["pane"]
    ledger = engine.ledger
    ledger.create_run(
        RUN_ID, controller_target=world.controller_pane, organization="acme", repo="widgets",
        repo_path=str(world.repo.path), base_ref=resolved.plan.base, plan_path=str(plan_path),
    )  # fmt: skip
    ledger.update_run(RUN_ID, workspace_id=pane["workspace_id"], repo_tab_id=pane["tab_id"], default_branch="main", base_sha=world.repo.head())
    snapshot = engine.run_dir(RUN_ID) / "plan.toml"
    snapshot.parent.mkdir(parents=True)
    shutil.copy(plan_path, snapshot)
    for w in resolved.workers:
        ledger.add_worker(RUN_ID, w.task, name=w.name, kind=w.kind, objective=w.worker.objective, claimed_files=w.worker.claim)
    return engine, ledger.get_run(RUN_ID)
