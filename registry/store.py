"""The durable ledger over SQLite (WAL): runs, workers with compare-and-set transitions, journal, inbox, effects."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from registry import core, machine, records
from registry.errors import (
    DuplicateRun,
    DuplicateWorker,
    EffectConflict,
    EffectNotFound,
    EffectSettled,
    InboxNotFound,
    RegistryError,
    RunNotFound,
    StaleState,
    WorkerNotFound,
)
from registry.machine import INITIAL, WorkerState
from registry.kinds import CONTROLLER_HOST, EffectStatus, EventKind, InboxVerdict, RunStatus, RunVerdict
from registry.records import R, Effect, Event, InboxMessage, Run, Worker, as_dict, build

Clock = Callable[[], datetime]

# Fields a caller may set on a worker. The rest is owned by the ledger: identity (run, task, name, kind),
# state and disposition (only via transition), liveness counters (only via record_check_in) and timestamps.
WORKER_FIELDS: frozenset[str] = frozenset(
    {
        "objective", "claimed_files", "pane_id", "reply_target", "last_callback_id", "pending_question",
        "reported_checks", "controller_verification", "branch", "worktree_path", "tab_label", "workspace_id",
        "tab_id", "created_workspace_ids", "created_pane_ids", "created_worktree_paths", "base_sha", "head_sha",
        "integrated_sha",
    }
)  # fmt: skip

RUN_FIELDS: frozenset[str] = frozenset(
    {
        "session", "base_sha", "workspace_id", "repo_tab_id", "controller_workspace_id", "controller_tab_id", "default_branch",
        "created_workspace_ids", "controller_kind",
    }
)

_JSON_COLUMNS = {
    Run: ("created_workspace_ids",),
    Worker: ("claimed_files", "created_workspace_ids", "created_pane_ids", "created_worktree_paths"),
    Event: ("detail",),
    Effect: ("request", "response"),
}

# Run status changes allowed: an interrupted run resumes; a finished run stays finished.
_RUN_MOVES: Mapping[RunStatus, frozenset[RunStatus]] = {
    RunStatus.ACTIVE: frozenset({RunStatus.INTERRUPTED, RunStatus.FINISHED}),
    RunStatus.INTERRUPTED: frozenset({RunStatus.ACTIVE, RunStatus.FINISHED}),
    RunStatus.FINISHED: frozenset(),
}

def utc_now() -> datetime:
    """The real clock, in UTC."""
    return datetime.now(UTC)


_json = core.to_json
_column = core.column


_aware = core.aware


_validate = build


def _record(model: type[R], row: sqlite3.Row) -> R:
    data = dict(row)
    for name in _JSON_COLUMNS.get(model, ()):
        if data[name] is not None:
            data[name] = json.loads(data[name])
    if model is Worker:
        del data["id"]  # the surrogate key only serves foreign keys; (run_id, task_label) is the identity
    return _validate(model, data)


_check_fact = core.check_fact


class Ledger:
    """One connection to the ledger file; several processes may each hold one on the same file."""

    def __init__(self, connection: sqlite3.Connection, now: Clock) -> None:
        self._db = connection
        self._now = now

    @classmethod
    def open(cls, path: Path, *, now: Clock = utc_now, busy_timeout_ms: int = 30_000, create: bool = True) -> Self:
        """Open and migrate the ledger at path (registry.core.connect: WAL, busy timeout...); ``create=False``: a
        missing file is LedgerMissing and nothing is made."""
        return cls(core.connect(path, busy_timeout_ms, create=create), now)

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    @property
    def rows(self) -> core.Rows:
        """The plain-row API over this same connection and clock (what `orchestrator.intake` records a callback with)."""
        return core.Rows(self._db, self._now)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        """The PRAGMA user_version the file is at."""
        return core.schema_version(self._db)

    def probe_write(self) -> None:
        """One real write that changes nothing (the schema version rewritten): a read-only or unwritable file fails here."""
        with self._write() as db:
            db.execute(f"PRAGMA user_version = {core.schema_version(db)}")

    def _migrate(self) -> None:
        core.migrate(self._db)

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:
        return core.write(self._db)

    def _stamp(self) -> str:
        return core.utc_stamp(self._now)

    def _journal(
        self,
        run_id: str,
        kind: str,
        *,
        task_label: str | None = None,
        from_state: WorkerState | None = None,
        to_state: WorkerState | None = None,
        detail: Mapping[str, Any] | None = None,
        at: str | None = None,
    ) -> int:
        return core.journal(
            self._db, run_id, kind, at=at or self._stamp(), task_label=task_label, from_state=from_state, to_state=to_state, detail=detail
        )

    # -- runs ---------------------------------------------------------------------------------------------

    def create_run(
        self,
        run_id: str,
        *,
        controller_target: str,
        session: str | None = None,
        organization: str | None = None,
        repo: str | None = None,
        repo_path: Path | str | None = None,
        base_ref: str | None = None,
        base_sha: str | None = None,
        plan_path: Path | str | None = None,
        fields: Mapping[str, Any] | None = None,
        workers: Sequence[Mapping[str, Any]] = (),
    ) -> Run:
        """Record a new active run whole: ``fields`` (any of RUN_FIELDS, e.g. controller_kind) and its ``workers``
        (``add_worker``'s arguments as mappings) are written in the same transaction as the run row, so a crash
        leaves either no run or one that resume has everything for."""
        unknown = sorted(set(fields or {}) - RUN_FIELDS)
        if unknown:
            raise RegistryError(f"run fields not settable here: {', '.join(unknown)}")
        at = self._stamp()
        run = _validate(
            Run,
            {
                "run_id": run_id, "controller_target": controller_target, "session": session,
                "organization": organization, "repo": repo, "repo_path": _column(repo_path), "base_ref": base_ref,
                "base_sha": base_sha, "plan_path": _column(plan_path), "status": RunStatus.ACTIVE,
                "stopped_at": None, "verdict": None, "created_at": at, "updated_at": at, **dict(fields or {}),
            },
        )  # fmt: skip
        data = {key: _column(value) for key, value in as_dict(run).items()}
        with self._write() as db:
            try:
                db.execute(
                    f"INSERT INTO runs ({', '.join(data)}) VALUES ({', '.join('?' * len(data))})",
                    tuple(data.values()),
                )
            except sqlite3.IntegrityError:
                raise DuplicateRun(f"run {run_id} already exists in the ledger") from None
            self._journal(run_id, EventKind.RUN_CREATED, detail={"controller_target": controller_target}, at=at)
            for spec in workers:
                self._insert_worker(db, run_id, at=at, **spec)
        return run

    def get_run(self, run_id: str) -> Run:
        """The run with this id, or RunNotFound."""
        row = self._db.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFound(run_id)
        return _record(Run, row)

    def list_runs(self, *, status: RunStatus | None = None) -> list[Run]:
        """Runs, oldest first, optionally only those with one status."""
        sql = "SELECT * FROM runs"
        args: tuple[str, ...] = ()
        if status is not None:
            sql, args = sql + " WHERE status = ?", (str(status),)
        return [_record(Run, row) for row in self._db.execute(sql + " ORDER BY created_at, run_id", args)]

    def set_run_status(
        self, run_id: str, status: RunStatus, *, stopped_at: str | None = None, verdict: RunVerdict | None = None
    ) -> Run:
        """Move a run to status, noting where it stopped; a finished run needs its verdict."""
        if (status is RunStatus.FINISHED) != (verdict is not None):
            raise RegistryError("a verdict is given exactly when a run is finished")
        with self._write() as db:
            current = self.get_run(run_id)
            if status not in _RUN_MOVES[current.status]:
                raise RegistryError(f"run {run_id} is {current.status}; it cannot become {status}")
            at = self._stamp()
            db.execute(
                "UPDATE runs SET status = ?, stopped_at = ?, verdict = ?, updated_at = ? WHERE run_id = ?",
                (str(status), stopped_at, verdict and str(verdict), at, run_id),
            )
            self._journal(
                run_id,
                EventKind.RUN_STATUS,
                detail={"from": str(current.status), "to": str(status), "stopped_at": stopped_at, "verdict": verdict and str(verdict)},
                at=at,
            )
        return self.get_run(run_id)

    def update_run(self, run_id: str, *, cause: Mapping[str, Any] | None = None, **changes: Any) -> Run:
        """Record facts about the run itself (its herdr workspace, base SHA…), journalled as run_updated."""
        unknown = sorted(set(changes) - RUN_FIELDS)
        if unknown or not changes:
            raise RegistryError(f"run fields not settable here: {', '.join(unknown) or '(none given)'}")
        with self._write() as db:
            current = self.get_run(run_id)
            at = self._stamp()
            updated = _validate(Run, {**as_dict(current), **changes, "updated_at": at})
            columns = {key: _column(value) for key, value in as_dict(updated).items() if key in {*changes, "updated_at"}}
            assignments = ", ".join(f"{key} = :{key}" for key in columns)
            db.execute(f"UPDATE runs SET {assignments} WHERE run_id = :_run", {**columns, "_run": run_id})
            self._journal(
                run_id,
                EventKind.RUN_UPDATED,
                detail={"cause": dict(cause or {}), "changes": {key: records.plain(getattr(updated, key)) for key in changes}},
                at=at,
            )
        return updated

    # -- workers ------------------------------------------------------------------------------------------

    def _worker_row(self, run_id: str, task_label: str) -> sqlite3.Row:
        row: sqlite3.Row | None = self._db.execute("SELECT * FROM workers WHERE run_id = ? AND task_label = ?", (run_id, task_label)).fetchone()
        if row is None:
            self.get_run(run_id)  # a missing run is the better error
            raise WorkerNotFound(run_id, task_label)
        return row

    @staticmethod
    def _check_fields(changes: Mapping[str, Any]) -> None:
        unknown = sorted(set(changes) - WORKER_FIELDS)
        if unknown:
            raise RegistryError(f"worker fields not settable here: {', '.join(unknown)}")

    def add_worker(
        self,
        run_id: str,
        task_label: str,
        *,
        name: str,
        kind: str,
        objective: str,
        cause: Mapping[str, Any] | None = None,
        initial: WorkerState = WorkerState.PROVISIONING,
        **fields: Any,
    ) -> Worker:
        """Register a worker (in ``provisioning``, or ``queued`` for the scheduler to admit), before any of its side effects."""
        with self._write() as db:
            self.get_run(run_id)
            return self._insert_worker(db, run_id, task_label, name=name, kind=kind, objective=objective, cause=cause, initial=initial, at=self._stamp(), **fields)

    def _insert_worker(
        self,
        db: sqlite3.Connection,
        run_id: str,
        task_label: str,
        *,
        name: str,
        kind: str,
        objective: str,
        at: str,
        cause: Mapping[str, Any] | None = None,
        initial: WorkerState = WorkerState.PROVISIONING,
        **fields: Any,
    ) -> Worker:
        if initial not in INITIAL:
            raise RegistryError(f"a worker is registered provisioning or queued, not {initial}")
        # Where it runs is fixed when it is registered, like its name and kind: never a field to change later.
        host = fields.pop("host", CONTROLLER_HOST)
        self._check_fields(fields)
        empty: dict[str, Any] = dict.fromkeys(records.fields_of(Worker))
        empty.update(claimed_files=(), created_workspace_ids=(), created_pane_ids=(), created_worktree_paths=(), host=host)
        worker = _validate(
            Worker,
            {
                **empty, **fields, "run_id": run_id, "task_label": task_label, "name": name, "kind": kind,
                "objective": objective, "state": initial, "unchanged_check_ins": 0,
                "created_at": at, "updated_at": at,
            },
        )  # fmt: skip
        data = {key: _column(value) for key, value in as_dict(worker).items()}
        clash = db.execute(
            "SELECT task_label, name FROM workers WHERE run_id = ? AND (task_label = ? OR name = ?)",
            (run_id, task_label, name),
        ).fetchone()
        if clash is not None:
            what = f"task {task_label}" if clash["task_label"] == task_label else f"name {name}"
            raise DuplicateWorker(f"run {run_id} already has a worker with {what}")
        db.execute(f"INSERT INTO workers ({', '.join(data)}) VALUES ({', '.join('?' * len(data))})", tuple(data.values()))
        self._journal(
            run_id,
            EventKind.WORKER_ADDED,
            task_label=task_label,
            to_state=initial,
            detail={"cause": dict(cause or {}), "changes": {"name": name, "kind": kind, **self._plain(worker, fields),
                                                             **({"host": host} if host != CONTROLLER_HOST else {})}},
            at=at,
        )
        return worker

    @staticmethod
    def _plain(worker: Worker, fields: Iterable[str]) -> dict[str, Any]:
        return {field: records.plain(getattr(worker, field)) for field in sorted(fields)}

    def get_worker(self, run_id: str, task_label: str) -> Worker:
        """The worker with this task label, or WorkerNotFound."""
        return _record(Worker, self._worker_row(run_id, task_label))

    def find_worker(self, run_id: str, *, name: str) -> Worker | None:
        """The worker of the run with this agent name, if any (inbound messages name their sender)."""
        row = self._db.execute("SELECT * FROM workers WHERE run_id = ? AND name = ?", (run_id, name)).fetchone()
        return None if row is None else _record(Worker, row)

    def list_workers(self, run_id: str, *, states: Iterable[WorkerState] | None = None) -> list[Worker]:
        """Workers of the run in registration order, optionally only those in the given states."""
        sql, args = "SELECT * FROM workers WHERE run_id = ?", [run_id]
        if states is not None:
            wanted = [str(state) for state in states]
            sql += f" AND state IN ({', '.join('?' * len(wanted))})"
            args += wanted
        return [_record(Worker, row) for row in self._db.execute(sql + " ORDER BY id", args)]

    def _apply(self, current: Worker, changes: Mapping[str, Any], **owned: Any) -> tuple[Worker, dict[str, Any]]:
        """The worker after changes (validated), and the column values to write."""
        updated = _validate(Worker, {**as_dict(current), **changes, **owned})
        columns = {key: _column(value) for key, value in as_dict(updated).items() if key in {*changes, *owned}}
        return updated, columns

    def transition(
        self,
        run_id: str,
        task_label: str,
        expected: WorkerState,
        new: WorkerState,
        *,
        cause: Mapping[str, Any] | None = None,
        **changes: Any,
    ) -> Worker:
        """Compare-and-set the worker from expected to new (plus field changes), journalled in the same transaction."""
        machine.check_transition(expected, new)
        self._check_fields(changes)
        with self._write() as db:
            current = self.get_worker(run_id, task_label)
            at = self._stamp()
            disposition = machine.disposition_after(expected, new, current.final_disposition)
            updated, columns = self._apply(current, changes, state=new, final_disposition=disposition, updated_at=at)
            written = {key: columns[key] for key in changes}  # core.set_state writes state, disposition and time itself
            plain = self._plain(updated, changes)
            if not core.set_state(db, run_id, task_label, expected, new, at=at, columns=written, changes=plain, cause=cause or {}):
                raise StaleState(run_id, task_label, str(expected), str(current.state))
        return updated

    def update_worker(
        self,
        run_id: str,
        task_label: str,
        *,
        fact: str = EventKind.WORKER_UPDATED,
        cause: Mapping[str, Any] | None = None,
        **changes: Any,
    ) -> Worker:
        """Record facts about a worker (pane id, head SHA, reported checks…) with a journal row named fact."""
        self._check_fields(changes)
        _check_fact(fact)
        if not changes:
            raise RegistryError("update_worker needs at least one field to change; use record_fact for a bare fact")
        with self._write() as db:
            current = self.get_worker(run_id, task_label)
            at = self._stamp()
            updated, columns = self._apply(current, changes, updated_at=at)
            written = {key: columns[key] for key in changes}
            core.set_fields(db, run_id, task_label, fact, at=at, columns=written, changes=self._plain(updated, changes), cause=cause or {})
        return updated

    def record_check_in(self, run_id: str, task_label: str, state_change_seq: int | None) -> Worker:
        """Note one check-in: count consecutive check-ins whose herdr state_change_seq did not move."""
        with self._write() as db:
            current = self.get_worker(run_id, task_label)
            unchanged = current.unchanged_check_ins + 1 if state_change_seq == current.last_state_change_seq else 0
            at = self._stamp()
            updated, columns = self._apply(
                current, {}, last_state_change_seq=state_change_seq, unchanged_check_ins=unchanged, updated_at=at
            )
            db.execute(
                "UPDATE workers SET last_state_change_seq = ?, unchanged_check_ins = ?, updated_at = ? WHERE run_id = ? AND task_label = ?",
                (state_change_seq, unchanged, at, run_id, task_label),
            )
            self._journal(
                run_id,
                EventKind.CHECK_IN,
                task_label=task_label,
                detail={"state_change_seq": state_change_seq, "unchanged_check_ins": unchanged},
                at=at,
            )
        return updated

    # -- journal ------------------------------------------------------------------------------------------

    def record_fact(
        self, run_id: str, kind: str, *, task_label: str | None = None, detail: Mapping[str, Any] | None = None
    ) -> Event:
        """Append a fact to the journal without changing any row (e.g. a verification step, a report path)."""
        _check_fact(kind)
        with self._write():
            if task_label is None:
                self.get_run(run_id)
            else:
                self._worker_row(run_id, task_label)
            seq = self._journal(run_id, kind, task_label=task_label, detail=detail)
        return self.event(seq)

    def event(self, seq: int) -> Event:
        """One journal row by sequence number."""
        row = self._db.execute("SELECT * FROM events WHERE seq = ?", (seq,)).fetchone()
        if row is None:
            raise RegistryError(f"no event #{seq} in the ledger")
        return _record(Event, row)

    def events(self, run_id: str, *, task_label: str | None = None, after_seq: int = 0) -> list[Event]:
        """The run's journal in order, optionally one worker's rows only, optionally after a sequence number."""
        sql, args = "SELECT * FROM events WHERE run_id = ? AND seq > ?", [run_id, after_seq]
        if task_label is not None:
            sql, args = sql + " AND task_label = ?", [*args, task_label]
        return [_record(Event, row) for row in self._db.execute(sql + " ORDER BY seq", args)]

    def last_event(self, run_id: str, kind: str) -> Event | None:
        """The run's newest journal row of ``kind`` (e.g. its last check-in), or None."""
        row = self._db.execute("SELECT * FROM events WHERE run_id = ? AND kind = ? ORDER BY seq DESC LIMIT 1", (run_id, kind)).fetchone()
        return None if row is None else _record(Event, row)

    # -- inbox --------------------------------------------------------------------------------------------

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
    ) -> InboxMessage:
        """Record one inbound message once (`Rows.record_inbound`); an accepted copy of an accepted one is kept aside, and
        a spool delivery already recorded is not recorded again (its first row is returned)."""
        row = self.rows.record_inbound(
            run_id, raw, source=source, verdict=verdict, fingerprint=fingerprint, reason_code=reason_code, reason=reason,
            task_label=task_label, kind=kind, sender=sender, received_at=received_at,
        )  # fmt: skip
        return self.get_inbound(row["id"])

    def get_inbound(self, inbox_id: int) -> InboxMessage:
        """One inbox message by id."""
        row = self._db.execute("SELECT * FROM inbox WHERE id = ?", (inbox_id,)).fetchone()
        if row is None:
            raise InboxNotFound(inbox_id)
        return _record(InboxMessage, row)

    def mark_handled(self, inbox_id: int) -> InboxMessage:
        """Note that the controller has acted on (or reported) a message; idempotent resume skips it after this."""
        with self._write() as db:
            message = self.get_inbound(inbox_id)
            if message.handled_at is not None:
                return message
            at = self._stamp()
            db.execute("UPDATE inbox SET handled_at = ? WHERE id = ?", (at, inbox_id))
            known = message.verdict is InboxVerdict.ACCEPTED and message.task_label is not None and db.execute(
                "SELECT 1 FROM workers WHERE run_id = ? AND task_label = ?", (message.run_id, message.task_label)
            ).fetchone() is not None
            self._journal(
                message.run_id,
                EventKind.INBOX_HANDLED,
                task_label=message.task_label if known else None,
                detail={"inbox_id": inbox_id},
                at=at,
            )
        return self.get_inbound(inbox_id)

    def prompted_tasks(self, run_id: str) -> frozenset[str]:
        """The run's tasks orch prompted (an `agent_prompt` effect in flight or confirmed) since their last transition."""
        return core.prompted_tasks(self._db, run_id)

    def accepted_fingerprints(self, run_id: str) -> frozenset[str]:
        """The fingerprints of the run's accepted messages (what a duplicate check needs, without reading the rows)."""
        return core.accepted_fingerprints(self._db, run_id)

    def list_inbox(
        self,
        run_id: str,
        *,
        verdict: InboxVerdict | None = None,
        task_label: str | None = None,
        kind: str | None = None,
        unhandled: bool = False,
    ) -> list[InboxMessage]:
        """The run's inbox in arrival order, filtered by verdict, task, kind and whether it is still unhandled."""
        sql, args = "SELECT * FROM inbox WHERE run_id = ?", [run_id]
        for column, value in (("verdict", verdict), ("task_label", task_label), ("kind", kind)):
            if value is not None:
                sql, args = sql + f" AND {column} = ?", [*args, str(value)]
        if unhandled:
            sql += " AND handled_at IS NULL"
        return [_record(InboxMessage, row) for row in self._db.execute(sql + " ORDER BY id", args)]

    # -- effects ------------------------------------------------------------------------------------------

    def intend(self, run_id: str, task_label: str | None, kind: str, key: str, request: Mapping[str, Any]) -> Effect:
        """Record a side effect before making it; the same key again returns the existing row, with is_new False."""
        if not key or not kind:
            raise RegistryError("an effect needs a kind and a key")
        encoded = _json(dict(request))
        with self._write() as db:
            row = db.execute("SELECT * FROM effects WHERE run_id = ? AND key = ?", (run_id, key)).fetchone()
            if row is not None:
                existing = _record(Effect, row)
                if (existing.kind, existing.task_label, _json(existing.request)) != (kind, task_label, encoded):
                    raise EffectConflict(
                        f"effect key {key} of run {run_id} already names a {existing.kind} for {existing.task_label or 'the run'}"
                        " with a different request; use a new key for a different action"
                    )
                return existing
            if task_label is None:
                self.get_run(run_id)
            else:
                self._worker_row(run_id, task_label)
            at = self._stamp()
            cursor = db.execute(
                "INSERT INTO effects (run_id, task_label, kind, key, status, request, intended_at) VALUES (?, ?, ?, ?, 'intended', ?, ?)",
                (run_id, task_label, kind, key, encoded, at),
            )
            effect_id = cursor.lastrowid
            assert effect_id is not None
            self._journal(
                run_id,
                EventKind.EFFECT_INTENDED,
                task_label=task_label,
                detail={"effect_id": effect_id, "kind": kind, "key": key, "request": dict(request)},
                at=at,
            )
        return dataclasses.replace(self.get_effect(effect_id), is_new=True)

    def get_effect(self, effect_id: int) -> Effect:
        """One effect by id."""
        row = self._db.execute("SELECT * FROM effects WHERE id = ?", (effect_id,)).fetchone()
        if row is None:
            raise EffectNotFound(effect_id)
        return _record(Effect, row)

    def find_effect(self, run_id: str, key: str) -> Effect | None:
        """The effect of the run with this key, if it was ever intended."""
        row = self._db.execute("SELECT * FROM effects WHERE run_id = ? AND key = ?", (run_id, key)).fetchone()
        return None if row is None else _record(Effect, row)

    def _settle(self, effect: Effect | int, status: EffectStatus, kind: EventKind, **columns: Any) -> Effect:
        effect_id = effect if isinstance(effect, int) else effect.id
        with self._write() as db:
            at = self._stamp()
            cursor = db.execute(
                f"UPDATE effects SET status = ?, settled_at = ?{''.join(f', {c} = ?' for c in columns)}"
                " WHERE id = ? AND status = 'intended'",
                (str(status), at, *(_column(v) for v in columns.values()), effect_id),
            )
            if cursor.rowcount == 0:
                raise EffectSettled(effect_id, str(self.get_effect(effect_id).status), str(status))
            settled = self.get_effect(effect_id)
            self._journal(
                settled.run_id,
                kind,
                task_label=settled.task_label,
                detail={"effect_id": effect_id, "kind": settled.kind, "key": settled.key, **columns},
                at=at,
            )
        return settled

    def confirm(self, effect: Effect | int, response: Mapping[str, Any] | None = None) -> Effect:
        """The effect happened; keep what herdr or git answered (ids to reuse on resume)."""
        return self._settle(effect, EffectStatus.CONFIRMED, EventKind.EFFECT_CONFIRMED, response=dict(response or {}))

    def fail(self, effect: Effect | int, error: str) -> Effect:
        """The effect was attempted and did not happen; keep the exact error."""
        return self._settle(effect, EffectStatus.FAILED, EventKind.EFFECT_FAILED, error=error)

    def abandon(self, effect: Effect | int, reason: str) -> Effect:
        """The effect will not be made (or could not be settled by read-back); keep why."""
        return self._settle(effect, EffectStatus.ABANDONED, EventKind.EFFECT_ABANDONED, error=reason)

    def in_flight(self, run_id: str) -> list[Effect]:
        """Effects of the run still intended: made or not, unknown until read back from herdr and git."""
        return self.list_effects(run_id, status=EffectStatus.INTENDED)

    def list_effects(
        self, run_id: str, *, task_label: str | None = None, status: EffectStatus | None = None
    ) -> list[Effect]:
        """The run's effects in the order they were intended, optionally filtered."""
        sql, args = "SELECT * FROM effects WHERE run_id = ?", [run_id]
        for column, value in (("task_label", task_label), ("status", status)):
            if value is not None:
                sql, args = sql + f" AND {column} = ?", [*args, str(value)]
        return [_record(Effect, row) for row in self._db.execute(sql + " ORDER BY id", args)]

