"""`orch run` and `orch resume`: the whole life of a plan in one process, driven phase by phase from the ledger.

Every phase is idempotent over the ledger (confirmed effects are replayed, in-flight ones settled by read-back),
so resuming is simply driving the same run again from wherever the ledger says it stands.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from pydantic import BaseModel, ConfigDict

from orchestrator.effects import settle_in_flight, unsettled
from orchestrator.engine import CannotTell, Engine, LedgerLost
from orchestrator import git, spool
from orchestrator.errors import ExitCode, HerdrMissing, HerdrNotFound, HerdrTimeout, HerdrUnavailable, HostUnreachable, OrchError, one_line
from orchestrator.fleet import Step, advance, give_up_held, give_up_queued, held_expired, held_workers, lost_workers
from orchestrator.integrate import integrate_run
from orchestrator.observe import Observation, check_in, others_move, saved_work
from orchestrator.preflight import PreflightResult, finish_preflight, preflight
from orchestrator.hints import TEXT, orch_command
from orchestrator.progress import Progress, Row
from orchestrator.report import VERDICT_EXIT, Report, write_report
from orchestrator.dialogs import pending_approval
from orchestrator.retire import retire
from orchestrator.verify import blocked_by_verification, stored_verification, verify_run
from registry.facts import LOST, EffectDecided, FactKind, HerdrLostPanes, Lost, Restarted
from registry import Effect, EffectStatus, RegistryError, Run, RunStatus, StaleState, Worker, WorkerState
from registry.machine import NEEDS_PANE, STARTING, UNVERIFIED, WAITING_ON_PERSON
from registry.kinds import CONTROLLER_HOST

S = WorkerState

# The check-in loop waits on MOVING workers by itself (the person is not needed to move them on). A worker still
# provisioning or ready after dispatch has stopped there with its reason recorded: waiting would never end.


class RunOutcome(BaseModel):
    """How `orch run`/`orch resume` ended: the run, where it stopped, the report and the exit code."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    finished: bool
    stopped_at: str | None
    report: Report
    exit_code: int


class Interrupted(OrchError):
    """The person stopped the run (Ctrl-C or SIGTERM); workers and evidence stay in place."""

    exit_code = ExitCode.INTERRUPTED


class HerdrDown(OrchError):
    """herdr stopped answering (not running, refusing connections, or not answering a read-back): the run is
    interrupted, nothing is failed for it, and `orch resume` continues once herdr is back."""

    exit_code = ExitCode.HERDR_UNAVAILABLE


# herdr itself is down, not a thing herdr was asked about: the run waits for it.
OUTAGE = (HerdrUnavailable, HerdrTimeout)


def herdr_down(engine: Engine, run: Run, stage: str, exc: OrchError) -> HerdrDown:
    """Record the run as interrupted by an outage (with its report) and say, in one line, what to do.

    The one rule for `orch run`, `orch resume` and every door command (orchestrator.door.stop_for_outage): the
    command that goes on once herdr is back is `orch resume RUN` for a run `orch run` drives, and the agent
    controller's own `orch wait --run RUN` for one it drives (resume refuses those).
    """
    # A call that ran to its time limit found a server that is there and says nothing: hung, not down.
    down = "not answering" if isinstance(exc, HerdrTimeout) else "down"
    stopped = f"herdr is {down} during {stage}"
    engine.ledger.set_run_status(run.run_id, RunStatus.INTERRUPTED, stopped_at=stopped)
    write_report(engine, engine.ledger.get_run(run.run_id))
    why = one_line(exc.message)
    then = f"orch resume {run.run_id}" if run.controller_kind == "run" else f"orch wait --run {run.run_id}"
    return HerdrDown(
        f"herdr is {down}: {why}; run {run.run_id} stopped during {stage}, no worker was failed for it, workers and evidence are in place: "
        f"`{then}` once it is back"
    )


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    # SIGTERM (a supervisor stopping us) gets the same orderly stop as Ctrl-C: record where we stopped.
    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _rows(engine: Engine, run: Run) -> list[Row]:
    ledger = engine.ledger
    rows = []
    for worker in ledger.list_workers(run.run_id):
        callback = None
        if worker.last_callback_id is not None:
            callback = ledger.get_inbound(worker.last_callback_id).kind
        rows.append(Row(task=worker.task_label, state=str(worker.state), last_callback=callback, since=run.created_at))
    return rows


def _say(progress: Progress, engine: Engine, notes: Sequence[Observation]) -> None:
    for note in notes:
        if note.what in ("update", "working"):
            continue  # the worker lines already show it
        who = note.task or "run"
        progress.note(f"{who}: {note.what.replace('_', ' ')}: {note.text}", engine.clock.now())


def _steps(progress: Progress, engine: Engine, steps: Sequence[Step]) -> None:
    for step in steps:
        if step.what == "queued" and step.task is not None:
            continue  # the worker's own line says queued
        progress.note(f"{step.task or 'run'}: {step.what.replace('_', ' ')}: {step.text}", engine.clock.now())


def drive(engine: Engine, run: Run, progress: Progress, *, keep: Sequence[str] = (), interval_s: float | None = None) -> RunOutcome:
    """Take a run from wherever the ledger says it stands to its report; stop early only for the person."""
    ledger = engine.ledger
    plan = engine.plan_for(run)
    interval = float(interval_s if interval_s is not None else plan.plan.defaults.checkin_interval_s)
    stage = "schedule"

    def show() -> None:
        progress.update(_rows(engine, run), engine.clock.now())

    try:
        with _terminate_as_interrupt():
            # The scheduler admits at most `defaults.concurrency` workers (and only those whose `after` is done);
            # the rest wait queued and start from the check-in loop as slots free.
            _steps(progress, engine, advance(engine, run, keep=keep))
            show()
            stage = "observe"
            number = 0
            while True:
                number += 1
                notes, _waiting, _states = check_in(engine, run, number)
                _say(progress, engine, notes)
                if ledger.list_workers(run.run_id, states=UNVERIFIED):
                    stage = "verify"
                    verdicts = verify_run(engine, run)
                    for decided in verdicts.verdicts:
                        evidence = decided.verification
                        if evidence.reasons:  # an acceptance shows on the worker's own line; a refusal says why here
                            progress.note(f"{decided.task}: {evidence.disposition} ({'; '.join(evidence.reasons)})", engine.clock.now())
                # A worker held for its host (orchestrator.held) is started again at every check-in until it answers.
                if ledger.list_workers(run.run_id, states=(S.QUEUED,)) or held_workers(engine, run):
                    stage = "schedule"
                    _steps(progress, engine, advance(engine, run, keep=keep))
                stage = "observe"
                show()
                # A worker whose question the plan answers waits on orch (a send to try again), never on the person.
                if others_move(engine, run):
                    engine.clock.sleep(interval)
                    continue
                # Nothing else moves: a held or lost worker's host gets its bound (orchestrator.held.HOLD_LIMIT check-ins).
                if (held_workers(engine, run) or lost_workers(engine, run)) and not held_expired(engine, run, interval):
                    engine.clock.sleep(interval)
                    continue
                # A remote worker's callback spooled after this check-in is judged before the run is: one more
                # collection (orchestrator.spool), and what it brings home is acted on by another check-in at once.
                if spool.remote_hosts(engine, run):
                    added, kept = spool.collect_last(engine, run)
                    for line in kept:
                        progress.note(line, engine.clock.now())
                    if added:
                        continue
                break
            # A held or lost worker whose host never answered ends not done, its host named (the verdict is never PASS).
            _steps(progress, engine, give_up_held(engine, run, "the run ended before it answered"))
            # A run never goes on to integrate, retire and finish with an effect whose outcome is unknown: what
            # read-back settles now is settled, what it cannot is the person's one question.
            questions = unsettled(engine, run)
            if questions:
                return _stop_for_effects(engine, run, progress, questions)
            waiting = [w for w in ledger.list_workers(run.run_id) if w.state in WAITING_ON_PERSON]
            if waiting:
                return _stop_for_person(engine, run, progress, waiting)
            # Nothing moves and nobody waits on the person: a worker still queued now could never start.
            _steps(progress, engine, give_up_queued(engine, run, "nothing left in the run could start it"))
            stage = "integrate"
            integrated = integrate_run(engine, run)
            if integrated.paused_by:
                progress.note(f"integration paused by {', '.join(integrated.paused_by)} (edited outside its claim)", engine.clock.now())
            if integrated.stopped_at:
                progress.note(f"integration stopped at {integrated.stopped_at}", engine.clock.now())
            stage = "retire"
            retire(engine, run, keep=keep, say=lambda line: progress.note(line, engine.clock.now()))
            show()
    except OUTAGE as exc:
        raise herdr_down(engine, run, stage, exc) from None
    except KeyboardInterrupt:
        ledger.set_run_status(run.run_id, RunStatus.INTERRUPTED, stopped_at=f"interrupted during {stage}")
        report, _ = write_report(engine, ledger.get_run(run.run_id))
        raise Interrupted(
            f"run {run.run_id} interrupted during {stage}; no new work was dispatched, workers and evidence are in place",
            hint=f"continue with `orch resume {run.run_id}`",
        ) from None
    except OrchError as exc:
        raise _stopped(engine, run, stage, exc) from exc
    verdict = write_report(engine, run)[0].verdict
    finished = ledger.set_run_status(run.run_id, RunStatus.FINISHED, stopped_at="report", verdict=verdict)
    # Written again so the report on disk shows the run as finished, not as it was a moment before.
    report, _ = write_report(engine, finished)
    return RunOutcome(run_id=run.run_id, finished=True, stopped_at="report", report=report, exit_code=int(VERDICT_EXIT[report.verdict]))


def _stopped(engine: Engine, run: Run, stage: str, exc: OrchError) -> OrchError:
    """A stop on an error: the run left resumable with its report written, and the error as one readable line.

    The report is written even so (the person reads what stands: workers, evidence, what was kept); a failure to
    write it must not hide the error that stopped the run.
    """
    what = one_line(exc.message) or type(exc).__name__
    try:
        engine.ledger.set_run_status(run.run_id, RunStatus.INTERRUPTED, stopped_at=f"stopped during {stage}: {what}")
        write_report(engine, engine.ledger.get_run(run.run_id))
        written = f"; the report is in {engine.run_dir(run.run_id) / 'report.md'}"
    except (OrchError, RegistryError, OSError):
        written = ""
    stopped = OrchError(f"run {run.run_id} stopped during {stage}: {what}{written}", hint=exc.hint or f"fix the cause, then `orch resume {run.run_id}`")
    stopped.exit_code = exc.exit_code
    return stopped


def reread_world(engine: Engine, run: Run, progress: Progress | None = None) -> list[str]:
    """Resume after herdr lost the run's world (it restarted: real herdr keeps no panes): what is gone, and the rule.

    Every worker that still needs its agent is read back, each through the herdr of its own host (a worker on another
    host by that host's server, ``Engine.herdr_of``: a build box's herdr may restart while the controller's does not).
    One whose pane that herdr no longer has (or whose pane id now names a pane elsewhere: a restarted herdr hands its
    ids out again):
    - never sent its packet (provisioning, or ready with no prompt made or in flight): nothing of its work can be lost,
      so it is started again (``restart``): worktree reused, a new pane and agent, then its packet as usual;
    - was sent its packet (its agent may have worked): fails, with its pane, its commits and any uncommitted changes
      named; its worktree is kept, nothing of its work is deleted, and it is never sent the packet a second time.
    Another host whose herdr does not answer now is not taken to have lost anything: its workers are kept as they are,
    each named (``TASK: host unreachable: …``), and looked at again at the next check-in. A worker whose result is in
    goes on to verification and integration (git alone). When the run's repo workspace is gone too, the run finds (or
    makes) it again before anything starts (``orch resume`` finishes preflight), and a worker that was provisioning
    without a pane yet starts again as well. Returns the lines said (none when herdr lost nothing of the run).
    """
    ledger = engine.ledger
    workspace = run.workspace_id
    if workspace is None:
        return []
    try:
        engine.herdr.workspace_get(workspace)
        workspace_gone = False
    except HerdrNotFound:
        workspace_gone = True
    except HerdrMissing:
        return []  # no herdr binary at all: the run's first herdr step says so
    lines: list[str] = []
    kept: list[str] = []
    silent: dict[str, str] = {}  # another host that did not answer: what it said
    for worker in ledger.list_workers(run.run_id, states=NEEDS_PANE):
        if worker.state is S.BLOCKED and blocked_by_verification(worker):
            continue
        remote = worker.host != CONTROLLER_HOST
        try:
            if worker.host in silent:
                raise HostUnreachable(silent[worker.host])  # asked once per host
            lines += _reread_worker(engine, run, worker, workspace_gone=workspace_gone, workspace=workspace)
        except HerdrUnavailable as exc:
            if not remote:
                raise
            # Another host's herdr not answering (the link, or its server restarting) is no evidence that it lost the
            # worker: kept as it is, named, and read at the next check-in on that host.
            silent.setdefault(worker.host, one_line(exc.message))
            kept.append(f"{worker.task_label}: host unreachable: host {worker.host} did not answer while orch read its world back "
                        f"({silent[worker.host]}); {worker.task_label} is kept as it was ({worker.state.value}), never taken as lost, "
                        "and looked at again at the next check-in")
    if workspace_gone:
        # Found (or made) again by preflight before anything starts: the workers started again, and those still
        # queued, need a repo workspace in the world herdr has now.
        ledger.update_run(run.run_id, cause={"phase": "resume", "reason": f"herdr no longer has workspace {workspace}"}, workspace_id=None, repo_tab_id=None)
    if lines or workspace_gone:
        ledger.record_fact(run.run_id, FactKind.HERDR_LOST_PANES, detail=HerdrLostPanes(workspace_id=workspace, workspace_gone=workspace_gone, lines=lines))
    lines += kept
    if progress is not None:
        for line in lines:
            progress.note(line, engine.clock.now())
    return lines


def _reread_worker(engine: Engine, run: Run, worker: Worker, *, workspace_gone: bool, workspace: str) -> list[str]:
    """``reread_world`` for one worker, through its host's herdr: the lines said (none when its pane is where it was)."""
    herdr, remote = engine.herdr_of(worker), worker.host != CONTROLLER_HOST
    where = f" on host {worker.host}" if remote else ""
    pane = worker.pane_id
    if pane is None:
        # The run's repo workspace is the controller's: a worker on another host keeps a workspace of its own there.
        if workspace_gone and not remote and worker.state is S.PROVISIONING:
            return restart(engine, run, worker, f"herdr no longer has the run's workspace {workspace} (herdr restarted while orch was stopped)")
        if worker.state is S.PROVISIONING and (lost := _lost_split_target(engine, run, worker)) is not None:
            # A sibling split from its owner's pane before herdr lost it: its split, asked again, would name the
            # owner's new pane under the first start's key.
            return restart(engine, run, worker, f"the pane {lost}{where} it was being split from is gone (herdr restarted while orch was stopped)")
        return []
    try:
        info = herdr.pane_get(pane)
    except HerdrNotFound:
        info = None
    if info is not None and (worker.worktree_path is None or _inside(info.cwd or info.foreground_cwd, worker.worktree_path, here=not remote)):
        return []
    gone = "is gone" if info is None else f"now names a pane in {info.cwd or info.foreground_cwd}"
    why = f"its pane {pane}{where} {gone} (herdr{where} restarted, or it was closed, while orch was stopped)"
    if worker.state in STARTING and not _packet_may_have_landed(engine, run, worker):
        return restart(engine, run, worker, why)
    unsaved = ""
    path = worker.worktree_path
    ssh = str(engine.host_config(run.run_id, worker.host).ssh) if remote else None
    if path and (remote or Path(path).is_dir()):
        try:
            changed = git.status_porcelain(path, on=ssh)
        except (git.GitError, HerdrUnavailable):
            changed = []  # a checkout gone there, or ssh not answering: what it saved still says where its work is
        if changed:
            unsaved = f"; {len(changed)} uncommitted change(s) in {path}{where} (not committed, kept there)"
    reason = f"{why} while it was {worker.state.value}; saved: {saved_work(engine, run, worker)}{unsaved}"
    try:
        engine.ledger.transition(run.run_id, worker.task_label, worker.state, S.FAILED, cause={"phase": "resume", "reason": reason, LOST: Lost.PANE_CLOSED, "pane": pane})
    except StaleState:
        return []
    return [f"{worker.task_label}: failed: {reason}"]


def _lost_split_target(engine: Engine, run: Run, worker: Worker) -> str | None:
    """The pane a pane-less worker's recorded split was asked of, when its host's herdr no longer has it (None otherwise)."""
    for effect in engine.ledger.list_effects(run.run_id, task_label=worker.task_label):
        target = effect.request.get("pane") if effect.kind == "pane_split" and effect.status is not EffectStatus.ABANDONED else None
        if isinstance(target, str):
            try:
                engine.herdr_of(worker).pane_get(target)
            except HerdrNotFound:
                return target
    return None


def _packet_may_have_landed(engine: Engine, run: Run, worker: Worker) -> bool:
    """Whether any packet or message was ever sent to the worker's agent, or may have been (a prompt in flight)."""
    return any(e.kind == "agent_prompt" and e.status in (EffectStatus.INTENDED, EffectStatus.CONFIRMED) for e in engine.ledger.list_effects(run.run_id, task_label=worker.task_label))


def restart(engine: Engine, run: Run, worker: Worker, why: str) -> list[str]:
    """Start a worker again that herdr lost before any packet reached it: back to provisioning with no pane, what its
    first start left in flight given up (it was made in a world herdr no longer has), and its next start's effects
    under new keys (``Engine.start_key``). Its worktree and branch are kept and reused; nothing is deleted."""
    ledger, task = engine.ledger, worker.task_label
    for effect in ledger.list_effects(run.run_id, task_label=task, status=EffectStatus.INTENDED):
        ledger.abandon(effect, f"herdr lost what it was about before it was read back ({why})")
    start = 1 + sum(1 for e in ledger.events(run.run_id, task_label=task) if e.kind == FactKind.RESTARTED)
    kept = f"; its worktree {worker.worktree_path} is kept and reused" if worker.worktree_path else ""
    reason = f"{why} while it was {worker.state.value}, before any packet was sent, so nothing of its work can be lost{kept}"
    cause = {"phase": "resume", "reason": reason}
    # The fact first: from it on, every effect of the new start has a key of its own (a crash before the move below
    # only makes the next resume start it once more).
    ledger.record_fact(run.run_id, FactKind.RESTARTED, task_label=task, detail=Restarted(start=start + 1, state=worker.state.value, pane=worker.pane_id, reason=reason))
    try:
        if worker.state is S.READY:
            ledger.transition(run.run_id, task, S.READY, S.PROVISIONING, cause=cause, pane_id=None, tab_id=None)
        elif worker.pane_id is not None or worker.tab_id is not None:
            ledger.update_worker(run.run_id, task, cause=cause, pane_id=None, tab_id=None)
    except StaleState:
        return []
    return [f"{task}: started again: {reason}"]


def _inside(cwd: str | None, checkout: str, *, here: bool = True) -> bool:
    """Whether ``cwd`` is ``checkout`` or below it; another host's paths (``here`` False) are compared as it prints them."""
    if cwd is None:
        return True  # herdr says nothing of where it is: no evidence that the id names another pane
    if not here:
        root = checkout.rstrip("/")
        return cwd.rstrip("/") == root or cwd.startswith(f"{root}/")
    found, root_path = Path(os.path.realpath(cwd)), Path(os.path.realpath(checkout))
    return found == root_path or root_path in found.parents


def _stop_for_effects(engine: Engine, run: Run, progress: Progress, questions: Sequence[str]) -> RunOutcome:
    """An effect's outcome stays unknown after read-back: stop, resumable, with the question and its command."""
    for line in questions:
        progress.note(f"unsettled: {line}", engine.clock.now())
    stopped = f"waiting for the person: {len(questions)} side effect(s) read-back cannot settle"
    engine.ledger.set_run_status(run.run_id, RunStatus.INTERRUPTED, stopped_at=stopped)
    report, _ = write_report(engine, engine.ledger.get_run(run.run_id))
    return RunOutcome(run_id=run.run_id, finished=False, stopped_at=stopped, report=report, exit_code=int(VERDICT_EXIT[report.verdict]))


def _stop_for_person(engine: Engine, run: Run, progress: Progress, waiting: Sequence[Worker]) -> RunOutcome:
    """Nothing moves without the person: keep the workers, say what is needed, leave the run resumable."""
    ledger = engine.ledger
    for worker in waiting:
        task = worker.task_label
        found = stored_verification(worker) if blocked_by_verification(worker) else None
        if found is not None:
            # The worker is done; the decision is the person's, about its evidence (an answer would reach nobody waiting).
            why = "; ".join(found.reasons) or "no reason recorded"
            progress.note(
                f"{task} is blocked by verification, integration is paused: {why} -> fix its branch and `orch verify --run {run.run_id} --task {task}`, "
                f"or `{orch_command('verify', '--run', run.run_id, '--supersede', task, '--reason', TEXT)}`, then `orch resume {run.run_id}`",
                engine.clock.now(),
            )
            continue
        if pending_approval(ledger, worker) is not None:
            # orch never approves on its own: the person answers the agent's form with its own keys.
            progress.note(
                f"{task} waits at an approval form: {worker.pending_question} -> `orch approve --run {run.run_id} {task}` or `orch approve --run {run.run_id} {task} --deny`, "
                f"then `orch resume {run.run_id}`",
                engine.clock.now(),
            )
            continue
        question = worker.pending_question or f"(see `orch inbox list --run {run.run_id}`)"
        progress.note(f"{task} waits for you: {question} -> `{orch_command('answer', '--run', run.run_id, task, text=True)}`, then `orch resume {run.run_id}`", engine.clock.now())
    stopped = "waiting for the person: " + ", ".join(w.task_label for w in waiting)
    ledger.set_run_status(run.run_id, RunStatus.INTERRUPTED, stopped_at=stopped)
    report, _ = write_report(engine, ledger.get_run(run.run_id))
    return RunOutcome(run_id=run.run_id, finished=False, stopped_at=stopped, report=report, exit_code=int(VERDICT_EXIT[report.verdict]))


def run_plan(
    engine: Engine,
    plan_path: Path,
    progress: Progress,
    *,
    keep: Sequence[str] = (),
    interval_s: float | None = None,
    on_preflight: Callable[[PreflightResult], None] | None = None,
) -> RunOutcome:
    """`orch run PLAN`: preflight (a new run), then drive it to its report."""
    engine.refuse_second_run(plan_path)
    try:
        checked = preflight(engine, plan_path)
    finally:
        engine.started()  # the run is recorded with its own lock (or none will be): a second `orch run` now finds it
    if on_preflight is not None:
        on_preflight(checked)
    if checked.failure is not None or checked.run_id is None:
        failure = checked.failure
        raise failure.error() if failure else OrchError("preflight failed")
    run = engine.attach_log(engine.ledger.get_run(checked.run_id))
    progress.note(f"run {run.run_id}: {len(engine.ledger.list_workers(run.run_id))} workers", engine.clock.now())
    return drive(engine, run, progress, keep=keep, interval_s=interval_s)


def resume_run(
    engine: Engine,
    run_id: str | None,
    progress: Progress,
    *,
    keep: Sequence[str] = (),
    interval_s: float | None = None,
    decisions: Mapping[int, str] | None = None,
) -> RunOutcome:
    """`orch resume [RUN]`: continue an interrupted (or crashed) run from the ledger without repeating any effect.

    Before anything else, every effect left in flight is settled by its kind's read-back (orchestrator.effects);
    ``decisions`` are the person's answers (effect id -> "sent" / "unsent") to a prompt read-back could not decide.
    """
    try:
        run = engine.find_run(run_id)
    except OrchError as exc:
        if run_id is not None or isinstance(exc, LedgerLost):  # a lost ledger is not "nothing was recorded"
            raise
        raise OrchError(
            "no unfinished run in the ledger: a run stopped before it was recorded created nothing in herdr or git",
            hint="re-run `orch run PLAN`: it starts from the beginning",
        ) from exc
    engine.drive(run.run_id)
    if run.controller_kind != "run":
        # Its controller checks in with `orch wait` (SKILL.md): a second driver would check in on the same run.
        raise OrchError(
            f"run {run.run_id} is driven by an agent controller; `orch resume` continues only runs started by `orch run`",
            hint=f"continue it with the granular commands (SKILL.md): `orch wait --run {run.run_id}`, then what its next[] says",
        )
    for effect_id, answer in (decisions or {}).items():
        _decide(engine, run, effect_id, answer)
    if run.status is RunStatus.INTERRUPTED:
        run = engine.ledger.set_run_status(run.run_id, RunStatus.ACTIVE, stopped_at=None)
    try:
        with _terminate_as_interrupt():
            run, questions = take_up(engine, run, lambda task, what, text: progress.note(f"{task}: {what}: {text}" if task else text, engine.clock.now()))
            for question in questions:
                progress.note(f"cannot tell by read-back: {question.question} -> {question.command}", engine.clock.now())
    except OUTAGE as exc:
        raise herdr_down(engine, run, "resume", exc) from None
    except KeyboardInterrupt:
        engine.ledger.set_run_status(run.run_id, RunStatus.INTERRUPTED, stopped_at="interrupted while resuming")
        raise Interrupted(f"run {run.run_id} interrupted while resuming", hint=f"continue with `orch resume {run.run_id}`") from None
    return drive(engine, run, progress, keep=keep, interval_s=interval_s)


def take_up(engine: Engine, run: Run, note: Callable[[str | None, str, str], None]) -> tuple[Run, list[CannotTell]]:
    """What going on with a stopped (or crashed) run starts with: the one rule for both doors, `orch resume` for a run
    `orch run` drives and the agent controller's first door command after a stop (orchestrator.door.take_up).

    The run is active again; the world is read back (``reread_world``: a worker herdr lost is started again when no
    packet reached it, else failed with what it saved) and the run's repo workspace found or made again if herdr lost
    it; then every effect left in flight is settled by its kind's read-back. What it did goes to ``note`` (task or None,
    what: ``started again``, ``failed`` or ``settling``, the words: the lines ``reread_world`` says). Returns the
    run and the questions read-back cannot answer. A herdr outage meanwhile raises: the caller stops the run again.
    """
    if run.status is RunStatus.INTERRUPTED:
        run = engine.ledger.set_run_status(run.run_id, RunStatus.ACTIVE, stopped_at=None)
    run = _placed(engine, run)
    for line in reread_world(engine, run):
        task, what, text = line.split(": ", 2)  # "TASK: started again|failed: REASON"; a task label has no ": "
        note(task, what, text)
    run = _placed(engine, engine.ledger.get_run(run.run_id))
    in_flight = engine.ledger.in_flight(run.run_id)
    if in_flight:
        note(None, "settling", f"settling {len(in_flight)} side effect(s) left in flight by read-back: " + ", ".join(f"{e.kind} ({e.task_label or 'run'})" for e in in_flight))
    return run, settle_in_flight(engine, run)


def _placed(engine: Engine, run: Run) -> Run:
    """The run with its repo workspace and tab in herdr: a crash that cut its preflight short, or a herdr restart that
    lost them (``reread_world``), is met by finishing preflight on the snapshot (same run, nothing made twice)."""
    if run.workspace_id is not None and run.repo_tab_id is not None:
        return run
    finished = finish_preflight(engine, run)
    if finished.failure is not None:
        raise finished.failure.error()
    return engine.ledger.get_run(run.run_id)


class Decided(BaseModel):
    """`orch resume --settle` of a run an agent controller drives: the answers recorded, and how the run goes on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    settled: dict[int, str]
    next: str


def record_decisions(engine: Engine, run_id: str | None, decisions: Mapping[int, str]) -> Decided | None:
    """The person's answers for a run driven by an agent controller; None for an `orch run` run (resume continues it).

    Such a run cannot be resumed by this process (its callbacks go to the controller agent), but its cannot-tell
    questions end in the same `orch resume RUN --settle ID=…` command: the answer is recorded, and the door's next
    check-in settles the effect by it.
    """
    run = engine.drive_run(run_id)
    if run.controller_kind == "run":
        return None
    checked = [(_check_decision(engine, run, effect_id, answer), answer) for effect_id, answer in decisions.items()]
    for effect, answer in checked:  # all checked before any is recorded: a bad one changes nothing
        engine.ledger.record_fact(run.run_id, FactKind.EFFECT_DECIDED, task_label=effect.task_label, detail=EffectDecided(effect_id=effect.id, answer=answer))
    return Decided(run_id=run.run_id, settled=dict(decisions), next=f"orch wait --run {run.run_id}")


def _decide(engine: Engine, run: Run, effect_id: int, answer: str) -> None:
    """Record the person's answer for an in-flight prompt (`orch resume --settle ID=sent|unsent`)."""
    effect = _check_decision(engine, run, effect_id, answer)
    engine.ledger.record_fact(run.run_id, FactKind.EFFECT_DECIDED, task_label=effect.task_label, detail=EffectDecided(effect_id=effect_id, answer=answer))


def _check_decision(engine: Engine, run: Run, effect_id: int, answer: str) -> Effect:
    """The in-flight prompt a `--settle ID=sent|unsent` answers, or the one-line reason it answers nothing."""
    try:
        effect = engine.ledger.get_effect(effect_id)
    except RegistryError:
        raise OrchError(f"run {run.run_id} has no effect {effect_id}", hint="the question that asked names the effect id") from None
    if effect.run_id != run.run_id or effect.kind != "agent_prompt" or effect.status is not EffectStatus.INTENDED:
        raise OrchError(
            f"effect {effect_id} is not a prompt of run {run.run_id} left in flight ({effect.kind}, {effect.status})",
            hint="--settle answers only the question a resume asked",
        )
    if answer not in ("sent", "unsent"):
        raise OrchError(f"--settle {effect_id}={answer}: the answer is sent or unsent")
    return effect
