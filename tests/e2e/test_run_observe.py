"""`orch run` on the simulator, observation side (spec §5): questions, blocks, stalls, forged callbacks, missing results.

Each test drives the real CLI (`orch run`, `orch answer`, `orch resume`, `orch report`, `orch inbox list`) against
scripted agents and pins the compact report whole, with ids and paths normalised as in test_run.py. The answered
question (a plan answer reaching the worker) is covered by test_run.py and not repeated here.
"""

from __future__ import annotations

import json
import re
from typing import Any

from orchestrator.observe import ASK_FOR_RESULT, STALL_LIMIT
from packets import build_controller_message
from registry import EventKind, RunStatus, WorkerState

S = WorkerState
INTERVAL = ("--interval", "0.5")

HEAD = """
organization = "acme"
repo = "widgets"
base = "main"

[defaults]
concurrency = 3
checkin_interval_s = 1
"""


def worker(task: str, *, claim: str | None = None, branch: str | None = None, extra: str = "") -> str:
    """One [[workers]] entry whose check passes once the worker wrote anything inside its claim."""
    claim = claim or f"src/{task}/"
    return f"""
[[workers]]
task = "{task}"
objective = "Work on {task}."
deliverable = "{task} committed on {branch or f'feat/{task}'}."
branch = "{branch or f'feat/{task}'}"
claim = ["{claim}"]
verify = ["ls {claim}"]
{extra}"""


def normalise(world: Any, text: str, run_id: str) -> str:
    """Paths, the run id, and the pane/workspace numbers concurrent provisioning hands out in any order."""
    text = text.replace(str(world.src_root), "<src>").replace(run_id, "<run>")
    return re.sub(r"pane w1:p[2-9]", "pane w1:pN", re.sub(r"workspace w[2-9]", "workspace wN", text))


def report(world: Any, run_id: str) -> str:
    shown = world.orch("report", "--run", run_id)
    return normalise(world, shown.stdout, run_id)


def notes(stderr: str, *markers: str) -> list[str]:
    """The progress lines carrying any of ``markers``, without their HH:MM:SS stamp."""
    lines = [re.sub(r"^\d\d:\d\d:\d\d ", "", line) for line in stderr.splitlines()]
    return [line for line in lines if any(marker in line for marker in markers)]


def run(world: Any, plan: str) -> tuple[Any, str]:
    """`orch run PLAN --json` with a short check-in interval; the process and its run id."""
    done = world.orch("run", str(world.write_plan(plan)), *INTERVAL, "--json")
    assert done.stdout, done.stderr
    return done, json.loads(done.stdout)["run_id"]


def short(world: Any, ref: str) -> str:
    return world.repo.git("rev-parse", "--short=7", ref)


def test_unanswerable_question_stops_the_run_resumable_then_answer_and_resume_pass(world: Any) -> None:
    world.write_scenarios(
        """
[[task.licence]]
do = "question"
message = "Which licence should the docs carry?"

[[task.licence]]
do = "write"
path = "docs/LICENCE.md"
content = "{answer}\\n"

[[task.licence]]
do = "commit"
message = "docs: licence"

[[task.licence]]
do = "result"
"""
    )
    answers = '\n[[workers.answers]]\nwhen = "page size"\nanswer = "50 by default."\n'
    plan = HEAD + worker("licence", claim="docs/", branch="docs/licence", extra=answers) + worker("greet")

    stopped, run_id = run(world, plan)

    assert stopped.returncode == 10, stopped.stderr
    outcome = json.loads(stopped.stdout)
    assert (outcome["finished"], outcome["stopped_at"]) == (False, "waiting for the person: licence")
    assert world.engine().ledger.get_run(run_id).status is RunStatus.INTERRUPTED
    assert notes(normalise(world, stopped.stderr, run_id), "needs answer", "waits for you") == [
        "licence: needs answer: Which licence should the docs carry? (answer with `orch answer licence TEXT`)",
        "licence waits for you: Which licence should the docs carry? -> `orch answer licence TEXT`, then `orch resume <run>`",
    ]
    assert report(world, run_id) == (
        "Herdr: PARTIAL\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: licence=question, greet=accepted\n"
        "Callbacks: run <run>; licence 1 accepted (question); greet 2 accepted (update, result); missing result: licence\n"
        "Verification: licence: not verified; greet: `ls src/greet/` exit 0 -> accepted\n"
        "Retired: licence pane w1:pN open (worker is question); "
        "licence worktree <src>/acme/widgets.worktrees/widgets-docs-licence open (worker is question); "
        "licence workspace wN open (worker is question); greet pane w1:pN open (worker is accepted); "
        "greet worktree <src>/acme/widgets.worktrees/widgets-feat-greet open (worker is accepted); "
        "greet workspace wN open (worker is accepted)\n"
        "Blockers: licence question: Which licence should the docs carry?\n"
    )

    answered = world.orch("answer", "--run", run_id, "licence", "MIT, like the code.")
    assert (answered.returncode, answered.stdout) == (0, "sent answer to licence at licence (submitted; worker working)\n")
    resumed = world.orch("resume", run_id, *INTERVAL)

    assert resumed.returncode == 0, resumed.stderr
    assert report(world, run_id) == (
        "Herdr: PASS\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: licence=retained/accepted, greet=retained/accepted\n"
        "Callbacks: run <run>; licence 2 accepted (question, result); greet 2 accepted (update, result); missing result: none\n"
        "Verification: licence: `ls docs/` exit 0 -> accepted; greet: `ls src/greet/` exit 0 -> accepted\n"
        "Retired: licence pane w1:pN closed; licence worktree <src>/acme/widgets.worktrees/widgets-docs-licence retained "
        f"(not integrated: commit {short(world, 'docs/licence')} exists only on docs/licence); licence workspace wN closed; "
        "greet pane w1:pN closed; greet worktree <src>/acme/widgets.worktrees/widgets-feat-greet retained "
        f"(not integrated: commit {short(world, 'feat/greet')} exists only on feat/greet); greet workspace wN closed\n"
        "Blockers: none\n"
    )
    assert world.repo.git("show", "docs/licence:docs/LICENCE.md") == "MIT, like the code."
