"""The agent controller's compound calls: wait for what needs it (checking in meanwhile), check in, and finish a run in one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from orchestrator import held as holds
from orchestrator import spool
from orchestrator.effects import unsettled
from orchestrator.engine import Engine
from orchestrator.driver import RunDriven
from orchestrator.errors import HerdrError, HerdrUnavailable, OrchError
from orchestrator.intake import Added, Raw, add_message, render_added
from orchestrator.integrate import IntegrateResult, integrate_run, render_integrate
from orchestrator.fleet import advance, give_up_held, held_expired, held_workers, lost_workers
from orchestrator.hints import TEXT, orch_command
from orchestrator.observe import _STEP_WHAT as STEP_WHAT
from orchestrator.observe import ObserveResult, Observation, WorkerStatus, answers_owed, check_in, others_move, render_observe
from packets import inert_line
from orchestrator.report import Blocker, Report, render_report, write_report
from orchestrator.repeats import ask_later
from orchestrator.retire import RetireResult, render_retire, retire
from orchestrator.verify import PENDING, VerifyResult, render_verify, verify_run
from registry import EventKind, RegistryError, Run, RunStatus, WorkerState
from registry.machine import AT_WORK, STARTING, UNVERIFIED, WAITING_ON_PERSON

S = WorkerState

# A question the plan answers is answered only once its worker has settled (it asks, then ends its turn): the check-in
# of a handover waits this long for that, so the controller need not call again just to deliver a planned answer
# (or a request to repeat, orchestrator.repeats).
SETTLE_S = 15.0
POLL_S = 0.5
# Blocker kinds that are a decision the person owes: while one is open the run is not over.
DECISIONS = frozenset({"question", "blocked", "verification_blocked", "integration_paused"})

Do = Literal["provision", "dispatch", "wait", "answer", "decide", "finish", "resume"]

# `orch wait` returns at the latest after this: an agent's tool call must not be cut off (claude's Bash tool stops one
# at 120 s by default), and the check-in it wakes for may add the settle window and verification on top.
WAIT_S = 60.0
# How often a waiting `orch wait` looks at the durable inbox (one SQLite read; herdr is read only at a check-in).
WAIT_POLL_S = 1.0
# How often a waiting `orch wait` collects remote workers' spools between check-ins (one ssh call per host).
SPOOL_POLL_S = 5.0
# Observations that need nothing from the controller: a wait goes on through them (they come back with what wakes it).
QUIET = frozenset({
    "working", "turn_not_finished", "answered", "asked_for_result", "asked_to_repeat", "report", "started", "slot_freed", "integrated",
    "queued", "slot_kept", "herdr_unavailable", "host_unreachable", "restarted",
    # Said at every check-in between asking a silent worker for its result and failing it: the failure wakes the wait.
    "settled_without_result",
})  # fmt: skip
Woke = Literal["callback", "decision", "verified", "failed", "finish", "timeout"]


class NextStep(BaseModel):
    """What the controller does next, with the exact command (None: nothing to run, e.g. wait for a callback)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    do: Do
    task: str | None
    command: str | None
    why: str


class Handover(BaseModel):
    """`orch inbox add --check-in`: the verdict on the envelope handed over, the check-in that followed, and what next."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    messages: tuple[Added, ...]
    check_in: ObserveResult
    verify: VerifyResult | None
    next: tuple[NextStep, ...]


class CheckedIn(ObserveResult):
    """`orch observe` for the agent controller: the check-in, the results it verified, and what next."""

    verify: VerifyResult | None
    next: tuple[NextStep, ...]


class Waited(CheckedIn):
    """`orch wait`: every check-in made while waiting, why it returned, the results verified, and what next."""

    woke: Woke
    waited_s: float


class Waiting(BaseModel):
    """A decision the person owes before the run can end, and the commands that record it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str | None
    kind: str
    text: str
    commands: tuple[str, ...]


class Finished(BaseModel):
    """`orch finish`: integrate, retire and report in one call; the run ends when no decision is open."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    finished: bool
    waiting: tuple[Waiting, ...]
    integrate: IntegrateResult
    retire: RetireResult
    report: Report
    report_text: str
    exit_code: int


# --- handing callbacks over ----------------------------------------------------------------------------------------


def hand_over(
    engine: Engine, run: Run, raw: str | Raw, *, source: str = "cli", limit: int | None = None, as_json: bool = False
) -> Handover:
    """Record the envelope through the one callback path (`orchestrator.intake`), then run one check-in and say what to do next."""
    added = add_message(engine, run, raw, source=source, limit=limit)
    observed, verified = settled_check_in(engine, run)
    return Handover(
        run_id=run.run_id, messages=(added,), check_in=observed, verify=verified, next=next_steps(engine, run, observed.observations, as_json=as_json)
    )


def settled_check_in(engine: Engine, run: Run, *, lifecycle: bool = True) -> tuple[ObserveResult, VerifyResult | None]:
    """One check-in that acts on everything it finds: callbacks, lifecycle, results (verified), queued workers.

    It checks in again (bounded) while a question the plan answers waits for its worker to end its turn; then it
    verifies every result it received, and starts the queued workers the freed slots (and accepted predecessors) allow.
    Only its first round reads every worker's lifecycle (and only with ``lifecycle``): the rounds that wait for an
    asking worker to settle must not count as check-ins toward another worker's stall.
    """
    clock, ledger = engine.clock, engine.ledger
    deadline = clock.monotonic() + SETTLE_S
    notes: list[Observation] = []
    states: dict[str, str] = {}
    rounds = 0
    while True:
        rounds += 1
        found, _waiting, seen = check_in(engine, run, rounds, lifecycle=lifecycle and rounds == 1)
        notes += found
        _advance(engine, run, rounds, notes)
        states.update(seen)
        # Only a deferred planned answer leaves an accepted message unhandled after a round; a worker a possible merge
        # names may also still be ending its turn before it can be asked to repeat (no callback would wake us for it).
        settling = bool(ledger.list_inbox(run.run_id, unhandled=True)) or ask_later(ledger, run, seen) or bool(answers_owed(engine, run))
        if not settling or clock.monotonic() >= deadline:
            break
        clock.sleep(POLL_S)
    verified = verify_received(engine, run, rounds, notes)
    if verified is not None:
        # An accepted worker frees its slot and starts its dependants; one rejected right now keeps its slot through
        # this call (the controller learns of it here and may send it back), and is freed at a later check-in.
        rejected = [v.task for v in verified.verdicts if v.verification.disposition == "rejected"]
        _advance(engine, run, rounds, notes, hold=rejected)
    return observed_now(engine, run, rounds, notes, states), verified


def _advance(engine: Engine, run: Run, rounds: int, notes: list[Observation], *, hold: Sequence[str] = ()) -> None:
    # As `orch run` does: the agent controller's check-in is where queued workers start as slots free, and where a
    # worker held for its host (orchestrator.held) is started again; once nothing else moves and its host had its
    # bound, it is given up, its host named.
    steps = []
    if engine.ledger.list_workers(run.run_id, states=(S.QUEUED,)) or held_workers(engine, run):
        steps += advance(engine, run, hold=hold)
    if (held_workers(engine, run) or lost_workers(engine, run)) and not others_move(engine, run) and held_expired(engine, run, _interval(engine, run)):
        steps += give_up_held(engine, run, "the run ended before it answered")
    for step in steps:
        notes.append(Observation(round=rounds, task=step.task, what=STEP_WHAT.get(step.what, "queued"), text=step.text))


def _interval(engine: Engine, run: Run) -> float:
    try:
        return float(engine.plan_for(run).plan.defaults.checkin_interval_s)
    except OrchError:
        return 60.0


def verify_received(engine: Engine, run: Run, rounds: int, notes: list[Observation]) -> VerifyResult | None:
    """Verify every result not verified yet (the check-in that receives a result verifies it); None when there is none."""
    if not engine.ledger.list_workers(run.run_id, states=tuple(PENDING)):
        return None
    verified = verify_run(engine, run)
    for v in verified.verdicts:
        found = v.verification
        notes.append(Observation(round=rounds, task=v.task, what="verified", text=found.disposition + (": " + "; ".join(found.reasons) if found.reasons else "")))
    return verified


def observed_now(engine: Engine, run: Run, rounds: int, notes: Sequence[Observation], states: Mapping[str, str]) -> ObserveResult:
    """The check-in's observations with every worker as the ledger has it now."""
    ledger = engine.ledger
    workers = tuple(
        WorkerStatus(
            task=w.task_label, name=w.name, state=w.state, herdr_state=states.get(w.task_label),
            unchanged_check_ins=w.unchanged_check_ins, pending_question=w.pending_question,
        )
        for w in ledger.list_workers(run.run_id)
    )  # fmt: skip
    active = bool(ledger.list_inbox(run.run_id, unhandled=True)) or any(w.state in AT_WORK for w in ledger.list_workers(run.run_id)) or bool(answers_owed(engine, run))
    return ObserveResult(run_id=run.run_id, rounds=rounds, observations=tuple(notes), workers=workers, active=active)


def observe_once(engine: Engine, run: Run, *, as_json: bool = False) -> CheckedIn:
    """`orch observe --once` for the agent controller: one check-in that acts on everything, and what next."""
    observed, verified = settled_check_in(engine, run)
    return CheckedIn(**dict(observed), verify=verified, next=next_steps(engine, run, observed.observations, as_json=as_json))


# --- waiting ---------------------------------------------------------------------------------------------------------


def lifecycle_due(engine: Engine, run: Run, interval_s: float) -> bool:
    """Whether a working worker was not looked at for ``interval_s`` (since the ledger's last lifecycle check-in,
    whichever process made it): the check-ins that count toward a stall come at the plan's interval, as `orch run`'s."""
    ledger = engine.ledger
    if not ledger.list_workers(run.run_id, states=tuple(AT_WORK)):
        return False
    last = ledger.last_event(run.run_id, EventKind.CHECK_IN)
    return last is None or (engine.clock.now() - last.at).total_seconds() >= interval_s


def check_in_due(engine: Engine, run: Run, interval_s: float) -> bool:
    """Whether orch owes the run a check-in now: a callback not acted on, a result not verified, a planned answer not
    sent yet, or a lifecycle check-in (``lifecycle_due``)."""
    ledger = engine.ledger
    if ledger.list_inbox(run.run_id, unhandled=True) or ledger.list_workers(run.run_id, states=tuple(PENDING)):
        return True
    return bool(answers_owed(engine, run)) or lifecycle_due(engine, run, interval_s)


def _woke(notes: Sequence[Observation], steps: Sequence[NextStep], verified: bool) -> Woke | None:
    """Why a wait returns after a check-in (None: nothing in it needs the controller)."""
    whats = {o.what for o in notes} - QUIET
    if whats & {"needs_answer", "blocked", "blocked_ui", "approval"} or any(s.do in ("answer", "decide") for s in steps):
        return "decision"
    if whats & {"failed", "gone", "skipped", "start_failed", "send_failed"}:
        return "failed"
    if verified or "verified" in whats:
        return "verified"
    if whats:
        return "callback"
    if any(s.do == "finish" for s in steps):
        return "finish"
    return None


def wait_run(engine: Engine, run: Run, *, timeout_s: float = WAIT_S, poll_s: float = WAIT_POLL_S, interval_s: float | None = None, as_json: bool = False) -> Waited:
    """Wait until something needs the controller, checking in whenever one is owed; at the latest after ``timeout_s``.

    A check-in is owed when a callback is in the durable inbox, a result is not verified, or a working worker was not
    looked at for the plan's `checkin_interval_s` (a silent worker is asked for its result and failed on time by these
    check-ins, with nobody sleeping in the controller). Every check-in acts on what it finds (orchestrator.door's
    ``settled_check_in``); the wait returns after the first one that holds anything for the controller (a callback, a
    decision, a verdict, a failure) or leaves nothing to wait for, else at the timeout with what it did meanwhile.
    """
    clock = engine.clock
    if interval_s is None:
        interval_s = _interval(engine, run)
    start = clock.monotonic()
    deadline = start + timeout_s
    notes: list[Observation] = []
    states: dict[str, str] = {}
    verdicts: list[VerifyResult] = []
    rounds = 0
    woke: Woke | None = None
    if taken_up_by_door(run):
        # The `orch wait` a herdr outage named: the world read back first, as `orch resume` does (take_up).
        try:
            engine.drive(run.run_id)
        except RunDriven:
            pass  # another door command acts on the run and takes it up itself (or ends it): the check-ins wait for it
        else:
            try:
                run, notes = take_up(engine, run)
            finally:
                engine.let_go(run.run_id)
            woke = _woke(notes, (), False) if notes else None  # a worker failed for what herdr lost wakes the controller
    queued = bool(engine.ledger.list_workers(run.run_id, states=(S.QUEUED,))) or held_workers(engine, run)
    held_tried = clock.monotonic()  # a held worker is tried again at the wait's first check-in, then every interval
    if woke is None and not any(s.do == "wait" for s in next_steps(engine, run)) and not queued and not check_in_due(engine, run, interval_s):
        woke = "finish"  # nothing to wait for: say so at once (next[] says what instead)
    remote = bool(spool.remote_hosts(engine, run))
    collected_at: float | None = None
    while woke is None:
        if remote and (collected_at is None or clock.monotonic() - collected_at >= SPOOL_POLL_S) and not check_in_due(engine, run, interval_s):
            # A remote worker's callback waits in its host's spool: bring it home now and then (one ssh per host), so
            # it wakes the wait as a local callback does instead of waiting for the next lifecycle check-in.
            collected_at = clock.monotonic()
            collect_between(engine, run)
        retry = held_workers(engine, run) and clock.monotonic() - held_tried >= interval_s
        if check_in_due(engine, run, interval_s) or (rounds == 0 and queued) or retry:
            held_tried = clock.monotonic()
            try:
                # One driver per run while it checks in; between check-ins the lock is free for `orch answer` & co.
                engine.drive(run.run_id)
            except RunDriven:
                clock.sleep(min(poll_s, max(0.0, deadline - clock.monotonic())))
                if clock.monotonic() >= deadline:
                    woke = "timeout"
                    break
                continue  # another orch process acts on the run right now: check in once it is done
            try:
                observed, verified = settled_check_in(engine, run, lifecycle=lifecycle_due(engine, run, interval_s))
            finally:
                engine.let_go(run.run_id)
            found = [o.model_copy(update={"round": rounds + o.round}) for o in observed.observations]
            rounds += observed.rounds
            notes += found
            states.update({w.task: w.herdr_state for w in observed.workers if w.herdr_state})
            if verified is not None:
                verdicts.append(verified)
            steps = next_steps(engine, run, found, as_json=as_json)
            woke = _woke(found, steps, verified is not None)
            if woke is None and not any(s.do == "wait" for s in steps):
                woke = "finish"
            if woke is not None:
                if woke == "decision":
                    _let_askers_settle(engine, run, [s.task for s in steps if s.do in ("answer", "decide") and s.task])
                break
        remaining = deadline - clock.monotonic()
        if remaining <= 0:
            woke = "timeout"
            break
        clock.sleep(min(poll_s, remaining))
    observed = observed_now(engine, run, rounds, notes, states)
    # Every step the check-ins raised, then where the run stands now.
    steps = next_steps(engine, run, notes, as_json=as_json)
    return Waited(**dict(observed), verify=_merged(run, verdicts), next=steps, woke=woke, waited_s=round(clock.monotonic() - start, 1))


def collect_between(engine: Engine, run: Run) -> None:
    """Collect the run's remote spools between check-ins, as its driver for that moment (never two collectors at once)."""
    try:
        engine.drive(run.run_id)
    except RunDriven:
        return  # its driver checks in (and collects) right now
    try:
        spool.collect(engine, run)  # what it records is acted on by the check-in it makes due
    finally:
        engine.let_go(run.run_id)


def _let_askers_settle(engine: Engine, run: Run, tasks: Sequence[str]) -> None:
    """Wait (bounded) until each worker that just asked has ended its turn: a worker sends its question, then ends the
    turn, and `orch answer` reaches only a settled worker, so the printed answer command works at the first call."""
    clock = engine.clock
    deadline = clock.monotonic() + SETTLE_S
    pending = list(tasks)
    while pending:
        still = []
        for task in pending:
            worker = engine.ledger.get_worker(run.run_id, task)
            target = worker.reply_target or worker.pane_id
            try:
                status = engine.herdr_of(worker).agent_get(target).agent_status if target else None
            except HerdrError:
                status = None  # gone or unreadable: `orch answer` says so itself
            if status == "working" and worker.state in WAITING_ON_PERSON:
                still.append(task)
        pending = still
        if not pending or clock.monotonic() >= deadline:
            return
        clock.sleep(POLL_S)


def _merged(run: Run, found: Sequence[VerifyResult]) -> VerifyResult | None:
    if not found:
        return None
    last = found[-1]
    return VerifyResult(run_id=run.run_id, verdicts=tuple(v for f in found for v in f.verdicts), not_verified=last.not_verified, integration_paused_by=last.integration_paused_by)


def after_preflight(run_id: str | None, *, as_json: bool = False) -> tuple[NextStep, ...]:
    """What follows `orch preflight`: provision the run it created; nothing when it created none (its failure's hint
    says what to do, then preflight again)."""
    if run_id is None:
        return ()
    command = orch_command("provision", "--run", run_id, as_json=as_json)
    return (NextStep(do="provision", task=None, command=command, why="the run is recorded: create its workers' tabs and start their agents"),)


def next_after(engine: Engine, run: Run, *, as_json: bool = False) -> tuple[NextStep, ...]:
    """What follows a door command (provision, dispatch, answer, send, approve, verify): dispatch the ready workers,
    else as ``next_steps`` says."""
    if run.controller_kind == "run":
        return ()  # `orch run`'s person door says its own next step (`orch resume RUN`), and nobody waits on it
    ready = [w.task_label for w in engine.ledger.list_workers(run.run_id, states=(S.READY,))]
    if ready:
        return (NextStep(do="dispatch", task=None, command=orch_command("dispatch", "--run", run.run_id, as_json=as_json), why=f"{', '.join(ready)} ready for their packets"),)
    return next_steps(engine, run, as_json=as_json)


def next_steps(engine: Engine, run: Run, observations: Iterable[Observation] = (), *, as_json: bool = False) -> tuple[NextStep, ...]:
    """What the controller does next: decide what waits on it, wait while workers work, then finish.

    Every command is exact and carries the caller's own flags (``--json``): run it as printed, TEXT replaced.
    """
    r = run.run_id
    workers = engine.ledger.list_workers(r)
    steps: list[NextStep] = []
    for o in observations:
        if o.what == "needs_answer" and o.task:
            steps.append(NextStep(do="answer", task=o.task, command=orch_command("answer", "--run", r, o.task, text=True, as_json=as_json),
                                  why="a question the plan does not answer: answer from the task's context, or ask the user first"))  # fmt: skip
        elif o.what == "approval" and o.task:
            steps.append(NextStep(do="decide", task=o.task, command=orch_command("approve", "--run", r, o.task, as_json=as_json),
                                  why="the agent stopped at its own approval form: ask the user; add --deny to refuse it"))  # fmt: skip
        elif o.what in ("blocked", "blocked_ui") and o.task:
            steps.append(NextStep(do="decide", task=o.task, command=orch_command("answer", "--run", r, o.task, text=True, as_json=as_json),
                                  why="the worker needs the user's decision (authority, a token, scope): ask the user, then answer"))  # fmt: skip
    lost = holds.lost(engine.ledger, r)
    moving = [w.task_label for w in workers if w.state in AT_WORK and w.task_label not in lost]
    queued = [w.task_label for w in workers if w.state is S.QUEUED]
    owed = answers_owed(engine, run)
    unverified = [w.task_label for w in workers if w.state in UNVERIFIED]
    held = holds.held(engine.ledger, r)
    wait = orch_command("wait", "--run", r, as_json=as_json)
    if moving or owed or unverified or held or lost:
        # A planned answer not sent yet goes out at a later check-in, and a result that came in after a check-in is
        # verified by the next one: `orch wait` makes both, one form for every step that needs no decision.
        why = [f"{', '.join(moving)} still working"] if moving else []
        if owed:
            why.append(f"the plan's answer to {', '.join(owed)} is not sent yet")
        if unverified:
            why.append(f"{', '.join(unverified)} sent a result to verify")
        for host in dict.fromkeys(h.host for h in held.values()):
            names = ", ".join(t for t, h in held.items() if h.host == host)
            why.append(f"{names} held: host {host} does not answer, it starts once it does (`orch finish --run {r}` ends the run without it)")
        for host in dict.fromkeys(h.host for h in lost.values()):
            names = ", ".join(t for t, h in lost.items() if h.host == host)
            why.append(f"{names} at work on host {host}, which does not answer: its work stays there, orch goes on once {host} answers "
                       f"(`orch finish --run {r}` ends the run without it)")
        steps.append(NextStep(do="wait", task=None, command=wait, why=f"{'; '.join(why)}: orch checks in while it waits and returns when something needs you"))
    else:
        reason = "no worker is working or waiting for verification"
        if queued:
            reason += f"; nothing left can start {', '.join(queued)} (finish reports it)"
        steps.append(NextStep(do="finish", task=None, command=orch_command("finish", "--run", r, as_json=as_json), why=reason))
    return tuple(steps)


# --- going on after a stop -------------------------------------------------------------------------------------------


def taken_up_by_door(run: Run) -> bool:
    """Whether the agent controller's next door command on ``run`` takes it up again first (``take_up``): a run it
    drives that was stopped (a herdr outage, or `orch finish` waiting for the person). A preflight that stopped is not
    (its hint is a new preflight), nor a run `orch run` drives (`orch resume` takes those up)."""
    return run.controller_kind != "run" and run.status is RunStatus.INTERRUPTED and not (run.stopped_at or "").startswith("preflight:")


def take_up(engine: Engine, run: Run) -> tuple[Run, list[Observation]]:
    """The agent controller going on with a stopped run, as `orch resume` goes on with one `orch run` drives: the one
    rule (orchestrator.run.take_up: active again, the world read back after a herdr restart, each worker herdr lost
    started again or failed with what it saved, effects in flight settled), then what is left starting (the workers that
    rule started again, those a stopped `orch provision` or `orch dispatch` left) provisioned and dispatched, as
    `orch run`'s loop does first. Returns the run and what it did, as a check-in's observations (round 0).

    Every door command that drives a run starts with it when ``taken_up_by_door`` (``Engine.drive_run``; `orch wait`
    itself); the caller holds the run's driver lock. An outage meanwhile raises, and stops the run again."""
    from orchestrator.run import take_up as take_up_run

    notes: list[Observation] = []

    def note(task: str | None, what: str, text: str) -> None:
        kind = {"started again": "restarted", "failed": "failed", "host unreachable": "host_unreachable"}.get(what)
        if kind is not None:
            notes.append(Observation(round=0, task=task, what=kind, text=text))  # type: ignore[arg-type]
        engine.echo(f"{task}: {what}: {text}" if task else text)

    run, questions = take_up_run(engine, run, note)
    for question in questions:
        engine.echo(f"cannot tell by read-back: {question.question} -> {question.command}")
    if engine.ledger.list_workers(run.run_id, states=tuple(STARTING)):
        for step in advance(engine, run):
            notes.append(Observation(round=0, task=step.task, what=STEP_WHAT.get(step.what, "queued"), text=step.text))
    return run, notes


# --- herdr down --------------------------------------------------------------------------------------------------------


def stop_for_outage(engine: Engine | None, exc: HerdrUnavailable, *, as_json: bool = False) -> OrchError:
    """What a door command that met a herdr outage ends with: the run it acted on stopped `interrupted` as `orch run`
    stops (orchestrator.run.herdr_down: no worker failed, one line, exit 3), with the one next step, the command
    that goes on once herdr is back (never at once: the controller tells the person and stops, it does not loop).

    The one place for every door command (the CLI's group calls it for any HerdrUnavailable that ends a command):
    a command that acted on no run (preflight before its run exists, a read) gets ``exc`` back unchanged.
    """
    from orchestrator.run import herdr_down

    if engine is None or engine.acting_on is None:
        return exc
    try:
        run = engine.ledger.get_run(engine.acting_on)
    except (OrchError, RegistryError):
        return exc  # not recorded (yet): nothing to stop
    if run.status is RunStatus.FINISHED:
        return exc
    stopped = herdr_down(engine, run, engine.command, exc)
    then = orch_command("resume", run.run_id, as_json=as_json) if run.controller_kind == "run" else orch_command("wait", "--run", run.run_id, as_json=as_json)
    step = NextStep(do="resume", task=None, command=then, why="herdr is down or not answering: tell the user and stop; run this once they say herdr is back")
    stopped.next_steps = (step.model_dump(mode="json"),)
    return stopped


# --- finishing a run -----------------------------------------------------------------------------------------------


def _waiting(run: Run, blockers: Sequence[Blocker], *, as_json: bool = False) -> tuple[Waiting, ...]:
    r = run.run_id
    out = []
    for b in blockers:
        if b.kind not in DECISIONS or b.task is None:
            continue
        commands: tuple[str, ...]
        if b.kind in ("question", "blocked"):
            commands = (orch_command("answer", "--run", r, b.task, text=True, as_json=as_json), orch_command("finish", "--run", r, "--abandon", b.task, "--reason", TEXT, as_json=as_json))
        elif b.kind == "verification_blocked":
            commands = (
                orch_command("send", "--run", r, b.task, "--kind", "follow-up", text=True, as_json=as_json),
                orch_command("verify", "--run", r, "--supersede", b.task, "--reason", TEXT, as_json=as_json),
                orch_command("finish", "--run", r, "--abandon", b.task, "--reason", TEXT, as_json=as_json),
            )
        else:
            commands = ()  # held back by another worker's decision: that worker's commands decide it
        out.append(Waiting(task=b.task, kind=b.kind, text=b.text, commands=commands))
    return tuple(out)


def finish_run(engine: Engine, run: Run, *, keep: Iterable[str] = (), abandon: Mapping[str, str] | None = None, as_json: bool = False) -> Finished:
    """Integrate, retire (keeping every worker that waits on the person), report; mark the run finished when nothing waits."""
    # A remote worker's callback spooled after the last check-in is judged before the run is (orchestrator.spool):
    # brought home, then acted on by a check-in of its own, so the refusals below see what it changed.
    if spool.remote_hosts(engine, run) and spool.collect_last(engine, run)[0]:
        settled_check_in(engine, run, lifecycle=False)
    workers = engine.ledger.list_workers(run.run_id)
    lost = holds.lost(engine.ledger, run.run_id)  # at work on a host that does not answer: ended below, its host named
    busy = [w for w in workers if w.state in AT_WORK and w.task_label not in (abandon or {}) and w.task_label not in lost]
    if busy:
        names = ", ".join(f"{w.task_label} ({w.state})" for w in busy)
        raise OrchError(
            f"run {run.run_id} is not done: {names} still working",
            hint=f"wait for their callbacks (`{orch_command('wait', '--run', run.run_id, as_json=as_json)}`), or stop one: `{orch_command('send', '--run', run.run_id, busy[0].task_label, '--kind', 'stop', text=True, as_json=as_json)}`",
        )
    owed = [t for t in answers_owed(engine, run) if t not in (abandon or {})]
    if owed:
        raise OrchError(
            f"run {run.run_id} is not done: the plan's answer to {', '.join(owed)} is not sent yet",
            hint=f"wait while orch sends it: `{orch_command('wait', '--run', run.run_id, as_json=as_json)}`",
        )
    pending = [w for w in workers if w.state in UNVERIFIED]
    if pending:
        raise OrchError(
            f"run {run.run_id} has results not verified yet: {', '.join(w.task_label for w in pending)}",
            hint=f"verify them first: `{orch_command('verify', '--run', run.run_id, as_json=as_json)}`",
        )
    # The agent controller ends the run: a worker still held for (or lost with) its host ends not done, its host named.
    give_up_held(engine, run, "the run was finished before it answered")
    questions = unsettled(engine, run)
    if questions:
        raise OrchError(
            f"run {run.run_id} is not done: {len(questions)} side effect(s) read-back cannot settle: {'; '.join(questions)}",
            hint=f"answer them (the command follows each ->), then `{orch_command('finish', '--run', run.run_id, as_json=as_json)}` again",
        )
    integrated = integrate_run(engine, run)
    retired = retire(engine, run, keep=keep, abandon=abandon)
    report, _ = write_report(engine, engine.ledger.get_run(run.run_id))
    waiting = _waiting(run, report.blockers, as_json=as_json)
    if not any(w.commands for w in waiting):
        # Only work held back with no command to decide it (a merge conflict, an unrelated history: its worker's agent
        # is retired, nothing in this run can send it back): the run finishes, as `orch run` finishes it, and the
        # report's blockers say what was not merged. Held-back work waits only while another worker's decision is open.
        waiting = ()
    if waiting:
        stopped = "waiting for the person: " + ", ".join(dict.fromkeys(w.task for w in waiting if w.task))
        engine.ledger.set_run_status(run.run_id, RunStatus.INTERRUPTED, stopped_at=stopped)
        finished = False
    else:
        engine.ledger.set_run_status(run.run_id, RunStatus.FINISHED, stopped_at="report", verdict=report.verdict)
        finished = True
    # Written again so report.md shows the run's status after this call, not as it was a moment before.
    report, _ = write_report(engine, engine.ledger.get_run(run.run_id))
    integrated = _as_part_of_finish(integrated, report.exit_code, finished=finished, as_json=as_json)
    return Finished(
        run_id=run.run_id, finished=finished, waiting=waiting, integrate=integrated, retire=retired, report=report,
        report_text=render_report(report), exit_code=report.exit_code,
    )  # fmt: skip


def _as_part_of_finish(integrated: IntegrateResult, exit_code: int, *, finished: bool, as_json: bool) -> IntegrateResult:
    """Integration's shortfall as one part of `orch finish`'s one story: the call's exit code is the run's verdict
    (its `exit_code`, also the failure's: every exit code in the document is the process's), and once the run is
    finished nothing is left to do in it (no hint: the report's blockers say what the user decides; integration is not
    tried again); while the run stays open the hint's commands carry the caller's flags, as every failure's do."""
    failure = integrated.failure
    if failure is None:
        return integrated
    from orchestrator.cli import with_caller_flags

    hint = None if finished else (with_caller_flags(failure.hint) if as_json else failure.hint)
    return integrated.model_copy(update={"failure": failure.model_copy(update={"hint": hint, "exit_code": exit_code})})


# --- rendering -----------------------------------------------------------------------------------------------------


def render_next(steps: Sequence[NextStep]) -> list[str]:
    """One `Next:` line per step."""
    return [f"Next: {s.do}" + (f" {s.task}" if s.task else "") + f": {s.why}" + (f": `{s.command}`" if s.command else "") for s in steps]


def render_handover(result: Handover) -> str:
    """One verdict line per envelope, the check-in, then what to do next."""
    verified = render_verify(result.verify) if result.verify else ""
    return "".join(render_added(m) for m in result.messages) + render_observe(result.check_in) + verified + "".join(line + "\n" for line in render_next(result.next))


def render_checked_in(result: CheckedIn) -> str:
    """The check-in, the verdicts it reached, then what to do next."""
    verified = render_verify(result.verify) if result.verify else ""
    return render_observe(result) + verified + "".join(line + "\n" for line in render_next(result.next))


def render_waited(result: Waited) -> str:
    """Why the wait returned and after how long, then the check-ins it made."""
    return f"Woke after {result.waited_s:g} s: {result.woke}\n" + render_checked_in(result)


def render_finished(result: Finished) -> str:
    """Integration, retirement, the compact report, then what still waits on the person (or that the run is over)."""
    parts = [render_integrate(result.integrate), render_retire(result.retire), result.report_text]
    parts += [f"Spool: {inert_line(text)}\n" for text in result.report.spools_kept]
    if result.finished:
        parts.append(f"Run {result.run_id} is finished.\n")
    else:
        lines = [f"Run {result.run_id} waits for the person:"]
        for w in result.waiting:
            lines.append(f"  {w.task} ({w.kind.replace('_', ' ')}): {inert_line(w.text)}")
            lines += [f"    `{c}`" for c in w.commands]
        parts.append("\n".join(lines) + "\n")
    return "".join(parts)
