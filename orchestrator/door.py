"""The agent controller's compound calls: hand over any number of callbacks (and check in) in one call, and finish a run in one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from orchestrator.effects import unsettled
from orchestrator.engine import Engine
from orchestrator.errors import OrchError
from orchestrator.handover import Handed, hand_over as record_all, render_handed
from orchestrator.inbox import Inbound
from orchestrator.integrate import IntegrateResult, integrate_run, render_integrate
from orchestrator.fleet import advance
from orchestrator.observe import _STEP_WHAT as STEP_WHAT
from orchestrator.observe import ObserveResult, Observation, WorkerStatus, answers_owed, check_in, render_observe
from packets import inert_line
from orchestrator.report import Blocker, Report, render_report, write_report
from orchestrator.repeats import ask_later
from orchestrator.retire import RetireResult, render_retire, retire
from registry import Run, RunStatus, WorkerState

S = WorkerState

# A question the plan answers is answered only once its worker has settled (it asks, then ends its turn): the check-in
# of a handover waits this long for that, so the controller need not call again just to deliver a planned answer
# (or a request to repeat, orchestrator.repeats).
SETTLE_S = 15.0
POLL_S = 0.5
# Workers still working on their own: the controller waits for their next callback.
MOVING = frozenset({S.DISPATCHED, S.WORKING})
# Workers with a result not yet verified.
UNVERIFIED = frozenset({S.RESULT, S.VERIFYING})
# Blocker kinds that are a decision the person owes: while one is open the run is not over.
DECISIONS = frozenset({"question", "blocked", "verification_blocked", "integration_paused"})

Do = Literal["wait", "answer", "decide", "verify", "finish"]


class NextStep(BaseModel):
    """What the controller does next, with the exact command (None: nothing to run, e.g. wait for a callback)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    do: Do
    task: str | None
    command: str | None
    why: str


class Handover(Handed):
    """`orch inbox add --check-in`: the verdict on every envelope handed over, the check-in that followed, and what next."""

    check_in: ObserveResult
    next: tuple[NextStep, ...]


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
    engine: Engine, run: Run, raw: str | Inbound, *, source: str = "cli", limit: int | None = None, separator: str | None = None
) -> Handover:
    """Validate and record each envelope on its own, then run one check-in and say what to do next."""
    handed = record_all(engine, run, raw, source=source, limit=limit, separator=separator)
    observed = settled_check_in(engine, run)
    return Handover(**dict(handed), check_in=observed, next=next_steps(engine, run, observed.observations))


def settled_check_in(engine: Engine, run: Run) -> ObserveResult:
    """One check-in; again (bounded) while a question the plan answers waits for its worker to end its turn."""
    clock, ledger = engine.clock, engine.ledger
    deadline = clock.monotonic() + SETTLE_S
    notes: list[Observation] = []
    states: dict[str, str] = {}
    rounds = 0
    while True:
        rounds += 1
        found, _waiting, seen = check_in(engine, run, rounds)
        notes += found
        if ledger.list_workers(run.run_id, states=(S.QUEUED,)):
            # As `orch observe` does: the agent controller's check-in is where queued workers start as slots free.
            for step in advance(engine, run):
                notes.append(Observation(round=rounds, task=step.task, what=STEP_WHAT.get(step.what, "queued"), text=step.text))
        states.update(seen)
        # Only a deferred planned answer leaves an accepted message unhandled after a round; a worker a possible merge
        # names may also still be ending its turn before it can be asked to repeat (no callback would wake us for it).
        settling = bool(ledger.list_inbox(run.run_id, unhandled=True)) or ask_later(ledger, run, seen) or bool(answers_owed(engine, run))
        if not settling or clock.monotonic() >= deadline:
            break
        clock.sleep(POLL_S)
    workers = tuple(
        WorkerStatus(
            task=w.task_label, name=w.name, state=w.state, herdr_state=states.get(w.task_label),
            unchanged_check_ins=w.unchanged_check_ins, pending_question=w.pending_question,
        )
        for w in ledger.list_workers(run.run_id)
    )  # fmt: skip
    active = bool(ledger.list_inbox(run.run_id, unhandled=True)) or any(w.state in MOVING for w in ledger.list_workers(run.run_id)) or bool(answers_owed(engine, run))
    return ObserveResult(run_id=run.run_id, rounds=rounds, observations=tuple(notes), workers=workers, active=active)


def next_steps(engine: Engine, run: Run, observations: Iterable[Observation] = ()) -> tuple[NextStep, ...]:
    """What the controller does next: answer or surface what waits on it, wait while workers work, then verify, then finish."""
    r = run.run_id
    workers = engine.ledger.list_workers(r)
    steps: list[NextStep] = []
    for o in observations:
        if o.what == "needs_answer" and o.task:
            steps.append(NextStep(do="answer", task=o.task, command=f"orch answer --run {r} {o.task} TEXT",
                                  why="a question the plan does not answer: answer from the task's context, or ask the user first"))  # fmt: skip
        elif o.what == "approval" and o.task:
            steps.append(NextStep(do="decide", task=o.task, command=f"orch approve --run {r} {o.task}",
                                  why="the agent stopped at its own approval form: ask the user; add --deny to refuse it"))  # fmt: skip
        elif o.what in ("blocked", "blocked_ui") and o.task:
            steps.append(NextStep(do="decide", task=o.task, command=f"orch answer --run {r} {o.task} TEXT",
                                  why="the worker needs the user's decision (authority, a token, scope): ask the user, then answer"))  # fmt: skip
    moving = [w.task_label for w in workers if w.state in MOVING]
    owed = answers_owed(engine, run)
    if owed:
        # A planned answer not sent yet (its send failed, or its worker was still ending its turn) goes out at a later
        # check-in, and no callback may come to prompt one: the controller checks in again, the person is not needed.
        steps.append(NextStep(do="wait", task=None, command=f"orch observe --run {r} --once",
                              why=f"the plan's answer to {', '.join(owed)} is not sent yet: check in again shortly to send it"))  # fmt: skip
    unverified = [w.task_label for w in workers if w.state in UNVERIFIED]
    if moving:
        steps.append(NextStep(do="wait", task=None, command=None, why=f"{', '.join(moving)} still working: wait for the next callback"))
    elif unverified:
        steps.append(NextStep(do="verify", task=None, command=f"orch verify --run {r}", why=f"{', '.join(unverified)} sent a result"))
    elif not owed:
        steps.append(NextStep(do="finish", task=None, command=f"orch finish --run {r}", why="no worker is working or waiting for verification"))
    return tuple(steps)


# --- finishing a run -----------------------------------------------------------------------------------------------


def _waiting(run: Run, blockers: Sequence[Blocker]) -> tuple[Waiting, ...]:
    r = run.run_id
    out = []
    for b in blockers:
        if b.kind not in DECISIONS or b.task is None:
            continue
        commands: tuple[str, ...]
        if b.kind in ("question", "blocked"):
            commands = (f"orch answer --run {r} {b.task} TEXT", f"orch finish --run {r} --abandon {b.task} --reason TEXT")
        elif b.kind == "verification_blocked":
            commands = (
                f"orch send --run {r} {b.task} --kind follow-up TEXT",
                f"orch verify --run {r} --supersede {b.task} --reason TEXT",
                f"orch finish --run {r} --abandon {b.task} --reason TEXT",
            )
        else:
            commands = ()  # held back by another worker's decision: that worker's commands decide it
        out.append(Waiting(task=b.task, kind=b.kind, text=b.text, commands=commands))
    return tuple(out)


def finish_run(engine: Engine, run: Run, *, keep: Iterable[str] = (), abandon: Mapping[str, str] | None = None) -> Finished:
    """Integrate, retire (keeping every worker that waits on the person), report; mark the run finished when nothing waits."""
    workers = engine.ledger.list_workers(run.run_id)
    busy = [w for w in workers if w.state in MOVING and w.task_label not in (abandon or {})]
    if busy:
        names = ", ".join(f"{w.task_label} ({w.state})" for w in busy)
        raise OrchError(
            f"run {run.run_id} is not done: {names} still working",
            hint=f"wait for their callbacks, or stop one: `orch send --run {run.run_id} {busy[0].task_label} --kind stop TEXT`",
        )
    owed = [t for t in answers_owed(engine, run) if t not in (abandon or {})]
    if owed:
        raise OrchError(
            f"run {run.run_id} is not done: the plan's answer to {', '.join(owed)} is not sent yet",
            hint=f"check in again to send it: `orch observe --run {run.run_id} --once`",
        )
    pending = [w for w in workers if w.state in UNVERIFIED]
    if pending:
        raise OrchError(
            f"run {run.run_id} has results not verified yet: {', '.join(w.task_label for w in pending)}",
            hint=f"verify them first: `orch verify --run {run.run_id}`",
        )
    questions = unsettled(engine, run)
    if questions:
        raise OrchError(
            f"run {run.run_id} is not done: {len(questions)} side effect(s) read-back cannot settle: {'; '.join(questions)}",
            hint=f"answer them (the command follows each ->), then `orch finish --run {run.run_id}` again",
        )
    integrated = integrate_run(engine, run)
    retired = retire(engine, run, keep=keep, abandon=abandon)
    report, _ = write_report(engine, engine.ledger.get_run(run.run_id))
    waiting = _waiting(run, report.blockers)
    if waiting:
        stopped = "waiting for the person: " + ", ".join(dict.fromkeys(w.task for w in waiting if w.task))
        engine.ledger.set_run_status(run.run_id, RunStatus.INTERRUPTED, stopped_at=stopped)
        finished = False
    else:
        engine.ledger.set_run_status(run.run_id, RunStatus.FINISHED, stopped_at="report", verdict=report.verdict)
        finished = True
    # Written again so report.md shows the run's status after this call, not as it was a moment before.
    report, _ = write_report(engine, engine.ledger.get_run(run.run_id))
    return Finished(
        run_id=run.run_id, finished=finished, waiting=waiting, integrate=integrated, retire=retired, report=report,
        report_text=render_report(report), exit_code=report.exit_code,
    )  # fmt: skip


# --- rendering -----------------------------------------------------------------------------------------------------


def render_next(steps: Sequence[NextStep]) -> list[str]:
    """One `Next:` line per step."""
    return [f"Next: {s.do}" + (f" {s.task}" if s.task else "") + f": {s.why}" + (f": `{s.command}`" if s.command else "") for s in steps]


def render_handover(result: Handover) -> str:
    """One verdict line per envelope, the check-in, then what to do next."""
    return render_handed(result) + render_observe(result.check_in) + "".join(line + "\n" for line in render_next(result.next))


def render_finished(result: Finished) -> str:
    """Integration, retirement, the compact report, then what still waits on the person (or that the run is over)."""
    parts = [render_integrate(result.integrate), render_retire(result.retire), result.report_text]
    if result.finished:
        parts.append(f"Run {result.run_id} is finished.\n")
    else:
        lines = [f"Run {result.run_id} waits for the person:"]
        for w in result.waiting:
            lines.append(f"  {w.task} ({w.kind.replace('_', ' ')}): {inert_line(w.text)}")
            lines += [f"    `{c}`" for c in w.commands]
        parts.append("\n".join(lines) + "\n")
    return "".join(parts)
