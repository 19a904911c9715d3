"""`orch report` and `orch status`: whole outputs from real SQLite ledgers populated through the registry API."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from orchestrator.cli import cli
from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.engine import Engine
from orchestrator.errors import ExitCode
from orchestrator.herdr import HerdrCli
from orchestrator.report import (
    build_report,
    render_markdown,
    render_report,
)
from orchestrator.status import age, build_run_list, build_status, render_run_list, render_status
from registry import InboxVerdict, Ledger, RunStatus, RunVerdict, WorkerState
from registry.facts import FactKind

GOLDEN = Path(__file__).resolve().parent / "golden"
START = datetime(2026, 1, 1, 9, 0, 0, tzinfo=UTC)
BASE = "a" * 40
S = WorkerState


class Tick:
    """A ledger clock that moves one second per reading, so every row has its own time."""

    def __init__(self) -> None:
        self.at = START

    def __call__(self) -> datetime:
        self.at += timedelta(seconds=1)
        return self.at


# --- building runs through the registry API, the way the phases will ------------------------------------------


def new_run(ledger: Ledger, run_id: str) -> None:
    ledger.create_run(
        run_id, controller_target="w1:p1", session="acme", repo="widgets", repo_path="/src/acme/widgets",
        base_ref="main", base_sha=BASE, plan_path="/src/acme/widgets/plan.toml",
    )  # fmt: skip
    ledger.update_run(run_id, controller_workspace_id="w1", controller_tab_id="w1:t1", cause={"phase": "preflight"})


def provision(ledger: Ledger, run_id: str, task: str, name: str, kind: str, pane: str, worktree: bool = True) -> None:
    path = f"/src/acme/widgets-{task}"
    ledger.add_worker(run_id, task, name=name, kind=kind, objective=f"Do the {task} work.", claimed_files=(f"src/{task}/**",), branch=f"feat/{task}")
    created = {"created_worktree_paths": (path,), "worktree_path": path} if worktree else {}
    ledger.transition(run_id, task, S.PROVISIONING, S.READY, cause={"phase": "provision"}, pane_id=pane, created_pane_ids=(pane,), **created)
    ledger.transition(run_id, task, S.READY, S.DISPATCHED, cause={"phase": "dispatch"})
    ledger.transition(run_id, task, S.DISPATCHED, S.WORKING, cause={"phase": "observe", "state": "working"})


def callback(ledger: Ledger, run_id: str, task: str, name: str, kind: str, body: str = "ok", handled: bool = True) -> int:
    raw = f"[herdr-orchestration run={run_id} task={task} from={name} kind={kind} reply-to=w1:p1]\n{body}"
    message = ledger.record_inbound(
        run_id, raw, source="inbox", verdict=InboxVerdict.ACCEPTED, fingerprint=f"{task}:{kind}:{body}",
        task_label=task, kind=kind, sender=name,
    )  # fmt: skip
    if handled:
        ledger.mark_handled(message.id)
    return message.id


def verified(
    ledger: Ledger, run_id: str, task: str, name: str, checks: list[tuple[str, int | None]], disposition: S,
    reasons: Sequence[str] = (), as_fact: bool = False,
) -> None:
    """A result, then the verify phase's verdict: in its transition's cause (as orchestrator.verify does) or as a bare fact."""
    result = callback(ledger, run_id, task, name, "result", body="commit 1234567")
    ledger.transition(run_id, task, S.WORKING, S.RESULT, cause={"inbox_id": result}, last_callback_id=result, reported_checks="pytest -q: pass")
    ledger.transition(run_id, task, S.RESULT, S.VERIFYING, cause={"phase": "verify", "step": "start"})
    detail = {
        "phase": "verify", "decided_by": "evidence", "disposition": disposition.value, "reasons": list(reasons), "head_sha": "b" * 40,
        "checks": [{"command": c, "exit_code": code, "error": None if code is not None else "timed out after 600s"} for c, code in checks],
    }  # fmt: skip
    if as_fact:
        ledger.record_fact(run_id, FactKind.VERIFICATION, task_label=task, detail=detail)
        detail = {"phase": "verify", "step": "recorded"}
    ledger.transition(run_id, task, S.VERIFYING, disposition, cause=detail, head_sha="b" * 40)


def retire(ledger: Ledger, run_id: str, task: str, pane: str, worktree: bool = True) -> None:
    current = ledger.get_worker(run_id, task).state
    ledger.transition(run_id, task, current, S.RETIRING, cause={"phase": "retire"})
    close = ledger.intend(run_id, task, "pane_close", f"{task}:pane_close", {"pane_id": pane})
    ledger.confirm(close, {})
    if worktree:
        remove = ledger.intend(run_id, task, "worktree_remove", f"{task}:worktree_remove", {"workspace_id": "w9"})
        ledger.confirm(remove, {})
    ledger.transition(run_id, task, S.RETIRING, S.RETIRED, cause={"phase": "retire"})


PASS_RUN = "w1:p1-20260101T090000Z"
PARTIAL_RUN = "w1:p1-20260101T100000Z"
FAIL_RUN = "w1:p1-20260101T110000Z"


def build_pass(ledger: Ledger) -> None:
    new_run(ledger, PASS_RUN)
    for task, name, kind, pane in (("api", "widgets-api", "codex", "w1:p2"), ("docs", "widgets-docs", "claude", "w1:p3")):
        provision(ledger, PASS_RUN, task, name, kind, pane)
        callback(ledger, PASS_RUN, task, name, "update", body="halfway")
        verified(ledger, PASS_RUN, task, name, [("pytest -q", 0), ("ruff check .", 0)], S.ACCEPTED)
        retire(ledger, PASS_RUN, task, pane)
    ledger.set_run_status(PASS_RUN, RunStatus.FINISHED, stopped_at="report", verdict=RunVerdict.PASS)


def build_partial(ledger: Ledger) -> None:
    new_run(ledger, PARTIAL_RUN)
    provision(ledger, PARTIAL_RUN, "api", "widgets-api", "codex", "w1:p2")
    verified(ledger, PARTIAL_RUN, "api", "widgets-api", [("pytest -q", 0)], S.ACCEPTED)
    retire(ledger, PARTIAL_RUN, "api", "w1:p2")
    provision(ledger, PARTIAL_RUN, "docs", "widgets-docs", "claude", "w1:p3", worktree=False)
    verified(
        ledger, PARTIAL_RUN, "docs", "widgets-docs", [("make docs", 2)], S.REJECTED,
        ["check `make docs` failed on re-run (exit 2)"],
    )  # fmt: skip
    ledger.transition(PARTIAL_RUN, "docs", S.REJECTED, S.RETAINED, cause={"phase": "retire", "reason": "kept for review of the failing docs build"})
    forged = f"[herdr-orchestration run={PARTIAL_RUN} task=api from=mallory kind=result reply-to=w1:p1]\nall done"
    ledger.record_inbound(
        PARTIAL_RUN, forged, source="inbox", verdict=InboxVerdict.KEPT_ASIDE, fingerprint="forged",
        reason_code="wrong_sender", reason="sender mallory is not the worker registered for task api (widgets-api)",
        task_label="api", kind="result", sender="mallory",
    )  # fmt: skip


def build_fail(ledger: Ledger) -> None:
    new_run(ledger, FAIL_RUN)
    provision(ledger, FAIL_RUN, "api", "widgets-api", "codex", "w1:p2")
    for _ in range(4):
        ledger.record_check_in(FAIL_RUN, "api", 7)
    ledger.transition(
        FAIL_RUN, "api", S.WORKING, S.FAILED,
        cause={"phase": "observe", "reason": "no state or output change across 3 consecutive check-ins (state_change_seq 7)"},
    )  # fmt: skip
    provision(ledger, FAIL_RUN, "deploy", "widgets-deploy", "pi", "w1:p3", worktree=False)
    question = callback(ledger, FAIL_RUN, "deploy", "widgets-deploy", "blocked", body="Needs production credentials", handled=False)
    ledger.transition(
        FAIL_RUN, "deploy", S.WORKING, S.BLOCKED, cause={"inbox_id": question},
        last_callback_id=question, pending_question="Grant the staging deploy key to widgets-deploy, or drop the deploy step?",
    )  # fmt: skip
    ledger.transition(FAIL_RUN, "deploy", S.BLOCKED, S.FAILED, cause={"phase": "observe", "reason": "the block cannot be answered: no staging deploy key exists"})


def test_a_run_whose_only_worker_waits_for_the_person_is_partial_not_failed(ledger: Ledger) -> None:
    new_run(ledger, FAIL_RUN)
    provision(ledger, FAIL_RUN, "deploy", "widgets-deploy", "pi", "w1:p3", worktree=False)
    question = callback(ledger, FAIL_RUN, "deploy", "widgets-deploy", "question", body="Which region?", handled=False)
    ledger.transition(FAIL_RUN, "deploy", S.WORKING, S.QUESTION, cause={"inbox_id": question}, last_callback_id=question, pending_question="Which region?")

    report = build_report(ledger, FAIL_RUN)

    assert (report.verdict, report.verdict_reasons[0]) == (RunVerdict.PARTIAL, "no worker accepted yet")


def test_blockers_come_from_history_whatever_state_retire_left_the_worker_in(ledger: Ledger) -> None:
    new_run(ledger, PARTIAL_RUN)
    provision(ledger, PARTIAL_RUN, "api", "widgets-api", "codex", "w1:p2", worktree=False)
    verified(ledger, PARTIAL_RUN, "api", "widgets-api", [("pytest -q", 0)], S.ACCEPTED)
    # A worker's own block (it needs a token), then kept by `orch retire --keep`: the token is still not given.
    provision(ledger, PARTIAL_RUN, "deploy", "widgets-deploy", "codex", "w1:p3", worktree=False)
    blocked = callback(ledger, PARTIAL_RUN, "deploy", "widgets-deploy", "blocked", body="Need a token for the staging API.")
    ledger.transition(PARTIAL_RUN, "deploy", S.WORKING, S.BLOCKED, cause={"inbox_id": blocked}, last_callback_id=blocked, pending_question="Need a token\n for the staging API.")
    ledger.transition(PARTIAL_RUN, "deploy", S.BLOCKED, S.RETAINED, cause={"phase": "retire", "reason": "kept on request"})
    # A verification block (an edit outside the claim), retired by an older retire that did not keep decisions open.
    provision(ledger, PARTIAL_RUN, "docs", "widgets-docs", "claude", "w1:p4", worktree=False)
    verified(ledger, PARTIAL_RUN, "docs", "widgets-docs", [("make docs", 0)], S.BLOCKED, ["edited outside its claim: README.md (integration paused for a decision)"])
    retire(ledger, PARTIAL_RUN, "docs", "w1:p4", worktree=False)
    # A question answered, and a block the person stopped: neither waits any more.
    provision(ledger, PARTIAL_RUN, "cli", "widgets-cli", "pi", "w1:p5", worktree=False)
    asked = callback(ledger, PARTIAL_RUN, "cli", "widgets-cli", "question", body="Which flag name?")
    ledger.transition(PARTIAL_RUN, "cli", S.WORKING, S.QUESTION, cause={"inbox_id": asked}, pending_question="Which flag name?")
    ledger.transition(PARTIAL_RUN, "cli", S.QUESTION, S.WORKING, cause={"message": "answer"}, pending_question=None)
    provision(ledger, PARTIAL_RUN, "db", "widgets-db", "pi", "w1:p6", worktree=False)
    ledger.transition(PARTIAL_RUN, "db", S.WORKING, S.BLOCKED, cause={"inbox_id": 0}, pending_question="Drop the table?")
    ledger.record_fact(PARTIAL_RUN, "message_sent", task_label="db", detail={"kind": "stop", "target": "w1:p6", "text": "no"})
    ledger.record_fact(PARTIAL_RUN, "integration", detail={"paused_by": ["docs"], "held": [{"task": "api", "by": ["docs"], "files": ["README.md"]}], "stopped_at": None, "conflicts": []})

    report = build_report(ledger, PARTIAL_RUN, integration_required=True)

    assert render_report(report).splitlines()[-1] == (
        "Blockers: widgets-deploy blocked: Need a token for the staging API.; "
        "widgets-docs blocked by verification: edited outside its claim: README.md (integration paused for a decision); "
        "widgets-api integration paused: not merged: paused by docs (both change README.md)"
    )
    assert [(b.task, b.kind) for b in report.blockers] == [("deploy", "blocked"), ("docs", "verification_blocked"), ("api", "integration_paused")]
    assert report.verdict is RunVerdict.PARTIAL


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "orch" / "ledger.sqlite3", now=Tick()) as opened:
        yield opened


# --- the report ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "build", "run_id", "verdict"),
    [("pass", build_pass, PASS_RUN, RunVerdict.PASS), ("partial", build_partial, PARTIAL_RUN, RunVerdict.PARTIAL), ("fail", build_fail, FAIL_RUN, RunVerdict.FAIL)],
)
def test_report_goldens(ledger: Ledger, name: str, build: object, run_id: str, verdict: RunVerdict, golden: Callable[[str, str], None]) -> None:
    build(ledger)  # type: ignore[operator]
    report = build_report(ledger, run_id)
    assert report.verdict is verdict
    golden(f"report_{name}.txt", render_report(report))
    golden(f"report_{name}.md", render_markdown(report, ledger.list_workers(run_id)))
    golden(f"report_{name}.json", json.dumps(report.model_dump(mode="json"), indent=2) + "\n")


def test_every_seq_names_an_event_of_the_run(ledger: Ledger) -> None:
    build_partial(ledger)
    seqs = {e.seq for e in ledger.events(PARTIAL_RUN)}
    document = build_report(ledger, PARTIAL_RUN).model_dump(mode="json")

    def walk(value: object) -> Iterator[int]:
        if isinstance(value, dict):
            for key, inner in value.items():
                yield from (inner if key == "seqs" else walk(inner))  # type: ignore[misc]
        elif isinstance(value, list):
            for inner in value:
                yield from walk(inner)

    found = list(walk(document))
    assert found and set(found) <= seqs


def test_integration_required_keeps_accepted_but_unintegrated_work_partial(ledger: Ledger) -> None:
    build_pass(ledger)
    report = build_report(ledger, PASS_RUN, integration_required=True)
    assert (report.verdict, report.verdict_reasons) == (
        RunVerdict.PARTIAL,
        ("widgets-api is accepted but not integrated", "widgets-docs is accepted but not integrated"),
    )
    for task in ("api", "docs"):
        ledger.update_worker(PASS_RUN, task, fact="integrated", integrated_sha="c" * 40, cause={"phase": "integrate"})
    report = build_report(ledger, PASS_RUN, integration_required=True)
    assert report.verdict is RunVerdict.PASS
    assert render_report(report).splitlines()[2] == "Workers: widgets-api=retired/accepted+integrated, widgets-docs=retired/accepted+integrated"
    assert report.workers[0].seqs[-1] == ledger.events(PASS_RUN)[-2].seq


def test_open_pane_in_flight_effect_and_run_failure(ledger: Ledger) -> None:
    build_partial(ledger)
    # A retire step left in flight: its outcome is unknown until read back, so it blocks a PASS and is named.
    pending = ledger.intend(PARTIAL_RUN, None, "workspace_close", "run:workspace_close:w7", {"workspace_id": "w7"})
    ledger.update_run(PARTIAL_RUN, created_workspace_ids=("w7",))
    report = build_report(ledger, PARTIAL_RUN)
    assert render_report(report).splitlines()[5:] == [
        "Retired: widgets-api pane w1:p2 closed; widgets-api worktree /src/acme/widgets-api removed; "
        "widgets-docs pane w1:p3 retained (kept for review of the failing docs build); run workspace w7 open (no reason recorded)",
        f"Blockers: effect #{pending.id} workspace_close (run) in flight, outcome unknown",
    ]
    assert report.verdict_reasons == (
        "widgets-docs is retained/rejected, not accepted",
        "run workspace w7 is open with no reason recorded",
        f"effect #{pending.id} workspace_close (run) in flight, outcome unknown",
    )
    ledger.record_fact(PARTIAL_RUN, FactKind.RETAINED, detail={"item": "w7", "reason": "holds the controller"})
    ledger.record_fact(PARTIAL_RUN, FactKind.RUN_FAILED, detail={"reason": "git fetch origin main: Permission denied (publickey)"})
    report = build_report(ledger, PARTIAL_RUN)
    assert (report.verdict, report.verdict_reasons) == (RunVerdict.FAIL, ("run failed: git fetch origin main: Permission denied (publickey)",))
    assert report.retired[-1].status == "retained" and report.retired[-1].reason == "holds the controller"


def test_failed_close_is_a_retention_reason(ledger: Ledger) -> None:
    new_run(ledger, PASS_RUN)
    provision(ledger, PASS_RUN, "api", "widgets-api", "codex", "w1:p2", worktree=False)
    verified(ledger, PASS_RUN, "api", "widgets-api", [("pytest -q", None)], S.ACCEPTED, as_fact=True)
    ledger.transition(PASS_RUN, "api", S.ACCEPTED, S.RETIRING, cause={"phase": "retire"})
    close = ledger.intend(PASS_RUN, "api", "pane_close", "api:pane_close", {"pane_id": "w1:p2"})
    ledger.fail(close, "confirmation_required: pane belongs to a worktree group")
    report = build_report(ledger, PASS_RUN)
    lines = render_report(report).splitlines()
    assert lines[4:6] == [
        "Verification: widgets-api: `pytest -q` did not run (timed out after 600s) -> accepted",
        "Retired: widgets-api pane w1:p2 retained (pane_close failed: confirmation_required: pane belongs to a worktree group)",
    ]
    assert report.verdict is RunVerdict.PASS


def test_retire_ladder_items_and_protected_workspaces(ledger: Ledger) -> None:
    new_run(ledger, PASS_RUN)
    # preflight created the repo workspace; the retire ladder never closes it.
    ledger.update_run(PASS_RUN, workspace_id="w2", created_workspace_ids=("w2",), cause={"phase": "preflight"})
    provision(ledger, PASS_RUN, "api", "widgets-api", "codex", "w2:p2")
    ledger.update_worker(PASS_RUN, "api", created_workspace_ids=("w5",), cause={"phase": "provision"})
    verified(ledger, PASS_RUN, "api", "widgets-api", [("pytest -q", 0)], S.ACCEPTED)
    ledger.transition(PASS_RUN, "api", S.ACCEPTED, S.RETIRING, cause={"phase": "retire"})
    items = [
        {"kind": "pane", "id": "w2:p2", "action": "gone", "reason": None},
        {"kind": "worktree", "id": "/src/acme/widgets-api", "action": "kept", "reason": "dirty: 2 uncommitted files"},
        {"kind": "workspace", "id": "w5", "action": "closed", "reason": None},
    ]
    ledger.transition(PASS_RUN, "api", S.RETIRING, S.RETAINED, cause={"phase": "retire", "items": items, "reason": "dirty: 2 uncommitted files"})
    report = build_report(ledger, PASS_RUN)
    assert render_report(report).splitlines()[5] == (
        "Retired: widgets-api pane w2:p2 closed; widgets-api worktree /src/acme/widgets-api retained (dirty: 2 uncommitted files); "
        "widgets-api workspace w5 closed; run workspace w2 retained (the run's repo workspace)"
    )
    assert (report.verdict, report.verdict_reasons) == (RunVerdict.PASS, ())


def test_empty_run_fails(ledger: Ledger) -> None:
    new_run(ledger, PASS_RUN)
    report = build_report(ledger, PASS_RUN)
    assert render_report(report) == (
        "Herdr: FAIL\n"
        "Controller: acme/w1/w1:t1/w1:p1\n"
        "Workers: none\n"
        f"Callbacks: run {PASS_RUN}; missing result: none\n"
        "Verification: none\n"
        "Retired: nothing created\n"
        "Blockers: none\n"
    )
    assert report.verdict_reasons == ("the run has no workers",)


# --- status --------------------------------------------------------------------------------------------------


def test_status_goldens(ledger: Ledger, golden: Callable[[str, str], None]) -> None:
    build_fail(ledger)
    now = START + timedelta(minutes=5)
    view = build_status(ledger, FAIL_RUN, now)
    golden("status_fail.txt", render_status(view))
    golden("status_fail.json", json.dumps(view.model_dump(mode="json"), indent=2) + "\n")


def test_status_names_a_remote_workers_host_and_never_lends_it_a_controller_panes_fate(ledger: Ledger) -> None:
    # Two herdr servers both number panes from w1: the controller's w1:p2 closed outside orch says nothing of the
    # build box's w1:p2 (issue 26: every herdr id is read with its host).
    new_run(ledger, FAIL_RUN)
    provision(ledger, FAIL_RUN, "api", "widgets-api", "codex", "w1:p2")
    ledger.transition(FAIL_RUN, "api", S.WORKING, S.FAILED, cause={"phase": "resume", "lost": "pane_closed", "pane": "w1:p2"})
    ledger.add_worker(FAIL_RUN, "cli", name="widgets-cli", kind="codex", objective="Do the cli work.", host="buildbox")
    ledger.transition(FAIL_RUN, "cli", S.PROVISIONING, S.READY, cause={"phase": "provision"}, pane_id="w1:p2", created_pane_ids=("w1:p2",))

    view = build_status(ledger, FAIL_RUN, START + timedelta(minutes=5))

    assert [(w.task, w.host, w.pane, w.pane_closed) for w in view.workers] == [
        ("api", "local", "w1:p2", "closed outside orch"), ("cli", "buildbox", "w1:p2", None),
    ]
    assert render_status(view) == (
        f"run         {FAIL_RUN}\n"
        "status      active\n"
        "controller  acme/w1/w1:t1/w1:p1\n"
        "repo        widgets /src/acme/widgets\n"
        "base        main aaaaaaaaaaaa\n"
        "\n"
        "task    name         kind    state    disposition    pane                         last callback    question\n"
        "------  -----------  ------  -------  -------------  ---------------------------  ---------------  ----------\n"
        "api     widgets-api  codex   failed   failed         w1:p2 (closed outside orch)  -                -\n"
        "cli     widgets-cli  codex   ready    -              w1:p2 on buildbox            -                -\n"
    )


def test_the_report_names_the_host_of_a_worker_off_the_controller(ledger: Ledger) -> None:
    new_run(ledger, FAIL_RUN)
    provision(ledger, FAIL_RUN, "api", "widgets-api", "codex", "w1:p2")
    ledger.add_worker(FAIL_RUN, "cli", name="widgets-cli", kind="codex", objective="Do the cli work.", host="buildbox")

    report = build_report(ledger, FAIL_RUN)
    kinds = [line for line in render_markdown(report, ledger.list_workers(FAIL_RUN)).splitlines() if line.startswith("- Kind:")]
    workers = [line for line in render_report(report).splitlines() if line.startswith("Workers:")]

    assert kinds == ["- Kind: codex", "- Kind: codex; host: ` buildbox `"]  # every value an inert code span
    assert workers == ["Workers: widgets-api=working, widgets-cli=provisioning on buildbox"]
    # --json says a worker's host only when it is not the controller's, as for retired items.
    assert [w.get("host") for w in report.model_dump(mode="json")["workers"]] == [None, "buildbox"]


def test_run_list(ledger: Ledger, golden: Callable[[str, str], None]) -> None:
    build_pass(ledger)
    build_partial(ledger)
    build_fail(ledger)
    runs = build_run_list(ledger)
    golden("status_all.txt", render_run_list(runs))
    golden("status_all.json", json.dumps(runs.model_dump(mode="json"), indent=2) + "\n")


@pytest.mark.parametrize(("seconds", "text"), [(-3, "0s"), (45, "45s"), (185, "3m05s"), (7800, "2h10m"), (273600, "3d04h")])
def test_age(seconds: int, text: str) -> None:
    assert age(seconds) == text


# --- the commands --------------------------------------------------------------------------------------------


@pytest.fixture
def orch_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "orch"
    monkeypatch.setenv("ORCH_HOME", str(home))
    return home


def invoke(*args: str, now: datetime = START + timedelta(minutes=5)) -> Result:
    engine = Engine(settings=Settings.from_env(), herdr=HerdrCli("herdr-not-called"), clock=FakeClock(now), env=dict(os.environ))
    return CliRunner().invoke(cli, list(args), obj={"engine": engine})


@pytest.mark.parametrize(
    ("build", "run_id", "name", "code"),
    [(build_pass, PASS_RUN, "pass", ExitCode.OK), (build_partial, PARTIAL_RUN, "partial", ExitCode.VERDICT_PARTIAL), (build_fail, FAIL_RUN, "fail", ExitCode.VERDICT_FAIL)],
)
def test_report_command_exit_codes_and_report_md(orch_home: Path, build: object, run_id: str, name: str, code: ExitCode) -> None:
    with Ledger.open(orch_home / "ledger.sqlite3", now=Tick()) as ledger:
        build(ledger)  # type: ignore[operator]
    result = invoke("report", "--run", run_id)
    assert (result.exit_code, result.stderr) == (int(code), "")
    assert result.stdout == (GOLDEN / f"report_{name}.txt").read_text()
    written = orch_home / "runs" / run_id.replace(":", "_") / "report.md"
    assert written.read_text() == (GOLDEN / f"report_{name}.md").read_text()
    as_json = invoke("report", "--run", run_id, "--json")
    assert (as_json.exit_code, json.loads(as_json.stdout)["verdict"]) == (int(code), name.upper())
    markdown = invoke("report", "--run", run_id, "--markdown")
    assert markdown.stdout == written.read_text()


def test_report_defaults_to_the_newest_run_even_when_finished(orch_home: Path) -> None:
    with Ledger.open(orch_home / "ledger.sqlite3", now=Tick()) as ledger:
        build_pass(ledger)
    result = invoke("report")
    assert (result.exit_code, result.stdout.splitlines()[0]) == (0, "Herdr: PASS")


def test_status_command(orch_home: Path) -> None:
    # Each run on its own fresh clock, so the failing run's rows have the times its golden file was made with.
    for build in (build_pass, build_fail):
        with Ledger.open(orch_home / "ledger.sqlite3", now=Tick()) as ledger:
            build(ledger)
    result = invoke("status", "--run", FAIL_RUN)
    assert (result.exit_code, result.stdout) == (0, (GOLDEN / "status_fail.txt").read_text())
    result = invoke("status")  # the newest unfinished run
    assert (result.exit_code, result.stdout) == (0, (GOLDEN / "status_fail.txt").read_text())
    result = invoke("status", "--all", "--json")
    assert [run["run_id"] for run in json.loads(result.stdout)["runs"]] == [PASS_RUN, FAIL_RUN]


def test_status_fits_the_terminal_columns(orch_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A person's 80-column terminal (COLUMNS, as a pipe through `less` keeps it): the worker table becomes one block
    # per worker rather than lines wrapped into noise; without COLUMNS and without a terminal, whole rows to grep.
    with Ledger.open(orch_home / "ledger.sqlite3", now=Tick()) as ledger:
        build_fail(ledger)
    monkeypatch.setenv("COLUMNS", "80")
    result = invoke("status", "--run", FAIL_RUN)
    assert (result.exit_code, result.stdout) == (0, (GOLDEN / "status_fail_80_columns.txt").read_text())
    assert max(len(line) for line in (GOLDEN / "status_fail.txt").read_text().splitlines()) > 80
    listed = invoke("status", "--all")
    assert (listed.exit_code, listed.stdout) == (0, (GOLDEN / "status_all_80_columns.txt").read_text())


def test_unknown_run_is_one_line(orch_home: Path) -> None:
    result = invoke("report", "--run", "nope")
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f"orch: no run nope in {orch_home / 'ledger.sqlite3'}\nhint: `orch status --all` lists the runs\n"
    assert not (orch_home / "runs").exists()


def test_empty_ledger(orch_home: Path) -> None:
    result = invoke("status")
    assert (result.exit_code, result.stderr) == (1, f"orch: no run in {orch_home / 'ledger.sqlite3'}\nhint: start one with `orch run PLAN` (step by step: `orch preflight PLAN`)\n")
    result = invoke("status", "--all")
    assert (result.exit_code, result.stdout) == (0, "no runs\n")


def test_a_workspace_herdr_closed_when_its_pane_moved_out_is_said_so(ledger: Ledger) -> None:
    """Provision, retire and the report give it in one wording (it was "herdr closed the emptied workspace w5" in
    provision's note and a bare "workspace w5 closed" here, as if the run had closed it)."""
    new_run(ledger, PASS_RUN)
    provision(ledger, PASS_RUN, "api", "widgets-api", "codex", "w1:p2", worktree=False)
    ledger.update_worker(PASS_RUN, "api", created_workspace_ids=("w5",), cause={"phase": "provision"})
    moved = ledger.intend(PASS_RUN, "api", "pane_move", "api:pane_move:w5:p1", {"pane": "w5:p1", "from": "w5", "workspace": "w1", "label": "widgets-api"})
    ledger.confirm(moved, {"pane_id": "w1:p2", "tab_id": "w1:t2", "workspace_id": "w1", "closed_workspace_id": "w5"})
    verified(ledger, PASS_RUN, "api", "widgets-api", [("pytest -q", 0)], S.ACCEPTED)
    ledger.transition(PASS_RUN, "api", S.ACCEPTED, S.RETIRING, cause={"phase": "retire"})
    items = [{"kind": "pane", "id": "w1:p2", "action": "closed", "reason": None},
             {"kind": "workspace", "id": "w5", "action": "closed", "reason": "by herdr when its pane moved out"}]  # fmt: skip
    ledger.transition(PASS_RUN, "api", S.RETIRING, S.RETIRED, cause={"phase": "retire", "items": items})

    report = build_report(ledger, PASS_RUN)

    assert render_report(report).splitlines()[5] == "Retired: widgets-api pane w1:p2 closed; widgets-api workspace w5 closed (by herdr when its pane moved out)"
    assert (report.verdict, report.verdict_reasons) == (RunVerdict.PASS, ())
