"""Screen detection (herdr_sim.detect) against screens modelled on herdr 0.8.2's manifest tests and the scripted agents."""

from __future__ import annotations

import pytest

from herdr_sim import detect
from herdr_sim.agent import screens

RULE = "─" * 40


@pytest.mark.parametrize(
    ("kind", "screen", "title", "state", "rule"),
    [
        # codex: the title spinner, "Action Required", a plain title; the trust dialog only on a live top region.
        ("codex", "", "⠋ widgets", "working", "title_spinner"),
        ("codex", "", "Action Required", "blocked", "title_action_required"),
        ("codex", "", "widgets", "idle", "title_idle"),
        ("codex", "> You are in /src/p\n\nDo you trust the contents of this\ndirectory? Working with untrusted\n\n› 1. Yes, continue\n  2. No, quit\n",
         "p", "blocked", "trust_directory"),
        ("codex", "› > You are in /src/p\n\nDo you trust the contents of this\ndirectory?\n", "p", "idle", "title_idle"),
        ("codex", "› run it\n\n• Working (12s • esc to interrupt)\n", "", "working", "working_line"),
        ("codex", "› run it\n\n• Working (12s • esc to interrupt)\n■ Conversation interrupted\n", "", "idle", None),
        ("codex", "  $ make deploy\n\n› 1. Yes, proceed (y)\n\n  Press enter to confirm or esc to cancel\n", "⠙ p", "working", "title_spinner"),
        ("codex", "  $ make deploy\n\n› 1. Yes, proceed (y)\n\n  Press enter to confirm or esc to cancel\n", "p", "blocked", "approval_form"),
        # claude: braille and half-circle spinners, ✳ idle, forms after the last rule.
        ("claude", "", "⠂ Claude Code", "working", "title_spinner"),
        ("claude", "", "◐ Claude Code", "working", "title_spinner"),
        ("claude", "", "✳ Claude Code", "idle", "title_idle"),
        ("claude", f"{RULE}\n Do you want to proceed?\n ❯ 1. Yes\n   2. No\n\n Esc to cancel · Tab to amend\n", "✳ Claude Code", "blocked",
         "permission_prompt"),
        ("claude", f"{RULE}\n Pick one\n ❯ 1. A\n\n Enter to confirm · Esc to cancel\n", "✳ Claude Code", "blocked", "confirm_form"),
        ("claude", f"{RULE}\n❯ \n{RULE}\n  ? for shortcuts\n", "", "idle", "prompt_box"),
        ("claude", "", "", "idle", None),
        # The real agents' screens (../shared/real-agents, written down from the named captures):
        # codex-19, codex 0.169's trust dialog; codex-2, its sign-in chooser without a provider.
        ("codex", "\n  Folder access\n  /src/p\n\n  Trust this folder? Codex can read, edit, and run files here.\n\n"
         "› 1. Trust and continue\n  2. Back to Agent Command Center\n\n  enter continue · esc back\n", "", "blocked", "trust_folder"),
        ("codex", "  Welcome to Codex, OpenAI's command-line coding agent\n\n> 1. Sign in with ChatGPT\n\n  Press enter to continue\n", "",
         "blocked", "sign_in"),
        # claude-8 (a notice the turn waits on), claude-12 (the auto-mode question, no footer), claude-15 (working while
        # the title stays ✳: the footer says so), claude-16 (idle).
        ("claude", f"❯ Create a file\n\n{RULE}\n  We're changing auto mode.\n\n  Enter to continue · Esc to cancel\n", "✳ Claude Code",
         "blocked", "confirm_form"),
        ("claude", f"{RULE}\n  Make auto mode your default permission mode?\n\n  ❯ Yes, set auto mode as my default permission mode\n"
         "    No, keep manual mode\n", "✳ Claude Code", "blocked", "auto_mode_question"),
        ("claude", f"✢ Combobulating… (1s · ↓ 24 tokens)\n\n{RULE}\n❯ \n{RULE}\n  ⏸ manual mode on · esc to interrupt\n", "✳ Claude Code",
         "working", "interrupt_footer"),
        ("claude", f"✻ Worked for 1s · done 9:29 PM\n\n{RULE}\n❯ \n{RULE}\n  ⏸ manual mode on · ? for shortcuts\n", "✳ Claude Code",
         "idle", "prompt_box"),
        # opencode-4: the busy footer says "esc interrupt" (no "to"); opencode-10: idle after the turn.
        ("opencode", "  ┃  Build · Fake model\n   ⬝⬝⬝⬝⬝■■■  esc interrupt        tab agents  ctrl+p commands    • OpenCode 1.18.33\n", "",
         "working", "interrupt_hint"),
        ("opencode", "     ▣  Build · Fake model · 23.8s\n   /home/dev/src/acme/widgets   1.0K (1%)  ctrl+p commands\n", "", "idle", None),
        # opencode and pi
        ("opencode", "△ Permission required\n  $ ls\n", "", "blocked", "permission_required"),
        ("opencode", "build  esc to interrupt\n", "", "working", "interrupt_hint"),
        ("opencode", "> \n", "", "idle", None),
        ("pi", "Working...\n", "", "working", "working_line"),
        ("pi", "> \n", "", "idle", None),
    ],
)
def test_rules_on_real_screens(kind: str, screen: str, title: str, state: str, rule: str | None) -> None:
    found = detect.explain(kind, screen, title)
    assert (found.state, found.rule.id if found.rule else None) == (state, rule)


def test_explain_json_names_the_matched_rule_and_its_evidence() -> None:
    found = detect.explain("codex", "", "⠋ widgets")
    doc = found.to_json()
    assert (doc["state"], doc["matched_rule"], doc["visible_working"], doc["fallback_reason"]) == (
        "working", {"id": "title_spinner", "priority": 1050, "region": "osc_title", "state": "working"}, True, None)
    assert found.text() == (
        "agent: codex\nstate: working\nmanifest: bundled herdr-sim.1\n"
        "rule: title_spinner (region=osc_title priority=1050)\nevidence: \"⠋ widgets\"\n"
    )
    assert detect.explain("pi", "> \n").to_json()["fallback_reason"] == "default_known_agent_idle_fallback"


@pytest.mark.parametrize("kind", ["codex", "claude", "opencode"])
def test_the_scripted_agents_forms_are_blockers(kind: str) -> None:
    form = screens.approval_form(kind, "make deploy")
    assert form is not None
    found = detect.explain(kind, "• Sending update:\n" + "\n".join(form.render(0)) + "\n")
    assert (found.state, found.visible_blocker) == ("blocked", True)


@pytest.mark.parametrize("kind", ["codex", "claude"])
def test_the_scripted_agents_trust_dialogs_are_blockers(kind: str) -> None:
    dialog = screens.trust_dialog(kind, "/src/acme/widgets")
    assert dialog is not None
    for selected in range(len(dialog.options)):
        assert detect.explain(kind, "\n".join(dialog.render(selected)) + "\n").state == "blocked"


@pytest.mark.parametrize("kind", ["codex", "claude", "opencode", "pi"])
def test_the_scripted_agents_busy_lines_read_working(kind: str) -> None:
    assert detect.explain(kind, "• Read packet\n" + screens.busy_line(kind, 3) + "\n").state == "working"


def test_regions() -> None:
    screen = "a\n\nb\n────\nc\n› x\nd\n"
    assert detect.region("top_non_empty_lines(2)", screen, "") == "a\n\nb"
    assert detect.region("bottom_non_empty_lines(2)", screen, "") == "› x\nd"
    assert detect.region("after_last_horizontal_rule", screen, "") == "c\n› x\nd"
    assert detect.region("after_last_prompt_marker", screen, "") == "d"
    assert detect.region("osc_title", screen, "t") == "t"
