"""`orch run` on the simulator, observation side (spec §5): questions, blocks, stalls, forged callbacks, missing results.

Each test drives the real CLI (`orch run`, `orch answer`, `orch resume`, `orch report`, `orch inbox list`) against
scripted agents and pins the compact report whole, with ids and paths normalised as in test_run.py. The answered
question (a plan answer reaching the worker at once) is covered by test_run.py and not repeated here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

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
    text = world.ids(text.replace(str(world.src_root), "<src>").replace(run_id, "<run>"))
    return re.sub(r"pane w1:p(?!1\b)[1-9A-Z0]+", "pane w1:pN", re.sub(r"workspace w(?!1\b)[1-9A-Z0]+", "workspace wN", text))


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


@pytest.mark.live_herdr(agents=True)
def test_unanswerable_question_stops_the_run_resumable_then_answer_and_resume_pass(world: Any, tmp_path: Path) -> None:
    # Answered, the worker goes on only once the test read `orch answer`'s line (the gate file): a result landing
    # before `orch answer` recorded the send would move it to `result` first (tests/orchestrator/test_messages.py).
    gate = tmp_path / "answered"
    world.write_scenarios(
        """
[[task.licence]]
do = "question"
message = "Which licence should the docs carry?"

[[task.licence]]
do = "run"
command = "until test -e GATE; do sleep 0.1; done"

[[task.licence]]
do = "write"
path = "docs/LICENCE.md"
content = "{answer}\\n"

[[task.licence]]
do = "commit"
message = "docs: licence"

[[task.licence]]
do = "result"
""".replace("GATE", str(gate))
    )
    answers = '\n[[workers.answers]]\nwhen = "page size"\nanswer = "50 by default."\n'
    plan = HEAD + worker("licence", claim="docs/", branch="docs/licence", extra=answers) + worker("greet")

    stopped, run_id = run(world, plan)

    assert stopped.returncode == 10, stopped.stderr
    outcome = json.loads(stopped.stdout)
    assert (outcome["finished"], outcome["stopped_at"]) == (False, "waiting for the person: licence")
    assert world.engine().ledger.get_run(run_id).status is RunStatus.INTERRUPTED
    assert notes(normalise(world, stopped.stderr, run_id), "needs answer", "waits for you") == [
        "licence: needs answer: Which licence should the docs carry?",
        "licence waits for you: Which licence should the docs carry? -> `orch answer --run <run> licence -- TEXT`, then `orch resume <run>`",
    ]
    assert report(world, run_id) == (
        "Herdr: PARTIAL\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: licence=question, greet=accepted\n"
        "Callbacks: run <run>; licence 1 accepted (question); greet 2 accepted (update, result); missing result: licence\n"
        "Verification: licence: not verified; greet: `ls src/greet/` exit 0 -> accepted\n"
        "Retired: licence pane w1:pN open (worker is question); "
        "licence worktree <src>/acme/widgets.worktrees/widgets-docs-licence open (worker is question); "
        "licence workspace wN closed (by herdr when its pane moved out); greet pane w1:pN open (worker is accepted); "
        "greet worktree <src>/acme/widgets.worktrees/widgets-feat-greet open (worker is accepted); "
        "greet workspace wN closed (by herdr when its pane moved out)\n"
        "Blockers: licence question: Which licence should the docs carry?\n"
    )

    answered = world.orch("answer", "--run", run_id, "licence", "MIT, like the code.")
    assert (answered.returncode, answered.stdout) == (0, "sent answer to licence at licence (submitted; worker working)\n"), answered.stderr
    gate.touch()
    resumed = world.orch("resume", run_id, *INTERVAL)

    assert resumed.returncode == 0, resumed.stderr
    assert report(world, run_id) == (
        "Herdr: PASS\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: licence=retained/accepted, greet=retained/accepted\n"
        "Callbacks: run <run>; licence 2 accepted (question, result); greet 2 accepted (update, result); missing result: none\n"
        "Verification: licence: `ls docs/` exit 0 -> accepted; greet: `ls src/greet/` exit 0 -> accepted\n"
        "Retired: licence pane w1:pN closed; licence worktree <src>/acme/widgets.worktrees/widgets-docs-licence retained "
        f"(not integrated: commit {short(world, 'docs/licence')} exists only on docs/licence); licence workspace wN closed (by herdr when its pane moved out); "
        "greet pane w1:pN closed; greet worktree <src>/acme/widgets.worktrees/widgets-feat-greet retained "
        f"(not integrated: commit {short(world, 'feat/greet')} exists only on feat/greet); greet workspace wN closed (by herdr when its pane moved out)\n"
        "Blockers: none\n"
    )
    assert world.repo.git("show", "docs/licence:docs/LICENCE.md") == "MIT, like the code."


def test_a_planned_answer_herdr_refuses_once_is_sent_at_the_next_check_in_and_the_run_passes(world: Any) -> None:
    if world.sim is None:
        pytest.skip("needs the simulator's fault injection")
    # Under load herdr may refuse or time out the answer's prompt: the plan still answers, at a later check-in,
    # and the run never stops "waiting for the person" for a question the plan answers.
    world.write_scenarios(
        """
[[task.pages]]
do = "run"
command = "herdr-sim fault add --command 'agent prompt' --code agent_not_ready --message 'agent pages is not an active named agent'"

[[task.pages]]
do = "question"
message = "Which page size should the docs show?"

[[task.pages]]
do = "write"
path = "docs/pages.md"
content = "{answer}\\n"

[[task.pages]]
do = "commit"
message = "docs: page size"

[[task.pages]]
do = "result"
"""
    )
    answers = '\n[[workers.answers]]\nwhen = "page size"\nanswer = "50 by default."\n'

    done, run_id = run(world, HEAD + worker("pages", claim="docs/", branch="docs/pages", extra=answers))

    assert done.returncode == 0, done.stderr
    assert notes(normalise(world, done.stderr, run_id), "send failed", "answered", "waits for you") == [
        "pages: send failed: answer to 'Which page size should the docs show?' not sent: "
        "herdr agent prompt: agent_not_ready: agent pages is not an active named agent; tried again at a later check-in",
        "pages: answered: Which page size should the docs show? -> 50 by default.",
    ]
    assert world.repo.git("show", "docs/pages:docs/pages.md") == "50 by default."
    prompts = [e for e in world.engine().ledger.list_effects(run_id, task_label="pages") if e.kind == "agent_prompt" and ":answer:" in e.key]
    assert [(e.key.split(":answer:")[1], e.status) for e in prompts] == [("1", "failed"), ("1#2", "confirmed")]


@pytest.mark.live_herdr(agents=True)
def test_blocked_worker_is_surfaced_with_its_decision_and_kept(world: Any) -> None:
    world.write_scenarios('[[task.deploy]]\ndo = "blocked"\nmessage = "Need a token for the staging API."\n')

    stopped, run_id = run(world, HEAD + worker("deploy") + worker("greet"))

    assert stopped.returncode == 10, stopped.stderr
    assert json.loads(stopped.stdout)["stopped_at"] == "waiting for the person: deploy"
    assert notes(normalise(world, stopped.stderr, run_id), "deploy: blocked:", "waits for you") == [
        "deploy: blocked: Need a token for the staging API.",
        "deploy waits for you: Need a token for the staging API. -> `orch answer --run <run> deploy -- TEXT`, then `orch resume <run>`",
    ]
    assert report(world, run_id) == (
        "Herdr: PARTIAL\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: deploy=blocked, greet=accepted\n"
        "Callbacks: run <run>; deploy 1 accepted (blocked); greet 2 accepted (update, result); missing result: deploy\n"
        "Verification: deploy: not verified; greet: `ls src/greet/` exit 0 -> accepted\n"
        "Retired: deploy pane w1:pN open (worker is blocked); "
        "deploy worktree <src>/acme/widgets.worktrees/widgets-feat-deploy open (worker is blocked); "
        "deploy workspace wN closed (by herdr when its pane moved out); greet pane w1:pN open (worker is accepted); "
        "greet worktree <src>/acme/widgets.worktrees/widgets-feat-greet open (worker is accepted); "
        "greet workspace wN closed (by herdr when its pane moved out)\n"
        "Blockers: deploy blocked: Need a token for the staging API.\n"
    )
    # Kept: not failed, not retired; its pane and its agent are still there, its turn over, waiting for the decision.
    ledger = world.engine().ledger
    deploy = ledger.get_worker(run_id, "deploy")
    assert (deploy.state, deploy.final_disposition, deploy.pending_question) == (S.BLOCKED, None, "Need a token for the staging API.")
    assert [e.to_state for e in ledger.events(run_id, task_label="deploy") if e.kind == EventKind.TRANSITION][-1] is S.BLOCKED
    agent = world.herdr("agent", "get", deploy.pane_id)["result"]["agent"]
    assert (agent["pane_id"], agent["agent_status"] in ("idle", "done")) == (deploy.pane_id, True)


def test_stalled_worker_fails_on_the_third_unchanged_check_in_while_a_printing_one_does_not(world: Any) -> None:
    # `chatty` prints a line about every half second (each `run` step shows its command and exit) for ~8 s,
    # never changing its herdr state, then commits and reports: alive by its output alone.
    printing = "".join('\n[[task.chatty]]\ndo = "run"\ncommand = "sleep 0.5"\n' for _ in range(16))
    world.write_scenarios(
        '[[task.stuck]]\ndo = "stall"\n'
        + printing
        + '\n[[task.chatty]]\ndo = "write"\npath = "{claim_file}"\ncontent = "tick\\n"\n'
        + '\n[[task.chatty]]\ndo = "commit"\nmessage = "chatty: done"\n'
        + '\n[[task.chatty]]\ndo = "result"\n'
    )

    done, run_id = run(world, HEAD + worker("stuck") + worker("chatty"))

    assert done.returncode == 10, done.stderr
    ledger = world.engine().ledger
    stuck = [e for e in ledger.events(run_id, task_label="stuck") if e.kind in (EventKind.CHECK_IN, EventKind.TRANSITION)]
    check_ins = [e.detail["unchanged_check_ins"] for e in stuck if e.kind == EventKind.CHECK_IN]
    # A baseline (0 while its screen still moves), then 1 and 2 unchanged: still working; the 3rd unchanged fails it.
    assert check_ins[-STALL_LIMIT - 1 :] == [0, 1, 2, 3] and max(check_ins[:-1]) < STALL_LIMIT
    last_check_in = max(i for i, e in enumerate(stuck) if e.kind == EventKind.CHECK_IN)
    failed = [i for i, e in enumerate(stuck) if e.kind == EventKind.TRANSITION and e.to_state is S.FAILED]
    assert failed == [last_check_in + 1]
    assert stuck[failed[0]].detail["cause"] == {"reason": "no change of state or output across 3 consecutive check-ins"}
    chatty = ledger.events(run_id, task_label="chatty")
    result_at = next(e.seq for e in chatty if e.kind == EventKind.TRANSITION and e.to_state is S.RESULT)
    working = [e.detail["unchanged_check_ins"] for e in chatty if e.kind == EventKind.CHECK_IN and e.seq < result_at]
    assert len(working) > STALL_LIMIT and max(working) < STALL_LIMIT, working
    assert report(world, run_id) == (
        "Herdr: PARTIAL\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: stuck=retired/failed, chatty=retained/accepted\n"
        "Callbacks: run <run>; stuck 0 accepted; chatty 1 accepted (result); missing result: stuck\n"
        "Verification: stuck: not verified; chatty: `ls src/chatty/` exit 0 -> accepted\n"
        # The stalled agent was still mid-turn: retire sent it a `stop` envelope, then /exit once it settled. Its
        # checkout held no work (no commit, clean), so it went too.
        "Retired: stuck pane w1:pN closed; stuck worktree <src>/acme/widgets.worktrees/widgets-feat-stuck removed; "
        "stuck workspace wN closed (by herdr when its pane moved out); chatty pane w1:pN closed; chatty worktree <src>/acme/widgets.worktrees/widgets-feat-chatty "
        f"retained (not integrated: commit {short(world, 'feat/chatty')} exists only on feat/chatty); chatty workspace wN closed (by herdr when its pane moved out)\n"
        "Blockers: stuck failed: no change of state or output across 3 consecutive check-ins\n"
    )


def test_forged_and_stale_callbacks_are_kept_aside_while_the_real_worker_is_accepted(world: Any) -> None:
    world.write_scenarios(
        """
[[task.greet]]
do = "send"
kind = "update"
message = "late news from an old run"
run = "r-stale"

[[task.greet]]
do = "send"
kind = "result"
message = "Status: done"
from = "mallory"

[[task.greet]]
do = "write"
path = "{claim_file}"
content = "hello\\n"

[[task.greet]]
do = "commit"
message = "greet: hello"

[[task.greet]]
do = "result"
"""
    )

    done, run_id = run(world, HEAD + worker("greet"))

    assert done.returncode == 0, done.stderr
    assert notes(normalise(world, done.stderr, run_id), "kept aside") == [
        'greet: kept aside: unknown_run: run "r-stale" is not the current run "<run>" nor any run the ledger knows',
        'greet: kept aside: wrong_sender: sender "mallory" is not "greet", the worker registered for task "greet"',
    ]
    assert report(world, run_id) == (
        "Herdr: PASS\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: greet=retained/accepted\n"
        "Callbacks: run <run>; greet 1 accepted (result); kept aside 2: "
        '#1 unknown_run (run "r-stale" is not the current run "<run>" nor any run the ledger knows), '
        '#2 wrong_sender (sender "mallory" is not "greet", the worker registered for task "greet"); missing result: none\n'
        "Verification: greet: `ls src/greet/` exit 0 -> accepted\n"
        "Retired: greet pane w1:pN closed; greet worktree <src>/acme/widgets.worktrees/widgets-feat-greet retained "
        f"(not integrated: commit {short(world, 'feat/greet')} exists only on feat/greet); greet workspace wN closed (by herdr when its pane moved out)\n"
        "Blockers: none\n"
    )
    # A late callback after the run finished (the worker's own callback command, replayed) is stale, never acted on.
    target = world.engine().ledger.get_worker(run_id, "greet").reply_target
    late = world.orch("inbox", "add", "--run", run_id, f"[herdr-orchestration run={run_id} task=greet from=greet kind=update reply-to={target}]\nlate")
    assert (late.returncode, normalise(world, late.stdout, run_id)) == (
        0, 'kept aside #4 (stale_run): update from greet for task greet: run "<run>" is finished\n'
    )
    listed = world.orch("inbox", "list", "--run", run_id)
    stamped = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", "<at>", normalise(world, listed.stdout, run_id))
    assert stamped == (
        "Inbox of run <run>: 4 messages\n"
        "#1 <at> kept aside (unknown_run) update task=greet from=greet [handled]\n"
        '    run "r-stale" is not the current run "<run>" nor any run the ledger knows\n'
        "#2 <at> kept aside (wrong_sender) result task=greet from=mallory [handled]\n"
        '    sender "mallory" is not "greet", the worker registered for task "greet"\n'
        "#3 <at> accepted result task=greet from=greet [handled]\n"
        "    Status: done\n"
        "#4 <at> kept aside (stale_run) update task=greet from=greet [new]\n"
        '    run "<run>" is finished\n'
    )


def test_missing_result_is_asked_for_once_then_accepted_or_surfaced(world: Any) -> None:
    # Both end their first turn without a result; `forgetful` answers the request with the default follow-up
    # (append, commit, verify, result), `silent` only says it is still thinking.
    world.write_scenarios(
        """
[[task.forgetful]]
do = "write"
path = "{claim_file}"
content = "hello\\n"

[[task.forgetful]]
do = "commit"
message = "forgetful: hello"

[[task.silent]]
do = "write"
path = "{claim_file}"
content = "hello\\n"

[[follow-up.silent]]
do = "update"
message = "still thinking"
"""
    )

    done, run_id = run(world, HEAD + worker("forgetful") + worker("silent"))

    assert done.returncode == 10, done.stderr
    ledger = world.engine().ledger
    run_row = ledger.get_run(run_id)
    for task in ("forgetful", "silent"):
        asks = [e for e in ledger.list_effects(run_id) if e.task_label == task and e.kind == "agent_prompt" and e.key != f"{task}:dispatch:1"]
        envelope = build_controller_message(
            run_id=run_id, task_label=task, controller_target=run_row.controller_target, kind="follow-up", body=ASK_FOR_RESULT
        )
        assert [(a.key, a.status.value, a.request["kind"], a.request["text"]) for a in asks] == [
            (f"{task}:ask-result:1", "confirmed", "follow-up", envelope)
        ]
    claimed = world.repo.git("show", "feat/forgetful:src/forgetful/sim-forgetful.txt")
    assert claimed == f"hello\nfollow-up: {ASK_FOR_RESULT}"
    # The two workers settle independently, so their lines interleave in either order.
    assert sorted(notes(done.stderr, "asked for result", "failed:")) == [
        "forgetful: asked for result: done without a result; asked once for it",
        "silent: asked for result: done without a result; asked once for it",
        "silent: failed: done without a result after being asked for it once; no change of state or output across 3 consecutive check-ins",
    ]
    assert report(world, run_id) == (
        "Herdr: PARTIAL\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: forgetful=retained/accepted, silent=retained/failed\n"
        "Callbacks: run <run>; forgetful 1 accepted (result); silent 1 accepted (update); missing result: silent\n"
        "Verification: forgetful: `ls src/forgetful/` exit 0 -> accepted; silent: not verified\n"
        "Retired: forgetful pane w1:pN closed; forgetful worktree <src>/acme/widgets.worktrees/widgets-feat-forgetful retained "
        f"(not integrated: 2 commits exist only on feat/forgetful ({short(world, 'feat/forgetful')} and 1 more)); "
        "forgetful workspace wN closed (by herdr when its pane moved out); silent pane w1:pN closed; "
        "silent worktree <src>/acme/widgets.worktrees/widgets-feat-silent retained (1 untracked file); silent workspace wN closed (by herdr when its pane moved out)\n"
        "Blockers: silent failed: done without a result after being asked for it once; "
        "no change of state or output across 3 consecutive check-ins\n"
    )
