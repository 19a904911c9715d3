"""Dialogs on an agent's screen: the trust dialog at start (answered only as policy allows) and approval forms mid-turn.

orch answers a dialog only with the keys of the quirk table (orchestrator/quirks.py), only through ``Engine.once``
(one recorded effect per answer), and only when the policy or a person said so; any other dialog is reported with
its screen text and nothing is typed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from orchestrator.herdr_models import AT_REST
from orchestrator.errors import HerdrError, OrchError
from orchestrator.quirks import Screen, excerpt, quirks
from packets import inert_line
from registry.facts import Cause, Dialog, FactKind, cause_of
from registry import EventKind, Ledger, Run, StaleState, WorkerState

if TYPE_CHECKING:
    from orchestrator.engine import CannotTell, Done, Engine, NotDone
    from orchestrator.herdr import Herdr
    from registry import Effect, Worker



@dataclass(frozen=True, kw_only=True)
class DialogKeys:
    """Keys sent to a pane to answer a dialog (an effect's stored result)."""

    pane_id: str
    dialog: str
    keys: tuple[str, ...]


class DialogStop(OrchError):
    """The agent waits at a dialog orch may not (or cannot) answer; the message shows the dialog's text."""


def flat(text: str) -> str:
    """Screen text as one inert line, its lines joined with ` / ` (it is the agent's text)."""
    # Worker text: every control or format character is shown escaped, never obeyed (packets.inert_line).
    lines = [inert_line(" ".join(line.split())) for line in text.splitlines()]
    # Box-drawing rules carry no words; they only widen the line.
    return " / ".join(line for line in lines if line and line.strip("─━═╌-"))


def send_keys(engine: Engine, worker: Worker, pane_id: str, screen: Screen, keys: tuple[str, ...], key: str) -> DialogKeys:
    """Send a dialog's keys once (``Engine.once``): an in-flight answer is settled by reading the screen back."""

    herdr = engine.herdr_of(worker)

    def act() -> DialogKeys:
        herdr.pane_send_keys(pane_id, *keys)
        return DialogKeys(pane_id=pane_id, dialog=screen.name, keys=keys)

    request = {"pane": pane_id, "dialog": screen.name, "keys": list(keys), **engine.on_host(worker.host)}
    return engine.once(worker.run_id, worker.task_label, "dialog_keys", key, request, act, model=DialogKeys,
                       settle=lambda: _read_back(herdr, pane_id, screen, keys))  # fmt: skip


def _read_back(herdr: Herdr, pane_id: str, screen: Screen, keys: tuple[str, ...]) -> Done[DialogKeys] | NotDone | CannotTell:
    from orchestrator.engine import CannotTell, Done, NotDone

    try:
        shown = herdr.pane_read(pane_id, source="visible")
    except HerdrError as exc:
        return CannotTell(f"did the keys {' '.join(keys)} answer the {screen.name} in pane {pane_id}? herdr could not read it: {exc.message}", f"herdr pane read {pane_id}")
    if screen.matches(shown):
        return NotDone(f"the {screen.name} is still on the screen of pane {pane_id}")
    return Done(DialogKeys(pane_id=pane_id, dialog=screen.name, keys=keys), f"the {screen.name} is gone from pane {pane_id}")


def settle_dialog_keys(engine: Engine, run: Run, effect: Effect) -> Done[DialogKeys] | NotDone | CannotTell:
    """Read-back of an answer left in flight: the dialog gone from the screen is done, still shown is not done."""
    from orchestrator.engine import CannotTell

    request = effect.request
    worker = engine.ledger.get_worker(run.run_id, effect.task_label or "")
    kinds = quirks(worker.kind)
    screen = kinds.dialog_named(str(request.get("dialog")))
    if screen is None:
        return CannotTell(f"which dialog did effect {effect.id} answer? {worker.kind} has no {request.get('dialog')} in the quirk table", "orch status")
    return _read_back(engine.effect_herdr(effect), str(request["pane"]), screen, tuple(request.get("keys") or ()))


def answer_trust_dialog(engine: Engine, worker: Worker, pane_id: str, *, allowed: bool, why_not: str, wait_timeout_ms: int) -> str | None:
    """An agent blocked at start: answer its trust dialog when ``allowed``, else raise DialogStop with the screen text.

    Returns a note for the provisioning outcome, or None when the screen shows no dialog at all (nothing to do).
    """
    kinds = quirks(worker.kind)
    shown = engine.herdr_of(worker).pane_read(pane_id, source="visible")
    text = excerpt(shown)
    trust = kinds.trust_on(shown)
    if trust is None:
        stop_at_notice(engine, worker, shown)
        engine.ledger.record_fact(worker.run_id, FactKind.DIALOG, task_label=worker.task_label, detail=Dialog(
            dialog=None, kind=worker.kind, answered=False, reason="not a dialog orch knows", screen=text))  # fmt: skip
        raise DialogStop(f"{worker.name} ({worker.kind}) is blocked at start-up by a dialog orch does not know; nothing was typed. Screen: {flat(text)}")
    if not allowed:
        engine.ledger.record_fact(worker.run_id, FactKind.DIALOG, task_label=worker.task_label, detail=Dialog(
            dialog=trust.name, kind=worker.kind, answered=False, reason=why_not, screen=text))  # fmt: skip
        raise DialogStop(
            f"{worker.name} ({worker.kind}) stopped at its {trust.name} dialog and nothing was typed ({why_not}). Screen: {flat(text)}",
            hint="answer it in the pane yourself, or allow it with `[policy] trust_run_worktrees = true`, then re-run",
        )
    keys = trust.keys_to_accept(shown)
    if keys is None:
        engine.ledger.record_fact(worker.run_id, FactKind.DIALOG, task_label=worker.task_label, detail=Dialog(
            dialog=trust.name, kind=worker.kind, answered=False, reason="the screen does not show which option is selected", screen=text))  # fmt: skip
        raise DialogStop(
            f"{worker.name} ({worker.kind}) stopped at its {trust.name} dialog, but its screen does not show which option is selected, so nothing was typed. Screen: {flat(text)}",
            hint="answer it in the pane yourself, then re-run",
        )
    wider = trust.scope(" ".join(shown.split()))  # the agent's own words: its trust lands on this path, not the worktree
    reason = why_not if wider is None else f"{why_not}; {worker.kind} applies it to {wider}"
    send_keys(engine, worker, pane_id, trust, keys, engine.start_key(worker.run_id, worker.task_label, "trust_dialog"))
    engine.ledger.record_fact(worker.run_id, FactKind.DIALOG, task_label=worker.task_label, detail=Dialog(
        dialog=trust.name, kind=worker.kind, answered=True, keys=list(keys), reason=reason, screen=text))  # fmt: skip
    info = engine.herdr_of(worker).agent_wait(worker.name, until=AT_REST, timeout_ms=wait_timeout_ms)
    if info.agent_status not in AT_REST:
        raise DialogStop(f"{worker.name} answered its {trust.name} dialog but is {info.agent_status}, not idle")
    return f"answered the {worker.kind} {trust.name} dialog with {' '.join(keys)} ({reason})"


def stop_at_notice(engine: Engine, worker: Worker, shown: str) -> None:
    """A start-up notice or form of the table on the screen: record it and raise DialogStop with its hint (never answered).

    Returns when the screen shows none of them.
    """
    kinds = quirks(worker.kind)
    notice = kinds.notice_on(shown) or kinds.approval_on(shown)
    if notice is None:
        return
    text = excerpt(shown)
    why = "orch never answers a start-up notice: it is the person's decision"
    engine.ledger.record_fact(worker.run_id, FactKind.DIALOG, task_label=worker.task_label, detail=Dialog(
        dialog=notice.name, kind=worker.kind, answered=False, reason=why, screen=text))  # fmt: skip
    raise DialogStop(
        f"{worker.name} ({worker.kind}) stopped at its {notice.name} at start-up and nothing was typed ({why}). Screen: {flat(text)}",
        hint=notice.hint or "answer it in the pane yourself, then re-run",
    )


READY_POLL_S = 0.5
# The ready sign must hold this long: codex 0.169 draws its input line first and its trust dialog over it a moment
# later (the real-agents lane), so one read of the sign is not yet an agent that can take a packet.
READY_SETTLE_S = 3.0
# The wait for the ready sign is at least this long: it ends as soon as the sign shows, and a heavy agent on a busy
# machine draws late (opencode 1.18: 10 s idle, 30-40 s on a loaded 2-CPU machine; the real-agents lane).
READY_TIMEOUT_FLOOR_S = 120


class NotReady(OrchError):
    """The agent started, but its screen never showed its kind's ready sign in time; the message shows the screen."""


def await_ready_sign(engine: Engine, worker: Worker, *, timeout_s: float, answer_trust: Callable[[], str | None],
                     blocked: bool = False, reused: bool = False) -> str | None:
    """Read the pane until the agent shows its kind's ready sign (orchestrator/quirks.py); returns ``answer_trust``'s note.

    herdr's readiness is not enough: it reads a blank, still-starting screen as idle (opencode draws its input ~10 s
    after start) and knows no dialog its manifests lack (codex 0.169's trust dialog reads idle), and a prompt pasted
    then is lost or, worse, its Enter answers the dialog. So a trust dialog found here goes to ``answer_trust`` (the
    caller's policy: it answers, or raises with the dialog's text), any other dialog raises DialogStop with nothing
    typed, and the agent is ready only once the sign has held READY_SETTLE_S; NotReady after ``timeout_s``. ``blocked``:
    herdr said so at start. ``reused``: an agent an earlier round started (its start sign may be gone). Only `pane
    read` is used, so this holds on every herdr release. Provisioning and `orch doctor` both wait here.
    """
    assert worker.pane_id is not None
    kinds = quirks(worker.kind)
    if kinds.ready is None:  # a kind without a known sign: herdr's readiness alone
        return answer_trust() if blocked else None
    deadline = engine.clock.monotonic() + timeout_s
    note: str | None = None
    answered = False
    first = True
    ready_since: float | None = None
    while True:
        shown = engine.herdr_of(worker).pane_read(worker.pane_id, source="visible")
        reading = kinds.read(shown)
        trust = kinds.trust_on(shown)
        if trust is not None and not answered:
            note, answered = answer_trust(), True
            continue
        if reading.state == "blocked" and trust is None:
            stop_at_notice(engine, worker, shown)
        if reused and reading.state != "blocked":
            return note  # an agent an earlier round started may have had turns since: its start sign can be gone
        if reading.state == "ready":
            now = engine.clock.monotonic()
            ready_since = now if ready_since is None else ready_since
            if now - ready_since >= READY_SETTLE_S:
                return note
            engine.clock.sleep(READY_POLL_S)
            continue
        ready_since = None
        if blocked and first and not answered and reading.state != "blocked":
            return answer_trust()  # herdr says blocked, the table knows no dialog there: the caller reports it
        first = False
        if engine.clock.monotonic() >= deadline:
            raise NotReady(
                f"{worker.name} ({worker.kind}) started, but its screen did not show that it takes a prompt ({kinds.ready.name}) "
                f"within {timeout_s:g}s, so no prompt will be sent to it. Screen: {flat(excerpt(shown)) or '(blank)'}")  # fmt: skip
        engine.clock.sleep(READY_POLL_S)


Decision = Literal["approve", "deny"]


def approval_form(worker: Worker, screen: str) -> Screen | None:
    """The approval or permission form of the worker's kind on this screen, if any."""
    return quirks(worker.kind).approval_on(screen)


def answer_approval(engine: Engine, worker: Worker, decision: Decision, number: int) -> tuple[Screen, DialogKeys]:
    """Answer the approval form the worker's agent shows with its own keys; the form must still be on screen."""
    if worker.pane_id is None:
        raise OrchError(f"{worker.task_label} has no pane recorded; there is no form to answer")
    shown = engine.herdr_of(worker).pane_read(worker.pane_id, source="visible")
    form = approval_form(worker, shown)
    if form is None:
        raise OrchError(
            f"{worker.task_label}: {worker.name}'s screen shows no {worker.kind} approval form orch knows; nothing was sent",
            hint="read the pane (`herdr agent read`) and answer it there",
        )
    keys = form.accept_keys if decision == "approve" else form.decline_keys
    sent = send_keys(engine, worker, worker.pane_id, form, keys, f"{worker.task_label}:approval:{number}")
    return form, sent


@dataclass(frozen=True, kw_only=True)
class Approved:
    """What `orch approve` did: the form, the decision, the keys sent, the worker's state after (`--json` prints its fields)."""

    run_id: str
    task: str
    form: str
    decision: Decision
    keys: tuple[str, ...]
    state: WorkerState


def pending_approval(ledger: Ledger, worker: Worker) -> tuple[int, Cause] | None:
    """(journal seq, cause) of the approval form a blocked worker waits at, or None when it waits for something else."""
    if worker.state is not WorkerState.BLOCKED:
        return None
    for event in reversed(ledger.events(worker.run_id, task_label=worker.task_label)):
        if event.kind == EventKind.TRANSITION and event.to_state is WorkerState.BLOCKED:
            cause = cause_of(event)
            return (event.seq, cause) if cause is not None and cause.get("approval") else None
    return None


def approve(engine: Engine, run: Run, task: str, decision: Decision) -> Approved:
    """Answer the approval form TASK's agent waits at, with the agent's own keys; the worker goes back to work."""
    ledger = engine.ledger
    worker = ledger.get_worker(run.run_id, task)
    pending = pending_approval(ledger, worker)
    if pending is None:
        raise OrchError(f"{task} is not waiting at an approval form (state {worker.state})", hint=f"`orch status --run {run.run_id}` shows what each worker waits for")
    seq, cause = pending
    form, sent = answer_approval(engine, worker, decision, seq)
    ledger.record_fact(run.run_id, FactKind.DIALOG, task_label=task, detail=Dialog(
        dialog=form.name, kind=worker.kind, answered=True, keys=list(sent.keys),
        reason=f"{'approved' if decision == 'approve' else 'denied'} through `orch approve`", screen=screen if isinstance(screen := cause.get("screen"), str) else None))  # fmt: skip
    try:
        worker = ledger.transition(run.run_id, task, WorkerState.BLOCKED, WorkerState.WORKING,
                                   cause={"phase": "approve", "decision": decision, "form": form.name, "keys": list(sent.keys)}, pending_question=None)  # fmt: skip
    except StaleState:
        worker = ledger.get_worker(run.run_id, task)
    return Approved(run_id=run.run_id, task=task, form=form.name, decision=decision, keys=sent.keys, state=worker.state)


def render_approved(result: Approved) -> str:
    """One line: what was answered and how."""
    verb = "approved" if result.decision == "approve" else "denied"
    return f"{result.task}: {verb} the {result.form} with {' '.join(result.keys)} (worker {result.state})\n"
