"""Workers held for a host that stopped answering while they were starting (issue 26: a laptop plus a build box).

A worker on another host that is still starting (provisioning or ready: no packet reached its agent) and meets its
host unreachable (``HostUnreachable``: `herdr --machine` or ssh cannot reach it) is *held*, never failed for it and
never a reason to stop the run: the controller's and the other hosts' workers go on. An effect whose outcome the
dropped link left unknown stays in flight; it is settled by read-back on that host when the host answers again.
Every later check-in of either door provisions and dispatches the held workers again (``orchestrator.fleet.advance``:
reuse before create, read-back before any second create or prompt).

The bound: a held worker keeps the run open while anything else in it moves; once nothing else does, the run waits
for its host at most ``STALL_LIMIT`` check-in intervals (the plan's `checkin_interval_s`, counted from when the worker
was held: the spec's three check-ins without change), then gives it up (`orch finish` gives it up at once: the agent
controller ended the run). A worker given up is failed with the host named, its in-flight effects abandoned unmade
(nothing there is removed: a checkout its create may have made stays on that host, named), and the run's verdict is
never PASS. The facts: ``host_held`` when it is held, ``host_answered`` when its host answered or it was given up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from orchestrator.errors import HostUnreachable, one_line
from registry import EffectStatus, Ledger, Run, StaleState, WorkerState
from registry.facts import FactKind, HostAnswered, HostHeld, read_fact
from registry.kinds import CONTROLLER_HOST
from registry.machine import STARTING

# The spec's stall bound (orchestrator.observe.STALL_LIMIT): check-in intervals a held worker waits once nothing else moves.
HOLD_LIMIT = 3


@dataclass(frozen=True)
class Held:
    """One held worker: its host, the stage that met the host gone, what the host said, and since when."""

    task: str
    host: str
    stage: str
    error: str
    since: datetime

    def line(self) -> str:
        """Why it is held, in the words `orch status`, provision, dispatch and the check-ins say after ``held:``."""
        return f"host {self.host} did not answer during {self.stage} ({self.error}); it starts once {self.host} answers, at a later check-in"


def held(ledger: Ledger, run_id: str) -> dict[str, Held]:
    """The run's held workers by task: starting, on another host, and their last hold not yet released."""
    found: dict[str, Held] = {}
    workers = {w.task_label: w for w in ledger.list_workers(run_id) if w.state in STARTING and w.host != CONTROLLER_HOST}
    if not workers:
        return found
    for event in ledger.events(run_id):
        task = event.task_label
        if task not in workers:
            continue
        if event.kind == FactKind.HOST_HELD:
            fact = read_fact(event, HostHeld)
            if task not in found:  # a hold goes on from its first fact until released
                found[task] = Held(task=task, host=fact["host"], stage=fact["stage"], error=fact["error"], since=event.at)
        elif event.kind == FactKind.HOST_ANSWERED:
            found.pop(task, None)
    return found


def hold(ledger: Ledger, run: Run, task: str, host: str, stage: str, exc: HostUnreachable) -> str:
    """Hold ``task`` (recorded once per hold: later attempts that meet the host gone add nothing); its ``held:`` line."""
    now = held(ledger, run.run_id)
    if task not in now:
        ledger.record_fact(run.run_id, FactKind.HOST_HELD, task_label=task, detail=HostHeld(host=host, stage=stage, error=one_line(exc.message)))
        now = held(ledger, run.run_id)
    return f"held: {now[task].line()}" if task in now else f"held: host {host} did not answer during {stage} ({one_line(exc.message)})"


def release(ledger: Ledger, run: Run, task: str) -> None:
    """The held worker's host answered: its start went on (whatever came of it is the phase's own story)."""
    was = held(ledger, run.run_id).get(task)
    if was is not None:
        ledger.record_fact(run.run_id, FactKind.HOST_ANSWERED, task_label=task, detail=HostAnswered(host=was.host, given_up=None))


def expired(ledger: Ledger, run_id: str, now: datetime, interval_s: float) -> bool:
    """Whether every held worker has waited its bound (``HOLD_LIMIT`` check-in intervals since it was held)."""
    found = held(ledger, run_id)
    return bool(found) and all((now - h.since).total_seconds() >= HOLD_LIMIT * interval_s for h in found.values())


def give_up(ledger: Ledger, run: Run, why: str, kept: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """End every held worker not done: failed with its host named and what is kept there, its in-flight effects
    abandoned unmade (their outcome stays unknown; nothing there is removed). Returns (task, reason) per worker."""
    out = []
    for task, one in held(ledger, run.run_id).items():
        worker = ledger.get_worker(run.run_id, task)
        where = (kept or {}).get(task) or _kept_there(worker.worktree_path, one.host)
        reason = f"host {one.host} did not answer since {one.since:%Y-%m-%d %H:%M:%SZ} ({one.error}); {why}, so it never started; {where}"
        for effect in ledger.list_effects(run.run_id, task_label=task, status=EffectStatus.INTENDED):
            ledger.abandon(effect, f"host {one.host} did not answer before the run ended: outcome unknown, nothing there removed")
        ledger.record_fact(run.run_id, FactKind.HOST_ANSWERED, task_label=task, detail=HostAnswered(host=one.host, given_up=reason))
        try:
            ledger.transition(run.run_id, task, worker.state, WorkerState.FAILED, cause={"phase": one.stage, "step": "host", "error": reason})
        except StaleState:
            continue
        out.append((task, reason))
    return out


def _kept_there(path: str | None, host: str) -> str:
    if path is None:
        return f"nothing was made for it on {host} that orch knows of"
    return f"whatever was made for it on {host} is kept there, never removed blind (its checkout would be {path})"
