"""The quirk table: dialogs recognised on real screens, and docs/agent-quirks.md generated from it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from herdr_sim.agent import screens
from orchestrator.quirks import QUIRKS, excerpt, quirks, render_reference

ROOT = Path(__file__).resolve().parents[2]


def test_agent_quirks_doc_is_generated_from_the_table() -> None:
    path = ROOT / "docs" / "agent-quirks.md"
    if os.environ.get("ORCH_UPDATE_GOLDEN") == "1":
        path.write_text(render_reference())
    assert path.read_text() == render_reference()


def test_every_entry_names_its_source() -> None:
    for entry in QUIRKS.values():
        for screen in (entry.trust_dialog, *entry.approval_forms):
            if screen is not None:
                assert screen.source and screen.accept_keys and screen.decline_keys, entry.kind
        if entry.plan_mode is not None:
            assert entry.plan_mode.source
        if entry.exit_command is not None:
            assert entry.exit_source


CODEX_TRUST = (
    "> You are in /home/me/src/acme/widgets.worktrees/widgets-feat-x\n\n"
    "  Do you trust the contents of this directory? Working with untrusted\n"
    "  contents comes with higher risk of prompt injection.\n\n"
    "› 1. Yes, continue\n  2. No, quit\n\n  Press enter to continue\n"
)
CLAUDE_TRUST = (
    "────────────────────────\n Do you trust the files in this folder?\n\n /home/me/project\n\n"
    " ❯ 1. Yes, proceed\n   2. No, exit\n\n Enter to confirm · Esc to exit\n"
)
CLAUDE_PERMISSION = (
    "────────────────────────\n Bash command\n\n   rm -rf build\n\n Do you want to proceed?\n"
    " ❯ 1. Yes\n   2. No, and tell Claude what to do differently (esc)\n\n Esc to cancel · Tab to amend\n"
)
CODEX_APPROVAL = (
    "  Would you like to run the following command?\n\n  $ make deploy\n\n"
    "› 1. Yes, proceed (y)\n  3. No, and tell Codex what to do differently (esc)\n\n  Press enter to confirm or esc to cancel\n"
)


@pytest.mark.parametrize(
    ("kind", "screen", "trust", "approval"),
    [
        ("codex", CODEX_TRUST, "trust directory", None),
        ("codex", CODEX_APPROVAL, None, "approval form"),
        ("codex", "› Summarize the repo\n\n• Working (3s • esc to interrupt)\n", None, None),
        ("claude", CLAUDE_PERMISSION, None, "permission prompt"),
        ("claude", "────\n❯ \n────\n  ? for shortcuts\n", None, None),
        ("opencode", "△ Permission required\n  $ make deploy\n  enter confirm  esc dismiss\n", None, "permission required"),
        ("pi", "Working...\n", None, None),
    ],
)
def test_dialogs_are_recognised_on_real_screens(kind: str, screen: str, trust: str | None, approval: str | None) -> None:
    entry = quirks(kind)
    found_trust = entry.trust_dialog.name if entry.trust_dialog is not None and entry.trust_dialog.matches(screen) else None
    found_form = entry.approval_on(screen)
    assert (found_trust, found_form.name if found_form else None) == (trust, approval)


def test_an_older_claude_trust_dialog_is_recognised_too() -> None:
    trust = quirks("claude").trust_dialog
    assert trust is not None and trust.matches(CLAUDE_TRUST.replace("Esc to exit", "Esc to cancel").replace("Enter to confirm", "Enter to confirm"))


@pytest.mark.parametrize("kind", ["codex", "claude"])
def test_the_simulated_dialogs_are_the_ones_orch_recognises(kind: str) -> None:
    """The simulator's scripted agents draw what the quirk table expects (and nothing else matches it)."""
    dialog = screens.trust_dialog(kind, "/tmp/w")
    form = screens.approval_form(kind, "make deploy")
    assert dialog is not None and form is not None
    entry = quirks(kind)
    assert entry.trust_dialog is not None
    assert entry.trust_dialog.matches("\n".join(dialog.render(0)))
    assert entry.approval_on("\n".join(dialog.render(0))) is None
    assert entry.approval_on("\n".join(form.render(0))) is not None
    assert not entry.trust_dialog.matches("\n".join(form.render(0)))


def test_excerpt_keeps_the_last_non_blank_lines() -> None:
    assert excerpt("\n\na\n\nb  \n\n\n", lines=2) == "\nb"
    assert excerpt("a\nb\nc\n", lines=2) == "b\nc"


CLAUDE_TRUST_MENU = (
    " Quick safety check: Is this a project you created or one you trust?\n\n"
    "{first} 1. Yes, I trust this folder\n{second} 2. No, exit\n\n Enter to confirm · Esc to cancel\n"
)


@pytest.mark.parametrize("first, second, keys", [
    ("❯", " ", ("enter",)),
    (" ", "❯", ("up", "enter")),  # later Claude Code releases open on "No, exit": Enter alone would quit
    (" ", " ", None),  # no cursor shown: which option Enter confirms cannot be told
    ("❯", "❯", None),
])  # fmt: skip
def test_the_trust_menu_is_answered_from_where_the_screen_shows_its_cursor(first: str, second: str, keys: tuple[str, ...] | None) -> None:
    trust = quirks("claude").trust_dialog
    assert trust is not None
    screen = CLAUDE_TRUST_MENU.format(first=first, second=second)
    assert trust.matches(screen)
    assert trust.keys_to_accept(screen) == keys


def test_the_codex_trust_menu_opening_on_yes_is_answered_with_enter() -> None:
    trust = quirks("codex").trust_dialog
    assert trust is not None and trust.keys_to_accept(CODEX_TRUST) == ("enter",)
    assert trust.keys_to_accept(CODEX_TRUST.replace("› 1.", "  1.").replace("  2. No", "› 2. No")) == ("up", "enter")
