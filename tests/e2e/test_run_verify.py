"""Issue 5 end to end through `orch run` / `orch resume`: verification, integration, retirement and resume, each with its exact report."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from registry import EffectStatus, EventKind, RunStatus
from herdr_sim.testing import eventually
from interrupt import interruptible

PLAN_HEAD = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
concurrency = 2
checkin_interval_s = 1
"""

INTEGRATION = """
[integration]
enabled = true
branch = "chore/integrate-widgets"
"""

GREET = """
[[workers]]
task = "greet"
objective = "Make the greeting formal."
deliverable = "src/greet/hello.txt committed on feat/greet."
branch = "feat/greet"
claim = ["src/greet/"]
verify = ["grep -q formal src/greet/hello.txt"]
"""

DOCS = """
[[workers]]
task = "docs"
objective = "Document the greeting."
deliverable = "docs/greet.md committed on docs/greet."
branch = "docs/greet"
claim = ["docs/"]
verify = ["test -f docs/greet.md"]
"""

# Writes the file its check looks for, commits, runs the checks for real and reports them.
HONEST_GREET = """
[[task.greet]]
do = "write"
path = "src/greet/hello.txt"
content = "formal hello\\n"

[[task.greet]]
do = "commit"
message = "{task}: formal greeting"

[[task.greet]]
do = "verify"

[[task.greet]]
do = "result"
"""

HONEST_DOCS = """
[[task.docs]]
do = "write"
path = "docs/greet.md"
content = "# Greeting\\n"

[[task.docs]]
do = "commit"
message = "{task}: greeting docs"

[[task.docs]]
do = "verify"

[[task.docs]]
do = "result"
"""


def herdr_log(world: Any, tmp_path: Path) -> Path:
    """Make orch reach herdr through a shim that logs every argv (one line per call) before running the simulator."""
    log = tmp_path / "herdr-calls.log"
    shim = tmp_path / "herdr-logged"
    shim.write_text(f'#!/bin/sh\nprintf "%s %s\\n" "$1" "$2" >> {log}\nexec herdr "$@"\n')
    shim.chmod(0o755)
    world.env["ORCH_HERDR"] = str(shim)
    log.touch()
    return log


def calls(log: Path, *commands: str) -> dict[str, int]:
    """How many logged herdr calls start with each command."""
    lines = log.read_text().splitlines()
    return {command: sum(1 for line in lines if line == command) for command in commands}


def report(world: Any, run_id: str) -> str:
    """`orch report` as a person reads it; paths, the run id and each worker's herdr ids normalised (<pane:task>, <ws:task>)."""
    shown: str = world.orch("report", "--run", run_id).stdout
    names: dict[str, str] = {}
    for worker in world.engine().ledger.list_workers(run_id):
        names.update({pane: f"<pane:{worker.task_label}>" for pane in worker.created_pane_ids})
        names.update({ws: f"<ws:{worker.task_label}>" for ws in worker.created_workspace_ids})
    # Provisioning is concurrent, so which worker got which number varies; ids never touch other words.
    for found, name in names.items():
        shown = re.sub(rf"(?<![\w:]){re.escape(found)}(?![\w:])", name, shown)
    shown = shown.replace(str(world.src_root), "<src>").replace(str(world.orch_home), "<home>").replace(run_id.replace(":", "_"), "<run>")
    return world.ids(shown.replace(run_id, "<run>"))


def run_plan(world: Any, plan: str, *extra: str) -> dict[str, Any]:
    """`orch run PLAN --json` with short check-ins; the parsed outcome."""
    done = world.orch("run", str(world.write_plan(plan)), "--interval", "0.3", "--json", *extra)
    assert done.stdout, done.stderr
    outcome: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == outcome["exit_code"], done.stderr
    return outcome


def short(world: Any, ref: str) -> str:
    return str(world.repo.git("rev-parse", "--short=7", ref))


LIAR = """
[[task.greet]]
do = "write"
path = "src/greet/hello.txt"
content = "hello\\n"

[[task.greet]]
do = "commit"
message = "{task}: greeting"

[[task.greet]]
do = "result"
checks = "claimed"
"""


@pytest.mark.live_herdr(agents=True)
def test_claimed_checks_that_fail_on_rerun_are_rejected(world: Any) -> None:
    world.write_scenarios(LIAR)

    outcome = run_plan(world, PLAN_HEAD + GREET)

    assert (outcome["finished"], outcome["exit_code"]) == (True, 11)
    check = "`grep -q formal src/greet/hello.txt`"
    assert report(world, outcome["run_id"]) == (
        "Herdr: FAIL\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: greet=retained/rejected\n"
        "Callbacks: run <run>; greet 1 accepted (result); missing result: none\n"
        f"Verification: greet: {check} exit 1 -> rejected (check {check} failed on re-run (exit 1); "
        f"worker reported {check} passing, but it does not pass on re-run)\n"
        "Retired: greet pane <pane:greet> closed; greet worktree <src>/acme/widgets.worktrees/widgets-feat-greet retained "
        f"(not integrated: commit {short(world, 'feat/greet')} exists only on feat/greet); greet workspace <ws:greet> closed (by herdr when its pane moved out)\n"
        "Blockers: none\n"
    )
    # The worker did claim the check passed: its result said so, and it never ran it.
    reported = world.engine().ledger.get_worker(outcome["run_id"], "greet").reported_checks
    assert json.loads(reported or "{}")["checks"] == [{"command": "grep -q formal src/greet/hello.txt", "exit_code": 0, "output": []}]


DRIVE_BY = """
[[task.docs]]
do = "write"
path = "docs/greet.md"
content = "# Greeting\\n"

[[task.docs]]
do = "write"
path = "README.md"
content = "drive-by edit\\n"
append = true

[[task.docs]]
do = "commit"
message = "{task}: greeting docs"

[[task.docs]]
do = "verify"

[[task.docs]]
do = "result"
"""


def test_an_out_of_claim_edit_pauses_integration(world: Any) -> None:
    world.write_scenarios(HONEST_GREET + DRIVE_BY)

    done = world.orch("run", str(world.write_plan(PLAN_HEAD + INTEGRATION + GREET + DOCS)), "--interval", "0.3", "--json")
    outcome = json.loads(done.stdout)

    # Nothing moves without a decision on docs: the run stops there, resumable, and merges nothing meanwhile.
    assert (outcome["finished"], outcome["stopped_at"], outcome["exit_code"]) == (False, "waiting for the person: docs", 10)
    pause = "edited outside its claim: README.md (integration paused for a decision)"
    assert report(world, outcome["run_id"]) == (
        "Herdr: PARTIAL\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: greet=accepted, docs=blocked\n"
        "Callbacks: run <run>; greet 1 accepted (result); docs 1 accepted (result); missing result: none\n"
        "Verification: greet: `grep -q formal src/greet/hello.txt` exit 0 -> accepted; "
        f"docs: `test -f docs/greet.md` exit 0 -> blocked ({pause})\n"
        "Retired: greet pane <pane:greet> open (worker is accepted); "
        "greet worktree <src>/acme/widgets.worktrees/widgets-feat-greet open (worker is accepted); greet workspace <ws:greet> closed (by herdr when its pane moved out); "
        "docs pane <pane:docs> open (worker is blocked); "
        "docs worktree <src>/acme/widgets.worktrees/widgets-docs-greet open (worker is blocked); docs workspace <ws:docs> closed (by herdr when its pane moved out)\n"
        f"Blockers: docs blocked by verification: {pause}\n"
    )
    assert outcome["report"]["verdict_reasons"][:2] == ["greet is accepted but not integrated", "docs is blocked/blocked, not accepted"]
    assert re.sub(r"^\d\d:\d\d:\d\d ", "", done.stderr.splitlines()[-1]) == (
        f"docs is blocked by verification, integration is paused: {pause} -> fix its branch and `orch verify --run {outcome['run_id']} --task docs`, "
        f"or `orch verify --run {outcome['run_id']} --supersede docs --reason TEXT`, then `orch resume {outcome['run_id']}`"
    )
    assert world.repo.git("branch", "--list", "chore/integrate-widgets") == ""
    assert world.engine().ledger.get_worker(outcome["run_id"], "greet").integrated_sha is None


@pytest.mark.live_herdr(agents=True)
def test_two_accepted_workers_are_merged_one_at_a_time_then_their_worktrees_removed(world: Any) -> None:
    world.write_scenarios(HONEST_GREET + HONEST_DOCS)

    outcome = run_plan(world, PLAN_HEAD + INTEGRATION + GREET + DOCS)

    assert (outcome["finished"], outcome["exit_code"]) == (True, 0)
    worktrees = "<src>/acme/widgets.worktrees"
    assert report(world, outcome["run_id"]) == (
        "Herdr: PASS\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: greet=retired/accepted+integrated, docs=retired/accepted+integrated\n"
        "Callbacks: run <run>; greet 1 accepted (result); docs 1 accepted (result); missing result: none\n"
        "Verification: greet: `grep -q formal src/greet/hello.txt` exit 0 -> accepted; docs: `test -f docs/greet.md` exit 0 -> accepted\n"
        f"Retired: greet pane <pane:greet> closed; greet worktree {worktrees}/widgets-feat-greet removed; greet workspace <ws:greet> closed (by herdr when its pane moved out); "
        f"docs pane <pane:docs> closed; docs worktree {worktrees}/widgets-docs-greet removed; docs workspace <ws:docs> closed (by herdr when its pane moved out); "
        # The integration worktree goes once every worker is retired: the branch keeps the merges, and the person's
        # checkout may check it out.
        "run worktree <home>/runs/<run>/integration removed (chore/integrate-widgets keeps its merges)\n"
        "Blockers: none\n"
    )
    git = world.repo.git
    heads = {branch: git("rev-parse", branch) for branch in ("feat/greet", "docs/greet")}
    # One --no-ff merge per worker, in plan order, each recorded as that worker's integrated SHA and proven by ancestry.
    merges = git("log", "--first-parent", "--format=%H %s", "chore/integrate-widgets").splitlines()
    assert [line.split(" ", 1)[1] for line in merges] == [
        f"Merge docs/greet (docs) at {heads['docs/greet'][:12]} into chore/integrate-widgets",
        f"Merge feat/greet (greet) at {heads['feat/greet'][:12]} into chore/integrate-widgets",
        "initial",
    ]
    ledger = world.engine().ledger
    integrated = {w.task_label: (w.head_sha, w.integrated_sha) for w in ledger.list_workers(outcome["run_id"])}
    assert integrated == {"greet": (heads["feat/greet"], merges[1].split()[0]), "docs": (heads["docs/greet"], merges[0].split()[0])}
    for head, into in integrated.values():
        assert subprocess.run(["git", "-C", str(world.repo.path), "merge-base", "--is-ancestor", head, str(into)]).returncode == 0
    # The checkouts are gone, their branches stay.
    assert not (world.src_root / "acme/widgets.worktrees/widgets-feat-greet").exists()
    assert not (world.src_root / "acme/widgets.worktrees/widgets-docs-greet").exists()
    assert git("branch", "--list", "feat/greet", "docs/greet").split() == ["docs/greet", "feat/greet"]
    assert git("worktree", "list", "--porcelain").count("worktree ") == 1  # the person's checkout alone
    assert not (world.src_root / "acme/widgets.worktrees").exists()  # the folder the run's checkouts made, once empty


DIRTY = HONEST_GREET + """
[[task.greet]]
do = "write"
path = "src/greet/notes.txt"
content = "unsaved thoughts\\n"
"""


def test_a_dirty_worktree_is_retained_with_its_reason(world: Any) -> None:
    world.write_scenarios(DIRTY)

    outcome = run_plan(world, PLAN_HEAD + INTEGRATION + GREET)

    # Integrated, so the one thing that keeps the checkout is the file written after the result.
    assert (outcome["finished"], outcome["exit_code"]) == (True, 0)
    checkout = "<src>/acme/widgets.worktrees/widgets-feat-greet"
    assert report(world, outcome["run_id"]) == (
        "Herdr: PASS\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: greet=retained/accepted+integrated\n"
        "Callbacks: run <run>; greet 1 accepted (result); missing result: none\n"
        "Verification: greet: `grep -q formal src/greet/hello.txt` exit 0 -> accepted\n"
        f"Retired: greet pane <pane:greet> closed; greet worktree {checkout} retained (1 untracked file); greet workspace <ws:greet> closed (by herdr when its pane moved out); "
        "run worktree <home>/runs/<run>/integration removed (chore/integrate-widgets keeps its merges)\n"
        "Blockers: none\n"
    )
    notes = world.src_root / "acme/widgets.worktrees/widgets-feat-greet/src/greet/notes.txt"
    assert notes.read_text() == "unsaved thoughts\n"


ASKS_FIRST = """
[[task.greet]]
do = "question"
message = "Formal or informal?"

[[task.greet]]
do = "write"
path = "src/greet/hello.txt"
content = "{answer}\\n"

[[task.greet]]
do = "commit"
message = "{task}: formal greeting"

[[task.greet]]
do = "verify"

[[task.greet]]
do = "result"
"""


def test_confirmation_required_stops_the_retire_ladder_without_closing_any_workspace(make_world: Any, tmp_path: Path) -> None:
    world = make_world(controller_in_repo=False)
    log = herdr_log(world, tmp_path)
    world.write_scenarios(ASKS_FIRST)
    asked = run_plan(world, PLAN_HEAD + GREET)
    assert (asked["finished"], asked["stopped_at"], asked["exit_code"]) == (False, "waiting for the person: greet", 10)
    run_id = asked["run_id"]
    ledger = world.engine().ledger
    repo_ws, pane = ledger.get_run(run_id).workspace_id, ledger.get_worker(run_id, "greet").pane_id
    assert (repo_ws, pane) == ("w2", "w2:p2")  # preflight opened the repo workspace; the worker's tab was moved into it
    # While the worker waits, the person opens another worktree from the repo workspace (which makes it the parent
    # of a worktree group) and closes the repo's first tab: the worker's pane is now that parent's last pane.
    side = world.herdr("worktree", "create", "--workspace", repo_ws, "--branch", "feat/side", "--no-focus", "--json")["result"]
    world.herdr("pane", "close", "w2:p1")
    assert world.orch("answer", "--run", run_id, "greet", "formal hello").returncode == 0

    done = world.orch("resume", run_id, "--interval", "0.3", "--json")

    assert (done.returncode, json.loads(done.stdout)["finished"]) == (0, True), done.stderr
    kept = "pane close needs confirmation (it would close a worktree group); the ladder stops here"
    assert report(world, run_id) == (
        "Herdr: PASS\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: greet=retained/accepted\n"
        "Callbacks: run <run>; greet 2 accepted (question, result); missing result: none\n"
        "Verification: greet: `grep -q formal src/greet/hello.txt` exit 0 -> accepted\n"
        f"Retired: greet pane <pane:greet> retained ({kept}); "
        "greet worktree <src>/acme/widgets.worktrees/widgets-feat-greet retained (still used by greet (pane kept)); "
        "greet workspace <ws:greet> closed (by herdr when its pane moved out); run workspace w2 retained (the run's repo workspace)\n"
        "Blockers: none\n"
    )
    # One refused pane close, never a workspace close: the group, its side worktree and the worker's shell all remain.
    assert calls(log, "pane close", "workspace close") == {"pane close": 1, "workspace close": 0}
    assert [w["workspace_id"] for w in world.herdr("workspace", "list")["result"]["workspaces"]] == ["w1", "w2", side["workspace"]["workspace_id"]]
    shell = world.herdr("pane", "get", pane)["result"]["pane"]
    assert ("agent" in shell, Path(side["worktree"]["path"]).is_dir()) == (False, True)
    assert world.herdr("pane", "get", world.controller_pane)["result"]["pane"]["focused"] is True


# Both workers are still working a moment after their packets were accepted; review (a sibling pane on greet's
# branch) commits only after greet did, since `commit` adds everything in the shared checkout. A silent sleep is
# check-ins without change (three of them fail a worker): these runs check in every second, and review's wait is
# two steps, each printing on screen.
SLOW = """
[[task.greet]]
do = "run"
command = "sleep 1"
""" + HONEST_GREET + """
[[task.review]]
do = "run"
command = "sleep 1.2"

[[task.review]]
do = "run"
command = "sleep 1.3"

[[task.review]]
do = "write"
path = "tests/greet/review.txt"
content = "reviewed\\n"

[[task.review]]
do = "commit"
message = "{task}: review notes"

[[task.review]]
do = "verify"

[[task.review]]
do = "result"
"""

REVIEW = """
[[workers]]
task = "review"
objective = "Review the greeting."
deliverable = "tests/greet/review.txt committed on feat/greet."
branch = "feat/greet"
claim = ["tests/greet/"]
verify = ["test -f tests/greet/review.txt"]
"""


def start_run(world: Any, plan: str, tmp_path: Path) -> subprocess.Popen[str]:
    """`orch run PLAN` in the background; its stdout and stderr go to files (a pipe nobody reads could stall it)."""
    out, err = (tmp_path / "run.out").open("w"), (tmp_path / "run.err").open("w")
    return subprocess.Popen(
        interruptible([sys.executable, "-m", "orchestrator", "run", str(world.write_plan(plan)), "--interval", "1", "--json"]),
        env=world.env, stdout=out, stderr=err, text=True,
    )  # fmt: skip


def wait_for(world: Any, what: str, found: Any, timeout_s: float = 60) -> str:
    """Poll the ledger (as another process would) until ``found(ledger, run_id)`` holds for the run; its id."""

    def run_found() -> str | None:
        if not (world.orch_home / "ledger.sqlite3").exists():
            return None
        ledger = world.engine().ledger
        return next((str(run.run_id) for run in ledger.list_runs() if found(ledger, run.run_id)), None)

    return eventually(run_found, lambda: f"no {what}:\n{(world.src_root.parent / 'run.err').read_text()}", timeout_s, 0.1)


def both_prompts_confirmed(ledger: Any, run_id: str) -> bool:
    return sum(1 for e in ledger.list_effects(run_id) if e.kind == "agent_prompt" and e.status is EffectStatus.CONFIRMED) == 2


def observing(ledger: Any, run_id: str) -> bool:
    return any(e.kind == EventKind.CHECK_IN for e in ledger.events(run_id))


def by(world: Any, task: str) -> str:
    """A sibling's own commit on the shared feat/greet, by its Orch-Task trailer (short)."""
    return str(world.repo.git("log", "-1", "--format=%H", f"--grep=^Orch-Task: {task}$", "feat/greet"))[:7]


def finished_once(world: Any, run_id: str, log: Path, resumed: subprocess.CompletedProcess[str]) -> None:
    """The resumed run ends PASS, and across both processes every create, start and prompt happened exactly once."""
    assert (resumed.returncode, json.loads(resumed.stdout)["finished"]) == (0, True), resumed.stderr
    assert report(world, run_id) == (
        "Herdr: PASS\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: greet=retained/accepted, review=retained/accepted\n"
        "Callbacks: run <run>; greet 1 accepted (result); review 1 accepted (result); missing result: none\n"
        "Verification: greet: `grep -q formal src/greet/hello.txt` exit 0 -> accepted; review: `test -f tests/greet/review.txt` exit 0 -> accepted\n"
        "Retired: greet pane <pane:greet> closed; greet worktree <src>/acme/widgets.worktrees/widgets-feat-greet retained "
        f"(not integrated: on feat/greet only, commit {by(world, 'greet')} by greet, commit {by(world, 'review')} by review); greet workspace <ws:greet> closed (by herdr when its pane moved out); "
        "review pane <pane:review> closed\n"
        "Blockers: none\n"
    )
    assert calls(log, "worktree create", "pane split", "agent start", "agent prompt") == {
        "worktree create": 1, "pane split": 1, "agent start": 2, "agent prompt": 2,
    }  # fmt: skip
    # The ledger agrees: one confirmed effect per create, start and prompt, and no second attempt key.
    made = [(e.kind, e.key, e.status.value) for e in world.engine().ledger.list_effects(run_id)
            if e.kind in ("worktree_create", "pane_split", "agent_start", "agent_prompt")]  # fmt: skip
    assert sorted(made) == [
        ("agent_prompt", "greet:dispatch:1", "confirmed"), ("agent_prompt", "review:dispatch:1", "confirmed"),
        ("agent_start", "greet:agent_start", "confirmed"), ("agent_start", "review:agent_start", "confirmed"),
        ("pane_split", "review:pane_split", "confirmed"), ("worktree_create", "greet:worktree_create", "confirmed"),
    ]  # fmt: skip
    assert world.engine().ledger.get_run(run_id).status is RunStatus.FINISHED


def test_a_killed_run_is_resumed_without_creating_or_prompting_anything_twice(world: Any, tmp_path: Path) -> None:
    log = herdr_log(world, tmp_path)
    world.write_scenarios(SLOW)
    proc = start_run(world, PLAN_HEAD + GREET + REVIEW, tmp_path)
    run_id = wait_for(world, "confirmed dispatch of both packets", both_prompts_confirmed)
    proc.send_signal(signal.SIGKILL)  # no handler runs: the ledger is left exactly as the process left it
    assert proc.wait(timeout=30) == -signal.SIGKILL

    resumed = world.orch("resume", run_id, "--interval", "1", "--json")

    finished_once(world, run_id, log, resumed)


def test_ctrl_c_records_where_the_run_stopped_and_resume_completes_it(world: Any, tmp_path: Path) -> None:
    log = herdr_log(world, tmp_path)
    # The run is interrupted while it observes. With SLOW's `sleep 1`, greet's result came 0.4-0.9 s after the
    # interrupt in rehearsals: a late interrupt finds the run verifying it. So here both workers' first step waits
    # for the interrupt instead (the gate file, made once the run exited), and the resume finds them free to go on.
    gate = tmp_path / "interrupted"
    wait = f"until test -e {gate}; do sleep 0.1; done"
    world.write_scenarios(SLOW.replace('command = "sleep 1"\n', f'command = "{wait}"\n').replace('command = "sleep 1.2"\n', f'command = "{wait}"\n'))
    proc = start_run(world, PLAN_HEAD + GREET + REVIEW, tmp_path)
    run_id = wait_for(world, "check-in round", observing)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    gate.touch()

    stopped = world.engine().ledger.get_run(run_id)
    assert (stopped.status, stopped.stopped_at) == (RunStatus.INTERRUPTED, "interrupted during observe")
    assert (tmp_path / "run.err").read_text().splitlines()[-2:] == [
        f"orch: run {run_id} interrupted during observe; no new work was dispatched, workers and evidence are in place",
        f"hint: continue with `orch resume {run_id} --json`",  # the run was started with --json: its hint says it the same way
    ]
    resumed = world.orch("resume", run_id, "--interval", "1", "--json")

    finished_once(world, run_id, log, resumed)
