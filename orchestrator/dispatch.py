"""Dispatch (spec §4): resolve each worker's agent, submit its packet exactly once, confirm acceptance, diagnose a stall.

A prompt is never repeated: its effect is intended before and confirmed after; a submitted-but-unaccepted or
unknown outcome is confirmed as such, so a later `orch dispatch` only reads back, never re-sends.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

from orchestrator import tables
from orchestrator.agents import enter_plan_mode
from orchestrator.dialogs import flat
from orchestrator.effects import from_json, to_json
from orchestrator.briefing import Briefing, brief
from orchestrator.engine import Engine, InFlightEffect
from orchestrator.errors import (
    HerdrAgentBlocked,
    HerdrAgentNotRunning,
    HerdrError,
    HerdrFailure,
    HerdrNotFound,
    HerdrPromptStalled,
    HerdrProtocolError,
    HerdrTargetAmbiguous,
    HerdrTimeout,
    HerdrUnavailable,
    HerdrWaitExpired,
    HostUnreachable,
    OrchError,
)
from orchestrator import held as holds
from orchestrator.herdr_models import AT_REST, AgentInfo, AgentStatus
from orchestrator.intake import catch_up
from orchestrator.messages import BASELINE_COMPLETION
from orchestrator.plan import ResolvedPlan
from orchestrator.quirks import excerpt, quirks
from registry.facts import DispatchDiagnosis, FactKind
from registry import Effect, EffectStatus, Run, StaleState, Worker, WorkerState
from registry.kinds import CONTROLLER_HOST

if TYPE_CHECKING:
    from orchestrator.herdr import Herdr

# herdr's own activity gate for `agent prompt --wait` is 5000 ms (CONTRACT §8.3); the fleet path uses the same.
ACCEPT_GATE_MS = 5000
T = TypeVar("T")
READ_LINES = 60
# Any observed state after submission settles the single-target wait: acceptance, not the end of the turn.
ACCEPTED_STATES: tuple[AgentStatus, ...] = ("working", "idle", "done", "blocked")
SENDABLE = AT_REST
# No answer, or one we cannot read: whether herdr wrote the prompt is unknown (engine.once leaves it in flight).
UNKNOWN: tuple[type[HerdrFailure], ...] = (HerdrTimeout, HerdrProtocolError)

# blocked: herdr (0.8.2+) refused the prompt because the agent sits at a dialog; nothing was written.
# held: its host did not answer (orchestrator.held); a later check-in sends it (or reads the prompt's fate back) there.
Outcome = Literal["accepted", "stalled", "unknown", "skipped", "blocked", "failed", "held"]
Suggestion = Literal["approval_prompt", "shell_prompt", "agent_prompt", "nothing", "unrecognised"]


@dataclass(frozen=True, kw_only=True)
class PromptOutcome:
    """The stored response of one `agent prompt` effect: submitted (or unknown), and whether acceptance was seen."""

    submitted: Literal["yes", "unknown"]
    accepted: bool
    status: str | None = None
    state_change_seq: int | None = None
    # herdr 0.9.2+: the agent's count of finished turns when the prompt's answer came (None before 0.9.2).
    completion_seq: int | None = None
    error_code: str | None = None
    error: str | None = None
    via: str | None = None


@dataclass(frozen=True, kw_only=True)
class Acceptance:
    """Evidence that the worker took its packet: a state after submission, a state_change_seq past the baseline, or
    (herdr 0.9.2+) a completion_seq past its baseline: a turn already finished since the packet was sent."""

    via: str
    status: str
    state_change_seq: int
    baseline_seq: int | None
    # herdr 0.9.2+ only (None before): what turn completion is later judged against (orchestrator.observe).
    completion_seq: int | None = None
    baseline_completion_seq: int | None = None


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    """What one pane read after a stalled prompt shows (the packet is never sent again)."""

    suggests: Suggestion
    summary: str
    last_lines: tuple[str, ...]


class WorkerDispatch(BaseModel):
    """One worker's dispatch outcome and its ledger state afterwards."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    agent: str
    outcome: Outcome
    state: str
    detail: str
    packet: str | None = None
    baseline_seq: int | None = None
    acceptance: Acceptance | None = None
    diagnosis: Diagnosis | None = None


class DispatchResult(BaseModel):
    """`orch dispatch`: what was sent, accepted, stalled or skipped, in plan order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    path: Literal["single", "fleet", "none"]
    prompts_sent: int
    workers: tuple[WorkerDispatch, ...]

    @property
    def ok(self) -> bool:
        """No worker failed, stalled or was left with an unknown outcome (one held for its host goes on later)."""
        return all(w.outcome in ("accepted", "skipped", "held") for w in self.workers)


@dataclass(eq=False)
class _Item:
    """A worker on its way through this dispatch."""

    worker: Worker
    key: str
    request: dict[str, object]
    briefing: Briefing | None = None
    effect: Effect | None = None
    outcome: PromptOutcome | None = None
    report: WorkerDispatch | None = None

    @property
    def task(self) -> str:
        return self.worker.task_label

    @property
    def baseline(self) -> int | None:
        value = self.request.get("baseline_seq")
        return value if isinstance(value, int) else None

    @property
    def baseline_completion(self) -> int | None:
        value = self.request.get(BASELINE_COMPLETION)
        return value if isinstance(value, int) else None

    def acceptance(self, via: str, info: AgentInfo) -> Acceptance:
        return Acceptance(via=via, status=info.agent_status, state_change_seq=info.state_change_seq, baseline_seq=self.baseline,
                          completion_seq=info.completion_seq, baseline_completion_seq=self.baseline_completion)


def dispatch_key(task: str) -> str:
    """The effect key of a worker's initial packet (follow-ups use later numbers)."""
    return f"{task}:dispatch:1"


def dispatch(engine: Engine, run: Run, tasks: Sequence[str] | None = None, *, gate_ms: int = ACCEPT_GATE_MS) -> DispatchResult:
    """Send each selected ready worker its packet once and confirm acceptance; report every selected worker."""
    plan = engine.plan_for(run)
    workers = engine.workers(run)
    selected = _select(run, workers, tasks)
    timeout_ms = plan.plan.defaults.wait_timeout_s * 1000
    items: list[_Item] = []
    for worker in selected:
        key = dispatch_key(worker.task_label)
        items.append(_Item(worker=worker, key=key, request={}, effect=_latest_effect(engine, run.run_id, key)))

    # Bad input first, before anything is sent: every packet to be sent must build.
    for item in items:
        if item.worker.state is WorkerState.READY and not _started(item.effect):
            brief(engine, run, item.task, plan=plan, save=False)

    candidates: list[_Item] = []
    for item in items:
        if item.worker.state is WorkerState.READY and _started(item.effect):
            assert item.effect is not None
            item.request = dict(item.effect.request)  # replayed or settled below, never re-sent
        elif item.worker.state is WorkerState.READY:
            candidates.append(item)
        elif item.worker.state is WorkerState.DISPATCHED and item.effect is not None and item.effect.status is EffectStatus.CONFIRMED:
            item.request = dict(item.effect.request)
            item.outcome = from_json(PromptOutcome, item.effect.response or {})
        else:
            item.report = _report(item, "skipped", _not_sendable(item.worker))

    # Workers are independent: resolve them concurrently (up to the plan's cap), then send concurrently. Each prompt
    # still goes through its own engine.once key, so concurrency never makes a second prompt.
    cap = max(1, plan.plan.defaults.concurrency)
    fresh = [i for i, ok in zip(candidates, _each(cap, lambda i: _preflight(engine, run, plan, i), candidates), strict=True) if ok]
    path: Literal["single", "fleet", "none"] = "none" if not fresh else "single" if len(fresh) == 1 else "fleet"
    stop = threading.Event()  # herdr itself failed: no further prompt starts (those under way finish and are recorded)

    def send(item: _Item) -> None:
        if stop.is_set():
            item.report = _report(item, "skipped", "not sent: dispatch stopped after herdr failed for another worker")
            return
        if item in fresh:
            item.briefing = brief(engine, run, item.task, plan=plan)
            item.request.update(packet=str(item.briefing.path), sha256=item.briefing.sha256, bytes=item.briefing.size)
        try:
            _send(engine, run, item, wait=path == "single", timeout_ms=timeout_ms)
        except HostUnreachable as exc:
            if item.worker.host == CONTROLLER_HOST:
                stop.set()
                raise
            # Its host alone is gone: the prompt's effect stays in flight (read back there when it answers), the
            # other workers' packets go on.
            _hold(engine, run, item, exc)
        except BaseException:
            stop.set()
            raise

    _each(cap, send, [i for i in items if i.report is None and i.outcome is None])
    sent = sum(1 for i in fresh if i.outcome is not None or (i.report is not None and i.report.outcome == "unknown" and i.briefing is not None))

    _confirm(engine, run, [i for i in items if i.report is None and i.outcome is not None], gate_ms=gate_ms)
    reports = [item.report for item in items if item.report is not None]
    return DispatchResult(run_id=run.run_id, path=path, prompts_sent=sent, workers=tuple(reports))


def completion_baseline(engine: Engine, run_id: str, task: str) -> int | None:
    """The completion_seq baseline of the worker's latest prompt (packet, answer or follow-up), or None when herdr had
    no counter then (before 0.9.2): a turn is finished once herdr's completion_seq moved past it."""
    for effect in reversed(engine.ledger.list_effects(run_id, task_label=task)):
        if effect.kind == "agent_prompt" and effect.status in (EffectStatus.INTENDED, EffectStatus.CONFIRMED):
            value = effect.request.get(BASELINE_COMPLETION)
            return value if isinstance(value, int) else None
    return None


def _each(cap: int, fn: Callable[[_Item], T], items: list[_Item]) -> list[T]:
    """fn over items on up to ``cap`` threads, results in order; the first exception propagates after all finish."""
    if len(items) <= 1 or cap == 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(cap, len(items)), thread_name_prefix="dispatch") as pool:
        futures = [pool.submit(fn, i) for i in items]
        wait_all(futures)
    return [f.result() for f in futures]


def _select(run: Run, workers: list[Worker], tasks: Sequence[str] | None) -> list[Worker]:
    if not tasks:
        return workers
    by_task = {w.task_label: w for w in workers}
    unknown = [t for t in tasks if t not in by_task]
    if unknown:
        raise OrchError(f"run {run.run_id} has no worker {unknown[0]}", hint=f"its workers: {', '.join(by_task) or '(none)'}")
    wanted = set(tasks)
    return [w for w in workers if w.task_label in wanted]


def _latest_effect(engine: Engine, run_id: str, key: str) -> Effect | None:
    """The last attempt of a key (engine.once retries a failed attempt as key#2, key#3…)."""
    found: Effect | None = None
    attempt = 1
    while (effect := engine.ledger.find_effect(run_id, key if attempt == 1 else f"{key}#{attempt}")) is not None:
        found, attempt = effect, attempt + 1
    return found


def _started(effect: Effect | None) -> bool:
    """A prompt that was (or may have been) submitted: its effect is confirmed or still in flight."""
    return effect is not None and effect.status in (EffectStatus.INTENDED, EffectStatus.CONFIRMED)


def _not_sendable(worker: Worker) -> str:
    if worker.state is WorkerState.PROVISIONING:
        return f"still provisioning: run `orch provision --run {worker.run_id}` first"
    if worker.state is WorkerState.QUEUED:
        return "queued: it starts as soon as a slot frees and every task in its `after` (if any) is accepted"
    if worker.state is WorkerState.SKIPPED:
        return "skipped: a predecessor ended without acceptance; it never starts"
    if worker.state is WorkerState.DISPATCHED:
        return "dispatched by another door without a recorded packet effect; inspect it"
    return f"already {worker.state}: its packet was sent before"


def _preflight(engine: Engine, run: Run, plan: ResolvedPlan, item: _Item) -> bool:
    """Resolve the target right before sending (spec §4); True when the worker may be sent its packet now."""
    try:
        return _resolve(engine, run, plan, item)
    except HostUnreachable as exc:
        if item.worker.host == CONTROLLER_HOST:
            raise
        _hold(engine, run, item, exc)
        return False


def _hold(engine: Engine, run: Run, item: _Item, exc: HostUnreachable) -> None:
    """A ready worker whose host does not answer: held (orchestrator.held), its packet sent (or, if a prompt may have
    landed, read back) by a later check-in once the host answers; never failed for it, never sent twice."""
    line = holds.hold(engine.ledger, run, item.task, item.worker.host, "dispatch", exc)
    item.report = _report(item, "held", line)


def _resolve(engine: Engine, run: Run, plan: ResolvedPlan, item: _Item) -> bool:
    worker = item.worker
    try:
        info = engine.herdr_of(worker).agent_get(worker.name)
    except (HerdrNotFound, HerdrTargetAmbiguous) as exc:
        _fail(engine, run, item, exc)
        return False
    if worker.host != CONTROLLER_HOST:
        holds.release(engine.ledger, run, item.task)
    if worker.pane_id and info.pane_id != worker.pane_id:
        item.report = _report(item, "skipped", f"agent {worker.name} is in pane {info.pane_id}, but the ledger has {worker.pane_id}; not sending")
        return False
    if info.agent_status not in SENDABLE and not _codex_ready(info):
        item.report = _report(item, "skipped", f"agent {worker.name} is {info.agent_status}; a packet goes only to an idle or done agent")
        return False
    problem = screen_problem(engine, worker)
    if problem is not None:
        item.report = _report(item, "skipped", problem)
        return False
    if engine.planned(plan, item.task).mode == "plan-first":
        problem = _enter_plan_mode(engine, worker)
        if problem is not None:
            item.report = _report(item, "skipped", problem)
            return False
        info = engine.herdr_of(worker).agent_get(worker.name)  # the baseline after the mode keys, so they do not count as acceptance
    item.request = {"target": worker.name, "pane_id": info.pane_id, "baseline_seq": info.state_change_seq, **engine.on_host(worker.host)}
    if info.completion_seq is not None:
        item.request[BASELINE_COMPLETION] = info.completion_seq
    return True


def _codex_ready(info: AgentInfo) -> bool:
    """herdr 0.9.3+ calls a codex screen no detection rule matches `unknown`, and its own `agent start` takes such an
    agent as ready when it is interactive-ready (../herdr-0.9.5/DELTA.md row 10): so does dispatch."""
    return info.agent_status == "unknown" and info.interactive_ready and info.agent == "codex"


def screen_problem(engine: Engine, worker: Worker) -> str | None:
    """Why the agent's screen cannot take a packet right now, or None; read right before pasting (spec §4).

    herdr's `idle` is not enough: a dialog its manifests do not know reads idle (codex 0.169's trust dialog, Claude
    Code's notices), and a packet's Enter would answer it. A dialog of the quirk table, or a kind's ready sign missing,
    means nothing is sent (provisioning handles start-up dialogs; a person answers the rest).
    """
    kinds = quirks(worker.kind)
    if kinds.ready is None and not (kinds.trust_dialogs or kinds.start_notices or kinds.approval_forms):
        return None
    try:
        shown = engine.herdr_of(worker).agent_read(worker.name, source="visible")
    except HerdrError as exc:
        return f"its screen could not be read before sending ({exc.message}); not sent"
    reading = kinds.read(shown)
    if reading.state == "blocked":
        return f"its screen shows the {worker.kind} {reading.sign}, which a packet's Enter would answer; not sent. Screen: {flat(excerpt(shown))}"
    if kinds.ready is not None and reading.state not in ("ready", "idle"):
        return f"its screen does not show that it takes a prompt ({worker.kind} {kinds.ready.name}); not sent. Screen: {flat(excerpt(shown)) or '(blank)'}"
    return None


def _enter_plan_mode(engine: Engine, worker: Worker) -> str | None:
    """Switch the agent to plan mode and confirm it on screen (orchestrator.agents); the reason when that cannot be done."""
    try:
        enter_plan_mode(engine, worker)
    except HerdrUnavailable:
        raise
    except OrchError as exc:
        return f"plan mode not confirmed, not sent: {exc.message}"
    return None


def _fail(engine: Engine, run: Run, item: _Item, exc: HerdrError) -> None:
    cause = {"phase": "dispatch", "error_code": exc.code, "error": exc.message}
    try:
        worker = engine.ledger.transition(run.run_id, item.task, item.worker.state, WorkerState.FAILED, cause=cause)
        state = str(worker.state)
    except StaleState as stale:
        state = stale.actual
    item.report = _report(item, "failed", exc.message, state=state)


def _send(engine: Engine, run: Run, item: _Item, *, wait: bool, timeout_ms: int) -> None:
    """Submit (or replay, or settle) the packet through engine.once; a submitted prompt moves ready -> dispatched."""
    name = item.worker.name

    def act() -> PromptOutcome:
        if item.briefing is None:
            # Read-back proved an earlier process's packet never landed (orchestrator.messages.settle_prompt): the
            # same packet, rebuilt from the plan snapshot, is sent now under the next attempt key.
            item.briefing = brief(engine, run, item.task)
        return _prompt(engine.herdr_of(item.worker), name, item.briefing.text, wait=wait, timeout_ms=timeout_ms)

    try:
        # A lost call, or one an earlier process left in flight: orchestrator.messages.settle_prompt decides (done /
        # not done / ask), never a second packet blindly (it would be a second turn).
        item.outcome = engine.once(run.run_id, item.task, "agent_prompt", item.key, item.request, act, model=PromptOutcome, unknown_on=UNKNOWN)
    except InFlightEffect as exc:
        item.report = _report(item, "unknown", f"{exc.message}; not re-sent")
        return
    except (HerdrNotFound, HerdrTargetAmbiguous) as exc:
        _fail(engine, run, item, exc)
        return
    except HerdrAgentBlocked as exc:
        # Nothing was written (herdr checks before typing), so a later dispatch may send it: show the dialog now.
        item.report = _report(item, "blocked", f"{exc.message}; answer it in the pane, then dispatch again", diagnosis=_diagnose(engine, item))
        return
    except HerdrError as exc:
        if exc.code is None or isinstance(exc, HerdrUnavailable):
            raise  # herdr unreachable or broken: the whole dispatch stops here
        item.report = _report(item, "skipped", f"not sent: {exc.message}")
        return
    if item.worker.host != CONTROLLER_HOST:
        holds.release(engine.ledger, run, item.task)  # its host answered: a prompt left in flight was read back there
    cause: dict[str, object] = {"phase": "dispatch", "effect": item.key, **item.request, "outcome": to_json(item.outcome)}
    try:
        worker = engine.ledger.transition(run.run_id, item.task, WorkerState.READY, WorkerState.DISPATCHED, cause=cause, reply_target=name)
        item.worker = worker
    except StaleState:
        item.worker = engine.ledger.get_worker(run.run_id, item.task)
    effect = _latest_effect(engine, run.run_id, item.key)
    if effect is not None:
        item.worker = catch_up(engine, run, item.task, effect.intended_at)


def _prompt(herdr: Herdr, name: str, text: str, *, wait: bool, timeout_ms: int) -> PromptOutcome:
    """One `agent prompt`; errors that mean "submitted" become outcomes so the effect is never retried (an unknown
    outcome, UNKNOWN, propagates and leaves the effect in flight)."""
    try:
        if wait:
            result = herdr.agent_prompt(name, text, wait=True, until=ACCEPTED_STATES, timeout_ms=timeout_ms)
            return PromptOutcome(
                submitted="yes", accepted=True, status=result.agent.agent_status, state_change_seq=result.agent.state_change_seq,
                completion_seq=result.agent.completion_seq, via="agent prompt --wait",
            )  # fmt: skip
        result = herdr.agent_prompt(name, text)
        return PromptOutcome(submitted="yes", accepted=False, status=result.agent.agent_status, state_change_seq=result.agent.state_change_seq,
                             completion_seq=result.agent.completion_seq)  # fmt: skip
    except (HerdrPromptStalled, HerdrWaitExpired, HerdrAgentNotRunning) as exc:
        # herdr submits before it waits: these arrive after the text and Enter were written (CONTRACT §8.3).
        return PromptOutcome(submitted="yes", accepted=False, error_code=exc.code, error=exc.message)


def _is_accepted(info: AgentInfo, item: _Item) -> bool:
    """Working now, or its state moved since the baseline, or (0.9.2+) a turn finished since it: an agent that took
    the packet and ended its turn before orch looked again."""
    if info.agent_status == "working" or (item.baseline is not None and info.state_change_seq > item.baseline):
        return True
    return item.baseline_completion is not None and info.completion_seq is not None and info.completion_seq > item.baseline_completion


def _confirm(engine: Engine, run: Run, items: list[_Item], *, gate_ms: int) -> None:
    """Confirm acceptance: one shared `agent list`, then concurrent waits for the rest, then one pane read per laggard."""
    accepted: dict[str, Acceptance] = {}
    for item in items:
        assert item.outcome is not None
        if item.outcome.accepted and item.outcome.status is not None and item.outcome.state_change_seq is not None:
            accepted[item.task] = Acceptance(via=item.outcome.via or "agent prompt", status=item.outcome.status,
                                             state_change_seq=item.outcome.state_change_seq, baseline_seq=item.baseline,
                                             completion_seq=item.outcome.completion_seq, baseline_completion_seq=item.baseline_completion)
    # A single-target prompt that stalled already waited herdr's gate: go straight to the diagnosis.
    stalled_now = {i.task for i in items if i.outcome is not None and i.outcome.error_code == "agent_prompt_stalled" and i.briefing is not None}
    waiting = [i for i in items if i.task not in accepted and i.task not in stalled_now]
    if waiting:
        # One `agent list` per host: agent names are orch's and unique in a run, but each host's herdr knows only its own.
        listed: dict[tuple[str, str], AgentInfo] = {}
        for host in dict.fromkeys(i.worker.host for i in waiting):
            herdr = engine.herdr_at(run.run_id, host)
            try:
                listed.update({(host, info.name): info for info in herdr.agent_list() if info.name})
            except HostUnreachable as exc:
                if host == CONTROLLER_HOST:
                    raise
                # Sent, and its host went away before acceptance was read: check-ins read it there once it answers.
                for item in [i for i in waiting if i.worker.host == host]:
                    item.worker = engine.ledger.get_worker(run.run_id, item.task)
                    item.report = _report(item, "held", f"sent; acceptance is read at a later check-in: host {host} did not answer ({exc.message})")
        waiting = [i for i in waiting if i.report is None]
        items = [i for i in items if i.report is None]
        for item in waiting:
            info = listed.get((item.worker.host, item.worker.name))
            if info is not None and _is_accepted(info, item):
                accepted[item.task] = item.acceptance("agent list", info)
        laggards = [i for i in waiting if i.task not in accepted]
        if laggards:
            with ThreadPoolExecutor(max_workers=len(laggards)) as pool:
                for item, found in zip(laggards, pool.map(lambda i: _await_working(engine, i, gate_ms), laggards), strict=True):
                    if found is not None:
                        accepted[item.task] = found
    unaccepted = [i for i in items if i.task not in accepted]
    diagnoses: dict[str, Diagnosis] = {}
    if unaccepted:
        with ThreadPoolExecutor(max_workers=len(unaccepted)) as pool:
            diagnoses = dict(zip((i.task for i in unaccepted), pool.map(lambda i: _diagnose(engine, i), unaccepted), strict=True))
    for item in items:
        if item.task in accepted:
            _mark_working(engine, run, item, accepted[item.task])
        else:
            _mark_stalled(engine, run, item, diagnoses[item.task])


def _await_working(engine: Engine, item: _Item, gate_ms: int) -> Acceptance | None:
    """Wait up to the gate for `working`; then one `agent get`, since the agent may have finished its turn already."""
    name = item.worker.name
    try:
        info = engine.herdr_of(item.worker).agent_wait(name, until=("working",), timeout_ms=gate_ms)
        return item.acceptance("agent wait", info)
    except (HerdrWaitExpired, HerdrAgentNotRunning, HerdrNotFound, HerdrTimeout):
        # HerdrTimeout: herdr's `agent wait` can overrun its own timeout (herdr#4280) and our wall clock kills it; a
        # wait is a read, so the `agent get` below decides instead of one worker aborting the fleet's confirmation.
        pass
    try:
        info = engine.herdr_of(item.worker).agent_get(name)
    except HerdrNotFound:
        return None
    if _is_accepted(info, item):
        return item.acceptance("agent get", info)
    return None


_APPROVAL = re.compile(r"(?i)\b(approve|allow|permission|trust this|do you want|proceed\?|continue\?|yes/no)\b|\(y/n\)|\[y/n\]")
_SHELL = re.compile(r"^(\S*[$#%]|[$#%])$")
_AGENT_INPUT = re.compile(r"^[›>❯]")


def classify_screen(text: str) -> Diagnosis:
    """What the last lines of a pane suggest about a prompt that produced no state change."""
    lines = tuple(line.rstrip() for line in text.splitlines() if line.strip())[-12:]
    if not lines:
        return Diagnosis(suggests="nothing", summary="the pane shows nothing; the agent may not have drawn its screen", last_lines=())
    last = lines[-1].strip()
    if any(_APPROVAL.search(line) for line in lines[-6:]):
        return Diagnosis(suggests="approval_prompt", summary="the agent shows an approval or trust prompt; answer it in the pane", last_lines=lines)
    if _SHELL.match(last):
        return Diagnosis(suggests="shell_prompt", summary="the pane is at a shell prompt: the agent has exited", last_lines=lines)
    if _AGENT_INPUT.match(last):
        return Diagnosis(suggests="agent_prompt", summary="the agent sits at its input prompt and reported no state change", last_lines=lines)
    return Diagnosis(suggests="unrecognised", summary="no approval or shell prompt recognised; read the pane", last_lines=lines)


def _diagnose(engine: Engine, item: _Item) -> Diagnosis:
    """Read the pane once (spec §4) and say what it suggests; never send anything."""
    try:
        text = engine.herdr_of(item.worker).agent_read(item.worker.name, source="recent-unwrapped", lines=READ_LINES)
    except HerdrNotFound as exc:
        return Diagnosis(suggests="nothing", summary=f"the agent is gone: {exc.message}", last_lines=())
    return classify_screen(text)


def _mark_working(engine: Engine, run: Run, item: _Item, acceptance: Acceptance) -> None:
    cause = {"phase": "dispatch", "effect": item.key, "acceptance": to_json(acceptance)}
    try:
        worker = engine.ledger.transition(run.run_id, item.task, WorkerState.DISPATCHED, WorkerState.WORKING, cause=cause)
        detail = f"accepted: {acceptance.status} (seq {acceptance.state_change_seq}{_past(acceptance.baseline_seq)}) via {acceptance.via}"
    except StaleState:
        # Observation moved it on first (e.g. its result already arrived): acceptance is implied.
        worker = engine.ledger.get_worker(run.run_id, item.task)
        detail = f"accepted; already {worker.state}"
    item.worker = worker
    item.report = _report(item, "accepted", detail, acceptance=acceptance)


def _mark_stalled(engine: Engine, run: Run, item: _Item, diagnosis: Diagnosis) -> None:
    assert item.outcome is not None
    why = item.outcome.error or f"no state change within {ACCEPT_GATE_MS} ms"
    engine.ledger.record_fact(
        run.run_id, FactKind.DISPATCH_DIAGNOSIS, task_label=item.task,
        detail=DispatchDiagnosis(
            effect=item.key, outcome=to_json(item.outcome),
            suggests=diagnosis.suggests, summary=diagnosis.summary, last_lines=list(diagnosis.last_lines),
        ),
    )
    item.worker = engine.ledger.get_worker(run.run_id, item.task)
    if item.outcome.submitted == "unknown":
        item.report = _report(item, "unknown", f"prompt outcome unknown ({why}); not re-sent; {diagnosis.summary}", diagnosis=diagnosis)
    else:
        item.report = _report(item, "stalled", f"submitted, not accepted ({why}); not re-sent; {diagnosis.summary}", diagnosis=diagnosis)


def _past(baseline: int | None) -> str:
    return "" if baseline is None else f", baseline {baseline}"


def _report(
    item: _Item, outcome: Outcome, detail: str, *, state: str | None = None,
    acceptance: Acceptance | None = None, diagnosis: Diagnosis | None = None,
) -> WorkerDispatch:
    packet = item.request.get("packet")
    return WorkerDispatch(
        task=item.task, agent=item.worker.name, outcome=outcome, state=state or str(item.worker.state), detail=detail,
        packet=packet if isinstance(packet, str) else None, baseline_seq=item.baseline, acceptance=acceptance, diagnosis=diagnosis,
    )  # fmt: skip


# --- rendering ------------------------------------------------------------------------------------------------------


def render_dispatch(result: DispatchResult, width: int | None = None) -> str:
    """The human `orch dispatch` output: a summary line, one row per worker, and the screen of each stalled worker."""
    counts: dict[str, int] = {}
    for w in result.workers:
        counts[w.outcome] = counts.get(w.outcome, 0) + 1
    summary = ", ".join(f"{n} {outcome}" for outcome, n in counts.items()) or "no workers"
    how = {"single": "one target, prompt --wait", "fleet": "fleet, prompts then concurrent acceptance", "none": "nothing new to send"}[result.path]
    lines = [f"dispatch run {result.run_id}: {summary}; {result.prompts_sent} prompt(s) sent ({how})", ""]
    rows = [(w.task, w.agent, w.outcome, w.state, w.detail) for w in result.workers]
    lines.append(tables.table(rows, ("task", "agent", "outcome", "state", "detail"), width))
    for w in result.workers:
        if w.diagnosis is not None and w.diagnosis.last_lines:
            lines += ["", f"{w.task}: last lines of its pane ({w.diagnosis.suggests}):", *(f"  | {line}" for line in w.diagnosis.last_lines)]
    return "\n".join(lines) + "\n"
