"""Validation of inbound envelopes against a view of the ledger: a pure function from raw text to a verdict."""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Annotated, Literal

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from packets.envelope import CONTROLLER_KINDS, Message, parse_message
from packets.errors import EnvelopeError, PacketError
from packets.model import describe_validation_error


class Reason(StrEnum):
    """Why a message was kept aside; the values are stable codes stored in the ledger and shown in reports."""

    MALFORMED_HEADER = "malformed_header"
    UNKNOWN_RUN = "unknown_run"
    STALE_RUN = "stale_run"
    WRONG_DIRECTION = "wrong_direction"
    UNKNOWN_TASK = "unknown_task"
    WRONG_SENDER = "wrong_sender"
    WRONG_REPLY_TO = "wrong_reply_to"
    DUPLICATE = "duplicate"


REASON_SUMMARIES: dict[Reason, str] = {
    Reason.MALFORMED_HEADER: "The text is not a well-formed Message Contract envelope.",
    Reason.UNKNOWN_RUN: "The run id is neither the current run nor any run the ledger knows.",
    Reason.STALE_RUN: "The run id belongs to an earlier or finished run.",
    Reason.WRONG_DIRECTION: "A controller kind (answer, follow-up, stop) arrived at the controller.",
    Reason.UNKNOWN_TASK: "No worker is registered for this task label in the current run.",
    Reason.WRONG_SENDER: "The sender is not the worker registered for the task.",
    Reason.WRONG_REPLY_TO: "The reply-to target is not the target registered for the task's worker.",
    Reason.DUPLICATE: "The same run, task, sender, kind and body were already accepted.",
}


class RegisteredWorker(BaseModel):
    """What validation needs to know about one registered worker."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    task_label: str
    worker_name: str
    reply_target: str


class LedgerView(BaseModel):
    """The slice of the ledger the engine hands to validate(): the current run, older runs, workers, accepted messages."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    run_id: str
    controller_target: str
    other_run_ids: frozenset[str] = frozenset()
    workers: tuple[RegisteredWorker, ...] = ()
    accepted_fingerprints: frozenset[str] = frozenset()

    @model_validator(mode="after")
    def _one_worker_per_task(self) -> LedgerView:
        labels = [worker.task_label for worker in self.workers]
        if len(labels) != len(set(labels)):
            raise ValueError("each task label must belong to exactly one registered worker")
        if self.run_id in self.other_run_ids:
            raise ValueError("the current run id cannot also be an other run id")
        return self


class Accepted(BaseModel):
    """A message that may change the ledger, with the task it belongs to and its fingerprint for duplicate checks."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    outcome: Literal["accepted"] = "accepted"
    task_label: str
    message: Message
    fingerprint: str


class KeptAside(BaseModel):
    """A message that must not change anything; recorded and reported with one reason and a one-line explanation."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    outcome: Literal["kept_aside"] = "kept_aside"
    reason: Reason
    explanation: str
    message: Message | None = None


def build_view(fields: Mapping[str, object]) -> LedgerView:
    """Validate a LedgerView from the engine's ledger rows, raising PacketError with one line instead of a pydantic error."""
    try:
        return LedgerView.model_validate(dict(fields))
    except ValidationError as error:
        raise PacketError(describe_validation_error(error, "ledger view")) from None


Verdict = Annotated[Accepted | KeptAside, Field(discriminator="outcome")]


def fingerprint(message: Message) -> str:
    """A stable sha256 over run, task, sender, kind and the normalised body (reply-to is deliberately left out)."""
    fields = [message.run_id, message.task, message.sender, message.kind, message.body]
    encoded = json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(encoded).hexdigest()


def validate(raw_text: str, view: LedgerView) -> Accepted | KeptAside:
    """Decide whether an inbound envelope is accepted for a task or kept aside, and why; never raises for bad input."""
    try:
        message = parse_message(raw_text)
    except EnvelopeError as error:
        return KeptAside(reason=Reason.MALFORMED_HEADER, explanation=str(error))

    def aside(reason: Reason, explanation: str) -> KeptAside:
        return KeptAside(reason=reason, explanation=explanation, message=message)

    if message.run_id != view.run_id:
        if message.run_id in view.other_run_ids:
            return aside(Reason.STALE_RUN, f'run "{message.run_id}" is an earlier or finished run; the current run is "{view.run_id}"')
        return aside(Reason.UNKNOWN_RUN, f'run "{message.run_id}" is not the current run "{view.run_id}" nor any run the ledger knows')
    if message.kind in CONTROLLER_KINDS:
        return aside(
            Reason.WRONG_DIRECTION,
            f'kind "{message.kind}" is sent by the controller ({view.controller_target}), never to it; workers send update, question, blocked or result',
        )
    worker = next((w for w in view.workers if w.task_label == message.task), None)
    if worker is None:
        return aside(Reason.UNKNOWN_TASK, f'task "{message.task}" has no registered worker in run "{view.run_id}"')
    if message.sender != worker.worker_name:
        return aside(Reason.WRONG_SENDER, f'sender "{message.sender}" is not "{worker.worker_name}", the worker registered for task "{message.task}"')
    if message.reply_to != worker.reply_target:
        return aside(
            Reason.WRONG_REPLY_TO,
            f'reply-to "{message.reply_to}" is not "{worker.reply_target}", the target registered for worker "{worker.worker_name}"',
        )
    digest = fingerprint(message)
    if digest in view.accepted_fingerprints:
        return aside(
            Reason.DUPLICATE,
            f'the same {message.kind} from "{message.sender}" for task "{message.task}" was already accepted (fingerprint {digest[:12]})',
        )
    return Accepted(task_label=worker.task_label, message=message, fingerprint=digest)
