"""Dialogs on an agent's screen: the trust dialog at start (answered only as policy allows) and approval forms mid-turn.

orch answers a dialog only with the keys of the quirk table (orchestrator/quirks.py), only through ``Engine.once``
(one recorded effect per answer), and only when the policy or a person said so; any other dialog is reported with
its screen text and nothing is typed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from orchestrator.errors import HerdrError, OrchError
from orchestrator.quirks import Screen, excerpt, quirks

if TYPE_CHECKING:
    from orchestrator.engine import Engine
    from registry import Worker

FACT_DIALOG = "dialog"  # record_fact(run, "dialog", task_label=…, detail={"dialog", "kind", "answered", "keys", "reason", "screen"})
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class DialogKeys(BaseModel):
    """Keys sent to a pane to answer a dialog."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pane_id: str
    dialog: str
    keys: tuple[str, ...]


class DialogStop(OrchError):
    """The agent waits at a dialog orch may not (or cannot) answer; the message shows the dialog's text."""


def flat(text: str) -> str:
    """Screen text as one inert line: control characters dropped, lines joined with ` / ` (it is the agent's text)."""
    lines = [" ".join(_CONTROL.sub(" ", line).split()) for line in text.splitlines()]
    return " / ".join(line for line in lines if line)


def send_keys(engine: Engine, worker: Worker, pane_id: str, screen: Screen, keys: tuple[str, ...], key: str) -> DialogKeys:
    """Send a dialog's keys once (``Engine.once``): an in-flight answer is settled by reading the screen back."""

    def act() -> DialogKeys:
        engine.herdr.pane_send_keys(pane_id, *keys)
        return DialogKeys(pane_id=pane_id, dialog=screen.name, keys=keys)

    def settle() -> DialogKeys | None:
        # The keys landed if the dialog is gone; still there means they did not (or cannot tell: stay in flight).
        try:
            shown = engine.herdr.pane_read(pane_id, source="visible")
        except HerdrError:
            return None
        return None if screen.matches(shown) else DialogKeys(pane_id=pane_id, dialog=screen.name, keys=keys)

    request = {"pane": pane_id, "dialog": screen.name, "keys": list(keys)}
    return engine.once(worker.run_id, worker.task_label, "dialog_keys", key, request, act, model=DialogKeys, settle=settle)


def answer_trust_dialog(engine: Engine, worker: Worker, pane_id: str, *, allowed: bool, why_not: str, wait_timeout_ms: int) -> str | None:
    """An agent blocked at start: answer its trust dialog when ``allowed``, else raise DialogStop with the screen text.

    Returns a note for the provisioning outcome, or None when the screen shows no dialog at all (nothing to do).
    """
    kinds = quirks(worker.kind)
    shown = engine.herdr.pane_read(pane_id, source="visible")
    text = excerpt(shown)
    trust = kinds.trust_dialog
    if trust is None or not trust.matches(shown):
        engine.ledger.record_fact(worker.run_id, FACT_DIALOG, task_label=worker.task_label, detail={
            "dialog": None, "kind": worker.kind, "answered": False, "reason": "not a dialog orch knows", "screen": text})  # fmt: skip
        raise DialogStop(f"{worker.name} ({worker.kind}) is blocked at start-up by a dialog orch does not know; nothing was typed. Screen: {flat(text)}")
    if not allowed:
        engine.ledger.record_fact(worker.run_id, FACT_DIALOG, task_label=worker.task_label, detail={
            "dialog": trust.name, "kind": worker.kind, "answered": False, "reason": why_not, "screen": text})  # fmt: skip
        raise DialogStop(
            f"{worker.name} ({worker.kind}) stopped at its {trust.name} dialog and nothing was typed ({why_not}). Screen: {flat(text)}",
            hint="answer it in the pane yourself, or allow it with `[policy] trust_run_worktrees = true`, then re-run",
        )
    send_keys(engine, worker, pane_id, trust, trust.accept_keys, f"{worker.task_label}:trust_dialog")
    engine.ledger.record_fact(worker.run_id, FACT_DIALOG, task_label=worker.task_label, detail={
        "dialog": trust.name, "kind": worker.kind, "answered": True, "keys": list(trust.accept_keys), "reason": why_not, "screen": text})  # fmt: skip
    info = engine.herdr.agent_wait(worker.name, until=("idle", "done"), timeout_ms=wait_timeout_ms)
    if info.agent_status not in ("idle", "done"):
        raise DialogStop(f"{worker.name} answered its {trust.name} dialog but is {info.agent_status}, not idle")
    return f"answered the {worker.kind} {trust.name} dialog with {' '.join(trust.accept_keys)} ({why_not})"


Decision = Literal["approve", "deny"]


def approval_form(worker: Worker, screen: str) -> Screen | None:
    """The approval or permission form of the worker's kind on this screen, if any."""
    return quirks(worker.kind).approval_on(screen)


def answer_approval(engine: Engine, worker: Worker, decision: Decision, number: int) -> tuple[Screen, DialogKeys]:
    """Answer the approval form the worker's agent shows with its own keys; the form must still be on screen."""
    if worker.pane_id is None:
        raise OrchError(f"{worker.task_label} has no pane recorded; there is no form to answer")
    shown = engine.herdr.pane_read(worker.pane_id, source="visible")
    form = approval_form(worker, shown)
    if form is None:
        raise OrchError(
            f"{worker.task_label}: {worker.name}'s screen shows no {worker.kind} approval form orch knows; nothing was sent",
            hint="read the pane (`herdr agent read`) and answer it there",
        )
    keys = form.accept_keys if decision == "approve" else form.decline_keys
    sent = send_keys(engine, worker, worker.pane_id, form, keys, f"{worker.task_label}:approval:{number}")
    return form, sent
