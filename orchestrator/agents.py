"""Per-kind facts about interactive agents: executable, exit command and plan mode (from the quirk table, orchestrator/quirks.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.errors import OrchError
from orchestrator.layout import HERDR_AGENT_KINDS
from orchestrator.quirks import PlanMode, quirks
from registry.facts import FactKind
from registry.facts import PlanMode as PlanModeFact

if TYPE_CHECKING:
    from orchestrator.engine import Engine, NotDone
    from orchestrator.herdr_models import HerdrFeatures
    from registry import Effect, Run, Worker


@dataclass(frozen=True, kw_only=True)
class AgentFacts:
    """What orch knows about one herdr agent kind (a table orch writes, AGENTS: nothing to validate)."""

    kind: str
    executable: str
    exit_command: str | None
    plan_mode: PlanMode | None = None


# herdr types the kind name, except for these two (CONTRACT §8.5, src/detect/mod.rs:141-165).
_EXECUTABLES = {"cursor": "cursor-agent", "kiro": "kiro-cli"}

AGENTS: dict[str, AgentFacts] = {
    kind: AgentFacts(
        kind=kind,
        executable=_EXECUTABLES.get(kind, kind),
        # Kinds without a known exit command get None, so the retire phase reads the pane instead of typing a guess.
        exit_command=quirks(kind).exit_command,
        plan_mode=quirks(kind).plan_mode,
    )
    for kind in HERDR_AGENT_KINDS
}


def facts(kind: str) -> AgentFacts:
    """The facts of one kind; an unknown kind is a one-line OrchError."""
    try:
        return AGENTS[kind]
    except KeyError:
        raise OrchError(f"{kind!r} is not a herdr agent kind ({', '.join(HERDR_AGENT_KINDS)})") from None


def plan_mode_problem(kind: str, features: HerdrFeatures | None = None) -> str | None:
    """Why a worker of this kind cannot run plan-first (on this herdr, when given), or None when orch can enter it."""
    mode = facts(kind).plan_mode
    if mode is None:
        return f"plan-first needs a plan mode orch can enter and confirm on screen; {kind} has no known plan mode (use mode = \"direct\" or a kind with one: {', '.join(k for k, f in AGENTS.items() if f.plan_mode)})"
    if features is not None and mode.key == "shift+tab" and not features.shift_tab:
        return f"plan-first needs herdr 0.8.2 or later: herdr {features.version} sends shift+tab as a plain Tab, so {kind}'s plan mode cannot be entered (use mode = \"direct\" or upgrade herdr)"
    return None


@dataclass(frozen=True, kw_only=True)
class KeysSent:
    """A key press sent to an agent through ``agent send-keys`` (an effect's stored result)."""

    target: str
    key: str


def settle_plan_mode_key(engine: Engine, run: Run, effect: Effect) -> NotDone:
    """Not done: the plan-mode loop reads the screen before every press, so a mode already on costs no key at all."""
    from orchestrator.engine import NotDone

    return NotDone("enter_plan_mode reads the screen before pressing again")


def enter_plan_mode(engine: Engine, worker: Worker, *, settle_s: float = 0.5) -> str:
    """Put a ready worker's agent in plan mode and confirm it from a pane read; returns the confirming screen.

    Dispatch calls this before sending a plan-first packet. Each press goes through ``engine.once`` (keys are a
    side effect); the screen is read before every press, so a mode already on costs no key at all.
    """
    mode = facts(worker.kind).plan_mode
    if mode is None:
        raise OrchError(f"{worker.task_label}: {plan_mode_problem(worker.kind)}")
    target = worker.name
    # Earlier calls (a re-dispatch) already used some press keys; number the new ones after them.
    earlier = sum(1 for e in engine.ledger.list_effects(worker.run_id, task_label=worker.task_label) if e.kind == "plan_mode_key")
    for press in range(mode.max_presses + 1):
        screen = engine.herdr_of(worker).agent_read(target, source="visible")
        if mode.confirm_text.casefold() in screen.casefold():
            engine.ledger.record_fact(worker.run_id, FactKind.PLAN_MODE, task_label=worker.task_label, detail=PlanModeFact(presses=press, confirm_text=mode.confirm_text))
            return screen
        if press == mode.max_presses:
            break

        def send() -> KeysSent:
            engine.herdr_of(worker).agent_send_keys(target, mode.key)
            return KeysSent(target=target, key=mode.key)

        engine.once(
            worker.run_id, worker.task_label, "plan_mode_key", f"{worker.task_label}:plan_mode_key:{earlier + press + 1}",
            {"target": target, "key": mode.key, **engine.on_host(worker.host)}, send, model=KeysSent,
        )  # fmt: skip
        engine.clock.sleep(settle_s)
    raise OrchError(
        f"{worker.task_label}: pressed {mode.key} {mode.max_presses} times and {target}'s screen never showed {mode.confirm_text!r}; plan mode is not confirmed",
        hint="read the pane (`herdr agent read`) and check the installed agent's mode controls",
    )
