"""The acceptance rule: an inbound envelope judged against a view of the ledger, from raw text to a verdict; pure (no pydantic).

The one place the Message Contract's acceptance order is written (docs/message-contract.md): every door and transport
of `orch inbox add` reaches it through `orchestrator.intake`. The body rules it applies live in `packets.screen`.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from packets.envelope import CONTROLLER_KINDS, DEFAULT_MESSAGE_LIMIT, MESSAGE_LIMIT_RANGE, WORKER_KINDS, Message, parse_message
from packets.errors import EnvelopeError, PacketError
from packets.result import parse_result
from packets.screen import REASON_SUMMARIES, Reason, looks_like_header, screen_body

__all__ = [
    "REASON_SUMMARIES", "Accepted", "KeptAside", "LedgerView", "Reason", "RegisteredWorker", "Verdict", "fingerprint",
    "looks_like_header", "message_size", "oversize", "screen_body", "validate",
]  # fmt: skip


@dataclass(frozen=True)
class RegisteredWorker:
    """What validation needs to know about one registered worker."""

    task_label: str
    worker_name: str
    reply_target: str
    # Absolute directories the worker may write reports in (its worktree, the run's report directory for it), as real paths.
    report_roots: tuple[str, ...] = ()
    # The herdr panes the worker's process may run in (its pane, and any id it had before herdr renumbered it).
    panes: tuple[str, ...] = ()
    # Its state, and the message kinds that state takes now (`registry.machine.accepted_kinds`); None: not judged.
    state: str | None = None
    accepts: frozenset[str] | None = None


@dataclass(frozen=True)
class LedgerView:
    """The slice of the ledger a message is judged against: the current run, older runs, workers, accepted messages.

    Built by `orchestrator.intake` from ledger rows; a view that breaks its rules is a one-line PacketError.
    """

    run_id: str
    controller_target: str
    other_run_ids: frozenset[str] = frozenset()
    workers: tuple[RegisteredWorker, ...] = ()
    accepted_fingerprints: frozenset[str] = frozenset()
    message_limit: int = DEFAULT_MESSAGE_LIMIT

    def __post_init__(self) -> None:
        labels = [worker.task_label for worker in self.workers]
        problem = None
        if len(labels) != len(set(labels)):
            problem = "each task label must belong to exactly one registered worker"
        elif self.run_id in self.other_run_ids:
            problem = "the current run id cannot also be an other run id"
        elif not MESSAGE_LIMIT_RANGE[0] <= self.message_limit <= MESSAGE_LIMIT_RANGE[1]:
            problem = f"message_limit {self.message_limit} is outside {MESSAGE_LIMIT_RANGE[0]}-{MESSAGE_LIMIT_RANGE[1]}"
        if problem is not None:
            raise PacketError(f"invalid ledger view: {problem}")


@dataclass(frozen=True)
class Accepted:
    """A message that may change the ledger, with the task it belongs to and its fingerprint for duplicate checks."""

    task_label: str
    message: Message
    fingerprint: str
    outcome: Literal["accepted"] = "accepted"


@dataclass(frozen=True)
class KeptAside:
    """A message that must not change anything; recorded and reported with one reason and a one-line explanation."""

    reason: Reason
    explanation: str
    message: Message | None = None
    outcome: Literal["kept_aside"] = "kept_aside"


Verdict = Accepted | KeptAside


def fingerprint(message: Message) -> str:
    """A stable sha256 over run, task, sender, kind and the normalised body (reply-to is deliberately left out)."""
    fields = [message.run_id, message.task, message.sender, message.kind, message.body]
    encoded = json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(encoded).hexdigest()


def message_size(raw_text: str) -> int:
    """The size the limit applies to: UTF-8 bytes of the text exactly as received."""
    return len(raw_text.encode("utf-8", errors="surrogatepass"))


def oversize_explanation(size: int, sha256: str, limit: int) -> str:
    """Why a message over the limit is kept aside, from its size and hash alone (the stdin door never holds all of it)."""
    return (
        f"the message is {size} bytes, over the {limit}-byte limit (sha256 {sha256}); "
        "large content belongs in a report file, sent by path"
    )


def oversize(size: int, sha256: str, limit: int) -> KeptAside:
    """The verdict on a message over the limit, from its size and hash alone (the stdin door never holds all of it)."""
    return KeptAside(Reason.OVERSIZE, oversize_explanation(size, sha256, limit))


def _confine(path: str, roots: tuple[str, ...], resolve: Callable[[str], str]) -> str | None:
    """Why a report path is not one the worker may write (None when it is)."""
    if path.startswith("~"):
        return "starts with ~ (never expanded: give the absolute path)"
    if not posixpath.isabs(path):
        return "is not an absolute path"
    if ".." in path.split("/"):
        return 'contains ".."'
    try:
        real = resolve(path)
    except (OSError, ValueError):  # a path swapped while it was resolved: nothing orch can vouch for
        return "cannot be resolved"
    for root in roots:
        # Roots come as real paths, pinned before the worker ran: resolving them again would follow a worker's swap.
        base = posixpath.normpath(root)
        if real == base or real.startswith(base.rstrip("/") + "/"):
            return None
    where = ", ".join(roots) if roots else "no directory (none is registered for this worker)"
    return f"resolves outside {where}" if real != posixpath.normpath(path) else f"is outside {where}"


# How much of one header value an explanation quotes: values have no length limit of their own but the message's.
_QUOTED = 80


def _q(value: str) -> str:
    return value if len(value) <= _QUOTED else value[: _QUOTED - 1] + "…"


def validate(
    raw_text: str, view: LedgerView, *, resolve: Callable[[str], str] = posixpath.normpath, pane: str | None = None
) -> Verdict:
    """Decide whether an inbound envelope is accepted for a task or kept aside, and why; never raises for bad input.

    The steps run in the order docs/message-contract.md states: size, header, run, task, sender, reply target and
    pane, direction, body, report paths, duplicate, turn; the first failing step is the reason. ``resolve`` maps a
    path to the one it names (the engine passes ``os.path.realpath`` so symlinks count; the default is lexical);
    ``pane`` is the herdr pane the callback was run from (``HERDR_PANE_ID``), None when it was not run from one.
    """
    size = message_size(raw_text)
    if size > view.message_limit:
        digest = hashlib.sha256(raw_text.encode("utf-8", errors="surrogatepass")).hexdigest()
        return KeptAside(Reason.OVERSIZE, oversize_explanation(size, digest, view.message_limit))
    try:
        message = parse_message(raw_text)
    except EnvelopeError as error:
        return KeptAside(Reason.MALFORMED_HEADER, str(error))

    def aside(reason: Reason, explanation: str) -> KeptAside:
        return KeptAside(reason, explanation, message)

    if message.run_id != view.run_id:
        if message.run_id in view.other_run_ids:
            return aside(Reason.STALE_RUN, f'run "{_q(message.run_id)}" is an earlier or finished run; the current run is "{view.run_id}"')
        return aside(Reason.UNKNOWN_RUN, f'run "{_q(message.run_id)}" is not the current run "{view.run_id}" nor any run the ledger knows')
    worker = next((w for w in view.workers if w.task_label == message.task), None)
    if worker is None:
        return aside(Reason.UNKNOWN_TASK, f'task "{_q(message.task)}" has no registered worker in run "{view.run_id}"')
    if message.sender != worker.worker_name:
        return aside(Reason.WRONG_SENDER, f'sender "{_q(message.sender)}" is not "{worker.worker_name}", the worker registered for task "{_q(message.task)}"')
    if message.reply_to != worker.reply_target:
        return aside(
            Reason.WRONG_REPLY_TO,
            f'reply-to "{_q(message.reply_to)}" is not "{worker.reply_target}", the target registered for worker "{worker.worker_name}"',
        )
    owner = None if pane is None or pane in worker.panes else next((w for w in view.workers if pane in w.panes), None)
    if owner is not None:
        return aside(
            Reason.WRONG_PANE,
            f'sent from pane "{pane}", worker "{owner.worker_name}"\'s pane, not from worker "{worker.worker_name}"\'s ({", ".join(worker.panes)})',
        )
    if message.kind in CONTROLLER_KINDS:
        return aside(
            Reason.WRONG_DIRECTION,
            f'kind "{message.kind}" is sent by the controller ({view.controller_target}), never to it; workers send update, question, blocked or result',
        )
    screened = screen_body(message.body)
    if screened is not None:
        return aside(*screened)
    if message.kind == "result":
        for path in parse_result(message.body).reports:
            why = _confine(path, worker.report_roots, resolve)
            if why is not None:
                return aside(Reason.REPORT_OUTSIDE, f'report path "{path}" {why}; reports belong in the worker\'s working directory or its report directory')
    digest = fingerprint(message)
    if digest in view.accepted_fingerprints:
        return aside(
            Reason.DUPLICATE,
            f'the same {message.kind} from "{_q(message.sender)}" for task "{_q(message.task)}" was already accepted (fingerprint {digest[:12]})',
        )
    if worker.accepts is not None and message.kind not in worker.accepts:
        takes = ", ".join(kind for kind in WORKER_KINDS if kind in worker.accepts) or "no message"
        return aside(
            Reason.OUT_OF_TURN,
            f'worker "{worker.worker_name}" is {worker.state}, which takes {takes} now; this {message.kind} changes nothing (orch keeps it aside for the person)',
        )
    return Accepted(worker.task_label, message, digest)
