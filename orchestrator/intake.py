"""`orch inbox add` without pydantic: a worker's callback read, validated, recorded and applied through the ledger's own SQL.

Every worker callback of a run is one `orch inbox add` process, and importing pydantic and building its models cost
more than the rest of the call together (docs/PERFORMANCE.md). So the common call (a named run, one message, no
check-in) takes this path: the Message Contract's rules come from the pure `packets.screen` (the same function
`packets.validate` wraps), the writes from `registry.core` (the same SQL the Ledger runs), the run's files from
`orchestrator.locations`. Whatever it cannot answer exactly as the full path would (no such run or ledger, no saved
limit, a view that breaks its rules) it hands back before writing anything, and `orchestrator.inbox` takes over.
`tests/orchestrator/test_intake.py` replays the hostile corpus through both paths and compares ledgers and outputs.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from orchestrator.locations import LEDGER_FILE, locations, run_dir
from orchestrator.reportfiles import pinned_roots
from packets.envelope import MESSAGE_LIMIT_RANGE
from packets.errors import PacketError
from packets.inert import inert_line
from packets.result import parse_result
from packets.screen import Reason
from packets.validate import Accepted, KeptAside, LedgerView, RegisteredWorker, fingerprint, oversize, validate
from registry.facts import CallbackCause, FactKind
from registry.core import Rows
from registry.kinds import InboxVerdict, RunStatus
from registry.machine import ACCEPTS, OPEN, REOPENED_BY_PROMPT, WorkerState, accepted_kinds, is_legal

if TYPE_CHECKING:
    from orchestrator.inbox import InboxAdded

S = WorkerState
# A callback moves its worker on only from OPEN (doing, or waiting on, the delegated work: registry.machine).
TARGET = {"question": S.QUESTION, "blocked": S.BLOCKED, "result": S.RESULT}
# What the ledger keeps of a message over the limit, besides its size and hash: enough to see what it was.
KEPT_PREFIX_BYTES = 2048
# How many messages of the run's size limit one call may carry: the input is read up to this many limits.
BATCH_MAX = 64
# Beside the plan snapshot: the run's effective message limit, fixed at preflight like the plan itself.
LIMITS_FILE = "limits.json"
_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
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
    """Read one message from a byte stream (the stdin door) holding at most ``limit + 1`` bytes, hashing all of it."""
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


def saved_limit(folder: Path) -> int | None:
    """The message limit preflight saved in a run's folder, or None when there is none (or it is not a valid one)."""
    try:
        saved = json.loads((folder / LIMITS_FILE).read_text(encoding="utf-8"))["message_limit_bytes"]
        if isinstance(saved, int) and MESSAGE_LIMIT_RANGE[0] <= saved <= MESSAGE_LIMIT_RANGE[1]:
            return saved
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def roots(folder: Path, task: str, worktree_path: str | None) -> tuple[str, ...]:
    """Where a worker may write reports: the real paths of its checkout and its report directory (both named in its
    packet), as pinned before it ran (`orchestrator.reportfiles`): a root the worker later swaps for a symlink moves nothing."""
    return tuple(real for _named, real in pinned_roots(folder, task, worktree_path))


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


@dataclass(frozen=True, slots=True)
class Added:
    """The verdict on one inbound message and what it changed (the fields of `orchestrator.inbox.InboxAdded`)."""

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

    def as_json(self) -> dict[str, Any]:
        """What `InboxAdded.model_dump(mode="json")` gives."""
        return {
            "inbox_id": self.inbox_id, "run_id": self.run_id, "verdict": str(self.verdict), "reason_code": self.reason_code,
            "reason": self.reason, "task": self.task, "kind": self.kind, "sender": self.sender,
            "state_before": None if self.state_before is None else str(self.state_before),
            "state_after": None if self.state_after is None else str(self.state_after),
        }  # fmt: skip


def render_added(added: Added | InboxAdded) -> str:
    """One line: the verdict and what it changed."""
    who = f"{added.kind or '?'} from {added.sender or '?'} for task {added.task or '?'}"
    if added.verdict is InboxVerdict.ACCEPTED:
        moved = f"{added.state_before} -> {added.state_after}" if added.state_before != added.state_after else f"stays {added.state_after}"
        return f"accepted #{added.inbox_id}: {who} (worker {moved})\n"
    if added.reason_code in (Reason.MALFORMED_HEADER, Reason.OVERSIZE):  # nothing was read of who sent it
        return f"kept aside #{added.inbox_id} ({added.reason_code}): {inert_line(added.reason or '')}\n"
    return f"kept aside #{added.inbox_id} ({added.reason_code}): {who}: {inert_line(added.reason or '')}\n"


class Intake:
    """One open ledger and one run: what `orch inbox add` needs, as rows (no records, no engine)."""

    def __init__(self, rows: Rows, orch_home: Path, run: Mapping[str, Any], limit: int) -> None:
        self.rows = rows
        self.run_id: str = run["run_id"]
        self.status = RunStatus(run["status"])
        self.controller_target: str = run["controller_target"]
        self.folder = run_dir(orch_home, self.run_id)
        self.limit = limit

    @classmethod
    def open(cls, env: Mapping[str, str], run_id: str) -> Intake | None:
        """The run's intake, or None when the full path must answer (no ledger yet, no such run, no saved limit)."""
        orch_home = locations(env)["orch_home"]
        path = orch_home / LEDGER_FILE
        if not path.is_file():
            return None  # the full path creates the ledger and says there is no such run
        rows = Rows.open(path, create=False)  # the Ledger's own open: WAL, busy timeout, foreign keys, migrations
        run = rows.run(run_id)
        limit = None if run is None else saved_limit(run_dir(orch_home, run_id))
        if run is None or limit is None:
            rows.close()
            return None
        return cls(rows, orch_home, run, limit)

    def close(self) -> None:
        """Close the ledger connection."""
        self.rows.close()

    def view(self) -> LedgerView | None:
        """What validation needs from the ledger (as `orchestrator.inbox.ledger_view` builds it), or None if it breaks its rules."""
        prompted = self.rows.prompted_tasks(self.run_id)
        workers = tuple(
            RegisteredWorker(
                task_label=row["task_label"], worker_name=row["name"], reply_target=row["reply_target"] or row["pane_id"],
                report_roots=roots(self.folder, row["task_label"], row["worktree_path"]),
                panes=worker_panes(row["pane_id"], json.loads(row["created_pane_ids"])), state=str(row["state"]),
                accepts=accepted_kinds(WorkerState(row["state"]), prompted=row["task_label"] in prompted),
            )  # fmt: skip
            for row in self.rows.workers(self.run_id)
            if row["reply_target"] or row["pane_id"]
        )
        try:
            return LedgerView(
                run_id=self.run_id,
                controller_target=self.controller_target,
                other_run_ids=self.rows.other_run_ids(self.run_id),
                workers=workers,
                accepted_fingerprints=self.rows.accepted_fingerprints(self.run_id),
                message_limit=self.limit,
            )
        except PacketError:
            return None

    def add(self, inbound: Raw, view: LedgerView, *, source: str, pane: str | None = None) -> Added:
        """Validate and record one message; an accepted one updates its worker (`orchestrator.inbox.add_message`)."""
        verdict: Accepted | KeptAside
        if not inbound.complete or inbound.size > view.message_limit:
            verdict = oversize(inbound.size, inbound.sha256, view.message_limit)
        else:
            verdict = validate(inbound.text, view, resolve=os.path.realpath, pane=pane)
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
                fingerprint=fingerprint(message) if message else inbound.sha256, reason_code=str(verdict.reason), reason=verdict.explanation,
                task_label=message.task if message else None, kind=message.kind if message else None,
                sender=message.sender if message else None,
            )  # fmt: skip
        recorded = InboxVerdict(row["verdict"])
        before = after = None
        if recorded is InboxVerdict.ACCEPTED and row["task_label"] is not None:
            before, after = self._apply(row["id"], row["task_label"], row["kind"] or "", message.body if message else "")
        return Added(
            inbox_id=row["id"], run_id=self.run_id, verdict=recorded, reason_code=row["reason_code"], reason=row["reason"],
            task=row["task_label"], kind=row["kind"], sender=row["sender"], state_before=before, state_after=after,
        )  # fmt: skip

    def _apply(self, inbox_id: int, task: str, kind: str, body: str) -> tuple[WorkerState, WorkerState]:
        """Let an accepted callback change its worker: compare-and-set, re-read once if another process moved it first.

        The same steps as `orchestrator.inbox._apply`, through `Rows` instead of the Ledger.
        """
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
                    continue  # another process moved the worker first (the Ledger's StaleState)
                return state, target
            # An update only records; a callback that cannot move the worker (already there, or past it) is still kept on it.
            return state, self.rows.update_worker(self.run_id, task, fact=FactKind.CALLBACK, cause=cause, **changes)
        state = self.rows.worker_state(self.run_id, task)
        return state, state


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the fast path did: ``added`` when it recorded the message, else the input it read (for the full path)."""

    added: Added | None
    inbound: Raw | None = None


def take(env: Mapping[str, str], run_id: str, text: str, stdin: BinaryIO, *, source: str) -> Outcome:
    """`orch inbox add --run RUN_ID TEXT|-`: record one message here, or hand it back (read, unrecorded) to the full path."""
    intake = Intake.open(env, run_id)
    if intake is None:
        return Outcome(None)
    try:
        # Read as the full path does: up to BATCH_MAX limits (orchestrator.handover), each message measured on its own.
        batch = intake.limit * BATCH_MAX
        inbound = read_stream(stdin, batch) if text == "-" else read_text(text, batch)
        view = intake.view()
        if view is None or (inbound.complete and not inbound.text.strip()):
            return Outcome(None, inbound)  # the full path says what is wrong
        if inbound.complete and inbound.size > intake.limit:
            # Read up to the batch limit, yet over its own limit: keep only the prefix, as the stdin door does.
            kept = inbound.text.encode("utf-8", errors="replace")[:KEPT_PREFIX_BYTES].decode("utf-8", errors="replace")
            inbound = Raw(text=kept, size=inbound.size, sha256=inbound.sha256, complete=False)
        return Outcome(intake.add(inbound, view, source=source, pane=caller_pane(env)), inbound)
    finally:
        intake.close()
