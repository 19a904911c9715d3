"""Every side-effect kind `Engine.once` may make: its request, how it is made, how read-back settles it, what is left."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
        "done if a workspace labelled for the repo that was not there before is listed; else not done",
        settle="orchestrator.preflight:settle_workspace_create",
    ),
    EffectKind(
        "tab_rename", "preflight, provision", "tab id and the label it must carry", "herdr tab rename",
        "done if the tab carries the label; not done if it carries another; the tab gone: not done (the phase then finds or makes its tab again)",
        settle="orchestrator.provision:settle_tab_rename",
    ),
    EffectKind(
        "worktree_create", "provision", "branch, base SHA, Layout Contract path, label", "herdr worktree create",
        "done if `worktree list` shows the branch checked out at the path (the run records it, its workspace and pane as created); "
        "not done if the branch is not checked out anywhere",
        settle="orchestrator.provision:settle_worktree_create",
    ),
    EffectKind(
        "worktree_open", "provision", "checkout path and label", "herdr worktree open",
        "done if a workspace holds a pane in the checkout; else not done",
        settle="orchestrator.provision:settle_worktree_open",
    ),
    EffectKind(
        "pane_move", "provision", "the pane as created, the repo workspace, the tab label", "herdr pane move --new-tab",
        "done if the pane (its pre-move id is an alias) is now in the repo workspace; not done if it is still elsewhere",
        "the pane gone altogether: the worker fails with that reason (its checkout is kept)",
        settle="orchestrator.provision:settle_pane_move",
    ),
    EffectKind(
        "workspace_close", "provision", "the emptied side workspace", "herdr workspace close",
        "done if the workspace is no longer listed; else not done",
        settle="orchestrator.provision:settle_workspace_close",
    ),
    EffectKind(
        "setup", "provision", "the plan's setup commands and the checkout", "the commands, run by orch",
        "never re-run by guess: not done (run now) only when the checkout is exactly as created (no changes)",
        "setup that changed the checkout and was cut short: a question (`orch retire --abandon TASK` or run it by hand)",
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
        "done if `agent get NAME` is in the pane; not done if no agent has the name and the pane is a bare shell",
        "the name held by another pane: the worker fails with that reason",
        settle="orchestrator.provision:settle_agent_start",
    ),
    EffectKind(
        "plan_mode_key", "dispatch", "agent and key", "herdr agent send-keys",
        "the screen decides: plan mode confirmed on screen is done; otherwise not done (one more press is harmless until the screen confirms)",
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
        "done if the agent's state_change_seq moved past the baseline recorded before sending, its screen shows the text, "
        "or a callback of the worker arrived after the send was intended; not done if the agent is idle and unchanged "
        "well after the call was launched and the text is not on its screen",
        "an agent that is gone or whose screen cannot be read: one question, answered with `orch resume --settle ID=sent|unsent`",
        settle="orchestrator.messages:settle_prompt",
    ),
    EffectKind(
        "pane_send_text", "retire", "pane and the agent's exit command", "herdr pane send-text",
        "done if no agent runs in the pane any more or the command is on its screen; else not done",
        settle="orchestrator.retire:settle_pane_send_text",
    ),
    EffectKind(
        "pane_send_keys", "retire", "pane and keys", "herdr pane send-keys",
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
        "done if the checkout is gone from `git worktree list`; else not done",
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

    questions = []
    for effect in engine.ledger.in_flight(run.run_id):
        answer = engine.settle_effect(run, effect)
        if isinstance(answer, CannotTell):
            questions.append(answer)
    return questions
