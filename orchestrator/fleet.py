"""Moving the fleet on between check-ins: integrate what a dependant waits for, free slots, start queued workers.

Both doors call ``advance``: `orch run` after every check-in round, an agent controller through the check-ins of `orch wait` (and `orch observe`).
Every herdr side effect underneath is an ``Engine.once`` effect of provisioning, dispatch, integration or retirement.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


from orchestrator import held as holds
from orchestrator.dispatch import dispatch
from orchestrator.engine import Engine
from orchestrator.integrate import integrate_run
from orchestrator.provision import provision
from orchestrator.retire import exit_for_slot
from orchestrator.schedule import admit, predecessors_done, slot_holders, waiting_reasons
from registry import Run, WorkerState
from registry.machine import FREEABLE, LIVE_STATES

S = WorkerState

# The one wording of a just-rejected worker keeping its slot (README "How many run at once", SKILL.md say the same).
HELD_FOR_SEND_BACK = "rejected: agent kept with its slot until the next check-in, so it can be sent back (`orch send`); then its slot is freed unless it was"


@dataclass(frozen=True, kw_only=True)
class Step:
    """One thing ``advance`` did, for the check-in output and the live display."""

    task: str | None
    what: str  # started, skipped, queued, freed, kept, integrated, provision_failed, dispatch, held, host_back, given_up
    text: str


def advance(engine: Engine, run: Run, *, keep: Iterable[str] = (), hold: Iterable[str] = ()) -> list[Step]:
    """Integrate predecessors a queued worker waits for, exit finished agents when the queue needs their slots,
    admit queued workers, then provision and dispatch them. Returns what it did, in order.

    ``keep`` are workers whose agents stay (the person's `--keep`); ``hold`` are rejected workers the agent controller
    has not been told of yet: their agents keep their slots through the door call that reports the rejection, so the
    controller can still send them back (`orch send` makes them working again); a later check-in frees them."""
    ledger = engine.ledger
    steps: list[Step] = []
    was_held = holds.held(ledger, run.run_id)
    queued = ledger.list_workers(run.run_id, states=(S.QUEUED,))
    if queued:
        plan = engine.plan_for(run)
        planned = {p.task: p for p in plan.workers}
        by_task = {w.task_label: w for w in ledger.list_workers(run.run_id)}
        into = plan.plan.integration
        if into.enabled and any(
            by_task[t].final_disposition is S.ACCEPTED and not by_task[t].integrated_sha for w in queued for t in planned[w.task_label].after
        ):
            result = integrate_run(engine, run)
            for item in result.items:
                if item.outcome == "merged":
                    steps.append(Step(task=item.task, what="integrated", text=f"merged into {into.branch} as {(item.integrated_sha or '')[:12]} for its dependants"))
            if result.paused_by or result.stopped_at:
                held = f"paused by {', '.join(result.paused_by)}" if result.paused_by else f"stopped at {result.stopped_at}"
                steps.append(Step(task=None, what="queued", text=f"integration {held}: dependants wait"))
            by_task = {w.task_label: w for w in ledger.list_workers(run.run_id)}
        ready = {w.task_label for w in queued if predecessors_done(planned[w.task_label], by_task, into.enabled)}
        # A sibling starts with its owner (admit places both in one pass), or once the owner is no longer queued.
        startable = [
            w for w in queued
            if w.task_label in ready
            and not ((owner := planned[w.task_label].sibling_of) and by_task[owner].state is S.QUEUED and owner not in ready)
        ]  # fmt: skip
        holders = slot_holders(engine, run)
        short = len(startable) - max(0, plan.plan.defaults.concurrency - len(holders))
        kept, held_back = set(keep), set(hold)
        for holder in holders:
            if short <= 0:
                break
            if holder.state in LIVE_STATES or holder.state not in FREEABLE or holder.task_label in kept:
                continue
            if holder.state is S.REJECTED and holder.task_label in held_back:
                steps.append(Step(task=holder.task_label, what="kept", text=HELD_FOR_SEND_BACK))
                continue
            why = exit_for_slot(engine, run, holder)
            if why is None:
                steps.append(Step(task=holder.task_label, what="freed", text=f"{holder.state.value}: agent exited to free its slot (pane and checkout kept until retirement)"))
                short -= 1
            else:
                steps.append(Step(task=holder.task_label, what="kept", text=f"agent not exited, its slot stays in use: {why}"))
    schedule = admit(engine, run)
    steps += [Step(task=q.task, what="skipped", text=f"never started: {q.reason}") for q in schedule.skipped]
    steps += [Step(task=t, what="started", text=f"admitted to slot {schedule.holding.index(t) + 1} of {schedule.concurrency}") for t in schedule.started]
    if ledger.list_workers(run.run_id, states=(S.PROVISIONING,)):
        provisioned = provision(engine, run)
        for outcome in provisioned.workers:
            if outcome.state == "failed" and outcome.task in schedule.started:
                steps.append(Step(task=outcome.task, what="provision_failed", text=outcome.error or "provisioning failed"))
    if ledger.list_workers(run.run_id, states=(S.READY,)):
        dispatched = dispatch(engine, run)
        for sent in dispatched.workers:
            if sent.outcome not in ("accepted", "skipped", "held"):
                steps.append(Step(task=sent.task, what="dispatch", text=f"{sent.outcome}: {sent.detail}"))
    # A worker held for its host is said when it is held and when its host answers, not at every check-in between.
    now_held = holds.held(ledger, run.run_id)
    steps += [Step(task=t, what="held", text=h.line()) for t, h in now_held.items() if t not in was_held]
    steps += [Step(task=t, what="host_back", text=f"host {h.host} answers again: its start goes on") for t, h in was_held.items() if t not in now_held]
    return steps


def held_workers(engine: Engine, run: Run) -> bool:
    """Whether any worker of the run is held for its host (orchestrator.held): a check-in tries to start it again."""
    return bool(holds.held(engine.ledger, run.run_id))


def lost_workers(engine: Engine, run: Run) -> set[str]:
    """The run's workers at work on a host that has not answered a check-in since (orchestrator.held.lose): they do
    not count as moving; the bound of held workers ends them once nothing else moves."""
    return set(holds.lost(engine.ledger, run.run_id))


def give_up_held(engine: Engine, run: Run, why: str) -> list[Step]:
    """End every held or lost worker not done, its host named (orchestrator.held.give_up): the run ends without it."""
    return [Step(task=task, what="given_up", text=f"failed: {reason}") for task, reason in holds.give_up(engine.ledger, run, why)]


def held_expired(engine: Engine, run: Run, interval_s: float) -> bool:
    """Whether the held and lost workers have waited their bound (``orchestrator.held.HOLD_LIMIT`` check-in intervals)."""
    return holds.expired(engine.ledger, run.run_id, engine.clock.now(), interval_s)


def give_up_queued(engine: Engine, run: Run, reason: str) -> list[Step]:
    """Skip every worker still queued when nothing left in the run can ever start it (the run is ending)."""
    steps = []
    reasons = waiting_reasons(engine, run)
    for worker in engine.ledger.list_workers(run.run_id, states=(S.QUEUED,)):
        why = f"{reason}: it was queued" + (f", {reasons[worker.task_label]}" if worker.task_label in reasons else "")
        engine.ledger.transition(run.run_id, worker.task_label, S.QUEUED, S.SKIPPED, cause={"phase": "schedule", "reason": why})
        steps.append(Step(task=worker.task_label, what="skipped", text=f"never started: {why}"))
    return steps
