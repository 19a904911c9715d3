"""Callback intake: validate an inbound envelope against the ledger, record it once, and let accepted ones update their worker."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, ConfigDict

from orchestrator.engine import Engine
from orchestrator.errors import OrchError
from orchestrator.intake import KEPT_PREFIX_BYTES as KEPT_PREFIX_BYTES  # shared with the fast path, named here as before
from orchestrator.intake import LIMITS_FILE as LIMITS_FILE
from orchestrator.intake import TARGET, caller_pane, may_apply, read_stream, read_text, roots, saved_limit, worker_panes
from orchestrator.intake import render_added as render_added
from packets import (
    DEFAULT_MESSAGE_LIMIT, Accepted, KeptAside, LedgerView, Reason, RegisteredWorker, fingerprint, inert_line, oversize, parse_message, validate,
)  # fmt: skip
from packets.result import parse_result
from registry.facts import CallbackCause, FactKind
from registry import InboxMessage, InboxVerdict, Run, RunStatus, StaleState, Worker, WorkerState, is_legal
from registry.machine import AT_WORK, OPEN, accepted_kinds

_OPEN, _TARGET = OPEN, TARGET


class InboxAdded(BaseModel):
    """The verdict on one inbound message and what it changed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    inbox_id: int
    run_id: str
    verdict: InboxVerdict
    reason_code: str | None
    reason: str | None
    task: str | None
    kind: str | None
    sender: str | None
    state_before: WorkerState | None = None
    state_after: WorkerState | None = None


class InboxEntry(BaseModel):
    """One row of `orch inbox list`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: int
    received_at: str
    verdict: InboxVerdict
    reason_code: str | None
    reason: str | None
    task: str | None
    kind: str | None
    sender: str | None
    handled: bool
    first_line: str


class InboxList(BaseModel):
    """Every message of a run, with its verdict."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    messages: tuple[InboxEntry, ...]


def report_dir(engine: Engine, run: Run, task: str) -> Path:
    """The run's report directory for one worker, named in its packet: the one place outside its worktree it may write."""
    return engine.run_dir(run.run_id) / "reports" / task


def report_roots(engine: Engine, run: Run, worker: Worker) -> tuple[Path, ...]:
    """Where a worker may write reports: its checkout and its report directory (both named in its packet)."""
    return tuple(Path(root) for root in roots(engine.run_dir(run.run_id), worker.task_label, worker.worktree_path))


class Inbound(BaseModel):
    """A message as it came through a door: its text (only a prefix when it is over the limit), size and hash."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    size: int
    sha256: str
    complete: bool


def read_inbound(stream: BinaryIO, limit: int) -> Inbound:
    """Read one message from a byte stream (the stdin door) holding at most ``limit + 1`` bytes, hashing all of it."""
    raw = read_stream(stream, limit)
    return Inbound(text=raw.text, size=raw.size, sha256=raw.sha256, complete=raw.complete)


def inbound_text(text: str, limit: int) -> Inbound:
    """The same for the argument door: argv arrives decoded with surrogateescape, so undo that to count real bytes."""
    raw = read_text(text, limit)
    return Inbound(text=raw.text, size=raw.size, sha256=raw.sha256, complete=raw.complete)


# LIMITS_FILE, beside the plan snapshot: the run's effective message limit, fixed at preflight like the plan itself, so
# a callback (one `orch inbox add` process each) reads one small file instead of resolving the plan and its policy overlays.


def save_message_limit(engine: Engine, run_id: str, limit: int) -> None:
    """Record the run's effective message limit in its folder (preflight, when it snapshots the plan)."""
    path = engine.run_dir(run_id) / LIMITS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"message_limit_bytes": limit}) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def message_limit(engine: Engine, run: Run) -> int:
    """The run's inbound size limit: the plan's `defaults.message_limit_bytes`, else the policy's, else 64 KiB."""
    saved = saved_limit(engine.run_dir(run.run_id))
    if saved is not None:
        return saved
    try:
        # A run preflighted before the limit was saved: its plan snapshot says.
        return engine.plan_for(run).message_limit
    except OrchError:
        # No readable snapshot (a run created by hand, or one whose plan no longer resolves): the default still protects.
        return DEFAULT_MESSAGE_LIMIT


def ledger_view(engine: Engine, run: Run, *, limit: int | None = None) -> LedgerView:
    """What validation needs from the ledger: this run, the other runs, registered workers, accepted fingerprints."""
    ledger = engine.ledger
    prompted = ledger.prompted_tasks(run.run_id)
    workers = tuple(
        RegisteredWorker(
            task_label=w.task_label, worker_name=w.name, reply_target=w.reply_target or w.pane_id or "",
            report_roots=tuple(str(root) for root in report_roots(engine, run, w)),
            panes=worker_panes(w.pane_id, w.created_pane_ids), state=str(w.state),
            accepts=accepted_kinds(w.state, prompted=w.task_label in prompted),
        )  # fmt: skip
        for w in ledger.list_workers(run.run_id)
        if w.reply_target or w.pane_id
    )
    return LedgerView(
        run_id=run.run_id,
        controller_target=run.controller_target,
        other_run_ids=frozenset(r.run_id for r in ledger.list_runs() if r.run_id != run.run_id),
        workers=workers,
        accepted_fingerprints=ledger.accepted_fingerprints(run.run_id),
        message_limit=message_limit(engine, run) if limit is None else limit,
    )


def add_message(engine: Engine, run: Run, raw: str | Inbound, *, source: str = "cli", limit: int | None = None) -> InboxAdded:
    """Validate and record one inbound message; an accepted one updates its worker (callback id, question, state).

    One message per call, whichever door it came through (argument, stdin, or one envelope of a batch);
    ``limit`` is the run's `message_limit` when the caller already has it.
    """
    view = ledger_view(engine, run, limit=limit)
    inbound = inbound_text(raw, view.message_limit) if isinstance(raw, str) else raw
    verdict: Accepted | KeptAside
    if not inbound.complete or inbound.size > view.message_limit:
        verdict = oversize(inbound.size, inbound.sha256, view.message_limit)
    else:
        verdict = validate(inbound.text, view, resolve=os.path.realpath, pane=caller_pane(engine.env))
    raw = inbound.text
    # A finished run takes nothing: that says more than the worker's turn (its state is past every turn by then).
    finished_turn = isinstance(verdict, KeptAside) and verdict.reason is Reason.OUT_OF_TURN
    if (isinstance(verdict, Accepted) or finished_turn) and run.status is RunStatus.FINISHED:
        verdict = KeptAside(Reason.STALE_RUN, f'run "{run.run_id}" is finished', verdict.message)
    message = verdict.message
    if isinstance(verdict, Accepted):
        recorded = engine.ledger.record_inbound(
            run.run_id, raw, source=source, verdict=InboxVerdict.ACCEPTED, fingerprint=verdict.fingerprint,
            task_label=verdict.task_label, kind=verdict.message.kind, sender=verdict.message.sender,
        )  # fmt: skip
    else:
        recorded = engine.ledger.record_inbound(
            run.run_id, raw, source=source, verdict=InboxVerdict.KEPT_ASIDE,
            # A message without parsed fields (malformed, oversize) is keyed by the hash of all its bytes.
            fingerprint=fingerprint(message) if message else inbound.sha256,
            reason_code=str(verdict.reason), reason=verdict.explanation,
            task_label=message.task if message else None, kind=message.kind if message else None,
            sender=message.sender if message else None,
        )  # fmt: skip
    before = after = None
    if recorded.verdict is InboxVerdict.ACCEPTED and recorded.task_label is not None:
        before, after = _apply(engine, run, recorded, message.body if message else "")
    return InboxAdded(
        inbox_id=recorded.id, run_id=run.run_id, verdict=recorded.verdict, reason_code=recorded.reason_code,
        reason=recorded.reason, task=recorded.task_label, kind=recorded.kind, sender=recorded.sender,
        state_before=before, state_after=after,
    )  # fmt: skip


def _apply(engine: Engine, run: Run, recorded: InboxMessage, body: str) -> tuple[WorkerState, WorkerState]:
    """Let an accepted callback change its worker: compare-and-set, re-read once if another process moved it first."""
    assert recorded.task_label is not None
    task, kind = recorded.task_label, recorded.kind or ""
    changes: dict[str, object] = {"last_callback_id": recorded.id}
    if kind in ("question", "blocked"):
        changes["pending_question"] = body
    if kind == "result":
        changes["reported_checks"] = parse_result(body).to_json()
    cause = CallbackCause(inbox_id=recorded.id, kind=kind)
    for _ in range(2):
        worker = engine.ledger.get_worker(run.run_id, task)
        if not may_apply(worker.state, kind):
            return worker.state, worker.state
        target = _TARGET.get(kind)
        if target is not None and worker.state in _OPEN and worker.state != target and is_legal(worker.state, target):
            try:
                updated = engine.ledger.transition(run.run_id, task, worker.state, target, cause=cause, **changes)
            except StaleState:
                continue
            return worker.state, updated.state
        # An update only records; a callback that cannot move the worker (already there, or past it) is still kept on it.
        updated = engine.ledger.update_worker(run.run_id, task, fact=FactKind.CALLBACK, cause=cause, **changes)
        return worker.state, updated.state
    worker = engine.ledger.get_worker(run.run_id, task)
    return worker.state, worker.state


def list_messages(engine: Engine, run: Run) -> InboxList:
    """Every message of the run in arrival order, with its verdict."""
    entries = []
    for m in engine.ledger.list_inbox(run.run_id):
        lines = [line for line in m.raw.replace("\r", "\n").split("\n") if line.strip()]
        body = lines[1] if len(lines) > 1 and lines[0].lstrip().startswith("[herdr-orchestration") else (lines[0] if lines else "")
        entries.append(
            InboxEntry(
                id=m.id, received_at=m.received_at.isoformat(timespec="seconds"), verdict=m.verdict,
                reason_code=m.reason_code, reason=m.reason, task=m.task_label, kind=m.kind, sender=m.sender,
                handled=m.handled_at is not None, first_line=body.strip(),
            )
        )  # fmt: skip
    return InboxList(run_id=run.run_id, messages=tuple(entries))


def render_list(listing: InboxList) -> str:
    """A compact table: id, verdict, task, kind, sender, handled, first body line or reason."""
    if not listing.messages:
        return f"Inbox of run {listing.run_id}: no messages\n"
    lines = [f"Inbox of run {listing.run_id}: {len(listing.messages)} message{'s' if len(listing.messages) != 1 else ''}"]
    for m in listing.messages:
        verdict = "accepted" if m.verdict is InboxVerdict.ACCEPTED else f"kept aside ({m.reason_code})"
        handled = "handled" if m.handled else "new"
        lines.append(f"#{m.id} {m.received_at} {verdict} {m.kind or '-'} task={m.task or '-'} from={m.sender or '-'} [{handled}]")
        lines.append(f"    {inert_line((m.reason or '') if m.verdict is InboxVerdict.KEPT_ASIDE else m.first_line)}")
    return "\n".join(lines) + "\n"


def catch_up(engine: Engine, run: Run, task: str, since: datetime) -> Worker:
    """Move a worker by a callback that arrived before the worker was marked as prompted.

    A fast agent (or a packet settled by read-back after a crash) can send its question, block or result while the
    ledger still has the worker ready, or in the result a follow-up is answering: the callback was recorded on the
    worker, but could not move it. Once the prompt is recorded, the latest such callback received after ``since``
    (when the prompt was intended) moves it, so the work is not asked for again.
    """
    worker = engine.ledger.get_worker(run.run_id, task)
    if worker.last_callback_id is None or worker.state not in AT_WORK:
        return worker
    message = engine.ledger.get_inbound(worker.last_callback_id)
    target = _TARGET.get(message.kind or "")
    if target is None or message.received_at <= since or not is_legal(worker.state, target):
        return worker
    # The prompt's own move cleared the question it answered, and with it the text of the one this callback asks.
    changes = {"pending_question": parse_message(message.raw).body} if message.kind in ("question", "blocked") else {}
    try:
        return engine.ledger.transition(
            run.run_id, task, worker.state, target, cause={"inbox_id": message.id, "kind": message.kind, "late": True}, **changes
        )
    except StaleState:
        return engine.ledger.get_worker(run.run_id, task)
