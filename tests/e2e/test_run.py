"""`orch run PLAN` end to end on the simulator: real tmux panes, real git worktrees, scripted agents."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

PLAN = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
concurrency = 3
checkin_interval_s = 1

[[workers]]
task = "api-docs"
objective = "Document the widgets API."
deliverable = "docs/api.md committed on docs/api-guide."
branch = "docs/api-guide"
claim = ["docs/"]
verify = ["test -n \\"$(ls docs)\\""]

[[workers.answers]]
when = "page size"
answer = "50 by default, 200 at most."

[[workers]]
task = "cli-help"
objective = "Improve the CLI help text."
deliverable = "src/cli/ changes committed on feat/cli-help."
branch = "feat/cli-help"
claim = ["src/cli/"]
verify = ["ls src/cli"]

[[workers]]
task = "cli-tests"
objective = "Test the CLI help text."
deliverable = "tests/cli/ committed on feat/cli-help."
branch = "feat/cli-help"
claim = ["tests/cli/"]
verify = ["ls tests/cli"]
"""

SCENARIOS = """
[[task.api-docs]]
do = "question"
message = "Which page size should the docs show?"

[[task.api-docs]]
do = "write"
path = "docs/api.md"
content = "# API\\n\\nPage size: {answer}\\n"

[[task.api-docs]]
do = "commit"
message = "docs: widgets API"

[[task.api-docs]]
do = "verify"

[[task.api-docs]]
do = "result"

# The siblings share one checkout and `commit` stages everything: cli-tests writes only once cli-help has committed,
# so each commit holds its own worker's files and the branch always ends with two commits.
[[task.cli-tests]]
do = "update"
message = "Starting {task}: {objective_line}"

[[task.cli-tests]]
do = "run"
command = "for i in $(seq 600); do git log --format=%s | grep -q '^cli-help:' && exit 0; sleep 0.1; done; exit 1"

[[task.cli-tests]]
do = "write"
path = "{claim_file}"
content = "{task}: {objective_line}\\n"

[[task.cli-tests]]
do = "commit"
message = "{task}: {objective_line}"

[[task.cli-tests]]
do = "verify"

[[task.cli-tests]]
do = "result"
"""


@pytest.mark.live_herdr(agents=True)
def test_three_workers_end_in_pass_with_every_created_pane_and_worktree_retired(world: Any) -> None:
    world.write_scenarios(SCENARIOS)
    plan = world.write_plan(PLAN)

    done = world.orch("run", str(plan), "--json")

    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    report = outcome["report"]
    assert (outcome["finished"], report["verdict"]) == (True, "PASS")
    run_id = outcome["run_id"]
    shown = world.ids(world.orch("report", "--run", run_id).stdout.replace(str(world.src_root), "<src>").replace(run_id, "<run>"))
    # Workers are provisioned concurrently, so which one got which pane/workspace number varies.
    shown = re.sub(r"pane w1:p(?!1\b)[1-9A-Z0]+", "pane w1:pN", re.sub(r"workspace w(?!1\b)[1-9A-Z0]+", "workspace wN", shown))
    shas = {name: world.repo.git("rev-parse", "--short=7", name) for name in ("docs/api-guide", "feat/cli-help")}

    def by(task: str) -> str:  # the sibling's own commit on the shared branch, by its Orch-Task trailer
        return world.repo.git("log", "-1", "--format=%H", f"--grep=^Orch-Task: {task}$", "feat/cli-help")[:7]

    assert shown == (
        "Herdr: PASS\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: api-docs=retained/accepted, cli-help=retained/accepted, cli-tests=retained/accepted\n"
        "Callbacks: run <run>; api-docs 2 accepted (question, result); cli-help 2 accepted (update, result); "
        "cli-tests 2 accepted (update, result); missing result: none\n"
        "Verification: api-docs: `test -n \"$(ls docs)\"` exit 0 -> accepted; cli-help: `ls src/cli` exit 0 -> accepted; "
        "cli-tests: `ls tests/cli` exit 0 -> accepted\n"
        "Retired: api-docs pane w1:pN closed; api-docs worktree <src>/acme/widgets.worktrees/widgets-docs-api-guide retained "
        f"(not integrated: commit {shas['docs/api-guide']} exists only on docs/api-guide); api-docs workspace wN closed (by herdr when its pane moved out); "
        "cli-help pane w1:pN closed; cli-help worktree <src>/acme/widgets.worktrees/widgets-feat-cli-help retained "
        f"(not integrated: on feat/cli-help only, commit {by('cli-help')} by cli-help, commit {by('cli-tests')} by cli-tests); cli-help workspace wN closed (by herdr when its pane moved out); "
        "cli-tests pane w1:pN closed\n"
        "Blockers: none\n"
    )
    # The run's orch.log holds every herdr and git call, from preflight's first herdr call (its version) to the last.
    log = (world.orch_home / "runs" / run_id.replace(":", "_") / "orch.log").read_text().splitlines()
    assert [line for line in log if not re.fullmatch(r"\S+ (herdr|git) exit=(-|-?\d+) \d+\.\d{3}s \S.* \(stdout \d+ B, stderr \d+ B\)(: .*)?", line)] == []
    first_herdr = next(line for line in log if " herdr exit=" in line)
    assert first_herdr.split(" (stdout")[0].endswith(" --version")
    assert sum(" agent start " in line for line in log) == 3 and any(" git exit=0 " in line for line in log)
    docs = world.repo.git("show", "docs/api-guide:docs/api.md")
    assert docs == "# API\n\nPage size: 50 by default, 200 at most."
    # Focus never left the controller's pane, at any moment of the run (the simulator records every focus change;
    # a live herdr does not tell), and herdr holds nothing of the run any more: the controller's one tab and pane.
    if world.sim is not None:
        assert world.sim.focus_history() == [world.controller_pane]
    tabs = world.herdr("tab", "list", "--workspace", world.env["HERDR_WORKSPACE_ID"])["result"]["tabs"]
    assert [(t["tab_id"], t["label"], t["pane_count"]) for t in tabs] == [(world.env["HERDR_TAB_ID"], "widgets", 1)]


def test_a_worker_whose_setup_fails_is_not_started_and_the_run_still_finishes(world: Any) -> None:
    plan = world.write_plan(
        """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
checkin_interval_s = 1

[[workers]]
task = "cli-help"
objective = "Improve the CLI help text."
deliverable = "src/cli/ changes committed on feat/cli-help."
branch = "feat/cli-help"
claim = ["src/cli/"]
verify = ["ls src/cli"]

[[workers]]
task = "broken-setup"
objective = "Anything."
deliverable = "Anything."
branch = "feat/broken-setup"
claim = ["src/broken/"]
setup = ["echo installing; exit 3"]
"""
    )

    done = world.orch("run", str(plan))

    assert done.returncode == 10, done.stderr
    run_id = json.loads(world.orch("status", "--all", "--json").stdout)["runs"][-1]["run_id"]
    shown = world.orch("report", "--run", run_id).stdout.replace(str(world.src_root), "<src>").replace(run_id, "<run>")
    shown = re.sub(r"pane w1:p[2-9]", "pane w1:pN", re.sub(r"workspace w[2-9]", "workspace wN", shown))
    kept = "failed before its agent started; kept for inspection (`orch retire --run <run> --abandon broken-setup --reason TEXT` removes it)"
    checkout = "<src>/acme/widgets.worktrees/widgets-feat-broken-setup"
    assert shown == (
        "Herdr: PARTIAL\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: cli-help=retained/accepted, broken-setup=retained/failed\n"
        "Callbacks: run <run>; cli-help 2 accepted (update, result); broken-setup 0 accepted; missing result: broken-setup\n"
        "Verification: cli-help: `ls src/cli` exit 0 -> accepted; broken-setup: not verified\n"
        "Retired: cli-help pane w1:pN closed; cli-help worktree <src>/acme/widgets.worktrees/widgets-feat-cli-help retained "
        f"(not integrated: commit {world.repo.git('rev-parse', '--short=7', 'feat/cli-help')} exists only on feat/cli-help); "
        f"cli-help workspace wN closed (by herdr when its pane moved out); broken-setup pane w1:pN retained ({kept}); broken-setup worktree {checkout} retained ({kept}); "
        "broken-setup workspace wN closed (by herdr when its pane moved out)\n"
        f"Blockers: broken-setup failed: setup command `echo installing; exit 3` failed (exit 3) in {checkout}; "
        "the checkout and tab are kept: installing\n"
    )
    # No agent ever started there; the checkout waits for the person, who gives the task up explicitly.
    assert (world.src_root / "acme" / "widgets.worktrees" / "widgets-feat-broken-setup").is_dir()
    gone = world.orch("retire", "--run", run_id, "--abandon", "broken-setup", "--reason", "setup needs a private index")
    assert gone.returncode == 0, gone.stderr
    assert not (world.src_root / "acme" / "widgets.worktrees" / "widgets-feat-broken-setup").exists()
