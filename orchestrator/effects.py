"""Every side-effect kind `Engine.once` may make: its request, how it is made, how read-back settles it, what is left,
and how its result is stored in the ledger."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from orchestrator.hints import TEXT, orch_command

if TYPE_CHECKING:
    from orchestrator.engine import CannotTell, Engine
    from registry import Effect, Run


@dataclass(frozen=True)
class EffectKind:
    """One kind of side effect, side by side: the intent, the call, and what read-back proves after a crash.

    ``request``: what the ledger stores under the key (plan-derived, stable across resume). ``made_by``: the
    herdr or git call. ``settled_by``: how an effect left in flight is decided (done / not done / cannot tell),
    implemented by ``settle`` ("module:function", next to the phase that makes the effect). ``left``: what a
    person may still have to do (empty: read-back always decides).
    """

    kind: str
    phase: str
    request: str
    made_by: str
    settled_by: str
    left: str = ""
    settle: str = ""


_KINDS = (
    EffectKind(
        "workspace_create", "preflight", "cwd and label of the repo workspace", "herdr workspace create",
        "done if a workspace other than the controller's serves the checkout (the create is intended only when none did); else not done",
        settle="orchestrator.preflight:settle_workspace_create",
    ),
    EffectKind(
        "tab_rename", "preflight, provision, observe (a worker tab renamed outside orch)", "tab id and the label it must carry", "herdr tab rename",
        "done if the tab carries the label; not done if it carries another; the tab gone: not done (the phase then finds or makes its tab again)",
        settle="orchestrator.provision:settle_tab_rename",
    ),
    EffectKind(
        "worktree_create", "provision", "branch, base SHA, Layout Contract path, label", "herdr worktree create",
        "done if `worktree list` shows the branch checked out at the path (recorded as the run's, with the workspace herdr opened "
        "for it); not done if the branch is checked out nowhere",
        "the branch checked out at another path: a question (remove or move that checkout, then resume)",
        settle="orchestrator.provision:settle_worktree_create",
    ),
    EffectKind(
        "base_push", "provision (a dependant on another host)",
        "the host, its checkout, the integration branch's commit and orch's ref there (refs/orch/RUN/base/TASK)",
        "git push SSH:CHECKOUT SHA:REF (into that checkout only, never a remote or branch)",
        "done if the ref in the host's checkout names exactly the commit (git rev-parse over ssh); not done if it names another "
        "or none; a host that does not answer leaves it in flight (read back again later)",
        settle="orchestrator.provision:settle_base_push",
    ),
    EffectKind(
        "worktree_open", "provision", "checkout path and label", "herdr worktree open",
        "done if a workspace holds a pane in the checkout; else not done",
        settle="orchestrator.provision:settle_worktree_open",
    ),
    EffectKind(
        "pane_move", "provision", "the pane as created, the repo workspace, the tab label", "herdr pane move --new-tab",
        "done if the pane (its pre-move id stays an alias) is in the repo workspace (recorded as the run's when its workspace was); "
        "not done if it is still elsewhere",
        "the pane gone altogether: the worker fails with that reason (its checkout is kept)",
        settle="orchestrator.provision:settle_pane_move",
    ),
    EffectKind(
        "workspace_close", "provision", "the emptied side workspace", "herdr workspace close",
        "done if `workspace get` says not found; else not done",
        settle="orchestrator.provision:settle_workspace_close",
    ),
    EffectKind(
        "setup", "provision", "the plan's setup commands and the checkout", "the commands, run by orch",
        "never re-run by guess: not done only while the checkout has no changes",
        f"setup cut short after it changed the checkout: a question (run it by hand, or `{orch_command('retire', '--run', 'RUN_ID', '--abandon', 'TASK', '--reason', TEXT)}`)",
        settle="orchestrator.provision:settle_setup",
    ),
    EffectKind(
        "pane_split", "provision", "the owner's pane and the checkout (never the direction: the split changes the layout)",
        "herdr pane split",
        "done if a pane in the owner's tab has the checkout as cwd and belongs to no other worker; else not done",
        settle="orchestrator.provision:settle_pane_split",
    ),
    EffectKind(
        "agent_start", "provision", "agent name, kind, pane, timeout, args", "herdr agent start",
        "done if `agent get NAME` is in the worker's pane; not done if no agent has the name",
        "the name held by an agent in another pane: a question (close that agent, then resume)",
        settle="orchestrator.provision:settle_agent_start",
    ),
    EffectKind(
        "plan_mode_key", "dispatch", "agent and key", "herdr agent send-keys",
        "not done: the plan-mode loop reads the screen before every press, so a mode already on costs no further key",
        settle="orchestrator.agents:settle_plan_mode_key",
    ),
    EffectKind(
        "dialog_keys", "provision, approve", "pane, the dialog's name (quirk table), the agent's keys for the answer", "herdr pane send-keys",
        "the screen decides: the dialog gone is done; the dialog still shown is not done (the keys did not land, so sending them is the answer still owed)",
        settle="orchestrator.dialogs:settle_dialog_keys",
    ),
    EffectKind(
        "agent_prompt", "dispatch, observe, retire",
        "target and the envelope kind (packet, answer, follow-up, stop, result request) with its text digest",
        "herdr agent prompt",
        "done if a callback of the worker arrived after the send was intended, the agent's state_change_seq moved past the "
        "baseline recorded before sending, or its screen shows the text; not done if the agent is gone, or idle/done, unmoved "
        "and without the text on screen 3 s or more after the send was intended (a crash, or a herdr process killed by a signal)",
        "the call ran to orch's time limit (or answered garbage) and nothing shows it landed, or the agent is busy without "
        "evidence: one question, answered with `orch resume RUN_ID --settle ID=sent` or `orch resume RUN_ID --settle ID=unsent` "
        "(for a run an agent controller drives, that only records the answer; its next check-in settles the effect)",
        settle="orchestrator.messages:settle_prompt",
    ),
    EffectKind(
        "pane_send_text", "retire, schedule (exiting a finished agent to free its slot)", "pane and the agent's exit command", "herdr pane send-text",
        "done if no agent runs in the pane any more or the command is on its screen; else not done",
        settle="orchestrator.retire:settle_pane_send_text",
    ),
    EffectKind(
        "pane_send_keys", "retire, schedule (exiting a finished agent to free its slot)", "pane and keys", "herdr pane send-keys",
        "done if no agent runs in the pane any more; else not done (Enter again on an exiting agent is harmless)",
        settle="orchestrator.retire:settle_pane_send_keys",
    ),
    EffectKind(
        "pane_close", "retire", "the pane the run created", "herdr pane close",
        "done if `pane get` says not found; else not done",
        settle="orchestrator.retire:settle_pane_close",
    ),
    EffectKind(
        "worktree_remove", "retire", "checkout path and how (herdr workspace or git)", "herdr worktree remove / git worktree remove",
        "done if the checkout's directory is gone; else not done",
        settle="orchestrator.retire:settle_worktree_remove",
    ),
    EffectKind(
        "integration_worktree", "integrate", "path, integration branch, base", "git worktree add",
        "done if the path is a checkout of the integration branch; else not done",
        settle="orchestrator.integrate:settle_integration_worktree",
    ),
    EffectKind(
        "git_merge", "integrate", "the verified head, its branch, the integration branch", "git merge --no-ff",
        "done if the head is an ancestor of the integration branch; not done if not and no merge is in progress",
        "a merge left in progress: a question (finish or `git merge --abort` in the integration worktree)",
        settle="orchestrator.integrate:settle_git_merge",
    ),
)

EFFECTS: dict[str, EffectKind] = {k.kind: k for k in _KINDS}

# --- an effect's result <-> the JSON object the ledger stores as its response (written once, for every kind) ---
#
# A result is one of two kinds. orch's own records (what a step made, e.g. provision's Checkout) are plain frozen
# dataclasses, stored by their fields and checked when read back by `registry.records.build`, the ledger's own check.
# herdr's response models (orchestrator.herdr_models, e.g. AgentPrompted) stay pydantic: they are the herdr-JSON edge,
# stored as their JSON dump and read back by their own validation. Either reads back a row stored by any orch version
# (tests/orchestrator/test_effects.py), and neither kind imports pydantic here.

M = TypeVar("M")


def to_json(result: Any) -> dict[str, Any]:
    """The JSON object the ledger stores for an effect's result (a record's fields, or a herdr model's JSON dump);
    also what `--json` prints of a command's result that is such a record (orchestrator.commands.base.emit)."""
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        from registry.records import plain

        stored: dict[str, Any] = plain(result)
        return stored
    return dict(result.model_dump(mode="json"))


def from_json(model: type[M], response: Mapping[str, Any]) -> M:
    """The result an effect's stored response stands for, as ``model`` (a record, checked; or a herdr model, validated)."""
    if dataclasses.is_dataclass(model):
        from registry.records import build

        return build(model, response)
    try:
        validated: M = model.model_validate(response)  # type: ignore[attr-defined]
    except ValueError as exc:  # pydantic's ValidationError: one line, as a record's is (it never escapes the engine)
        from orchestrator.herdr import validation_summary
        from registry import RegistryError

        raise RegistryError(f"invalid {model.__name__.lower()}: {validation_summary(exc)}") from None  # type: ignore[arg-type]
    return validated


Settler = Callable[["Engine", "Run", "Effect"], Any]


def settler(kind: str) -> Settler:
    """The read-back function of an effect kind (imported when first needed: it lives with its phase)."""
    module, _, name = EFFECTS[kind].settle.partition(":")
    found: Settler = getattr(importlib.import_module(module), name)
    return found


def settle_in_flight(engine: Engine, run: Run) -> list[CannotTell]:
    """Settle every effect of the run left in flight, each by its kind's read-back, before the run is driven on.

    Done effects are confirmed (later phases replay them), not-done ones abandoned (their phase makes them under
    the next attempt key when it gets there); what read-back cannot decide stays in flight and its question is returned.
    """
    from orchestrator.engine import CannotTell
    from orchestrator.errors import HerdrError, HerdrUnavailable
    from registry.kinds import CONTROLLER_HOST

    questions = []
    for effect in engine.ledger.in_flight(run.run_id):
        try:
            answer = engine.settle_effect(run, effect)
        except HerdrError:
            continue  # e.g. the pane is gone: left in flight, its phase meets the same error and records it
        except HerdrUnavailable:
            if engine.effect_host(effect) == CONTROLLER_HOST:
                raise  # the controller's herdr down: the run stops until it is back
            continue  # another host not answering: left in flight, read back once it answers (its workers wait)
        if isinstance(answer, CannotTell):
            questions.append(answer)
    return questions


def unsettled(engine: Engine, run: Run) -> list[str]:
    """Settle every effect of the run still in flight by read-back; one line (question -> command) per one left.

    Both doors call it before a run may finish (`orch run` before integrating, `orch finish` before anything): a run
    is never finished with an effect in flight.
    """
    from orchestrator.engine import CannotTell
    from orchestrator.errors import HerdrError, HerdrNotFound, HostUnreachable, one_line

    lines = []
    for effect in engine.ledger.in_flight(run.run_id):
        who = effect.task_label or "the run"
        try:
            answer = engine.settle_effect(run, effect)
        except HerdrNotFound as exc:
            # What the effect was about is gone (its pane closed, herdr restarted): it cannot have left anything
            # open there, and it never will.
            engine.ledger.abandon(effect, f"read back: gone ({one_line(exc.message)})")
            continue
        except HerdrError as exc:
            lines.append(
                f"{effect.kind} for {who} (effect {effect.id}) is in flight and its read-back failed: {one_line(exc.message)} "
                f"-> look at herdr, then `orch resume {run.run_id}`"
            )
            continue
        except HostUnreachable as exc:
            host = engine.effect_host(effect)
            lines.append(
                f"{effect.kind} for {who} (effect {effect.id}) is in flight on host {host}, which does not answer: {one_line(exc.message)} "
                f"-> once it answers, `orch resume {run.run_id}` reads it back there"
            )
            continue
        if isinstance(answer, CannotTell):
            what = f"{effect.kind} for {who} (effect {effect.id}): read-back cannot tell whether it happened"
            question = f"{what}: {answer.question}" if answer.question else what
            lines.append(f"{question} -> {answer.command or f'look at herdr and git, then `orch resume {run.run_id}`'}")
    return lines


def effect_table() -> str:
    """The table docs/ledger.md shows (tests/test_docs.py keeps the two in step)."""
    rows = ["| kind | request (the intent under its key) | made by | read-back settles it | left for the person |", "|---|---|---|---|---|"]
    for k in _KINDS:
        rows.append(f"| `{k.kind}` | {k.request} | {k.made_by} | {k.settled_by} | {k.left or 'nothing: read-back always decides'} |")
    return "\n".join(rows) + "\n"
