"""The ledger against real SQLite files: migrations, runs, workers and CAS transitions, journal, inbox, effects."""

from __future__ import annotations

import dataclasses

import sqlite3
from collections import deque
from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise
from pathlib import Path

import pytest

from registry import (
    Clock,
    DuplicateRun,
    DuplicateWorker,
    Effect,
    EffectConflict,
    EffectNotFound,
    EffectSettled,
    EffectStatus,
    Event,
    IllegalTransition,
    InboxMessage,
    InboxVerdict,
    Ledger,
    RegistryError,
    Run,
    RunNotFound,
    RunStatus,
    RunVerdict,
    SchemaTooNew,
    StaleState,
    Worker,
    WorkerNotFound,
    WorkerState,
    make_run_id,
)
from registry.machine import TRANSITIONS
from registry.schema import MIGRATIONS

S = WorkerState
START = datetime(2026, 11, 30, 8, 0, 0, tzinfo=UTC)  # the conftest clock's first reading
RUN_ID = "w1:p1-20261130T080000Z"


def at(tick: int) -> datetime:
    """The time of the clock's tick-th reading (0-based)."""
    return START + timedelta(seconds=tick)


def new_worker(ledger: Ledger, task: str = "fix-login", **fields: object) -> Worker:
    return ledger.add_worker(RUN_ID, task, name=f"{task}-w", kind="codex", objective=f"do {task}", **fields)


def path_to(target: WorkerState, start: WorkerState = S.PROVISIONING) -> list[WorkerState]:
    """The shortest legal path of states from start (provisioning) to target (inclusive)."""
    previous: dict[WorkerState, WorkerState | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        for nxt in sorted(TRANSITIONS[state]):
            if nxt not in previous:
                previous[nxt] = state
                queue.append(nxt)
    path: list[WorkerState] = []
    node: WorkerState | None = target
    while node is not None:
        path.append(node)
        node = previous[node]
    return path[::-1]


def drive(ledger: Ledger, task: str, target: WorkerState) -> Worker:
    worker = ledger.get_worker(RUN_ID, task)
    path = path_to(target, worker.state)
    for current, new in pairwise(path):
        worker = ledger.transition(RUN_ID, task, current, new)
    return worker


# -- opening and migrations ----------------------------------------------------------------------------------


def test_open_creates_and_migrates_an_empty_file(ledger_path: Path, clock: Clock) -> None:
    with Ledger.open(ledger_path, now=clock) as ledger:
        assert ledger.schema_version == len(MIGRATIONS) == 6
    db = sqlite3.connect(ledger_path)
    names = db.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name").fetchall()
    assert names == [
        ("index", "effects_in_flight"),
        ("index", "events_by_run"),
        ("index", "inbox_accepted_once"),
        ("index", "inbox_by_run"),
        ("index", "inbox_spooled_once"),
        ("table", "effects"),
        ("table", "events"),
        ("table", "inbox"),
        ("table", "runs"),
        ("table", "workers"),
        ("trigger", "events_no_delete"),
        ("trigger", "events_no_update"),
    ]
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_reopening_keeps_data_and_does_not_migrate_again(ledger_path: Path, clock: Clock) -> None:
    with Ledger.open(ledger_path, now=clock) as ledger:
        created = ledger.create_run(RUN_ID, controller_target="w1:p1")
    with Ledger.open(ledger_path, now=clock) as ledger:
        assert ledger.schema_version == 6
        assert ledger.list_runs() == [created]


def test_connection_enforces_foreign_keys(ledger: Ledger) -> None:
    with pytest.raises(sqlite3.IntegrityError):
        ledger._db.execute("INSERT INTO events (run_id, at, kind) VALUES ('nope', 'x', 'k')")


def test_migration_4_lets_an_existing_ledger_hold_queued_and_skipped_workers(ledger_path: Path, clock: Clock) -> None:
    ledger_path.parent.mkdir(parents=True)
    old = sqlite3.connect(ledger_path, isolation_level=None)
    for script in MIGRATIONS[:3]:
        old.executescript(script)
    old.execute("PRAGMA user_version = 3")
    old.close()
    with Ledger.open(ledger_path, now=clock) as ledger:
        assert ledger.schema_version == 6
        ledger.create_run(RUN_ID, controller_target="w1:p1")
        ledger.add_worker(RUN_ID, "a", name="a", kind="codex", objective="x", initial=WorkerState.QUEUED)
        skipped = ledger.transition(RUN_ID, "a", WorkerState.QUEUED, WorkerState.SKIPPED, cause={"after": "b"})
        assert skipped.state is WorkerState.SKIPPED
    assert sqlite3.connect(ledger_path).execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_migration_5_puts_every_earlier_worker_on_the_controller_and_a_new_one_where_registered(
    ledger_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    import registry.core

    with monkeypatch.context() as before:
        before.setattr(registry.core, "MIGRATIONS", MIGRATIONS[:4])
        with Ledger.open(ledger_path, now=clock) as ledger:
            ledger.create_run(RUN_ID, controller_target="w1:p1")
            ledger._db.execute(
                "INSERT INTO workers (run_id, task_label, name, kind, state, objective, created_at, updated_at) "
                "VALUES (?, 'here', 'here', 'codex', 'queued', 'x', '2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00')",
                (RUN_ID,),
            )
    with Ledger.open(ledger_path, now=clock) as ledger:
        there = ledger.add_worker(RUN_ID, "there", name="there", kind="codex", objective="x", host="buildbox")
        assert [(w.task_label, w.host) for w in ledger.list_workers(RUN_ID)] == [("here", "local"), ("there", "buildbox")]
        assert there.host == "buildbox"
        assert [e.detail["changes"] for e in ledger.events(RUN_ID, task_label="there")] == [{"name": "there", "kind": "codex", "host": "buildbox"}]
        with pytest.raises(RegistryError, match="worker fields not settable here: host"):
            ledger.update_worker(RUN_ID, "there", host="local")


def test_migration_6_keeps_a_twin_spool_delivery_and_records_each_delivery_once_after(
    ledger_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before migration 6 only the run's driver lock kept two collections of one spool entry apart: a file may hold a
    # twin. The migration keeps both rows (nothing that was recorded is deleted) and marks the later one's source.
    import registry.core

    source = "spool:box:00000000000000000001-7-deadbeef"
    with monkeypatch.context() as before:
        before.setattr(registry.core, "MIGRATIONS", MIGRATIONS[:5])
        with Ledger.open(ledger_path, now=clock) as ledger:
            ledger.create_run(RUN_ID, controller_target="w1:p1")
            for verdict in ("accepted", "kept_aside", "kept_aside"):  # as that release's code recorded them
                ledger._db.execute(
                    "INSERT INTO inbox (run_id, received_at, source, raw, verdict, fingerprint) VALUES (?, '2026-01-01T00:00:00.000000+00:00', ?, 'm', ?, 'f')",
                    (RUN_ID, source, verdict),
                )
            ledger._db.execute("INSERT INTO inbox (run_id, received_at, source, raw, verdict, fingerprint) VALUES (?, '2026-01-01T00:00:00.000000+00:00', 'cli', 'm', 'kept_aside', 'f')", (RUN_ID,))
    with Ledger.open(ledger_path, now=clock) as ledger:
        assert ledger.schema_version == 6
        assert [(m.id, m.source, m.verdict) for m in ledger.list_inbox(RUN_ID)] == [
            (1, source, InboxVerdict.ACCEPTED),
            (2, f"{source} (again: #2)", InboxVerdict.KEPT_ASIDE),
            (3, f"{source} (again: #3)", InboxVerdict.KEPT_ASIDE),
            (4, "cli", InboxVerdict.KEPT_ASIDE),
        ]
        first = ledger.get_inbound(1)
        journal = len(ledger.events(RUN_ID))
        again = ledger.record_inbound(RUN_ID, "m", source=source, verdict=InboxVerdict.KEPT_ASIDE, fingerprint="f")
        assert again == first  # already recorded: its first row, nothing written
        assert (len(ledger.list_inbox(RUN_ID)), len(ledger.events(RUN_ID))) == (4, journal)
        with pytest.raises(sqlite3.IntegrityError):  # the index itself, under any code that skips the check
            ledger._db.execute(
                "INSERT INTO inbox (run_id, received_at, source, raw, verdict, fingerprint) VALUES (?, 'x', ?, 'm', 'kept_aside', 'g')",
                (RUN_ID, source),
            )


def test_a_spool_delivery_is_recorded_once_and_other_sources_as_often_as_they_come(ledger: Ledger) -> None:
    ledger.create_run(RUN_ID, controller_target="w1:p1")
    other = ledger.create_run("w1:p9-20261130T090000Z", controller_target="w1:p9")
    source = "spool:box:00000000000000000002-7-deadbeef"
    first = ledger.rows.record_inbound(RUN_ID, "m", source=source, verdict=InboxVerdict.ACCEPTED, fingerprint="f")
    again = ledger.rows.record_inbound(RUN_ID, "m", source=source, verdict=InboxVerdict.ACCEPTED, fingerprint="f")
    assert (first["already_recorded"], again["already_recorded"], again["id"]) == (False, True, first["id"])
    # Per run: another run's spool may hold an entry of the same id; and a plain source names no delivery.
    elsewhere = ledger.rows.record_inbound(other.run_id, "m", source=source, verdict=InboxVerdict.ACCEPTED, fingerprint="f")
    plain = [ledger.rows.record_inbound(RUN_ID, "m", source="cli", verdict=InboxVerdict.ACCEPTED, fingerprint="f") for _ in range(2)]
    assert (elsewhere["already_recorded"], [p["already_recorded"] for p in plain]) == (False, [False, False])
    assert [(m.source, m.verdict) for m in ledger.list_inbox(RUN_ID)] == [
        (source, InboxVerdict.ACCEPTED), ("cli", InboxVerdict.KEPT_ASIDE), ("cli", InboxVerdict.KEPT_ASIDE),
    ]  # fmt: skip


def test_migration_3_keeps_older_runs_resumable_unless_their_inbox_shows_an_agent_controller(ledger_path: Path, clock: Clock) -> None:
    # A file as schema 2 wrote it (its DDL is MIGRATIONS[:2], released and never edited), with two runs the release
    # before controller_kind made: one `orch run` interrupted (its workers called `orch inbox add`, source cli), one
    # an agent controller drove (it handed callbacks over with --source prompt). Issue 21: both became 'agent'.
    ledger_path.parent.mkdir(parents=True)
    old = sqlite3.connect(ledger_path, isolation_level=None)
    for script in MIGRATIONS[:2]:
        old.executescript(script)
    old.execute("PRAGMA user_version = 2")
    for run_id, status, source in (("w1:p1-20261101T080000Z", "interrupted", "cli"), ("w1:p7-20261101T090000Z", "active", "prompt")):
        old.execute(
            "INSERT INTO runs (run_id, controller_target, status, stopped_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
            (run_id, run_id.split("-")[0], status, "interrupted during observe" if status == "interrupted" else None,
             "2026-11-01T08:00:00.000000+00:00", "2026-11-01T08:00:00.000000+00:00"),
        )  # fmt: skip
        old.execute(
            "INSERT INTO inbox (run_id, received_at, source, raw, verdict, fingerprint) VALUES (?, ?, ?, ?, 'accepted', ?)",
            (run_id, "2026-11-01T08:05:00.000000+00:00", source, "[herdr-orchestration …]", f"fp-{run_id}"),
        )
    old.execute("INSERT INTO runs (run_id, controller_target, status, created_at, updated_at) VALUES ('w1:p8-20261101T100000Z', 'w1:p8', 'active', '2026-11-01T10:00:00.000000+00:00', '2026-11-01T10:00:00.000000+00:00')")
    old.close()

    with Ledger.open(ledger_path, now=clock) as ledger:
        kinds = {run.run_id: run.controller_kind for run in ledger.list_runs()}
        made = ledger.create_run(RUN_ID, controller_target="w1:p1")  # a new run still defaults to agent unless told

    assert kinds == {"w1:p1-20261101T080000Z": "run", "w1:p7-20261101T090000Z": "agent", "w1:p8-20261101T100000Z": "run"}
    assert made.controller_kind == "agent"


def test_a_newer_ledger_is_refused(ledger_path: Path, clock: Clock) -> None:
    ledger_path.parent.mkdir(parents=True)
    sqlite3.connect(ledger_path).execute("PRAGMA user_version = 7").connection.close()
    with pytest.raises(SchemaTooNew) as raised:
        Ledger.open(ledger_path, now=clock)
    assert str(raised.value) == "ledger schema version 7 is newer than this orch understands (6)"


def test_a_naive_clock_is_refused(ledger_path: Path) -> None:
    with Ledger.open(ledger_path, now=lambda: datetime(2026, 1, 1)) as ledger:
        with pytest.raises(RegistryError) as raised:
            ledger.create_run(RUN_ID, controller_target="w1:p1")
        assert str(raised.value) == "the ledger clock gave a naive datetime; the ledger needs timezone-aware UTC"
        assert ledger.list_runs() == []


# -- runs ----------------------------------------------------------------------------------------------------


def test_run_id_is_pane_then_utc_stamp() -> None:
    assert make_run_id("w1:p1", datetime(2026, 11, 30, 8, 0, 0, tzinfo=UTC)) == "w1:p1-20261130T080000Z"
    paris = timezone(timedelta(hours=1))
    assert make_run_id("w3:p12", datetime(2026, 11, 30, 9, 30, 5, tzinfo=paris)) == "w3:p12-20261130T083005Z"


@pytest.mark.parametrize(
    ("pane", "when", "message"),
    [
        ("w1:p1", datetime(2026, 1, 1), "timestamp must be timezone-aware"),
        ("", START, "controller pane id must be non-empty without whitespace, got ''"),
        ("w1 p1", START, "controller pane id must be non-empty without whitespace, got 'w1 p1'"),
    ],
)
def test_run_id_refuses_bad_input(pane: str, when: datetime, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        make_run_id(pane, when)
    assert str(raised.value) == message


def test_create_and_read_a_run(ledger: Ledger, tmp_path: Path) -> None:
    created = ledger.create_run(
        RUN_ID,
        controller_target="w1:p1",
        session="acme",
        organization="acme",
        repo="shop",
        repo_path=tmp_path / "shop",
        base_ref="main",
        base_sha="a" * 40,
        plan_path=tmp_path / "plan.toml",
    )
    assert created == Run(
        run_id=RUN_ID,
        controller_target="w1:p1",
        session="acme",
        organization="acme",
        repo="shop",
        repo_path=str(tmp_path / "shop"),
        base_ref="main",
        base_sha="a" * 40,
        plan_path=str(tmp_path / "plan.toml"),
        status=RunStatus.ACTIVE,
        stopped_at=None,
        verdict=None,
        created_at=at(0),
        updated_at=at(0),
    )
    assert ledger.get_run(RUN_ID) == created
    assert ledger.events(RUN_ID) == [
        Event(seq=1, run_id=RUN_ID, task_label=None, at=at(0), kind="run_created", from_state=None, to_state=None, detail={"controller_target": "w1:p1"})
    ]


def test_duplicate_and_missing_runs(ledger: Ledger, run: Run) -> None:
    with pytest.raises(DuplicateRun) as duplicate:
        ledger.create_run(RUN_ID, controller_target="w1:p1")
    assert str(duplicate.value) == f"run {RUN_ID} already exists in the ledger"
    with pytest.raises(RunNotFound) as missing:
        ledger.get_run("w9:p9-20260101T000000Z")
    assert str(missing.value) == "no run w9:p9-20260101T000000Z in the ledger"


def test_run_interrupts_resumes_and_finishes_with_a_verdict(ledger: Ledger, run: Run) -> None:
    stopped = ledger.set_run_status(RUN_ID, RunStatus.INTERRUPTED, stopped_at="dispatch")
    assert (stopped.status, stopped.stopped_at, stopped.updated_at) == (RunStatus.INTERRUPTED, "dispatch", at(1))
    assert ledger.list_runs(status=RunStatus.INTERRUPTED) == [stopped]
    ledger.set_run_status(RUN_ID, RunStatus.ACTIVE)
    done = ledger.set_run_status(RUN_ID, RunStatus.FINISHED, stopped_at="report", verdict=RunVerdict.PARTIAL)
    assert (done.status, done.stopped_at, done.verdict) == (RunStatus.FINISHED, "report", RunVerdict.PARTIAL)
    assert [(e.kind, e.detail) for e in ledger.events(RUN_ID)][1:] == [
        ("run_status", {"from": "active", "to": "interrupted", "stopped_at": "dispatch", "verdict": None}),
        ("run_status", {"from": "interrupted", "to": "active", "stopped_at": None, "verdict": None}),
        ("run_status", {"from": "active", "to": "finished", "stopped_at": "report", "verdict": "PARTIAL"}),
    ]
    with pytest.raises(RegistryError) as raised:
        ledger.set_run_status(RUN_ID, RunStatus.ACTIVE)
    assert str(raised.value) == f"run {RUN_ID} is finished; it cannot become active"


def test_verdict_goes_with_finished_only(ledger: Ledger, run: Run) -> None:
    for status, verdict in ((RunStatus.FINISHED, None), (RunStatus.INTERRUPTED, RunVerdict.PASS)):
        with pytest.raises(RegistryError) as raised:
            ledger.set_run_status(RUN_ID, status, verdict=verdict)
        assert str(raised.value) == "a verdict is given exactly when a run is finished"
    assert ledger.get_run(RUN_ID) == run


# -- workers -------------------------------------------------------------------------------------------------


def test_add_worker_starts_in_provisioning_and_is_journalled(ledger: Ledger, run: Run) -> None:
    worker = new_worker(ledger, claimed_files=["src/login.py"], branch="fix/login", base_sha="b" * 40)
    assert worker == Worker(
        run_id=RUN_ID, task_label="fix-login", name="fix-login-w", kind="codex", state=S.PROVISIONING,
        objective="do fix-login", claimed_files=("src/login.py",), pane_id=None, reply_target=None,
        last_callback_id=None, pending_question=None, reported_checks=None, controller_verification=None,
        final_disposition=None, branch="fix/login", worktree_path=None, tab_label=None, workspace_id=None,
        tab_id=None, created_workspace_ids=(), created_pane_ids=(), created_worktree_paths=(), base_sha="b" * 40,
        head_sha=None, integrated_sha=None, last_state_change_seq=None, unchanged_check_ins=0,
        created_at=at(1), updated_at=at(1),
    )  # fmt: skip
    assert ledger.get_worker(RUN_ID, "fix-login") == worker
    assert ledger.find_worker(RUN_ID, name="fix-login-w") == worker
    assert ledger.find_worker(RUN_ID, name="someone") is None
    assert ledger.events(RUN_ID, task_label="fix-login") == [
        Event(
            seq=2, run_id=RUN_ID, task_label="fix-login", at=at(1), kind="worker_added", from_state=None,
            to_state=S.PROVISIONING,
            detail={"cause": {}, "changes": {"name": "fix-login-w", "kind": "codex", "base_sha": "b" * 40, "branch": "fix/login", "claimed_files": ["src/login.py"]}},
        )
    ]  # fmt: skip


def test_task_label_and_name_are_unique_per_run(ledger: Ledger, run: Run) -> None:
    new_worker(ledger)
    with pytest.raises(DuplicateWorker) as same_task:
        ledger.add_worker(RUN_ID, "fix-login", name="other", kind="codex", objective="x")
    assert str(same_task.value) == f"run {RUN_ID} already has a worker with task fix-login"
    with pytest.raises(DuplicateWorker) as same_name:
        ledger.add_worker(RUN_ID, "other-task", name="fix-login-w", kind="codex", objective="x")
    assert str(same_name.value) == f"run {RUN_ID} already has a worker with name fix-login-w"
    other_run = ledger.create_run("w1:p1-20261130T090000Z", controller_target="w1:p1")
    assert new_worker_in(ledger, other_run.run_id).task_label == "fix-login"


def new_worker_in(ledger: Ledger, run_id: str) -> Worker:
    return ledger.add_worker(run_id, "fix-login", name="fix-login-w", kind="codex", objective="x")


def test_worker_lookups_name_what_is_missing(ledger: Ledger, run: Run) -> None:
    with pytest.raises(WorkerNotFound) as raised:
        ledger.get_worker(RUN_ID, "ghost")
    assert str(raised.value) == f"no worker ghost in run {RUN_ID}"
    with pytest.raises(RunNotFound):
        ledger.get_worker("w9:p9-20260101T000000Z", "ghost")


def test_bad_worker_fields_are_one_line_errors_and_change_nothing(ledger: Ledger, run: Run) -> None:
    with pytest.raises(RegistryError) as unknown:
        new_worker(ledger, state="working", colour="red")
    assert str(unknown.value) == "worker fields not settable here: colour, state"
    with pytest.raises(RegistryError) as invalid:
        new_worker(ledger, claimed_files="src/login.py", unchanged_check_ins=3)
    assert str(invalid.value) == "worker fields not settable here: unchanged_check_ins"
    with pytest.raises(RegistryError) as typed:
        new_worker(ledger, claimed_files=[1, 2], pane_id=["w1:p2"])
    assert str(typed.value) == "invalid worker: claimed_files.0: must be str, not int; pane_id: must be str | None, not list"
    assert ledger.list_workers(RUN_ID) == []
    assert [e.kind for e in ledger.events(RUN_ID)] == ["run_created"]


def test_list_workers_filters_by_state(ledger: Ledger, run: Run) -> None:
    a, b, c = (new_worker(ledger, task) for task in ("task-a", "task-b", "task-c"))
    ready = ledger.transition(RUN_ID, "task-b", S.PROVISIONING, S.READY)
    assert ledger.list_workers(RUN_ID) == [a, ready, c]
    assert ledger.list_workers(RUN_ID, states=[S.PROVISIONING]) == [a, c]
    assert ledger.list_workers(RUN_ID, states=[]) == []


# -- transitions ---------------------------------------------------------------------------------------------


def test_transition_is_compare_and_set_with_its_journal_row(ledger: Ledger, run: Run) -> None:
    new_worker(ledger)
    moved = ledger.transition(
        RUN_ID, "fix-login", S.PROVISIONING, S.READY, cause={"agent_status": "idle"}, pane_id="w1:p2", created_pane_ids=["w1:p2"]
    )
    assert (moved.state, moved.pane_id, moved.created_pane_ids, moved.updated_at) == (S.READY, "w1:p2", ("w1:p2",), at(2))
    assert ledger.get_worker(RUN_ID, "fix-login") == moved
    assert ledger.events(RUN_ID, after_seq=2) == [
        Event(
            seq=3, run_id=RUN_ID, task_label="fix-login", at=at(2), kind="transition", from_state=S.PROVISIONING,
            to_state=S.READY,
            detail={"cause": {"agent_status": "idle"}, "changes": {"created_pane_ids": ["w1:p2"], "pane_id": "w1:p2"}},
        )
    ]  # fmt: skip


def test_stale_expected_state_raises_naming_the_actual_one_and_writes_nothing(ledger: Ledger, run: Run) -> None:
    new_worker(ledger)
    ledger.transition(RUN_ID, "fix-login", S.PROVISIONING, S.READY)
    before = ledger.events(RUN_ID)
    with pytest.raises(StaleState) as raised:
        ledger.transition(RUN_ID, "fix-login", S.PROVISIONING, S.FAILED, pane_id="w1:p9")
    assert str(raised.value) == f"worker fix-login of run {RUN_ID} is ready, not provisioning"
    assert (raised.value.expected, raised.value.actual) == ("provisioning", "ready")
    assert ledger.events(RUN_ID) == before
    assert ledger.get_worker(RUN_ID, "fix-login").pane_id is None


def test_illegal_transition_is_refused_before_touching_the_ledger(ledger: Ledger, run: Run) -> None:
    new_worker(ledger)
    before = ledger.events(RUN_ID)
    with pytest.raises(IllegalTransition):
        ledger.transition(RUN_ID, "fix-login", S.PROVISIONING, S.ACCEPTED)
    with pytest.raises(IllegalTransition):
        # The table is checked first: even a worker that does not exist gets the table's answer.
        ledger.transition(RUN_ID, "ghost", S.RETIRED, S.RETIRING)
    assert ledger.events(RUN_ID) == before


def test_transition_of_unknown_worker(ledger: Ledger, run: Run) -> None:
    with pytest.raises(WorkerNotFound):
        ledger.transition(RUN_ID, "ghost", S.PROVISIONING, S.READY)


def test_invalid_change_rolls_back_the_whole_transition(ledger: Ledger, run: Run) -> None:
    new_worker(ledger)
    before = ledger.events(RUN_ID)
    with pytest.raises(RegistryError) as raised:
        ledger.transition(RUN_ID, "fix-login", S.PROVISIONING, S.READY, last_callback_id="not a number")
    assert str(raised.value) == "invalid worker: last_callback_id: must be int | None, not str"
    assert ledger.get_worker(RUN_ID, "fix-login").state is S.PROVISIONING
    assert ledger.events(RUN_ID) == before


@pytest.mark.parametrize("source", list(WorkerState), ids=str)
def test_every_pair_through_the_store(ledger: Ledger, run: Run, source: WorkerState) -> None:
    for target in WorkerState:
        task = f"{source}-to-{target}"
        new_worker(ledger, task, initial=S.QUEUED)
        drive(ledger, task, source)
        seq = ledger.events(RUN_ID)[-1].seq
        if target in TRANSITIONS[source]:
            moved = ledger.transition(RUN_ID, task, source, target, cause={"test": True})
            assert ledger.get_worker(RUN_ID, task) == moved
            assert moved.state is target
            assert [(e.kind, e.from_state, e.to_state, e.detail) for e in ledger.events(RUN_ID, after_seq=seq)] == [
                ("transition", source, target, {"cause": {"test": True}, "changes": {}})
            ]
        else:
            with pytest.raises(IllegalTransition):
                ledger.transition(RUN_ID, task, source, target)
            assert ledger.get_worker(RUN_ID, task).state is source
            assert ledger.events(RUN_ID, after_seq=seq) == []


def test_disposition_is_recorded_by_verdicts_and_cleared_by_follow_ups(ledger: Ledger, run: Run) -> None:
    new_worker(ledger)
    drive(ledger, "fix-login", S.VERIFYING)
    rejected = ledger.transition(RUN_ID, "fix-login", S.VERIFYING, S.REJECTED, controller_verification="tests fail")
    assert (rejected.final_disposition, rejected.controller_verification) == (S.REJECTED, "tests fail")
    again = ledger.transition(RUN_ID, "fix-login", S.REJECTED, S.DISPATCHED, cause={"follow_up": "fix tests"})
    assert again.final_disposition is None
    for current, new in ((S.DISPATCHED, S.RESULT), (S.RESULT, S.VERIFYING), (S.VERIFYING, S.ACCEPTED), (S.ACCEPTED, S.RETIRING), (S.RETIRING, S.RETIRED)):
        done = ledger.transition(RUN_ID, "fix-login", current, new)
    assert (done.state, done.final_disposition) == (S.RETIRED, S.ACCEPTED)


def test_update_worker_records_a_named_fact(ledger: Ledger, run: Run) -> None:
    new_worker(ledger)
    updated = ledger.update_worker(RUN_ID, "fix-login", fact="integrated", cause={"branch": "orch/integration"}, integrated_sha="c" * 40)
    assert (updated.integrated_sha, updated.state, updated.updated_at) == ("c" * 40, S.PROVISIONING, at(2))
    assert [(e.kind, e.detail) for e in ledger.events(RUN_ID, after_seq=2)] == [
        ("integrated", {"cause": {"branch": "orch/integration"}, "changes": {"integrated_sha": "c" * 40}})
    ]
    with pytest.raises(RegistryError) as empty:
        ledger.update_worker(RUN_ID, "fix-login")
    assert str(empty.value) == "update_worker needs at least one field to change; use record_fact for a bare fact"
    with pytest.raises(RegistryError) as owned:
        ledger.update_worker(RUN_ID, "fix-login", state=S.FAILED, final_disposition=S.FAILED)
    assert str(owned.value) == "worker fields not settable here: final_disposition, state"


def test_check_ins_count_consecutive_unchanged_state_change_seq(ledger: Ledger, run: Run) -> None:
    new_worker(ledger)
    counts = [ledger.record_check_in(RUN_ID, "fix-login", seq).unchanged_check_ins for seq in (5, 5, 5, 6, 6)]
    assert counts == [0, 1, 2, 0, 1]
    worker = ledger.get_worker(RUN_ID, "fix-login")
    assert (worker.last_state_change_seq, worker.unchanged_check_ins) == (6, 1)
    assert [e.detail for e in ledger.events(RUN_ID, after_seq=2)] == [
        {"state_change_seq": 5, "unchanged_check_ins": 0},
        {"state_change_seq": 5, "unchanged_check_ins": 1},
        {"state_change_seq": 5, "unchanged_check_ins": 2},
        {"state_change_seq": 6, "unchanged_check_ins": 0},
        {"state_change_seq": 6, "unchanged_check_ins": 1},
    ]


# -- journal -------------------------------------------------------------------------------------------------


def test_record_fact_and_filter_the_journal(ledger: Ledger, run: Run) -> None:
    new_worker(ledger)
    fact = ledger.record_fact(RUN_ID, "verification", task_label="fix-login", detail={"check": "pytest", "rc": 0})
    run_fact = ledger.record_fact(RUN_ID, "report_written", detail={"path": "/tmp/report.md"})
    assert fact == Event(seq=3, run_id=RUN_ID, task_label="fix-login", at=at(2), kind="verification", from_state=None, to_state=None, detail={"check": "pytest", "rc": 0})
    assert [e.seq for e in ledger.events(RUN_ID)] == [1, 2, 3, 4]
    assert ledger.events(RUN_ID, task_label="fix-login", after_seq=2) == [fact]
    assert ledger.events(RUN_ID, after_seq=3) == [run_fact]
    with pytest.raises(WorkerNotFound):
        ledger.record_fact(RUN_ID, "verification", task_label="ghost")
    with pytest.raises(RegistryError) as bad:
        ledger.record_fact(RUN_ID, " ")
    assert str(bad.value) == "fact kind must be a non-empty word, got ' '"
    with pytest.raises(RegistryError) as owned:
        ledger.record_fact(RUN_ID, "transition")
    assert str(owned.value) == "fact kind transition is written by the ledger itself; choose another name"
    with pytest.raises(RegistryError):
        ledger.update_worker(RUN_ID, "fix-login", fact="effect_confirmed", head_sha="d" * 40)
    assert [e.seq for e in ledger.events(RUN_ID)] == [1, 2, 3, 4]


def test_the_journal_is_append_only(ledger: Ledger, run: Run, ledger_path: Path) -> None:
    db = sqlite3.connect(ledger_path)
    for sql in ("UPDATE events SET kind = 'x'", "DELETE FROM events"):
        with pytest.raises(sqlite3.IntegrityError) as raised:
            db.execute(sql)
        assert str(raised.value) == "events are append-only"
    db.close()
    assert len(ledger.events(RUN_ID)) == 1


# -- inbox ---------------------------------------------------------------------------------------------------

RAW = "[herdr-orchestration run=w1:p1-20261130T080000Z task=fix-login from=fix-login-w kind=result reply-to=w1:p2]\ndone"


def test_inbound_messages_are_recorded_with_their_verdict(ledger: Ledger, run: Run) -> None:
    new_worker(ledger)
    accepted = ledger.record_inbound(
        RUN_ID, RAW, source="orch-inbox", verdict=InboxVerdict.ACCEPTED, fingerprint="fp-1",
        task_label="fix-login", kind="result", sender="fix-login-w",
    )  # fmt: skip
    assert accepted == InboxMessage(
        id=1, run_id=RUN_ID, received_at=at(2), source="orch-inbox", raw=RAW, verdict=InboxVerdict.ACCEPTED,
        reason_code=None, reason=None, task_label="fix-login", kind="result", sender="fix-login-w",
        fingerprint="fp-1", handled_at=None,
    )  # fmt: skip
    aside = ledger.record_inbound(
        RUN_ID, "hello", source="agent-prompt", verdict=InboxVerdict.KEPT_ASIDE, fingerprint="fp-2",
        reason_code="no_header", reason="first line is not a herdr-orchestration header",
        received_at=datetime(2026, 11, 30, 9, 0, tzinfo=timezone(timedelta(hours=1))),
    )  # fmt: skip
    assert (aside.received_at, aside.verdict, aside.reason_code) == (START, InboxVerdict.KEPT_ASIDE, "no_header")
    assert [(e.task_label, e.detail) for e in ledger.events(RUN_ID, after_seq=2)] == [
        ("fix-login", {"inbox_id": 1, "verdict": "accepted", "reason_code": None, "task": "fix-login", "kind": "result", "sender": "fix-login-w", "source": "orch-inbox"}),
        (None, {"inbox_id": 2, "verdict": "kept_aside", "reason_code": "no_header", "task": None, "kind": None, "sender": None, "source": "agent-prompt"}),
    ]


def test_a_duplicate_accepted_message_is_kept_aside_not_accepted_twice(ledger: Ledger, run: Run) -> None:
    first = ledger.record_inbound(RUN_ID, RAW, source="orch-inbox", verdict=InboxVerdict.ACCEPTED, fingerprint="fp-1")
    again = ledger.record_inbound(RUN_ID, RAW, source="agent-prompt", verdict=InboxVerdict.ACCEPTED, fingerprint="fp-1")
    assert (again.id, again.verdict, again.reason_code, again.reason) == (2, InboxVerdict.KEPT_ASIDE, "duplicate", "duplicate of accepted message #1")
    assert ledger.list_inbox(RUN_ID, verdict=InboxVerdict.ACCEPTED) == [first]
    # The database itself refuses a second accepted copy, whatever the caller does.
    with pytest.raises(sqlite3.IntegrityError):
        ledger._db.execute(
            "INSERT INTO inbox (run_id, received_at, source, raw, verdict, fingerprint) VALUES (?, 'x', 's', 'r', 'accepted', 'fp-1')",
            (RUN_ID,),
        )


def test_inbox_filters_and_handling(ledger: Ledger, run: Run) -> None:
    new_worker(ledger)
    update = ledger.record_inbound(RUN_ID, "u", source="s", verdict=InboxVerdict.ACCEPTED, fingerprint="a", task_label="fix-login", kind="update")
    result = ledger.record_inbound(RUN_ID, "r", source="s", verdict=InboxVerdict.ACCEPTED, fingerprint="b", task_label="fix-login", kind="result")
    stale = ledger.record_inbound(RUN_ID, "x", source="s", verdict=InboxVerdict.KEPT_ASIDE, fingerprint="c", task_label="gone", reason_code="unknown_task")
    assert ledger.list_inbox(RUN_ID) == [update, result, stale]
    assert ledger.list_inbox(RUN_ID, task_label="fix-login", kind="result") == [result]
    assert ledger.list_inbox(RUN_ID, verdict=InboxVerdict.KEPT_ASIDE) == [stale]
    handled = ledger.mark_handled(update.id)
    assert handled.handled_at == at(5)
    assert ledger.mark_handled(update.id) == handled
    assert ledger.list_inbox(RUN_ID, verdict=InboxVerdict.ACCEPTED, unhandled=True) == [result]
    assert [(e.kind, e.task_label, e.detail) for e in ledger.events(RUN_ID)][-1] == ("inbox_handled", "fix-login", {"inbox_id": 1})


def test_inbox_refuses_unknown_runs_and_missing_fingerprints(ledger: Ledger, run: Run) -> None:
    with pytest.raises(RunNotFound):
        ledger.record_inbound("w9:p9-20260101T000000Z", "x", source="s", verdict=InboxVerdict.KEPT_ASIDE, fingerprint="f")
    with pytest.raises(RegistryError) as missing:
        ledger.record_inbound(RUN_ID, "x", source="s", verdict=InboxVerdict.KEPT_ASIDE, fingerprint="")
    assert str(missing.value) == "an inbound message needs a fingerprint"
    assert ledger.list_inbox(RUN_ID) == []


# -- effects -------------------------------------------------------------------------------------------------


def test_intend_twice_returns_the_same_effect(ledger: Ledger, run: Run) -> None:
    new_worker(ledger)
    request = {"branch": "fix/login", "path": "/src/acme/shop.worktrees/shop-fix-login"}
    first = ledger.intend(RUN_ID, "fix-login", "worktree_create", "fix-login:worktree_create", request)
    assert first == Effect(
        id=1, run_id=RUN_ID, task_label="fix-login", kind="worktree_create", key="fix-login:worktree_create",
        status=EffectStatus.INTENDED, request=request, response=None, error=None, intended_at=at(2), settled_at=None,
        is_new=True,
    )  # fmt: skip
    again = ledger.intend(RUN_ID, "fix-login", "worktree_create", "fix-login:worktree_create", dict(request))
    assert again == dataclasses.replace(first, is_new=False) == ledger.get_effect(first.id)
    assert len(ledger.list_effects(RUN_ID)) == 1
    assert [e.kind for e in ledger.events(RUN_ID)] == ["run_created", "worker_added", "effect_intended"]


def test_a_key_cannot_name_two_different_actions(ledger: Ledger, run: Run) -> None:
    ledger.intend(RUN_ID, None, "workspace_close", "close:w2", {"workspace": "w2"})
    with pytest.raises(EffectConflict) as raised:
        ledger.intend(RUN_ID, None, "workspace_close", "close:w2", {"workspace": "w3"})
    assert str(raised.value) == (
        f"effect key close:w2 of run {RUN_ID} already names a workspace_close for the run with a different request;"
        " use a new key for a different action"
    )


def test_effects_settle_once(ledger: Ledger, run: Run) -> None:
    new_worker(ledger)
    prompt = ledger.intend(RUN_ID, "fix-login", "agent_prompt", "fix-login:dispatch:1", {"target": "fix-login-w"})
    confirmed = ledger.confirm(prompt, {"ok": True})
    assert (confirmed.status, confirmed.response, confirmed.settled_at) == (EffectStatus.CONFIRMED, {"ok": True}, at(3))
    with pytest.raises(EffectSettled) as raised:
        ledger.fail(prompt.id, "late")
    assert str(raised.value) == "effect #1 is already confirmed; cannot mark it failed"
    close = ledger.intend(RUN_ID, "fix-login", "pane_close", "fix-login:pane_close", {"pane": "w1:p2"})
    failed = ledger.fail(close, "confirmation_required: pane belongs to a worktree group")
    assert (failed.status, failed.error) == (EffectStatus.FAILED, "confirmation_required: pane belongs to a worktree group")
    start = ledger.intend(RUN_ID, "fix-login", "agent_start", "fix-login:agent_start", {"pane": "w1:p2"})
    abandoned = ledger.abandon(start.id, "read-back found no agent and the pane is gone")
    assert (abandoned.status, abandoned.error) == (EffectStatus.ABANDONED, "read-back found no agent and the pane is gone")
    assert [(e.kind, e.detail) for e in ledger.events(RUN_ID, after_seq=2) if e.kind != "effect_intended"] == [
        ("effect_confirmed", {"effect_id": 1, "kind": "agent_prompt", "key": "fix-login:dispatch:1", "response": {"ok": True}}),
        ("effect_failed", {"effect_id": 2, "kind": "pane_close", "key": "fix-login:pane_close", "error": "confirmation_required: pane belongs to a worktree group"}),
        ("effect_abandoned", {"effect_id": 3, "kind": "agent_start", "key": "fix-login:agent_start", "error": "read-back found no agent and the pane is gone"}),
    ]
    with pytest.raises(EffectNotFound):
        ledger.confirm(99)


def test_in_flight_effects_survive_a_crash(ledger_path: Path, clock: Clock) -> None:
    with Ledger.open(ledger_path, now=clock) as ledger:
        ledger.create_run(RUN_ID, controller_target="w1:p1")
        new_worker(ledger)
        done = ledger.intend(RUN_ID, "fix-login", "worktree_create", "wt", {"branch": "fix/login"})
        ledger.confirm(done, {"workspace_id": "w2", "pane_id": "w2:p1"})
        pending = ledger.intend(RUN_ID, "fix-login", "pane_move", "move", {"pane": "w2:p1"})
    # A new process resumes: it finds the move in flight, and re-intending hands back the same row, never a second one.
    with Ledger.open(ledger_path, now=clock) as resumed:
        assert pending.is_new
        left = dataclasses.replace(pending, is_new=False)
        assert resumed.in_flight(RUN_ID) == [left]
        assert resumed.intend(RUN_ID, "fix-login", "pane_move", "move", {"pane": "w2:p1"}) == left
        assert resumed.intend(RUN_ID, "fix-login", "worktree_create", "wt", {"branch": "fix/login"}).response == {"workspace_id": "w2", "pane_id": "w2:p1"}
        assert resumed.find_effect(RUN_ID, "nope") is None
        assert resumed.list_effects(RUN_ID, task_label="fix-login", status=EffectStatus.CONFIRMED) == [resumed.get_effect(done.id)]


def test_effects_need_a_known_worker_and_json_requests(ledger: Ledger, run: Run) -> None:
    with pytest.raises(WorkerNotFound):
        ledger.intend(RUN_ID, "ghost", "agent_start", "k", {})
    with pytest.raises(RegistryError) as raised:
        ledger.intend(RUN_ID, None, "workspace_close", "k", {"when": datetime(2026, 1, 1)})
    assert str(raised.value) == "value is not JSON-serialisable: Object of type datetime is not JSON serializable"
    assert ledger.list_effects(RUN_ID) == []


def test_update_run_records_where_the_run_lives_and_journals_it(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "ledger.sqlite3", now=lambda: datetime(2026, 11, 30, 8, 0, tzinfo=UTC))
    ledger.create_run("w1:p1-20261130T080000Z", controller_target="w1:p1")

    run = ledger.update_run("w1:p1-20261130T080000Z", cause={"by": "preflight"}, workspace_id="w1", created_workspace_ids=("w3",))

    assert (run.workspace_id, run.created_workspace_ids) == ("w1", ("w3",))
    assert ledger.get_run(run.run_id) == run
    last = ledger.events(run.run_id)[-1]
    assert (last.kind, last.detail) == ("run_updated", {"cause": {"by": "preflight"}, "changes": {"workspace_id": "w1", "created_workspace_ids": ["w3"]}})


def test_update_run_refuses_fields_it_does_not_own(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path / "ledger.sqlite3")
    ledger.create_run("w1:p1-20261130T080000Z", controller_target="w1:p1")

    with pytest.raises(RegistryError, match="run fields not settable here: status"):
        ledger.update_run("w1:p1-20261130T080000Z", status="finished")
