"""A base force-pushed mid-run: every worker still starts from the commit preflight pinned, the move is reported,
and integration never merges unrelated histories."""

from __future__ import annotations

import json
import re
from typing import Any

PLAN = """
organization = "acme"
repo = "widgets"
base = "origin/main"

[defaults]
concurrency = 1
checkin_interval_s = 1

[integration]
enabled = true
branch = "chore/integration-moved"

[[workers]]
task = "first"
objective = "Write the first note."
deliverable = "src/first/ committed on feat/first."
branch = "feat/first"
claim = ["src/first/"]

[[workers]]
task = "second"
objective = "Write the second note."
deliverable = "src/second/ committed on feat/second."
branch = "feat/second"
claim = ["src/second/"]
"""

# The first worker force-pushes an unrelated history to origin's main before it does its work: a person (or a
# bot) rewriting the base while the run goes on. With a concurrency of 1, the second worker is provisioned only
# after that, so its fetch gate meets the moved base every time.
SCENARIOS = """
[[task.first]]
do = "run"
command = "rm -rf {rewrite} && git init --quiet --initial-branch=main {rewrite} && git -C {rewrite} commit --quiet --allow-empty -m rewritten && git -C {rewrite} push --quiet --force {origin} main"

[[task.first]]
do = "write"
path = "{{claim_file}}"
content = "first\\n"

[[task.first]]
do = "commit"
message = "first: note"

[[task.first]]
do = "verify"

[[task.first]]
do = "result"
"""


def test_a_base_force_pushed_mid_run_leaves_every_worker_on_the_pinned_commit_and_is_reported(world: Any) -> None:
    origin = world.src_root.parent / "origin.git"
    world.repo.git("clone", "--quiet", "--bare", str(world.repo.path), str(origin))
    world.repo.git("remote", "add", "origin", str(origin))
    world.repo.git("fetch", "--quiet", "origin")
    pinned = world.repo.head()
    world.write_scenarios(SCENARIOS.format(rewrite=world.src_root.parent / "rewrite", origin=origin))
    plan = world.write_plan(PLAN)

    done = world.orch("run", str(plan), "--json")

    moved = world.repo.git("rev-parse", "origin/main")
    assert moved != pinned
    # A rewritten base needs the person (the work is on a history the base no longer has): PARTIAL, never a crash.
    assert done.returncode == 10, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    # Both workers' branches and the integration branch start from the pinned commit.
    for branch in ("feat/first", "feat/second", "chore/integration-moved"):
        assert world.repo.git("merge-base", branch, pinned) == pinned, branch
    shown = world.orch("report", "--run", run_id).stdout.replace(str(world.orch_home), "<home>").replace(run_id.replace(":", "_"), "<run>")
    shown = world.ids(shown.replace(str(world.src_root), "<src>").replace(run_id, "<run>"))
    shown = re.sub(r"pane w1:p(?!1\b)[1-9A-Z0]+", "pane w1:pN", re.sub(r"workspace w(?!1\b)[1-9A-Z0]+", "workspace wN", shown))
    moved_text = (
        f"base origin/main moved during the run (pinned at preflight as {pinned[:12]}; rewritten: now {moved[:12]}, which does not contain it); "
        f"every worker started from {pinned[:12]}, so the run's work is on a history the base no longer has: rebase it onto the new base before landing it"
    )
    assert shown == (
        "Herdr: PARTIAL\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: first=retired/accepted+integrated, second=retired/accepted+integrated\n"
        "Callbacks: run <run>; first 1 accepted (result); second 2 accepted (update, result); missing result: none\n"
        "Verification: first: no checks -> accepted; second: no checks -> accepted\n"
        "Retired: first pane w1:pN closed; first worktree <src>/acme/widgets.worktrees/widgets-feat-first removed; first workspace wN closed (by herdr when its pane moved out); "
        "second pane w1:pN closed; second worktree <src>/acme/widgets.worktrees/widgets-feat-second removed; second workspace wN closed (by herdr when its pane moved out); "
        "run worktree <home>/runs/<run>/integration removed (chore/integration-moved keeps its merges)\n"
        f"Blockers: {moved_text}\n"
    )
    header = [line for line in world.orch("status", "--run", run_id).stdout.splitlines() if line.startswith("base ")]
    assert header == [f"base        origin/main {pinned[:12]} (pinned; the base moved during the run: rewritten, now {moved[:12]})"]
    markdown = (world.orch_home / "runs" / run_id.replace(":", "_") / "report.md").read_text()
    assert f"\nBase: {moved_text}\n" in markdown
