"""Validation of inbound envelopes against a view of the ledger: a pure function from raw text to a verdict (a model)."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from packets.envelope import Message
from packets.errors import PacketError
from packets.grammar import DEFAULT_MESSAGE_LIMIT, MESSAGE_LIMIT_RANGE
from packets.model import describe_validation_error
from packets.screen import (
    REASON_SUMMARIES,
    Reason,
    fingerprint,
    judge,
    looks_like_header,
    message_size,
    oversize_explanation,
    screen_body,
)

__all__ = [
    "REASON_SUMMARIES", "Accepted", "KeptAside", "LedgerView", "Reason", "RegisteredWorker", "Verdict", "build_view",
    "fingerprint", "looks_like_header", "message_size", "oversize", "screen_body", "validate",
]  # fmt: skip


class RegisteredWorker(BaseModel):
    """What validation needs to know about one registered worker."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    task_label: str
    worker_name: str
    reply_target: str
    # Absolute directories the worker may write reports in (its worktree, the run's report directory for it).
    report_roots: tuple[str, ...] = ()
    # The herdr panes the worker's process may run in; its state and the message kinds that state takes now.
    panes: tuple[str, ...] = ()
    state: str | None = None
    accepts: frozenset[str] | None = None


class LedgerView(BaseModel):
    """The slice of the ledger the engine hands to validate(): the current run, older runs, workers, accepted messages."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    run_id: str
    controller_target: str
    other_run_ids: frozenset[str] = frozenset()
    workers: tuple[RegisteredWorker, ...] = ()
    accepted_fingerprints: frozenset[str] = frozenset()
    message_limit: int = Field(default=DEFAULT_MESSAGE_LIMIT, ge=MESSAGE_LIMIT_RANGE[0], le=MESSAGE_LIMIT_RANGE[1])

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


def oversize(size: int, sha256: str, limit: int) -> KeptAside:
    """The verdict on a message over the limit, from its size and hash alone (the stdin door never holds all of it)."""
    return KeptAside(reason=Reason.OVERSIZE, explanation=oversize_explanation(size, sha256, limit))


def validate(
    raw_text: str, view: LedgerView, *, resolve: Callable[[str], str] = posixpath.normpath, pane: str | None = None
) -> Accepted | KeptAside:
    """Decide whether an inbound envelope is accepted for a task or kept aside, and why; never raises for bad input.

    The steps run in the order docs/message-contract.md states: size, header, run, task, sender, reply target and
    pane, direction, body, report paths, duplicate, turn; the first failing step is the reason
    (`packets.screen.judge`). ``resolve`` maps a path to the one it names (the engine passes ``os.path.realpath`` so
    symlinks count; the default is lexical); ``pane`` is the herdr pane the callback ran in (``HERDR_PANE_ID``).
    """
    verdict = judge(raw_text, view, resolve=resolve, pane=pane)
    found = verdict.envelope
    message = None if found is None else Message(
        run_id=found.run_id, task=found.task, sender=found.sender, kind=found.kind, reply_to=found.reply_to, body=found.body
    )  # fmt: skip
    if verdict.reason is None:
        assert message is not None and verdict.task_label is not None and verdict.fingerprint is not None
        return Accepted(task_label=verdict.task_label, message=message, fingerprint=verdict.fingerprint)
    return KeptAside(reason=verdict.reason, explanation=verdict.explanation, message=message)
