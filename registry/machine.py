"""The worker state machine: states and the explicit transition table; standard library only, no I/O, no clock."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from registry.errors import IllegalTransition
from registry.kinds import WORKER_KINDS


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
    # herdr lost a ready worker's pane before its packet was sent (a restart while orch was stopped): nothing of its
    # work can be lost, so resume starts it again.
    S.READY: frozenset({S.DISPATCHED, S.PROVISIONING, S.FAILED, S.RETIRING}),
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

# --- The groups: every set of states a phase asks about is named here, once ---------------------------------------
# Stages partition the states: each state is in exactly one (tests/registry/test_machine.py fails when a new state is
# not placed), and most groups below are unions of stages, so a new state lands in them by its stage.
NOT_STARTED: frozenset[WorkerState] = frozenset({S.QUEUED})  # waiting for a slot or a predecessor; nothing created yet
STARTING: frozenset[WorkerState] = frozenset({S.PROVISIONING, S.READY})  # admitted: its worktree, pane and agent are being made
# Working on its own: its next callback moves it (the controller only waits; a missing callback is a repeat or a stall).
AT_WORK: frozenset[WorkerState] = frozenset({S.DISPATCHED, S.WORKING})
# Waiting on the person (its question, its own block or verification's): its silence is not a stall, and a run with
# nothing else to wait for stops and says what is needed.
WAITING_ON_PERSON: frozenset[WorkerState] = frozenset({S.QUESTION, S.BLOCKED})
# A result is in and not yet verified (`verifying` is one a stopped verify left behind; verifying again is safe).
UNVERIFIED: frozenset[WorkerState] = frozenset({S.RESULT, S.VERIFYING})
SETTLED: frozenset[WorkerState] = frozenset({S.ACCEPTED, S.REJECTED, S.SUPERSEDED, S.FAILED})  # a verdict, nothing left to do
RETIREMENT: frozenset[WorkerState] = frozenset({S.RETIRING, S.RETIRED, S.RETAINED})  # the stop ladder has it
NEVER_STARTED: frozenset[WorkerState] = frozenset({S.SKIPPED})  # a predecessor ended without acceptance: never admitted
STAGES: Mapping[str, frozenset[WorkerState]] = {
    "not started": NOT_STARTED, "starting": STARTING, "at work": AT_WORK, "waiting on the person": WAITING_ON_PERSON,
    "unverified": UNVERIFIED, "settled": SETTLED, "retirement": RETIREMENT, "never started": NEVER_STARTED,
}  # fmt: skip

# Doing, or waiting on, the delegated work: a callback may move it, a check-in observes it.
OPEN: frozenset[WorkerState] = AT_WORK | WAITING_ON_PERSON
# Moving on without the person: `orch run`'s loop waits on these by itself.
MOVING: frozenset[WorkerState] = AT_WORK | UNVERIFIED
# The worker's agent may still be doing or holding work of this run (a queued worker has none yet): it holds a slot.
LIVE_STATES: frozenset[WorkerState] = STARTING | OPEN | UNVERIFIED
# Needs its agent (and so its pane) to go on; one with its result in, or blocked by verification, needs only git.
NEEDS_PANE: frozenset[WorkerState] = STARTING | OPEN
# No packet went out: the worker never had delegated work to report on.
NOT_DISPATCHED: frozenset[WorkerState] = NOT_STARTED | STARTING | NEVER_STARTED
# Never admitted to a slot (still waiting, or skipped).
NOT_ADMITTED: frozenset[WorkerState] = NOT_STARTED | NEVER_STARTED
# Never had an agent, or its agent is gone for good.
NO_AGENT: frozenset[WorkerState] = NOT_ADMITTED | {S.RETIRED}
# Ended without acceptance: a predecessor here skips its dependants, and retire may `stop` its still-busy agent.
UNACCEPTED: frozenset[WorkerState] = SETTLED - {S.ACCEPTED}
# Finished, and nothing of it waits on the person: its agent may be exited to free a slot (blocked is kept as it is).
FREEABLE: frozenset[WorkerState] = SETTLED | {S.RETAINED}
# Nothing left to do in this run: a follow-up would start untracked work, a stop is moot (retire's own stop goes to a
# worker in `retiring` whose agent is still busy, so that state is not here).
FINISHED: frozenset[WorkerState] = frozenset({S.ACCEPTED, S.RETAINED, S.RETIRED})
# The retire ladder is through with it (retired, or kept with a reason).
LADDER_DONE: frozenset[WorkerState] = frozenset({S.RETIRED, S.RETAINED})
# A disposition is recorded (or it was retained, or a retire was under way, or it never started): the ladder may run.
RETIRABLE: frozenset[WorkerState] = SETTLED | NEVER_STARTED | {S.BLOCKED, S.RETAINED, S.RETIRING}
# Entering one ends a wait on the person (an answer, a follow-up, a new result, a decision, a failure); retirement's
# states do not: the question is still unanswered.
RESOLVING: frozenset[WorkerState] = MOVING | SETTLED
# The only states a worker is added in: queued (it waits for a slot) or provisioning (admitted at once).
INITIAL: frozenset[WorkerState] = frozenset({S.QUEUED, S.PROVISIONING})

# Verdicts recorded as the worker's final disposition when entered (blocked only when it comes from verifying).
DISPOSITIONS: frozenset[WorkerState] = SETTLED | {S.BLOCKED}

# Entering one of these means the work is open again, so an earlier disposition no longer holds.
REOPENING: frozenset[WorkerState] = AT_WORK | UNVERIFIED | {S.QUESTION}
# Where a person may declare a worker superseded: read from the table, so the two cannot disagree.
SUPERSEDABLE: frozenset[WorkerState] = frozenset(s for s, nxt in TRANSITIONS.items() if S.SUPERSEDED in nxt)
# An abandoned worker in one of these is superseded first, then retired; blocked (like the unstarted) retires directly.
ABANDON_TO_SUPERSEDED: frozenset[WorkerState] = SUPERSEDABLE - {S.BLOCKED}


# Which message kinds a worker's callback may carry in each state (one vocabulary with the table above: a kind that
# moves the worker names a state this one may go to). Anything else is kept aside as `out_of_turn` and changes nothing,
# so a closed, accepted or verifying worker's record cannot be rewritten, a blocker is removed only by a decision, and a
# worker has one open question at a time (docs/message-contract.md).
WORKER_MESSAGE_KINDS: frozenset[str] = frozenset(WORKER_KINDS)
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
