"""A worker's callback taken in: read, judged against the ledger, recorded once, and applied to its worker.

The one callback path, for both doors (the person's `orch run`, the agent controller's `orch inbox add --check-in`)
and every transport (the console script's route without click, `orch inbox add` through click, the engine's own
callers): they differ only in how they open the ledger (`Intake.open` from the environment, `Intake.of` from an
engine). Nothing here imports pydantic, so a worker's callback never pays for it (docs/PERFORMANCE.md): the Message
Contract is `packets.validate` (over `packets.envelope`, `packets.screen`, `packets.result`), the writes are
`registry.core.Rows` (the Ledger's own SQL), the worker moves by `registry.machine`. The route, file by file, is in
docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from orchestrator.locations import LEDGER_FILE, locations, run_dir
from orchestrator.reportfiles import pinned_roots
from packets.envelope import DEFAULT_MESSAGE_LIMIT, MESSAGE_LIMIT_RANGE, parse_message
from packets.inert import inert_line
from packets.result import parse_result
from packets.screen import Reason
from packets.validate import Accepted, KeptAside, LedgerView, RegisteredWorker, fingerprint, oversize, validate
from registry.facts import CallbackCause, FactKind
from registry.core import Rows
from registry.errors import StaleState
from registry.kinds import CONTROLLER_HOST, InboxVerdict, RunStatus
from registry.machine import ACCEPTS, AT_WORK, OPEN, REOPENED_BY_PROMPT, WorkerState, accepted_kinds, is_legal

if TYPE_CHECKING:
    from orchestrator.engine import Engine
    from registry.records import Run, Worker

S = WorkerState
# A callback moves its worker on only from OPEN (doing, or waiting on, the delegated work: registry.machine).
TARGET = {"question": S.QUESTION, "blocked": S.BLOCKED, "result": S.RESULT}
# What the ledger keeps of a message over the limit, besides its size and hash: enough to see what it was.
KEPT_PREFIX_BYTES = 2048
# Beside the plan snapshot: the run's effective message limit, fixed at preflight like the plan itself, so a callback
# reads one small file instead of resolving the plan and its policy overlays.
LIMITS_FILE = "limits.json"
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Raw:
    """A message as it came through a door: its text (only a prefix when it is over the limit), size and hash."""

    text: str
    size: int
    sha256: str
    complete: bool


def _decode(data: bytes) -> str:
    # Undecodable bytes become U+FFFD: printable, storable, and never a control character.
    return data.decode("utf-8", errors="replace")


def read_stream(stream: BinaryIO, limit: int) -> Raw:
    """Read one message from a byte stream (the stdin door), keeping at most ``limit + 1`` bytes and hashing all of it."""
    digest, kept, size = hashlib.sha256(), bytearray(), 0
    while chunk := stream.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
        if len(kept) <= limit:
            kept += chunk[: limit + 1 - len(kept)]
    if size > limit:
        return Raw(text=_decode(bytes(kept[:KEPT_PREFIX_BYTES])), size=size, sha256=digest.hexdigest(), complete=False)
    return Raw(text=_decode(bytes(kept)), size=size, sha256=digest.hexdigest(), complete=True)


def read_text(text: str, limit: int) -> Raw:
    """The same for the argument door: argv arrives decoded with surrogateescape, so undo that to count real bytes."""
    data = text.encode("utf-8", errors="surrogateescape")
    if len(data) > limit:
        return Raw(text=_decode(data[:KEPT_PREFIX_BYTES]), size=len(data), sha256=hashlib.sha256(data).hexdigest(), complete=False)
    return Raw(text=_decode(data), size=len(data), sha256=hashlib.sha256(data).hexdigest(), complete=True)


def read(text: str, stdin: BinaryIO, limit: int) -> Raw:
    """TEXT as given, or stdin when TEXT is `-`: one message, measured against the run's limit."""
    return read_stream(stdin, limit) if text == "-" else read_text(text, limit)


def saved_limit(folder: Path) -> int | None:
    """The message limit preflight saved in a run's folder, or None when there is none (or it is not a valid one)."""
    try:
        saved = json.loads((folder / LIMITS_FILE).read_text(encoding="utf-8"))["message_limit_bytes"]
        if isinstance(saved, int) and MESSAGE_LIMIT_RANGE[0] <= saved <= MESSAGE_LIMIT_RANGE[1]:
            return saved
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


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
    from orchestrator.errors import OrchError  # only a run preflighted before the limit was saved gets here

    try:
        # A run preflighted before the limit was saved: its plan snapshot says.
        return engine.plan_for(run).message_limit
    except OrchError:
        # No readable snapshot (a run created by hand, or one whose plan no longer resolves): the default still protects.
        return DEFAULT_MESSAGE_LIMIT


def worker_panes(pane_id: str | None, created_pane_ids: Sequence[str]) -> tuple[str, ...]:
    """The herdr panes a worker's process may run in: its pane and every pane id orch recorded for it (herdr gives a
    pane moved to another workspace a new id, while the process keeps the HERDR_PANE_ID it started with)."""
    return tuple(dict.fromkeys([*([pane_id] if pane_id else []), *created_pane_ids]))


def caller_pane(env: Mapping[str, str]) -> str | None:
    """The herdr pane a callback was run from (herdr sets HERDR_PANE_ID in every pane it runs), or None outside herdr."""
    return env.get("HERDR_PANE_ID") or None


def may_apply(state: WorkerState, kind: str) -> bool:
    """Whether an accepted callback may still change its worker once recorded: its state takes the kind, or a prompt
    may be reopening it (the judge saw the same; a worker moved in between by another process is left as it is)."""
    return kind in ACCEPTS[state] or state in REOPENED_BY_PROMPT


@dataclass(frozen=True)
class Added:
    """The verdict on one inbound message and what it changed."""

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
    # A spool delivery the ledger already held (another collection recorded it first): nothing recorded or applied now.
    already_recorded: bool = False

    def as_json(self) -> dict[str, Any]:
        """Its `--json` form: every field, enums by value."""
        return {
            "inbox_id": self.inbox_id, "run_id": self.run_id, "verdict": str(self.verdict), "reason_code": self.reason_code,
            "reason": self.reason, "task": self.task, "kind": self.kind, "sender": self.sender,
            "state_before": None if self.state_before is None else str(self.state_before),
            "state_after": None if self.state_after is None else str(self.state_after),
            "already_recorded": self.already_recorded,
        }  # fmt: skip


def render_added(added: Added) -> str:
    """One line: the verdict and what it changed."""
    who = f"{added.kind or '?'} from {added.sender or '?'} for task {added.task or '?'}"
    if added.already_recorded:
        return f"already recorded as #{added.inbox_id} ({added.verdict}): nothing recorded again\n"
    if added.verdict is InboxVerdict.ACCEPTED:
        moved = f"{added.state_before} -> {added.state_after}" if added.state_before != added.state_after else f"stays {added.state_after}"
        return f"accepted #{added.inbox_id}: {who} (worker {moved})\n"
    if added.reason_code in (Reason.MALFORMED_HEADER, Reason.OVERSIZE):  # nothing was read of who sent it
        return f"kept aside #{added.inbox_id} ({added.reason_code}): {inert_line(added.reason or '')}\n"
    return f"kept aside #{added.inbox_id} ({added.reason_code}): {who}: {inert_line(added.reason or '')}\n"


class Intake:
    """One open ledger (as rows) and one run: everything `orch inbox add` needs, and nothing more (no records, no engine)."""

    def __init__(
        self, rows: Rows, folder: Path, run_id: str, status: RunStatus, controller_target: str, limit: int, pane: str | None
    ) -> None:
        self.rows = rows
        self.folder = folder
        self.run_id = run_id
        self.status = status
        self.controller_target = controller_target
        self.limit = limit
        self.pane = pane

    @classmethod
    def open(cls, env: Mapping[str, str], run_id: str) -> Intake | None:
        """A worker's callback, from the environment alone; None when there is no ledger, no such run or no saved limit
        (the caller opens the engine, which says what is wrong or reads an old run's limit from its plan)."""
        orch_home = locations(env)["orch_home"]
        path = orch_home / LEDGER_FILE
        if not path.is_file():
            return None
        rows = Rows.open(path, create=False)  # the Ledger's own open: WAL, busy timeout, foreign keys, migrations
        run = rows.run(run_id)
        folder = run_dir(orch_home, run_id)
        limit = None if run is None else saved_limit(folder)
        if run is None or limit is None:
            rows.close()
            return None
        return cls(rows, folder, run_id, RunStatus(run["status"]), run["controller_target"], limit, caller_pane(env))

    @classmethod
    def of(cls, engine: Engine, run: Run, limit: int | None = None) -> Intake:
        """The same over an engine's ledger connection (its `rows`): never closed here, the connection is the engine's."""
        limit = message_limit(engine, run) if limit is None else limit
        return cls(
            engine.ledger.rows, engine.run_dir(run.run_id), run.run_id, run.status, run.controller_target, limit, caller_pane(engine.env)
        )

    def close(self) -> None:
        """Close the ledger connection this intake opened itself."""
        self.rows.close()

    def view(self, host: str = CONTROLLER_HOST) -> LedgerView:
        """What validation needs from the ledger: this run, the other runs, registered workers, accepted fingerprints.

        ``host``: where the message was sent from. Pane ids are that host's herdr's own, so only its workers' panes
        are compared with the sender's (a worker on another host may hold the very same id)."""
        prompted = self.rows.prompted_tasks(self.run_id)
        workers = tuple(
            RegisteredWorker(
                task_label=row["task_label"], worker_name=row["name"], reply_target=row["reply_target"] or row["pane_id"],
                # Where the worker may write reports: the real paths of its checkout and report directory, pinned
                # before it ran (`orchestrator.reportfiles`), so a root it later swaps for a symlink moves nothing.
                report_roots=tuple(real for _named, real in pinned_roots(self.folder, row["task_label"], row["worktree_path"])),
                panes=worker_panes(row["pane_id"], json.loads(row["created_pane_ids"])) if row["host"] == host else (), state=str(row["state"]),
                accepts=accepted_kinds(WorkerState(row["state"]), prompted=row["task_label"] in prompted),
            )  # fmt: skip
            for row in self.rows.workers(self.run_id)
            if row["reply_target"] or row["pane_id"]
        )
        return LedgerView(
            run_id=self.run_id,
            controller_target=self.controller_target,
            other_run_ids=self.rows.other_run_ids(self.run_id),
            workers=workers,
            accepted_fingerprints=self.rows.accepted_fingerprints(self.run_id),
            message_limit=self.limit,
        )

    def add(self, inbound: Raw | str, *, source: str = "cli", host: str = CONTROLLER_HOST, pane: str | None = None) -> Added:
        """Judge and record one message (whichever door it came through); an accepted one updates its worker.

        ``host`` and ``pane``: a message collected from another host's spool, and the herdr pane it was sent from
        there (else the caller's own pane, on the controller's machine)."""
        view = self.view(host)
        if isinstance(inbound, str):
            inbound = read_text(inbound, view.message_limit)
        verdict: Accepted | KeptAside
        if not inbound.complete or inbound.size > view.message_limit:
            verdict = oversize(inbound.size, inbound.sha256, view.message_limit)
        else:
            verdict = validate(inbound.text, view, resolve=os.path.realpath, pane=self.pane if host == CONTROLLER_HOST else pane)
        message = verdict.message
        # A finished run takes nothing: that says more than the worker's turn (its state is past every turn by then).
        finished_turn = isinstance(verdict, KeptAside) and verdict.reason is Reason.OUT_OF_TURN
        if (isinstance(verdict, Accepted) or finished_turn) and self.status is RunStatus.FINISHED:
            verdict = KeptAside(Reason.STALE_RUN, f'run "{self.run_id}" is finished', message)
        if isinstance(verdict, Accepted):
            row = self.rows.record_inbound(
                self.run_id, inbound.text, source=source, verdict=InboxVerdict.ACCEPTED, fingerprint=verdict.fingerprint,
                task_label=verdict.task_label, kind=verdict.message.kind, sender=verdict.message.sender,
            )  # fmt: skip
        else:
            row = self.rows.record_inbound(
                self.run_id, inbound.text, source=source, verdict=InboxVerdict.KEPT_ASIDE,
                # A message without parsed fields (malformed, oversize) is keyed by the hash of all its bytes.
                fingerprint=fingerprint(message) if message else inbound.sha256,
                reason_code=str(verdict.reason), reason=verdict.explanation,
                task_label=message.task if message else None, kind=message.kind if message else None,
                sender=message.sender if message else None,
            )  # fmt: skip
        recorded = InboxVerdict(row["verdict"])
        before = after = None
        if row["already_recorded"]:
            pass  # another collection recorded this delivery first, and applied it: never twice
        elif recorded is InboxVerdict.ACCEPTED and row["task_label"] is not None:
            before, after = self._apply(row["id"], row["task_label"], row["kind"] or "", message.body if message else "")
        return Added(
            inbox_id=row["id"], run_id=self.run_id, verdict=recorded, reason_code=row["reason_code"], reason=row["reason"],
            task=row["task_label"], kind=row["kind"], sender=row["sender"], state_before=before, state_after=after,
            already_recorded=row["already_recorded"],
        )  # fmt: skip

    def _apply(self, inbox_id: int, task: str, kind: str, body: str) -> tuple[WorkerState, WorkerState]:
        """Let an accepted callback change its worker: compare-and-set, re-read once if another process moved it first."""
        changes: dict[str, Any] = {"last_callback_id": inbox_id}
        if kind in ("question", "blocked"):
            changes["pending_question"] = body
        if kind == "result":
            changes["reported_checks"] = parse_result(body).to_json()
        cause = CallbackCause(inbox_id=inbox_id, kind=kind)
        for _ in range(2):
            state = self.rows.worker_state(self.run_id, task)
            if not may_apply(state, kind):
                return state, state
            target = TARGET.get(kind)
            if target is not None and state in OPEN and state != target and is_legal(state, target):
                if not self.rows.transition(self.run_id, task, state, target, cause=cause, **changes):
                    continue  # another process moved the worker first
                return state, target
            # An update only records; a callback that cannot move the worker (already there, or past it) is still kept on it.
            return state, self.rows.update_worker(self.run_id, task, fact=FactKind.CALLBACK, cause=cause, **changes)
        state = self.rows.worker_state(self.run_id, task)
        return state, state


def take(env: Mapping[str, str], run_id: str, text: str, stdin: BinaryIO, *, source: str) -> Added | Raw | None:
    """`orch inbox add --run RUN_ID TEXT|-` from the environment alone: what it recorded (Added), or, when it cannot
    record, what it read (Raw: an empty message) or None (no ledger, no such run, no saved limit), for the engine to answer."""
    intake = Intake.open(env, run_id)
    if intake is None:
        return None
    try:
        inbound = read(text, stdin, intake.limit)
        if inbound.complete and not inbound.text.strip():
            return inbound  # nothing to judge: the caller says so, and records nothing
        return intake.add(inbound, source=source)
    finally:
        intake.close()


def add_message(engine: Engine, run: Run, raw: str | Raw, *, source: str = "cli", limit: int | None = None) -> Added:
    """Judge and record one message for a run the engine holds (`Intake.of(...).add`); ``limit`` when already known."""
    return Intake.of(engine, run, limit).add(raw, source=source)


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
    target = TARGET.get(message.kind or "")
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
