"""Controller -> worker messages (answer, follow-up, stop) in the Message Contract envelope, and reading report paths safely."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from orchestrator.engine import CannotTell, Done, Engine, NotDone, Settlement
from orchestrator.errors import HerdrError, HerdrNotFound, OrchError
from orchestrator.herdr_models import AT_REST, AgentInfo, AgentPrompted
from orchestrator.hints import TEXT, orch_command
from orchestrator.intake import catch_up
from orchestrator.reportfiles import REPORT_LIMIT_BYTES as REPORT_LIMIT_BYTES  # its home is reportfiles; named here as before

# The request key of a prompt's completion_seq baseline (herdr 0.9.2+, ../herdr-0.9.5/DELTA.md row 1), recorded only
# where herdr has the counter: a turn started by that prompt is finished once completion_seq moved past it
# (orchestrator.dispatch.completion_baseline, read by orchestrator.observe).
BASELINE_COMPLETION = "baseline_completion_seq"
from packets import build_controller_message
from registry.facts import EffectDecided, EffectUnknown, FactKind, MessageSent, read_facts
from registry import Effect, Run, StaleState, Worker, WorkerState
from registry.machine import FINISHED, WAITING_ON_PERSON

Kind = Literal["answer", "follow-up", "stop"]
S = WorkerState


# After a message is submitted, where the worker stands in the ledger (an answer resumes work; a follow-up is a new dispatch).
_AFTER: dict[str, dict[WorkerState, WorkerState]] = {
    "answer": {S.QUESTION: S.WORKING, S.BLOCKED: S.WORKING},
    "follow-up": {S.QUESTION: S.WORKING, S.BLOCKED: S.DISPATCHED, S.RESULT: S.DISPATCHED, S.REJECTED: S.DISPATCHED},
    "stop": {},
}


@dataclass(frozen=True, kw_only=True)
class SentMessage:
    """A message submitted to a worker (exit 0 of `herdr agent prompt`: submitted, nothing more; `--json` prints its fields)."""

    run_id: str
    task: str
    kind: Kind
    target: str
    text: str
    # herdr's status of the agent in its reply to the prompt (often still `idle` or `done`: the turn the message starts
    # may not have begun), kept as evidence; ``state`` is the worker's state in orch after the message.
    herdr_status_at_send: str
    state: WorkerState



def _refuse(worker: Worker, kind: Kind) -> None:
    """Refuse, before any herdr call, a message the worker's state makes meaningless."""
    task, state = worker.task_label, worker.state
    if kind == "answer" and state not in WAITING_ON_PERSON:
        raise OrchError(
            f"worker {task} asked nothing to answer (state {state})",
            hint=f"`orch answer` replies to a pending question or block; `{orch_command('send', '--run', worker.run_id, task, '--kind', 'follow-up', text=True)}` sends new instructions",
        )
    if kind != "answer" and state in FINISHED:
        raise OrchError(
            f"worker {task} is finished (state {state}); a {kind} would reach no task of this run",
            hint=f"`orch status --run {worker.run_id}` shows its disposition; give new work to a new run",
        )


def _target(worker: Worker) -> str:
    target = worker.reply_target or worker.pane_id
    if not target:
        raise OrchError(f"worker {worker.task_label} has no reply target yet (state {worker.state})")
    return target


def send_message(
    engine: Engine,
    run: Run,
    task: str,
    kind: Kind,
    body: str,
    *,
    urgent: bool = False,
    key: str | None = None,
    agent_status: str | None = None,
) -> SentMessage:
    """Send one answer, follow-up or stop to a worker's reply target, once per key, through `engine.once`.

    Only an idle or done worker gets a message, except a stop or an urgent follow-up (a scope correction),
    which may interrupt a working one. ``agent_status`` is a state the caller has just read (saves an `agent get`).
    """
    worker = engine.ledger.get_worker(run.run_id, task)
    text = build_controller_message(run_id=run.run_id, task_label=task, controller_target=run.controller_target, kind=kind, body=body)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    key = key or f"{task}:{kind}:{digest}"
    if engine.ledger.find_effect(run.run_id, key) is None:
        # The same message again (a re-run after success) replays its effect below; only a new one is judged by state.
        _refuse(worker, kind)
    target = _target(worker)
    herdr = engine.herdr_of(worker)
    try:
        status = agent_status or herdr.agent_get(target).agent_status
    except HerdrNotFound:
        # A settled worker's agent exits to free its slot (or a person closed it): a message has nobody to reach.
        raise OrchError(
            f"worker {task} has no agent in herdr any more ({target} is gone): the {kind} was not sent",
            hint=f"its work is kept (branch {worker.branch or 'none'}, `orch status --run {run.run_id}`); orch cannot send it back "
            "once its agent has exited: tell the user, who may have the work redone in a new run",
        ) from None
    may_interrupt = kind == "stop" or (kind == "follow-up" and urgent)
    if status not in AT_REST and not (may_interrupt and status == "working"):
        allowed = "idle, done or working" if may_interrupt else "idle or done"
        raise OrchError(
            f"worker {task} is {status} in herdr; a {kind} goes only to a worker that is {allowed}",
            hint=f"`orch wait --run {run.run_id}` returns when it calls back; a stop or `--urgent` follow-up may interrupt a working worker",
        )
    existing = engine.ledger.find_effect(run.run_id, key)
    if existing is not None:
        request = dict(existing.request)  # the intent as first recorded (its baseline included), never recomputed
    else:
        info = herdr.agent_get(target)
        request = {"target": target, "kind": kind, "text": text, "baseline_seq": info.state_change_seq, **engine.on_host(worker.host)}
        if info.completion_seq is not None:  # herdr 0.9.2+: the turn this message starts ends past it (observe)
            request[BASELINE_COMPLETION] = info.completion_seq
    prompted = engine.once(
        run.run_id,
        task,
        "agent_prompt",
        key,
        request,
        lambda: herdr.agent_prompt(target, text),
        model=AgentPrompted,
    )
    after = _AFTER[kind].get(worker.state)
    if after is not None:
        changes = {"pending_question": None} if worker.state in WAITING_ON_PERSON else {}
        try:
            worker = engine.ledger.transition(
                run.run_id, task, worker.state, after, cause={"message": kind, "target": target}, **changes
            )
        except StaleState:
            # A fast worker's callback (its result after the answer, a block) moved it on before this process
            # recorded the send: the message was submitted all the same, and the worker stands where it went.
            worker = engine.ledger.get_worker(run.run_id, task)
        sent = engine.ledger.find_effect(run.run_id, key)
        if sent is not None:
            worker = catch_up(engine, run, task, sent.intended_at)
    else:
        engine.ledger.record_fact(run.run_id, FactKind.MESSAGE_SENT, task_label=task, detail=MessageSent(kind=kind, target=target, text=text))
    return SentMessage(
        run_id=run.run_id, task=task, kind=kind, target=target, text=text,
        herdr_status_at_send=prompted.agent.agent_status, state=worker.state,
    )  # fmt: skip


# How long after a prompt was intended its text must have reached the agent if it was sent at all: herdr's prompt
# submits (types the text and Enter) before anything else, so an unmoved, idle agent this long after means unsent.
PROMPT_LANDED_S = 3.0


def _squash(text: str) -> str:
    return " ".join(text.split())


def prompt_text(effect: Effect) -> str | None:
    """The text a prompt effect carried: stored in the request (messages) or in the packet file it names (dispatch)."""
    text = effect.request.get("text")
    if isinstance(text, str):
        return text
    packet = effect.request.get("packet")
    if isinstance(packet, str):
        try:
            return Path(packet).read_text(encoding="utf-8")
        except OSError:
            return None
    return None


def decided(engine: Engine, effect: Effect) -> str | None:
    """The person's recorded answer for this effect ("sent" or "unsent"), if any."""
    for fact in reversed(read_facts(engine.ledger.events(effect.run_id, task_label=effect.task_label), EffectDecided)):
        if fact.get("effect_id") == effect.id:
            return str(fact["answer"])
    return None


def left_unknown(engine: Engine, effect: Effect) -> str | None:
    """Why the call itself left the outcome unknown (HerdrTimeout, HerdrProtocolError…), if it did; None after a crash."""
    for fact in reversed(read_facts(engine.ledger.events(effect.run_id, task_label=effect.task_label), EffectUnknown)):
        if fact.get("effect_id") == effect.id:
            return str(fact["error"])
    return None


def settle_prompt(engine: Engine, run: Run, effect: Effect) -> Settlement[Any]:
    """Did an in-flight `agent prompt` land? Never guessed, since a second packet would be a second turn.

    Done on any of: the person said so; a callback of the worker arrived after the send was intended; the agent's
    state_change_seq moved past the baseline recorded before sending; its screen shows the text. Not done when the
    agent is idle or done, unmoved and without the text on screen at least PROMPT_LANDED_S after the send was
    intended (or the agent is gone, so nothing can have received it). Anything else is one question for the person.
    """
    from orchestrator.dispatch import PromptOutcome  # dispatch imports this module

    req = effect.request
    target = str(req["target"])
    baseline = req.get("baseline_seq") if isinstance(req.get("baseline_seq"), int) else None
    kind = "packet" if ":dispatch:" in effect.key else str(req.get("kind") or "message")

    def done(info: AgentInfo, how: str, via: str = "agent get") -> Done[Any]:
        # How it was decided is journalled (effect_settled); `via` names the read that saw it, as dispatch does.
        if kind == "packet":
            moved = baseline is not None and info.state_change_seq > baseline
            outcome = PromptOutcome(submitted="yes", accepted=info.agent_status == "working" or moved, status=info.agent_status,
                                    state_change_seq=info.state_change_seq, via=via)  # fmt: skip
            return Done(outcome, how)
        return Done(AgentPrompted(type="agent_prompted", agent=info), how)

    said = decided(engine, effect)
    herdr = engine.effect_herdr(effect)
    try:
        info = herdr.agent_get(target)
    except HerdrNotFound:
        if said == "sent":
            return CannotTell(f"{target} is gone, so the {kind} cannot be replayed", f"give the worker up with `{orch_command('retire', '--run', effect.run_id, '--abandon', effect.task_label or 'TASK', '--reason', TEXT)}`")
        return NotDone(f"no agent {target}: nothing can have received the {kind}")
    if said == "sent":
        return done(info, "the person said it was sent", "the person")
    if said == "unsent":
        return NotDone("the person said it was not sent")
    later = [m for m in engine.ledger.list_inbox(run.run_id, task_label=effect.task_label) if m.verdict == "accepted" and m.received_at > effect.intended_at]
    if later:
        return done(info, f"callback #{later[0].id} ({later[0].kind}) arrived after the send was intended", "inbox")
    text = prompt_text(effect)
    why = left_unknown(engine, effect)
    lost = why is not None and why != "HerdrCallLost"  # ran to our limit or answered garbage: waiting proves nothing
    waited = 0.0
    for _ in range(1 if lost else 2):
        if baseline is not None and info.state_change_seq > baseline:
            return done(info, f"state_change_seq moved from {baseline} to {info.state_change_seq}")
        if text is not None:
            try:
                screen = herdr.agent_read(target, source="recent", lines=400)
            except HerdrError:
                screen = None
            if screen is not None and _landmark(text) in _squash(screen):
                return done(info, "its screen shows the text", "agent read")
        waited = (engine.clock.now() - effect.intended_at).total_seconds()
        if lost or waited >= PROMPT_LANDED_S:
            break
        engine.clock.sleep(PROMPT_LANDED_S - waited)  # a call still on its way lands within this; then read again
        info = herdr.agent_get(target)
    if lost:
        # herdr ran the call to our limit (or answered garbage): it may still land, so nothing proves it did not.
        return CannotTell(
            f"the {kind} to {target} ended without an answer ({why}) and {target} ({info.agent_status}) shows no sign of it: did it arrive? Read its pane (`herdr agent read {target}`)",
            f"orch resume {run.run_id} --settle {effect.id}=sent (or {effect.id}=unsent)",
        )
    if info.agent_status in AT_REST and baseline is not None and text is not None:
        return NotDone(f"{target} is {info.agent_status}, state_change_seq still {baseline}, the text not on its screen {waited:.0f}s after the send was intended")
    if info.agent_status in AT_REST and baseline is None and text is not None and kind != "packet":
        return NotDone(f"{target} is {info.agent_status} and the text is not on its screen {waited:.0f}s after the send was intended")
    return CannotTell(
        f"did {target} ({info.agent_status}) receive the {kind} orch was sending at {effect.intended_at:%H:%M:%S}? Read its pane (`herdr agent read {target}`)",
        f"orch resume {run.run_id} --settle {effect.id}=sent (or {effect.id}=unsent)",
    )


def _landmark(text: str) -> str:
    """The part of a prompt's text its screen must show if it landed: its longest line (squashed), at most 60
    characters, never the envelope header (every message to the worker repeats it, so it proves nothing)."""
    lines = [_squash(line) for line in text.splitlines() if line.strip() and not line.startswith("[herdr-orchestration ")]
    return max(lines, key=len)[:60] if lines else _squash(text)


@dataclass(frozen=True, kw_only=True)
class ReportRead:
    """A report path a worker sent: its text when it is in an allowed place and small enough, else why it was not read."""

    path: str
    text: str | None = None
    reason: str | None = None


def read_report(engine: Engine, run: Run, worker: Worker, path: str, *, limit: int = REPORT_LIMIT_BYTES) -> ReportRead:
    """Read a report path from a message, only inside the worker's pinned roots, following no symlink, up to ``limit``
    bytes, from a regular file, with a deadline (`orchestrator.reportfiles.open_report`); else say why not."""
    from orchestrator.fetch import open_report_of  # a remote worker's report is read on its host

    opened = open_report_of(engine, worker, path, limit=limit)
    return ReportRead(path=path, text=opened.text, reason=opened.reason)