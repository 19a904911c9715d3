"""The worker state machine: states and the explicit transition table; standard library only, no I/O, no clock."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from registry.errors import IllegalTransition


class WorkerState(StrEnum):
    """Where one worker is in its life, from queued (waiting for a slot or a predecessor) to retirement."""

    QUEUED = "queued"
    PROVISIONING = "provisioning"
    READY = "ready"
    DISPATCHED = "dispatched"
    WORKING = "working"
    QUESTION = "question"
    BLOCKED = "blocked"
    RESULT = "result"
    VERIFYING = "verifying"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"
    FAILED = "failed"
    RETIRING = "retiring"
    RETIRED = "retired"
    RETAINED = "retained"
    SKIPPED = "skipped"


S = WorkerState

# Integration is deliberately not a state: it is a recorded fact (journal + integrated_sha) about accepted work.
# The spec integrates after the owning worker is retired or paused, so "integrated" is orthogonal to the
# retire ladder; as a state it would need accepted -> integrated -> retiring and could not follow retired.
TRANSITIONS: Mapping[WorkerState, frozenset[WorkerState]] = {
    # The scheduler admits a queued worker into a free slot, skips it when a predecessor ended without acceptance,
    # and the person may give it up (retiring: nothing was created for it).
    S.QUEUED: frozenset({S.PROVISIONING, S.SKIPPED, S.RETIRING}),
    S.PROVISIONING: frozenset({S.READY, S.FAILED, S.RETIRING}),
    S.READY: frozenset({S.DISPATCHED, S.FAILED, S.RETIRING}),
    # The worker may finish, ask or block before any check-in saw it working.
    S.DISPATCHED: frozenset({S.WORKING, S.QUESTION, S.BLOCKED, S.RESULT, S.FAILED, S.SUPERSEDED}),
    S.WORKING: frozenset({S.QUESTION, S.BLOCKED, S.RESULT, S.FAILED, S.SUPERSEDED}),
    # An answer puts the worker back to work; it may also reply with a result straight away.
    S.QUESTION: frozenset({S.WORKING, S.BLOCKED, S.RESULT, S.FAILED, S.SUPERSEDED}),
    # Blocked is both a worker report (needs user authority) and a verification verdict (evidence not
    # reproducible); the answer or follow-up decides where it goes next, and the user may give up on it.
    S.BLOCKED: frozenset({S.WORKING, S.DISPATCHED, S.RESULT, S.VERIFYING, S.FAILED, S.SUPERSEDED, S.RETIRING, S.RETAINED}),
    # A follow-up packet (e.g. the result lacked evidence) is a new dispatch awaiting acceptance.
    S.RESULT: frozenset({S.VERIFYING, S.DISPATCHED, S.FAILED, S.SUPERSEDED}),
    S.VERIFYING: frozenset({S.ACCEPTED, S.REJECTED, S.SUPERSEDED, S.BLOCKED, S.FAILED}),
    S.ACCEPTED: frozenset({S.RETIRING, S.RETAINED}),
    # Rejected work can be sent back with a follow-up instead of being fixed by the controller.
    S.REJECTED: frozenset({S.DISPATCHED, S.RETIRING, S.RETAINED}),
    S.SUPERSEDED: frozenset({S.RETIRING, S.RETAINED}),
    S.FAILED: frozenset({S.RETIRING, S.RETAINED}),
    # The ladder stops at confirmation_required or unresolved evidence: the pane is kept, with a reason.
    S.RETIRING: frozenset({S.RETIRED, S.RETAINED}),
    S.RETAINED: frozenset({S.RETIRING}),
    S.RETIRED: frozenset(),
    # Never started: nothing to stop or remove, so the ladder only records it retired.
    S.SKIPPED: frozenset({S.RETIRING}),
}

# States in which the worker's agent may still be doing or holding work of this run (a queued worker has none yet).
LIVE_STATES: frozenset[WorkerState] = frozenset(
    {S.PROVISIONING, S.READY, S.DISPATCHED, S.WORKING, S.QUESTION, S.BLOCKED, S.RESULT, S.VERIFYING}
)

# Verdicts recorded as the worker's final disposition when entered (blocked only when it comes from verifying).
DISPOSITIONS: frozenset[WorkerState] = frozenset({S.ACCEPTED, S.REJECTED, S.SUPERSEDED, S.BLOCKED, S.FAILED})

# Entering one of these means the work is open again, so an earlier disposition no longer holds.
REOPENING: frozenset[WorkerState] = frozenset({S.DISPATCHED, S.WORKING, S.QUESTION, S.RESULT, S.VERIFYING})


# Which message kinds a worker's callback may carry in each state (one vocabulary with the table above: a kind that
# moves the worker names a state this one may go to). Anything else is kept aside as `out_of_turn` and changes nothing,
# so a closed, accepted or verifying worker's record cannot be rewritten, a blocker is removed only by a decision, and a
# worker has one open question at a time (docs/message-contract.md).
WORKER_MESSAGE_KINDS: frozenset[str] = frozenset({"update", "question", "blocked", "result"})
ACCEPTS: Mapping[WorkerState, frozenset[str]] = {
    **dict.fromkeys(WorkerState, frozenset()),
    S.DISPATCHED: WORKER_MESSAGE_KINDS,
    S.WORKING: WORKER_MESSAGE_KINDS,
    # Waiting for an answer: a second question waits its turn; the worker may still block, or finish instead.
    S.QUESTION: frozenset({"update", "blocked", "result"}),
    # Waiting for a person's decision (its own block, or verification's): only what changes nothing but the record.
    S.BLOCKED: frozenset({"update"}),
    S.RESULT: frozenset({"update"}),
}
# States a controller prompt (the packet, an answer, a follow-up) sends back to work: once orch has prompted the worker
# since it entered one of them, its callbacks are in turn, since they may answer that prompt before the ledger records
# the move (a fast agent; `orchestrator.inbox.catch_up` moves it once the prompt is recorded).
REOPENED_BY_PROMPT: frozenset[WorkerState] = frozenset({S.READY, S.QUESTION, S.BLOCKED, S.RESULT, S.REJECTED})


def accepted_kinds(state: WorkerState, *, prompted: bool) -> frozenset[str]:
    """The message kinds a worker in ``state`` may send; ``prompted``: orch prompted it since it entered the state."""
    return WORKER_MESSAGE_KINDS if prompted and state in REOPENED_BY_PROMPT else ACCEPTS[state]


def is_legal(current: WorkerState, new: WorkerState) -> bool:
    """Whether the table allows current -> new."""
    return new in TRANSITIONS[current]


def check_transition(current: WorkerState, new: WorkerState) -> None:
    """Raise IllegalTransition unless the table allows current -> new."""
    if not is_legal(current, new):
        allowed = tuple(state.value for state in WorkerState if state in TRANSITIONS[current])
        raise IllegalTransition(current.value, new.value, allowed)


def disposition_after(current: WorkerState, new: WorkerState, previous: WorkerState | None) -> WorkerState | None:
    """The worker's final disposition once current -> new happened, given the disposition it had before."""
    if new is S.BLOCKED:
        return S.BLOCKED if current is S.VERIFYING else previous
    if new in DISPOSITIONS:
        return new
    if new in REOPENING:
        return None
    return previous
