"""The agent controller's compound calls: many envelopes in one `inbox add`, and `orch finish` (real git and SQLite)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.door import finish_run, next_steps, render_finished
from orchestrator.handover import split_envelopes
from orchestrator.errors import OrchError
from orchestrator.verify import verify_run
from registry import RunStatus, WorkerState
from verify_fleet import RUN_ID, Fleet, body

S = WorkerState


def header(task: str, kind: str) -> str:
    return f"[herdr-orchestration run={RUN_ID} task={task} from={task} kind={kind} reply-to=w1:p1]"


def test_one_stdin_is_split_at_every_header_line() -> None:
    one = f"{header('a', 'update')}\nhalfway\n"
    assert split_envelopes(one) == [one]
    raw = f"stray words\n{header('a', 'update')}\nhalfway\n\n{header('b', 'result')}\nStatus: done\nCommits: none\n\n\n"
    assert split_envelopes(raw) == [
        "stray words\n",
        f"{header('a', 'update')}\nhalfway\n",
        f"{header('b', 'result')}\nStatus: done\nCommits: none\n",
    ]


def test_inbox_add_validates_each_envelope_of_one_stdin_on_its_own(tmp_path: Path, git_repo: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = Fleet(tmp_path, git_repo)
    fleet.engine.ledger.update_worker(RUN_ID, "api-docs", reply_target="w1:p1", cause={"test": True})
    fleet.engine.ledger.update_worker(RUN_ID, "greeting", reply_target="w1:p1", cause={"test": True})
    for name, value in fleet.engine.env.items():
        monkeypatch.setenv(name, value)
    raw = f"{header('api-docs', 'update')}\nhalfway\n{header('greeting', 'question')}\nFormal or casual?\n{header('nobody', 'update')}\nhi\n"

    shown = CliRunner().invoke(cli, ["inbox", "add", "--run", RUN_ID, "-"], input=raw)

    assert (shown.exit_code, shown.stdout.splitlines()[:2]) == (0, [
        "accepted #1: update from api-docs for task api-docs (worker stays working)",
        "accepted #2: question from greeting for task greeting (worker working -> question)",
    ])
    assert shown.stdout.splitlines()[2].startswith("kept aside #3 (")
    data = json.loads(CliRunner().invoke(cli, ["inbox", "list", "--run", RUN_ID, "--json"]).stdout)
    assert [(m["task"], m["verdict"]) for m in data["messages"]] == [("api-docs", "accepted"), ("greeting", "accepted"), ("nobody", "kept_aside")]


def test_next_steps_wait_then_verify_then_finish(tmp_path: Path, git_repo: Any) -> None:
    fleet = Fleet(tmp_path, git_repo)
    assert [(s.do, s.command) for s in next_steps(fleet.engine, fleet.run)] == [("wait", None)]
    for task in ("api-docs", "greeting", "survey"):
        fleet.result(task, body([], [], []))
    assert [(s.do, s.command) for s in next_steps(fleet.engine, fleet.run)] == [("verify", f"orch verify --run {RUN_ID}")]
    verify_run(fleet.engine, fleet.run)
    assert [(s.do, s.command) for s in next_steps(fleet.engine, fleet.run)] == [("finish", f"orch finish --run {RUN_ID}")]


def _decisions_open(fleet: Fleet) -> None:
    docs = fleet.commit("api-docs", {"docs/api.md": "# API\n"})
    fleet.result("api-docs", body([docs], ["docs/api.md"], [("test -f docs/api.md", 0)]))
    verify_run(fleet.engine, fleet.run)
    ledger = fleet.engine.ledger
    ledger.transition(RUN_ID, "greeting", S.WORKING, S.BLOCKED, cause={"inbox_id": 9}, pending_question="Need a token for the staging API.")
    ledger.transition(RUN_ID, "survey", S.WORKING, S.QUESTION, cause={"inbox_id": 10}, pending_question="Which modules?")


def test_finish_keeps_what_waits_on_the_person_and_leaves_the_run_open(tmp_path: Path, git_repo: Any) -> None:
    fleet = Fleet(tmp_path, git_repo)
    _decisions_open(fleet)

    result = finish_run(fleet.engine, fleet.run)

    assert (result.finished, result.exit_code, result.report.verdict.value) == (False, 10, "PARTIAL")
    assert [(w.task, w.kind, w.text, w.commands[0]) for w in result.waiting] == [
        ("greeting", "blocked", "Need a token for the staging API.", f"orch answer --run {RUN_ID} greeting TEXT"),
        ("survey", "question", "Which modules?", f"orch answer --run {RUN_ID} survey TEXT"),
    ]
    assert [(w.task, w.outcome) for w in result.retire.workers] == [("api-docs", "retired"), ("greeting", "waiting"), ("survey", "waiting")]
    assert result.report_text.splitlines()[-1] == "Blockers: greeting blocked: Need a token for the staging API.; survey question: Which modules?"
    assert render_finished(result).endswith(
        f"Run {RUN_ID} waits for the person:\n"
        "  greeting (blocked): Need a token for the staging API.\n"
        f"    `orch answer --run {RUN_ID} greeting TEXT`\n"
        f"    `orch finish --run {RUN_ID} --abandon greeting --reason TEXT`\n"
        "  survey (question): Which modules?\n"
        f"    `orch answer --run {RUN_ID} survey TEXT`\n"
        f"    `orch finish --run {RUN_ID} --abandon survey --reason TEXT`\n"
    )
    run = fleet.engine.ledger.get_run(RUN_ID)
    assert (run.status, run.stopped_at) == (RunStatus.INTERRUPTED, "waiting for the person: greeting, survey")
    assert (fleet.engine.run_dir(RUN_ID) / "report.md").read_text().count("Run status: interrupted.") == 1


def test_finish_ends_the_run_once_nothing_waits(tmp_path: Path, git_repo: Any) -> None:
    fleet = Fleet(tmp_path, git_repo)
    _decisions_open(fleet)

    result = finish_run(fleet.engine, fleet.run, abandon={"greeting": "no token will be issued", "survey": "not needed"})

    assert (result.finished, result.waiting, result.report.run_status) == (True, (), "finished")
    run = fleet.engine.ledger.get_run(RUN_ID)
    assert (run.status, run.verdict) == (RunStatus.FINISHED, result.report.verdict)
    with pytest.raises(OrchError):
        fleet.engine.find_run(None)  # no unfinished run left


def test_finish_refuses_while_a_worker_works_or_a_result_is_unverified(tmp_path: Path, git_repo: Any) -> None:
    fleet = Fleet(tmp_path, git_repo)
    with pytest.raises(OrchError) as working:
        finish_run(fleet.engine, fleet.run)
    assert (working.value.message, working.value.hint) == (
        f"run {RUN_ID} is not done: api-docs (working), greeting (working), survey (working) still working",
        f"wait for their callbacks, or stop one: `orch send --run {RUN_ID} api-docs --kind stop TEXT`",
    )
    for task in ("api-docs", "greeting", "survey"):
        fleet.result(task, body([], [], []))
    with pytest.raises(OrchError) as unverified:
        finish_run(fleet.engine, fleet.run)
    assert (unverified.value.message, unverified.value.hint) == (
        f"run {RUN_ID} has results not verified yet: api-docs, greeting, survey",
        f"verify them first: `orch verify --run {RUN_ID}`",
    )
    assert fleet.engine.ledger.get_run(RUN_ID).status is RunStatus.ACTIVE
