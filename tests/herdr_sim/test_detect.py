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
    assert detect.explain(kind, "\n".join(dialog.render(0)) + "\n").state == "blocked"


def test_regions() -> None:
    screen = "a\n\nb\n────\nc\n› x\nd\n"
    assert detect.region("top_non_empty_lines(2)", screen, "") == "a\n\nb"
    assert detect.region("bottom_non_empty_lines(2)", screen, "") == "› x\nd"
    assert detect.region("after_last_horizontal_rule", screen, "") == "c\n› x\nd"
    assert detect.region("after_last_prompt_marker", screen, "") == "d"
    assert detect.region("osc_title", screen, "t") == "t"
