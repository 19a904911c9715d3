"""The fleet scheduler: which queued workers may start now (the concurrency cap, `after` dependencies), and which never will.

Pure over the ledger and the plan snapshot: it only moves workers queued -> provisioning (admitted into a slot) or
queued -> skipped (a predecessor ended without acceptance). Everything herdr does for an admitted worker happens in
provisioning and dispatch, through ``Engine.once`` like any other effect; freeing a slot is ``orchestrator.fleet``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from graphlib import TopologicalSorter
from typing import Literal


from orchestrator.engine import Engine
from orchestrator.plan import ResolvedPlan, ResolvedWorker
from registry.facts import FactKind
from registry import Effect, EffectStatus, Event, EventKind, Run, StaleState, Worker, WorkerState
from registry.machine import LIVE_STATES, NO_AGENT, RETIREMENT, UNACCEPTED

S = WorkerState

# record_fact(run, FactKind.AGENT_EXITED, task_label=task, detail={...}): the agent of a finished worker left its pane to free
# its slot (the pane and checkout stay for the retire ladder at the end of the run).
# A worker in LIVE_STATES has, or is about to have, a live agent doing this run's work: it holds a slot. A predecessor
# that ends UNACCEPTED (and is not working again) skips its dependants (registry.machine).

Decision = Literal["start", "wait", "skip"]


@dataclass(frozen=True, kw_only=True)
class Queued:
    """A worker the scheduler did not start, and why (waiting for a slot or a predecessor, or skipped for good)."""

    task: str
    reason: str
    chain: tuple[str, ...] = ()  # skipped: the predecessors from the one that ended back to this worker's own


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """One scheduling pass: the slots in use, who was admitted, who was skipped, who still waits."""

    run_id: str
    concurrency: int
    holding: tuple[str, ...]  # workers whose agent holds a slot after this pass
    started: tuple[str, ...]
    skipped: tuple[Queued, ...]
    waiting: tuple[Queued, ...]

    @property
    def free(self) -> int:
        """Slots still free after this pass."""
        return max(0, self.concurrency - len(self.holding))


def holds_slot(worker: Worker, events: Sequence[Event], effects: Sequence[Effect]) -> bool:
    """Whether the worker's agent counts against the cap: from admission until its agent is known to be gone.

    Working states always hold (provisioning is about to start an agent). A finished worker (accepted, rejected,
    failed, superseded, blocked by verification, retiring, retained) holds until its agent exited (the FactKind.AGENT_EXITED
    fact) unless it never had one: it never became ready and no agent start was attempted for it.
    """
    if worker.state in NO_AGENT:
        return False
    if worker.state in LIVE_STATES:
        return True
    task = worker.task_label
    if any(e.task_label == task and e.kind == FactKind.AGENT_EXITED for e in events):
        return False
    became_ready = any(e.task_label == task and e.kind == EventKind.TRANSITION and e.to_state is S.READY for e in events)
    start_tried = any(e.task_label == task and e.kind == "agent_start" and e.status is not EffectStatus.FAILED for e in effects)
    return became_ready or start_tried


def slot_holders(engine: Engine, run: Run, workers: Sequence[Worker] | None = None) -> list[Worker]:
    """The run's workers whose agent counts against ``defaults.concurrency`` right now."""
    events = engine.ledger.events(run.run_id)
    effects = engine.ledger.list_effects(run.run_id)
    listed = engine.ledger.list_workers(run.run_id) if workers is None else workers
    return [w for w in listed if holds_slot(w, events, effects)]


def predecessors_done(planned: ResolvedWorker, by_task: Mapping[str, Worker], integration: bool) -> bool:
    """Every `after` task is accepted (and integrated, when the plan integrates)."""
    for task in planned.after:
        pred = by_task[task]
        if pred.final_disposition is not S.ACCEPTED or (integration and not pred.integrated_sha):
            return False
    return True


def _wait_reason(planned: ResolvedWorker, by_task: Mapping[str, Worker], integration: bool) -> str | None:
    """Why a queued worker cannot start yet for its predecessors (None: they are done)."""
    pending = []
    for task in planned.after:
        pred = by_task[task]
        if pred.final_disposition is not S.ACCEPTED:
            pending.append(f"{task} ({task} is {pred.state.value})")
        elif integration and not pred.integrated_sha:
            pending.append(f"{task} ({task} is accepted, not integrated yet)")
    return f"waits for {' and '.join(pending)}" if pending else None


def _ended_unaccepted(pred: Worker) -> str | None:
    """How a predecessor ended without acceptance, or None while it may still be accepted."""
    if pred.state is S.SKIPPED:
        return "was skipped"
    if pred.final_disposition in UNACCEPTED and pred.state not in LIVE_STATES:
        return f"was {pred.final_disposition.value}" if pred.final_disposition is not None else None
    if pred.state in RETIREMENT and pred.final_disposition is None:
        return "was given up"
    return None


def admit(engine: Engine, run: Run, plan: ResolvedPlan | None = None) -> Schedule:
    """Skip the dependants of predecessors that ended unaccepted, then admit queued workers, in plan order, into free slots."""
    ledger = engine.ledger
    plan = plan or engine.plan_for(run)
    integration = plan.plan.integration.enabled
    planned = {p.task: p for p in plan.workers}
    by_task = {w.task_label: w for w in ledger.list_workers(run.run_id)}

    skipped: list[Queued] = []
    graph = {p.task: set(p.after) for p in plan.workers}
    chains: dict[str, tuple[str, ...]] = {}
    for task in TopologicalSorter(graph).static_order():
        worker = by_task.get(task)
        if worker is None or worker.state is not S.QUEUED:
            continue
        for pred_task in planned[task].after:
            pred = by_task[pred_task]
            how = _ended_unaccepted(pred)
            if how is None:
                continue
            chain = (*chains.get(pred_task, ()), pred_task)
            first = chain[0]
            root = by_task[first]
            root_how = _ended_unaccepted(root) or "ended"
            reason = f"after {pred_task}, which {how}" + (f" (the chain {' -> '.join((*chain, task))} began when {first} {root_how})" if len(chain) > 1 else "")
            try:
                moved = ledger.transition(run.run_id, task, S.QUEUED, S.SKIPPED, cause={"phase": "schedule", "reason": reason, "after": pred_task, "chain": list(chain)})
            except StaleState:
                break
            by_task[task] = moved
            chains[task] = chain
            skipped.append(Queued(task=task, reason=reason, chain=chain))
            break

    workers = list(by_task.values())
    holding = [w.task_label for w in slot_holders(engine, run, workers)]
    started: list[str] = []
    waiting: list[Queued] = []
    cap = plan.plan.defaults.concurrency
    for p in plan.workers:
        worker = by_task.get(p.task)
        if worker is None or worker.state is not S.QUEUED:
            continue
        why = _wait_reason(p, by_task, integration)
        owner = by_task.get(p.sibling_of) if p.sibling_of else None
        if why is None and owner is not None and owner.state is S.QUEUED:
            why = f"waits for {owner.task_label}, whose pane it splits ({owner.task_label} is queued)"
        if why is None and len(holding) >= cap:
            why = f"waiting for a slot ({len(holding)} of {cap} in use: {', '.join(holding)})"
        if why is not None:
            waiting.append(Queued(task=p.task, reason=why))
            continue
        try:
            moved = ledger.transition(run.run_id, p.task, S.QUEUED, S.PROVISIONING, cause={"phase": "schedule", "slot": len(holding) + 1, "of": cap})
        except StaleState:
            continue  # another process admitted it first
        # Its sibling (later in the plan) is admitted in this same pass: provisioning makes the owner's pane first,
        # so a worker after the sibling must not take the slot it would wait a whole pass for.
        by_task[p.task] = moved
        holding.append(p.task)
        started.append(p.task)
    return Schedule(run_id=run.run_id, concurrency=cap, holding=tuple(holding), started=tuple(started), skipped=tuple(skipped), waiting=tuple(waiting))


def waiting_reasons(engine: Engine, run: Run, plan: ResolvedPlan | None = None) -> dict[str, str]:
    """Why each queued worker waits, without changing anything (for status lines and the live display)."""
    plan = plan or engine.plan_for(run)
    integration = plan.plan.integration.enabled
    by_task = {w.task_label: w for w in engine.ledger.list_workers(run.run_id)}
    holding = [w.task_label for w in slot_holders(engine, run, list(by_task.values()))]
    reasons: dict[str, str] = {}
    for p in plan.workers:
        worker = by_task.get(p.task)
        if worker is None or worker.state is not S.QUEUED:
            continue
        reasons[p.task] = _wait_reason(p, by_task, integration) or f"waiting for a slot ({len(holding)} of {plan.plan.defaults.concurrency} in use)"
    return reasons


def render_schedule(schedule: Schedule) -> list[str]:
    """One line per admitted, skipped or waiting worker (empty when nothing was queued)."""
    lines = [f"{task}: started (slot {schedule.holding.index(task) + 1} of {schedule.concurrency})" for task in schedule.started]
    lines += [f"{q.task}: skipped, never started: {q.reason}" for q in schedule.skipped]
    lines += [f"{q.task}: queued, {q.reason}" for q in schedule.waiting]
    return lines
