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

A worker already at work there (dispatched or working: its agent has its packet) whose host stops answering is *lost*
(``lose``, stage ``work``: a check-in could not reach its host, so it is not looked at and no stall counts against it).
The same bound holds it: a host that answers again before it releases the worker (``found``: read back, its spool
collected, as ever); once nothing else moves and the bound passed, ``give_up`` ends it failed with the host named and
its work kept there (its checkout and commits on that host, nothing there touched; retire keeps it, retained).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from orchestrator.errors import HostUnreachable, one_line
from registry import EffectStatus, Ledger, Run, StaleState, WorkerState
from registry.facts import FactKind, HostAnswered, HostHeld, read_fact
from registry.kinds import CONTROLLER_HOST
from registry.machine import AT_WORK, STARTING

# The spec's stall bound (orchestrator.observe.STALL_LIMIT): check-in intervals a held worker waits once nothing else moves.
HOLD_LIMIT = 3

# The stage of a hold on a worker at work (lost): its host did not answer a check-in.
WORK = "work"


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
        if self.stage == WORK:
            return f"host {self.host} did not answer a check-in ({self.error}); its work stays there, and orch reads it again once {self.host} answers"
        return f"host {self.host} did not answer during {self.stage} ({self.error}); it starts once {self.host} answers, at a later check-in"

    def note(self) -> str:
        """The line `orch status` shows for it: ``held: …`` while it starts, ``lost: …`` while at work."""
        return f"{'lost' if self.stage == WORK else 'held'}: {self.line()}"


def held(ledger: Ledger, run_id: str) -> dict[str, Held]:
    """The run's held workers by task: starting, on another host, and their last hold not yet released."""
    return {t: h for t, h in waiting(ledger, run_id).items() if h.stage != WORK}


def lost(ledger: Ledger, run_id: str) -> dict[str, Held]:
    """The run's lost workers by task: at work on another host that has not answered a check-in since (``lose``)."""
    return {t: h for t, h in waiting(ledger, run_id).items() if h.stage == WORK}


def waiting(ledger: Ledger, run_id: str) -> dict[str, Held]:
    """Every worker waiting for its host: starting (held) or at work (lost), its last hold not yet released."""
    found: dict[str, Held] = {}
    workers = {w.task_label: w for w in ledger.list_workers(run_id) if w.state in STARTING | AT_WORK and w.host != CONTROLLER_HOST}
    if not workers:
        return found
    for event in ledger.events(run_id):
        task = event.task_label
        if task not in workers:
            continue
        if event.kind == FactKind.HOST_HELD:
            fact = read_fact(event, HostHeld)
            # A hold goes on from its first fact until released (or until a hold of the other kind, held or lost, begins).
            if task not in found or (found[task].stage == WORK) != (fact["stage"] == WORK):
                found[task] = Held(task=task, host=fact["host"], stage=fact["stage"], error=fact["error"], since=event.at)
        elif event.kind == FactKind.HOST_ANSWERED:
            found.pop(task, None)
    # A hold of the other kind (held while starting, then at work; or the reverse after a restart) is no longer this one.
    return {t: h for t, h in found.items() if (h.stage == WORK) == (workers[t].state in AT_WORK)}


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


def lose(ledger: Ledger, run: Run, task: str, host: str, error: str) -> None:
    """``task``, at work, met its host gone at a check-in: lost from then (recorded once until its host answers)."""
    if task not in lost(ledger, run.run_id):
        ledger.record_fact(run.run_id, FactKind.HOST_HELD, task_label=task, detail=HostHeld(host=host, stage=WORK, error=one_line(error)))


def found(ledger: Ledger, run: Run, host: str) -> list[str]:
    """``host`` answered a check-in: its lost workers are looked at again as ever. Returns them."""
    back = [t for t, h in lost(ledger, run.run_id).items() if h.host == host]
    for task in back:
        ledger.record_fact(run.run_id, FactKind.HOST_ANSWERED, task_label=task, detail=HostAnswered(host=host, given_up=None))
    return back


def expired(ledger: Ledger, run_id: str, now: datetime, interval_s: float) -> bool:
    """Whether every worker waiting for its host (held or lost) has waited its bound (``HOLD_LIMIT`` check-in
    intervals since it was held or lost)."""
    found = waiting(ledger, run_id)
    return bool(found) and all((now - h.since).total_seconds() >= HOLD_LIMIT * interval_s for h in found.values())


def give_up(ledger: Ledger, run: Run, why: str, kept: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """End every held or lost worker not done: failed with its host named and what is kept there, its in-flight effects
    abandoned unmade (their outcome stays unknown; nothing there is removed). Returns (task, reason) per worker."""
    out = []
    for task, one in waiting(ledger, run.run_id).items():
        worker = ledger.get_worker(run.run_id, task)
        since = f"host {one.host} did not answer since {one.since:%Y-%m-%d %H:%M:%SZ} ({one.error}); {why}"
        if one.stage == WORK:
            reason = f"{since}, so its work was never brought home; {_work_kept(worker.worktree_path, one.host)}"
        else:
            reason = f"{since}, so it never started; {(kept or {}).get(task) or _kept_there(worker.worktree_path, one.host)}"
        for effect in ledger.list_effects(run.run_id, task_label=task, status=EffectStatus.INTENDED):
            ledger.abandon(effect, f"host {one.host} did not answer before the run ended: outcome unknown, nothing there removed")
        ledger.record_fact(run.run_id, FactKind.HOST_ANSWERED, task_label=task, detail=HostAnswered(host=one.host, given_up=reason))
        try:
            ledger.transition(run.run_id, task, worker.state, WorkerState.FAILED, cause={"phase": "observe" if one.stage == WORK else one.stage, "step": "host", "error": reason})
        except StaleState:
            continue
        out.append((task, reason))
    return out


def _kept_there(path: str | None, host: str) -> str:
    if path is None:
        return f"nothing was made for it on {host} that orch knows of"
    return f"whatever was made for it on {host} is kept there, never removed blind (its checkout would be {path})"


def _work_kept(path: str | None, host: str) -> str:
    where = f"its checkout {path}" if path else "its checkout"
    return f"its work is kept on {host} ({where} and its commits there), nothing there touched"
