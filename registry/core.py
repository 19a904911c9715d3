"""The ledger's SQL, written once: open and migrate the file, write transactions, journal, inbox and worker rows, and `Rows`,
the plain-row API over them that a worker's callback uses (stdlib only; `registry.store.Ledger` adds records on top)."""

from __future__ import annotations

import json
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any

from registry.errors import LedgerMissing, RegistryError, RunNotFound, SchemaTooNew, WorkerNotFound
from registry.kinds import SPOOL_SOURCE, EventKind, InboxVerdict
from registry.machine import WorkerState, check_transition, disposition_after
from registry.schema import MIGRATIONS

# The Ledger (records, for the engine) and `Rows` (plain rows, for `orch inbox add`, which needs no whole records)
# both go through these: one way to open the file, one SQL for each write, one compare-and-set.


def connect(path: Path, busy_timeout_ms: int, *, create: bool = True) -> sqlite3.Connection:
    """Open and migrate the ledger at path: WAL, busy timeout, foreign keys, rows by name.

    ``create=False``: a missing file is LedgerMissing, and nothing (no file, no folder) is made.
    """
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
        target: str | Path = path
    elif not path.is_file():
        raise LedgerMissing(path)
    else:
        # mode=rw: SQLite must not create the file if it vanishes between the check and the open.
        target = "file:" + urllib.parse.quote(str(path.absolute())) + "?mode=rw"
    # isolation_level=None: we issue BEGIN IMMEDIATE ourselves, so Python never opens a deferred transaction.
    # check_same_thread=False only so an owner may close connections its worker threads opened; a Ledger
    # is still used by one thread at a time (the engine keeps one per thread).
    try:
        db = sqlite3.connect(target, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False, uri=not create)
    except sqlite3.OperationalError:
        if not create and not path.is_file():
            raise LedgerMissing(path) from None
        raise
    db.row_factory = sqlite3.Row
    try:
        db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA foreign_keys = ON")
        # NORMAL is durable across application crashes in WAL mode; only power loss can drop the last commit.
        db.execute("PRAGMA synchronous = NORMAL")
        migrate(db)
    except BaseException:
        db.close()
        raise
    return db


def schema_version(db: sqlite3.Connection) -> int:
    """The PRAGMA user_version the file is at."""
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def migrate(db: sqlite3.Connection) -> None:
    """Bring the file to the newest schema, in one write transaction; a newer file than this code is SchemaTooNew."""
    with write(db):
        version = schema_version(db)
        if version > len(MIGRATIONS):
            raise SchemaTooNew(f"ledger schema version {version} is newer than this orch understands ({len(MIGRATIONS)})")
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            for statement in split_statements(script):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {number}")


def split_statements(script: str) -> Iterator[str]:
    """Statements of a migration script; executescript() cannot be used because it commits on its own."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            if pending.strip():
                yield pending
            pending = ""
    if pending.strip() and not pending.strip().startswith("--"):
        raise RegistryError("migration script ends with an incomplete statement")


@contextmanager
def write(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction."""
    # BEGIN IMMEDIATE takes the write lock up front, so read-then-write sequences never deadlock on upgrade.
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        # SQLite may already have rolled back on its own (a full disk, an I/O error): a second ROLLBACK would fail
        # and hide the error that matters.
        if db.in_transaction:
            with suppress(sqlite3.Error):
                db.execute("ROLLBACK")
        raise


def to_json(value: Any) -> str:
    """Canonical JSON as the ledger stores it (sorted keys, compact, UTF-8 kept)."""
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise RegistryError(f"value is not JSON-serialisable: {exc}") from None


def column(value: Any) -> Any:
    """A Python value as the ledger stores it: enums by value, sequences as JSON, datetimes as ISO UTC."""
    if isinstance(value, (tuple, list, dict)):
        return to_json(value)
    if isinstance(value, datetime):
        # Fixed width, so ISO strings sort in time order inside SQLite.
        return value.astimezone(UTC).isoformat(timespec="microseconds")
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    return value


def journal(
    db: sqlite3.Connection,
    run_id: str,
    kind: str,
    *,
    at: str,
    task_label: str | None = None,
    from_state: str | None = None,
    to_state: str | None = None,
    detail: Mapping[str, Any] | None = None,
) -> int:
    """Append one journal row; its sequence number."""
    cursor = db.execute(
        "INSERT INTO events (run_id, task_label, at, kind, from_state, to_state, detail) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (run_id, task_label, at, kind, from_state, to_state, to_json(dict(detail or {}))),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def insert_inbound(
    db: sqlite3.Connection,
    run_id: str,
    raw: str,
    *,
    at: str,
    received_at: str,
    source: str,
    verdict: InboxVerdict,
    fingerprint: str,
    reason_code: str | None,
    reason: str | None,
    task_label: str | None,
    kind: str | None,
    sender: str | None,
) -> tuple[int, bool]:
    """Inside a write transaction: record one inbound message once (an accepted copy of an accepted one is kept aside).

    Its row id, and whether this call recorded it: a delivery from a spool (source ``spool:…``) already in the run's
    inbox is not recorded again (migration 6's unique index enforces it; here it is a no-op, "already recorded")."""
    if source.startswith(SPOOL_SOURCE):
        delivered = db.execute("SELECT id FROM inbox WHERE run_id = ? AND source = ?", (run_id, source)).fetchone()
        if delivered is not None:
            return int(delivered["id"]), False
    if verdict is InboxVerdict.ACCEPTED:
        first = db.execute(
            "SELECT id FROM inbox WHERE run_id = ? AND fingerprint = ? AND verdict = 'accepted'",
            (run_id, fingerprint),
        ).fetchone()
        if first is not None:
            # Never act twice on one message, never drop it silently: keep the copy aside, pointing at the first.
            verdict, reason_code, reason = (
                InboxVerdict.KEPT_ASIDE,
                "duplicate",
                f"duplicate of accepted message #{first['id']}",
            )
    cursor = db.execute(
        "INSERT INTO inbox (run_id, received_at, source, raw, verdict, reason_code, reason, task_label, kind, sender, fingerprint)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (run_id, received_at, source, raw, str(verdict), reason_code, reason, task_label, kind, sender, fingerprint),
    )
    inbox_id = cursor.lastrowid
    assert inbox_id is not None
    # The journal row is the worker's only when the message was accepted for a registered worker: kept-aside
    # mail may name anything, and must add nothing to a worker's history.
    known = verdict is InboxVerdict.ACCEPTED and task_label is not None and db.execute(
        "SELECT 1 FROM workers WHERE run_id = ? AND task_label = ?", (run_id, task_label)
    ).fetchone() is not None
    journal(
        db,
        run_id,
        EventKind.INBOX_RECORDED,
        task_label=task_label if known else None,
        detail={
            "inbox_id": inbox_id, "verdict": str(verdict), "reason_code": reason_code, "task": task_label,
            "kind": kind, "sender": sender, "source": source,
        },
        at=at,
    )  # fmt: skip
    return inbox_id, True


# An `agent_prompt` effect intended (and not failed or abandoned) after the worker's last transition: the packet, an
# answer or a follow-up that may be answered before the ledger records the move it causes.
_PROMPTED_SQL = """
    SELECT DISTINCT e.task_label FROM events e
    JOIN effects f ON f.id = json_extract(e.detail, '$.effect_id') AND f.status IN ('intended', 'confirmed')
    WHERE e.run_id = ? AND e.kind = 'effect_intended' AND e.task_label IS NOT NULL
      AND json_extract(e.detail, '$.kind') = 'agent_prompt'
      AND e.seq > COALESCE(
        (SELECT MAX(t.seq) FROM events t WHERE t.run_id = e.run_id AND t.task_label = e.task_label AND t.kind = 'transition'), 0)
"""


def prompted_tasks(db: sqlite3.Connection, run_id: str) -> frozenset[str]:
    """The run's tasks orch has prompted since they entered their current state (see `registry.machine.accepted_kinds`)."""
    return frozenset(str(row[0]) for row in db.execute(_PROMPTED_SQL, (run_id,)))


def update_worker_row(
    db: sqlite3.Connection, run_id: str, task_label: str, columns: Mapping[str, Any], *, expected: str | None = None
) -> int:
    """Write column values on one worker (only while its state is ``expected``, when given); how many rows changed."""
    assignments = ", ".join(f"{key} = :{key}" for key in columns)
    where = "run_id = :_run AND task_label = :_task" + (" AND state = :_expected" if expected is not None else "")
    args: dict[str, Any] = {**columns, "_run": run_id, "_task": task_label}
    if expected is not None:
        args["_expected"] = expected
    return db.execute(f"UPDATE workers SET {assignments} WHERE {where}", args).rowcount


def accepted_fingerprints(db: sqlite3.Connection, run_id: str) -> frozenset[str]:
    """The fingerprints of the run's accepted messages (what a duplicate check needs, without reading the rows)."""
    rows = db.execute("SELECT fingerprint FROM inbox WHERE run_id = ? AND verdict = 'accepted'", (run_id,))
    return frozenset(str(row[0]) for row in rows)


def set_state(
    db: sqlite3.Connection, run_id: str, task_label: str, expected: WorkerState, new: WorkerState, *,
    at: str, columns: Mapping[str, Any], changes: Mapping[str, Any], cause: Mapping[str, Any],
) -> bool:  # fmt: skip
    """Inside a write transaction: compare-and-set the worker from expected to new (plus column values), journalled as a
    transition with its cause and ``changes`` (as JSON); False, with nothing written, when it was no longer expected."""
    previous = db.execute("SELECT final_disposition FROM workers WHERE run_id = ? AND task_label = ?", (run_id, task_label)).fetchone()
    if previous is None:
        raise WorkerNotFound(run_id, task_label)
    before = None if previous["final_disposition"] is None else WorkerState(previous["final_disposition"])
    disposition = disposition_after(expected, new, before)
    values = {**columns, "state": new.value, "final_disposition": column(disposition), "updated_at": at}
    if update_worker_row(db, run_id, task_label, values, expected=expected.value) == 0:
        return False
    journal(
        db, run_id, EventKind.TRANSITION, at=at, task_label=task_label, from_state=expected, to_state=new,
        detail={"cause": dict(cause), "changes": dict(changes)},
    )  # fmt: skip
    return True


def set_fields(
    db: sqlite3.Connection, run_id: str, task_label: str, fact: str, *,
    at: str, columns: Mapping[str, Any], changes: Mapping[str, Any], cause: Mapping[str, Any],
) -> None:  # fmt: skip
    """Inside a write transaction: write column values on a worker, journalled as ``fact`` with its cause and ``changes``."""
    update_worker_row(db, run_id, task_label, {**columns, "updated_at": at})
    journal(db, run_id, fact, at=at, task_label=task_label, detail={"cause": dict(cause), "changes": dict(changes)})


def check_fact(kind: str) -> None:
    """A journal kind a caller may write: a word, and none the ledger writes itself."""
    # The ledger's own kinds mean something to readers of the journal (resume, report): callers may not mimic them.
    if not kind or any(ch.isspace() for ch in kind):
        raise RegistryError(f"fact kind must be a non-empty word, got {kind!r}")
    if kind in set(EventKind) - {EventKind.WORKER_UPDATED}:
        raise RegistryError(f"fact kind {kind} is written by the ledger itself; choose another name")


def aware(value: datetime, what: str) -> datetime:
    """The same instant in UTC; a naive datetime (ambiguous across controller processes) is a RegistryError."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise RegistryError(f"{what} gave a naive datetime; the ledger needs timezone-aware UTC")
    return value.astimezone(UTC)


def utc_stamp(now: Callable[[], datetime]) -> str:
    """The ledger's timestamp of ``now()``: ISO UTC, fixed width."""
    return str(column(aware(now(), "the ledger clock")))


def _now() -> datetime:
    return datetime.now(UTC)


# The worker fields a callback sets, with their types: the Worker record's (tests/registry/test_records.py holds them
# equal), checked here since a callback builds no record and so never imports `registry.records`.
CALLBACK_FIELDS: Mapping[str, type] = {"last_callback_id": int, "pending_question": str, "reported_checks": str}


class Rows:
    """One connection to the ledger handing out plain rows: everything a callback reads and writes, without records.

    The one implementation of the inbox writes and of a callback's worker changes: `orchestrator.intake` uses it for
    every door, and the Ledger hands out one over its own connection (`Ledger.rows`) and records its inbox through it.
    A callback reads a few columns and writes a few; it has no use for whole records.
    """

    def __init__(self, db: sqlite3.Connection, now: Callable[[], datetime] = _now) -> None:
        self._db = db
        self._now = now

    @classmethod
    def open(cls, path: Path, *, busy_timeout_ms: int = 30_000, create: bool = True) -> Rows:
        """Open and migrate the ledger at path, exactly as `Ledger.open` does."""
        return cls(connect(path, busy_timeout_ms, create=create))

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def run(self, run_id: str) -> dict[str, Any] | None:
        """The run's row (run_id, status, controller_target), or None."""
        row = self._db.execute("SELECT run_id, status, controller_target FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else dict(row)

    def workers(self, run_id: str) -> list[dict[str, Any]]:
        """The run's workers in registration order (task_label, name, state, reply_target, pane_id, created_pane_ids, worktree_path, host)."""
        sql = (
            "SELECT task_label, name, state, reply_target, pane_id, created_pane_ids, worktree_path, host FROM workers"
            " WHERE run_id = ? ORDER BY id"
        )
        return [dict(row) for row in self._db.execute(sql, (run_id,))]

    def other_run_ids(self, run_id: str) -> frozenset[str]:
        """Every run id but this one."""
        return frozenset(str(row[0]) for row in self._db.execute("SELECT run_id FROM runs WHERE run_id != ?", (run_id,)))

    def prompted_tasks(self, run_id: str) -> frozenset[str]:
        """The tasks orch prompted since their last transition (`Ledger.prompted_tasks`)."""
        return prompted_tasks(self._db, run_id)

    def accepted_fingerprints(self, run_id: str) -> frozenset[str]:
        """The fingerprints of the run's accepted messages."""
        return accepted_fingerprints(self._db, run_id)

    def record_inbound(
        self,
        run_id: str,
        raw: str,
        *,
        source: str,
        verdict: InboxVerdict,
        fingerprint: str,
        reason_code: str | None = None,
        reason: str | None = None,
        task_label: str | None = None,
        kind: str | None = None,
        sender: str | None = None,
        received_at: datetime | None = None,
    ) -> dict[str, Any]:
        """Record one inbound message once; its row as recorded (an accepted copy of an accepted one is kept aside).

        A spool delivery already in the inbox is not recorded again: its first row, with ``already_recorded`` true."""
        if not fingerprint:
            raise RegistryError("an inbound message needs a fingerprint")
        at = utc_stamp(self._now)
        stamp = at if received_at is None else str(column(aware(received_at, "received_at")))
        with write(self._db) as db:
            if db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
                raise RunNotFound(run_id)
            inbox_id, new = insert_inbound(
                db, run_id, raw, at=at, received_at=stamp, source=source, verdict=verdict, fingerprint=fingerprint,
                reason_code=reason_code, reason=reason, task_label=task_label, kind=kind, sender=sender,
            )  # fmt: skip
        return {**dict(self._db.execute("SELECT * FROM inbox WHERE id = ?", (inbox_id,)).fetchone()), "already_recorded": not new}

    def worker_state(self, run_id: str, task_label: str) -> WorkerState:
        """The worker's state."""
        row = self._db.execute("SELECT state FROM workers WHERE run_id = ? AND task_label = ?", (run_id, task_label)).fetchone()
        if row is None:
            raise WorkerNotFound(run_id, task_label)
        return WorkerState(row["state"])

    @staticmethod
    def _check(changes: Mapping[str, Any]) -> None:
        unknown = sorted(set(changes) - set(CALLBACK_FIELDS))
        if unknown:
            raise RegistryError(f"worker fields not settable here: {', '.join(unknown)}")
        for key, value in changes.items():
            if type(value) is not CALLBACK_FIELDS[key]:
                raise RegistryError(f"invalid worker: {key}: must be {CALLBACK_FIELDS[key].__name__}, not {type(value).__name__}")

    def transition(
        self, run_id: str, task_label: str, expected: WorkerState, new: WorkerState, *, cause: Mapping[str, Any], **changes: Any
    ) -> bool:
        """Compare-and-set a worker from expected to new with callback fields, journalled; False if it moved first."""
        check_transition(expected, new)
        self._check(changes)
        with write(self._db) as db:
            plain = {key: changes[key] for key in sorted(changes)}
            return set_state(db, run_id, task_label, expected, new, at=utc_stamp(self._now), columns=changes, changes=plain, cause=cause)

    def update_worker(self, run_id: str, task_label: str, *, fact: str, cause: Mapping[str, Any], **changes: Any) -> WorkerState:
        """Record callback fields on a worker with a journal row named fact; the worker's state."""
        self._check(changes)
        check_fact(fact)
        if not changes:
            raise RegistryError("update_worker needs at least one field to change; use record_fact for a bare fact")
        with write(self._db) as db:
            state = self.worker_state(run_id, task_label)
            plain = {key: changes[key] for key in sorted(changes)}
            set_fields(db, run_id, task_label, fact, at=utc_stamp(self._now), columns=changes, changes=plain, cause=cause)
        return state
