"""Durable worker registry (SQLite ledger) and the worker state machine; imports nothing from orchestrator or packets."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from registry.errors import (
        DuplicateRun,
        DuplicateWorker,
        EffectConflict,
        EffectNotFound,
        EffectSettled,
        IllegalTransition,
        InboxNotFound,
        LedgerMissing,
        RegistryError,
        RunNotFound,
        SchemaTooNew,
        StaleState,
        WorkerNotFound,
    )
    from registry.machine import LIVE_STATES, TRANSITIONS, WorkerState, check_transition, is_legal
    from registry.kinds import CONTROLLER_HOST, EffectStatus, EventKind, InboxVerdict, RunStatus, RunVerdict
    from registry.records import Effect, Event, InboxMessage, Run, Worker, make_run_id
    from registry.store import WORKER_FIELDS, Clock, Ledger, utc_now

# Loaded lazily (PEP 562): `from registry import Ledger` works as ever, while a worker's callback (`orch inbox add`)
# loads only what it uses (`registry.core`, `registry.kinds`, `registry.machine`), never the Ledger.
_HOMES = {
    **dict.fromkeys(
        ("DuplicateRun", "DuplicateWorker", "EffectConflict", "EffectNotFound", "EffectSettled", "IllegalTransition", "InboxNotFound",
         "LedgerMissing", "RegistryError", "RunNotFound", "SchemaTooNew", "StaleState", "WorkerNotFound"),
        "registry.errors",
    ),
    **dict.fromkeys(("LIVE_STATES", "TRANSITIONS", "WorkerState", "check_transition", "is_legal"), "registry.machine"),
    **dict.fromkeys(("CONTROLLER_HOST", "EffectStatus", "EventKind", "InboxVerdict", "RunStatus", "RunVerdict"), "registry.kinds"),
    **dict.fromkeys(("Effect", "Event", "InboxMessage", "Run", "Worker", "make_run_id"), "registry.records"),
    **dict.fromkeys(("WORKER_FIELDS", "Clock", "Ledger", "utc_now"), "registry.store"),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'registry' has no attribute {name!r}")
    module = importlib.import_module(home)
    # Bind every name of that module at once: importing `packets.validate` set the attribute `validate` to the
    # module, and the function of that name must win (as with the eager imports this replaces).
    for other, where in _HOMES.items():
        if where == home:
            globals()[other] = getattr(module, other)
    return globals()[name]


__all__ = [
    "CONTROLLER_HOST",
    "LIVE_STATES",
    "TRANSITIONS",
    "WORKER_FIELDS",
    "Clock",
    "DuplicateRun",
    "DuplicateWorker",
    "Effect",
    "EffectConflict",
    "EffectNotFound",
    "EffectSettled",
    "EffectStatus",
    "Event",
    "EventKind",
    "IllegalTransition",
    "InboxMessage",
    "InboxNotFound",
    "InboxVerdict",
    "Ledger",
    "LedgerMissing",
    "RegistryError",
    "Run",
    "RunNotFound",
    "RunStatus",
    "RunVerdict",
    "SchemaTooNew",
    "StaleState",
    "Worker",
    "WorkerNotFound",
    "WorkerState",
    "check_transition",
    "is_legal",
    "make_run_id",
    "utc_now",
]
