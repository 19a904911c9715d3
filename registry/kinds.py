"""The ledger's vocabularies (run status and verdict, inbox verdicts, effect status, journal kinds, message kinds): plain enums, no pydantic."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args

# The Message Contract's kinds, written once: a worker sends these, the controller those (docs/message-contract.md).
# `packets.envelope` parses and renders them and `registry.machine` says which a state takes; both import them from here,
# the one module of `registry` that `packets` may import (tests/test_layering.py).
WorkerKind = Literal["update", "question", "blocked", "result"]
ControllerKind = Literal["answer", "follow-up", "stop"]
MessageKind = Literal[WorkerKind, ControllerKind]
WORKER_KINDS: tuple[WorkerKind, ...] = get_args(WorkerKind)
CONTROLLER_KINDS: tuple[ControllerKind, ...] = get_args(ControllerKind)


class RunStatus(StrEnum):
    """Whether a run is going, stopped part-way (resumable), or over."""

    ACTIVE = "active"
    INTERRUPTED = "interrupted"
    FINISHED = "finished"


class RunVerdict(StrEnum):
    """The report's first line: Herdr: PASS | PARTIAL | FAIL."""

    PASS = "PASS"
    PARTIAL = "PARTIAL"
    FAIL = "FAIL"


class InboxVerdict(StrEnum):
    """What validation decided about an inbound message."""

    ACCEPTED = "accepted"
    KEPT_ASIDE = "kept_aside"


class EffectStatus(StrEnum):
    """Where one side effect stands: intended (in flight until settled) or settled one of three ways."""

    INTENDED = "intended"
    CONFIRMED = "confirmed"
    FAILED = "failed"
    ABANDONED = "abandoned"


class EventKind(StrEnum):
    """Journal kinds the ledger writes itself; recorded facts may use any other lowercase name."""

    RUN_CREATED = "run_created"
    RUN_STATUS = "run_status"
    WORKER_ADDED = "worker_added"
    TRANSITION = "transition"
    WORKER_UPDATED = "worker_updated"
    RUN_UPDATED = "run_updated"
    CHECK_IN = "check_in"
    INBOX_RECORDED = "inbox_recorded"
    INBOX_HANDLED = "inbox_handled"
    EFFECT_INTENDED = "effect_intended"
    EFFECT_CONFIRMED = "effect_confirmed"
    EFFECT_FAILED = "effect_failed"
    EFFECT_ABANDONED = "effect_abandoned"


# The plan's name for the controller's own machine (issue 26): a worker there has host "local", as every worker
# recorded before hosts existed had.
CONTROLLER_HOST = "local"

# A message collected from another host's spool has the source `spool:<host>:<entry id>`: one delivery, which the
# ledger records once per run (migration 6's unique index; `registry.core.insert_inbound` says "already recorded").
SPOOL_SOURCE = "spool:"
