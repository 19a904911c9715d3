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

# The update reaches the inbox before the crash, and a check-in reads the inbox before it looks at the agents: the
# worker is working (not still dispatched) when its agent is found gone.
[[task.exits]]
do = "update"
message = "committed"

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
        "Callbacks: run <run>; exits 1 accepted (update); closed 1 accepted (update); missing result: exits, closed\n"
        "Verification: exits: not verified; closed: not verified\n"
        f"Retired: exits pane <exits-pane> closed; exits worktree {tree.format('exits')} retained (not integrated: commit {sha['exits']} exists only on feat/exits); "
        f"exits workspace wN closed (by herdr when its pane moved out); closed pane <closed-pane> gone (closed outside orch, not by this run); closed worktree {tree.format('closed')} retained "
        f"(not integrated: commit {sha['closed']} exists only on feat/closed); closed workspace wN closed (by herdr when its pane moved out)\n"
        f"Blockers: exits failed: {exited}; closed failed: {closed}\n"
    )
    status = scrub(world.orch("status", "--run", run_id).stdout)
    rows = [re.sub(r" {2,}", "  ", line) for line in status.splitlines() if line.startswith(("exits ", "closed "))]
    assert rows == [
        f"exits  exits  codex  retained  failed  <exits-pane> (closed)  update {rows[0].split('update ')[1].split()[0]} ago  -",
        f"closed  closed  codex  retained  failed  <closed-pane> (closed outside orch)  update {rows[1].split('update ')[1].split()[0]} ago  -",
    ]
    # The progress said it when it happened, once, instead of three silent check-ins.
    progress = scrub((tmp_path / "run.err").read_text())
    assert [line for line in progress.splitlines() if "outside orch" in line] == [f"<time> exits: failed: {exited}", f"<time> closed: failed: {closed}"]


PLAN_LAYOUT = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
concurrency = 3
checkin_interval_s = 1

[[workers]]
task = "renamed"
objective = "Write the renamed note."
deliverable = "src/renamed/ committed on feat/renamed."
branch = "feat/renamed"
claim = ["src/renamed/"]

[[workers]]
task = "removed"
objective = "Write the removed note."
deliverable = "src/removed/ committed on feat/removed."
branch = "feat/removed"
claim = ["src/removed/"]

[[workers]]
task = "switched"
objective = "Write the switched note."
deliverable = "src/switched/ committed on feat/switched."
branch = "feat/switched"
claim = ["src/switched/"]
"""

# Each commits and says so; then `renamed` waits for the test's gate before its result, the others work on.
SCENARIO_LAYOUT = """
[[task.{task}]]
do = "write"
path = "{{claim_file}}"
content = "{task}\\n"

[[task.{task}]]
do = "commit"
message = "{task}: note"

[[task.{task}]]
do = "update"
message = "committed"
"""
# `renamed` waits for the gate printing as it goes (each `run` step shows its command and exit, as test_run_observe's
# chatty worker does): a silent wait would be failed as stalled at its third check-in, before the Layout Contract's
# read-back (every LAYOUT_EVERY-th check-in) had noticed its renamed tab. At most ~30 s, over as soon as the gate is there.
GATED = "".join('\n[[task.renamed]]\ndo = "run"\ncommand = "[ -f {gate} ] || sleep 0.5"\n' for _ in range(60)) + """
[[task.renamed]]
do = "verify"

[[task.renamed]]
do = "result"
"""


def test_a_renamed_tab_is_renamed_back_and_a_removed_or_switched_worktree_is_reported_as_found(world: Any, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    tasks = ("renamed", "removed", "switched")
    scenarios = "".join(SCENARIO_LAYOUT.format(task=task) for task in tasks) + GATED.format(gate=gate)
    world.write_scenarios(scenarios + "".join(f'\n[[task.{task}]]\ndo = "stall"\n' for task in ("removed", "switched")))
    running = start_run(world, world.write_plan(PLAN_LAYOUT), tmp_path)
    try:
        def committed() -> str | None:
            if not (world.orch_home / "ledger.sqlite3").exists():
                return None
            ledger = world.engine().ledger
            for run in ledger.list_runs():
                said = {m.task_label for m in ledger.list_inbox(run.run_id) if m.kind == "update"}
                if said >= set(tasks):
                    return str(run.run_id)
            return None

        run_id = eventually(committed, lambda: f"no updates from every worker:\n{(tmp_path / 'run.err').read_text()}", 120)
        ledger = world.engine().ledger
        workers = {task: ledger.get_worker(run_id, task) for task in tasks}
        world.herdr("tab", "rename", workers["renamed"].tab_id, "my", "notes")
        subprocess.run(["git", "-C", str(world.repo.path), "worktree", "remove", "--force", workers["removed"].worktree_path], check=True, capture_output=True)
        subprocess.run(["git", "-C", workers["switched"].worktree_path, "switch", "--quiet", "-c", "fix/elsewhere"], check=True, capture_output=True)

        def mended() -> bool:
            return any(e.kind == "tab_renamed" for e in world.engine().ledger.events(run_id))

        eventually(mended, lambda: f"the renamed tab was not noticed:\n{(tmp_path / 'run.err').read_text()}", 60)
        gate.write_text("")
        running.wait(timeout=300)
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()
    assert running.returncode == 10, (tmp_path / "run.err").read_text()
    sha = {task: world.repo.git("rev-parse", "--short=7", f"feat/{task}") for task in tasks}
    tree = {task: f"<src>/acme/widgets.worktrees/widgets-feat-{task}" for task in tasks}
    removed = f"its worktree {tree['removed']} was removed outside orch while it was working; saved: 1 commit on feat/removed ({sha['removed']}) (git keeps the branch)"
    switched = (
        f"its worktree {tree['switched']} was switched to branch fix/elsewhere outside orch while it was working; saved: 1 commit on feat/switched "
        f"({sha['switched']}), the worktree {tree['switched']} (kept); commits made after the switch are on branch fix/elsewhere, not on feat/switched"
    )

    def scrub(text: str) -> str:
        text = world.ids(text.replace(str(world.orch_home), "<home>").replace(str(world.src_root), "<src>").replace(run_id, "<run>"))
        for task, worker in workers.items():
            text = re.sub(rf"(?<![\w:]){re.escape(worker.pane_id or '')}\b", f"<{task}-pane>", text)
            text = re.sub(rf"(?<![\w:]){re.escape(worker.tab_id or '')}\b", f"<{task}-tab>", text)
        return re.sub(r"workspace w(?!1\b)[1-9A-Z0]+", "workspace wN", re.sub(r"\d\d:\d\d:\d\d", "<time>", text))

    assert scrub(world.orch("report", "--run", run_id).stdout) == (
        "Herdr: PARTIAL\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: renamed=retained/accepted, removed=retired/failed, switched=retained/failed\n"
        "Callbacks: run <run>; renamed 2 accepted (update, result); removed 1 accepted (update); switched 1 accepted (update); missing result: removed, switched\n"
        "Verification: renamed: no checks -> accepted; removed: not verified; switched: not verified\n"
        f"Retired: renamed pane <renamed-pane> closed; renamed worktree {tree['renamed']} retained (not integrated: commit {sha['renamed']} exists only on feat/renamed); "
        f"renamed workspace wN closed (by herdr when its pane moved out); removed pane <removed-pane> closed; removed worktree {tree['removed']} gone (removed outside orch, not by this run; "
        f"branch feat/removed keeps its commits); removed workspace wN closed (by herdr when its pane moved out); switched pane <switched-pane> closed; switched worktree {tree['switched']} "
        "retained (switched to branch fix/elsewhere outside orch; kept for whoever switched it); switched workspace wN closed (by herdr when its pane moved out)\n"
        f"Blockers: removed failed: {removed}; switched failed: {switched}\n"
    )
    markdown = scrub((world.orch_home / "runs" / run_id.replace(":", "_") / "report.md").read_text())
    assert "\n- Layout: ` tab <renamed-tab> was renamed outside orch to 'my notes'; renamed back to 'widgets-feat-renamed' `\n" in markdown
    # One line each, when it was noticed (the test's three hands may fall into one check-in or two: any order).
    said = sorted(line for line in scrub((tmp_path / "run.err").read_text()).splitlines() if "outside orch" in line)
    assert said == sorted([
        "<time> renamed: layout: tab <renamed-tab> was renamed outside orch to \"my notes\"; renamed back to \"widgets-feat-renamed\" (Layout Contract)",
        f"<time> removed: failed: {removed}",
        f"<time> switched: failed: {switched}",
    ])
    # The tab carries its Layout Contract label again (until retire closed it), through one `tab rename` effect.
    renames = [e for e in world.engine().ledger.list_effects(run_id) if e.kind == "tab_rename" and e.key.startswith("renamed:layout:")]
    assert [(e.status.value, e.request) for e in renames] == [("confirmed", {"tab": workers["renamed"].tab_id, "label": "widgets-feat-renamed"})]
    # The switched checkout is the person's now: still there, on their branch.
    assert world.repo.git("-C", workers["switched"].worktree_path, "rev-parse", "--abbrev-ref", "HEAD") == "fix/elsewhere"
