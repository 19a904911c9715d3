"""A person's hands during a run: a worker pane closed by hand, an agent that exits outside orch, a renamed worker
tab, a worktree removed or switched under a worker. Each is reported as what it is, with what was saved."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from herdr_sim.testing import eventually

PLAN = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
concurrency = 2
checkin_interval_s = 1

[[workers]]
task = "exits"
objective = "Write the exits note."
deliverable = "src/exits/ committed on feat/exits."
branch = "feat/exits"
claim = ["src/exits/"]

[[workers]]
task = "closed"
objective = "Write the closed note."
deliverable = "src/closed/ committed on feat/closed."
branch = "feat/closed"
claim = ["src/closed/"]
"""

# `exits` commits, then its agent process dies (the pane is back at its shell); `closed` commits, says so, and
# goes on working until the test closes its pane with herdr's own command, as a person would.
SCENARIOS = """
[[task.exits]]
do = "write"
path = "{claim_file}"
content = "exits\\n"

[[task.exits]]
do = "commit"
message = "exits: note"

[[task.exits]]
do = "crash"
exit_code = 3
message = "killed"

[[task.closed]]
do = "write"
path = "{claim_file}"
content = "closed\\n"

[[task.closed]]
do = "commit"
message = "closed: note"

[[task.closed]]
do = "update"
message = "committed"

[[task.closed]]
do = "stall"
"""


def start_run(world: Any, plan: Path, tmp_path: Path) -> subprocess.Popen[str]:
    out, err = (tmp_path / "run.out").open("w"), (tmp_path / "run.err").open("w")
    return subprocess.Popen([sys.executable, "-m", "orchestrator", "run", str(plan), "--json"], env=world.env, stdout=out, stderr=err, text=True)


def test_a_pane_closed_by_hand_and_an_agent_exited_outside_orch_are_reported_as_such(world: Any, tmp_path: Path) -> None:
    world.write_scenarios(SCENARIOS)
    running = start_run(world, world.write_plan(PLAN), tmp_path)
    try:
        def committed() -> tuple[str, str] | None:
            if not (world.orch_home / "ledger.sqlite3").exists():
                return None
            ledger = world.engine().ledger
            for run in ledger.list_runs():
                if any(m.kind == "update" and m.task_label == "closed" for m in ledger.list_inbox(run.run_id)):
                    pane = ledger.get_worker(run.run_id, "closed").pane_id
                    return (run.run_id, pane) if pane else None
            return None

        run_id, pane = eventually(committed, lambda: f"no update from closed:\n{(tmp_path / 'run.err').read_text()}", 120)
        world.herdr("pane", "close", pane)
        running.wait(timeout=300)
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()
    assert running.returncode == 11, (tmp_path / "run.err").read_text()
    ledger = world.engine().ledger
    panes = {task: ledger.get_worker(run_id, task).pane_id for task in ("exits", "closed")}
    sha = {task: world.repo.git("rev-parse", "--short=7", f"feat/{task}") for task in ("exits", "closed")}

    def scrub(text: str) -> str:
        text = world.ids(text.replace(str(world.orch_home), "<home>").replace(str(world.src_root), "<src>").replace(run_id, "<run>").replace(run_id.replace(":", "_"), "<run>"))
        for task, pane in panes.items():
            text = re.sub(rf"(?<![\w:]){re.escape(pane)}\b", f"<{task}-pane>", text)
        return re.sub(r"workspace w(?!1\b)[1-9A-Z0]+", "workspace wN", re.sub(r"\d\d:\d\d:\d\d", "<time>", text))

    tree = "<src>/acme/widgets.worktrees/widgets-feat-{}"
    exited = (
        "its agent exited outside orch while it was working; pane <exits-pane> is back at a shell; "
        f"saved: 1 commit on feat/exits ({sha['exits']}), the worktree {tree.format('exits')} (kept), its terminal history in <home>/runs/<run>/transcripts/exits.txt"
    )
    closed = (
        "its pane <closed-pane> was closed outside orch (by hand or by another tool) while it was working; "
        f"saved: 1 commit on feat/closed ({sha['closed']}), the worktree {tree.format('closed')} (kept), no terminal history (the pane is gone)"
    )
    assert scrub(world.orch("report", "--run", run_id).stdout) == (
        "Herdr: FAIL\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: exits=retained/failed, closed=retained/failed\n"
        "Callbacks: run <run>; exits 0 accepted; closed 1 accepted (update); missing result: exits, closed\n"
        "Verification: exits: not verified; closed: not verified\n"
        f"Retired: exits pane <exits-pane> closed; exits worktree {tree.format('exits')} retained (not integrated: commit {sha['exits']} exists only on feat/exits); "
        f"exits workspace wN closed; closed pane <closed-pane> gone (closed outside orch, not by this run); closed worktree {tree.format('closed')} retained "
        f"(not integrated: commit {sha['closed']} exists only on feat/closed); closed workspace wN closed\n"
        f"Blockers: exits failed: {exited}; closed failed: {closed}\n"
    )
    status = scrub(world.orch("status", "--run", run_id).stdout)
    rows = [re.sub(r" {2,}", "  ", line) for line in status.splitlines() if line.startswith(("exits ", "closed "))]
    assert rows == [
        "exits  exits  codex  retained  failed  <exits-pane> (closed)  -  -",
        f"closed  closed  codex  retained  failed  <closed-pane> (closed outside orch)  update {rows[1].split('update ')[1].split()[0]} ago  -",
    ]
    # The progress said it when it happened, once, instead of three silent check-ins.
    progress = scrub((tmp_path / "run.err").read_text())
    assert [line for line in progress.splitlines() if "outside orch" in line] == [f"<time> exits: failed: {exited}", f"<time> closed: failed: {closed}"]
