"""The quirk table: dialogs recognised on real screens, and docs/agent-quirks.md generated from it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from herdr_sim.agent import screens
from orchestrator.quirks import QUIRKS, Proof, excerpt, quirks, render_reference

ROOT = Path(__file__).resolve().parents[2]


def test_agent_quirks_doc_is_generated_from_the_table() -> None:
    path = ROOT / "docs" / "agent-quirks.md"
    if os.environ.get("ORCH_UPDATE_GOLDEN") == "1":
        path.write_text(render_reference())
    assert path.read_text() == render_reference()


def test_every_entry_names_its_source() -> None:
    for entry in QUIRKS.values():
        for screen in (*entry.trust_dialogs, *entry.start_notices, *entry.approval_forms):
            assert screen.source and screen.accept_keys and screen.decline_keys, entry.kind
        for notice in entry.start_notices:
            assert notice.hint, (entry.kind, notice.name)  # orch never answers it: the person needs to know what to do
        if entry.plan_mode is not None:
            assert entry.plan_mode.source
        if entry.exit_command is not None:
            assert entry.exit_source


def _proofs() -> list[tuple[str, Proof]]:
    found: list[tuple[str, Proof | None]] = []
    for kind, entry in QUIRKS.items():
        found += [(f"{kind} {s.name}", s.proof) for s in (*entry.trust_dialogs, *entry.start_notices, *entry.approval_forms)]
        found += [(f"{kind} {s.name}", s.proof) for s in (*entry.busy, *entry.idle, *((entry.ready,) if entry.ready else ()))]
        found += [(f"{kind} exit", entry.exit_proof), (f"{kind} plan mode", entry.plan_mode.proof if entry.plan_mode else None)]
    return [(what, proof) for what, proof in found if proof is not None]


def test_every_proof_names_a_capture_or_a_lane_test_that_exists() -> None:
    """A verified entry names the captures that show it (tests/orchestrator/test_captured_screens.py reads them), or the
    real-agents lane test that sees it at every run: that test must exist, for that kind."""
    lane = "\n".join(path.read_text() for path in sorted((ROOT / "tests" / "real_agents").glob("test_*.py")))
    for what, proof in _proofs():
        assert proof.captures or proof.lane, what
        if proof.lane:
            test, _, kind = proof.lane.removesuffix("]").partition("[")
            assert f"def {test}(" in lane, (what, proof.lane)
            assert kind == what.split()[0], (what, proof.lane)


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
    found = entry.trust_on(screen)
    found_trust = found.name if found is not None else None
    found_form = entry.approval_on(screen)
    assert (found_trust, found_form.name if found_form else None) == (trust, approval)


def test_an_older_claude_trust_dialog_is_recognised_too() -> None:
    trust = quirks("claude").trust_on(CLAUDE_TRUST)
    assert trust is not None and trust.name == "trust folder"


@pytest.mark.parametrize("kind", ["codex", "claude"])
def test_the_simulated_dialogs_are_the_ones_orch_recognises(kind: str) -> None:
    """The simulator's scripted agents draw what the quirk table expects (and nothing else matches it)."""
    dialog = screens.trust_dialog(kind, "/tmp/w")
    form = screens.approval_form(kind, "make deploy")
    assert dialog is not None and form is not None
    entry = quirks(kind)
    shown = "\n".join(dialog.render(dialog.opens_on))
    trust = entry.trust_on(shown)
    assert trust is not None and trust is entry.trust_dialogs[0]  # the newest wording, as the real agent shows it
    assert trust.keys_to_accept(shown) == ("down",) * (dialog.accept - dialog.opens_on) + ("enter",)
    assert entry.approval_on(shown) is None
    assert entry.approval_on("\n".join(form.render(0))) is not None
    assert entry.trust_on("\n".join(form.render(0))) is None


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
    screen = CLAUDE_TRUST_MENU.format(first=first, second=second)
    trust = quirks("claude").trust_on(screen)
    assert trust is not None
    assert trust.matches(screen)
    assert trust.keys_to_accept(screen) == keys


def test_the_codex_trust_menu_opening_on_yes_is_answered_with_enter() -> None:
    trust = quirks("codex").trust_on(CODEX_TRUST)
    assert trust is not None and trust.keys_to_accept(CODEX_TRUST) == ("enter",)
    assert trust.keys_to_accept(CODEX_TRUST.replace("› 1.", "  1.").replace("  2. No", "› 2. No")) == ("up", "enter")


# --- the five disagreements with the real agents (../shared/real-agents, issue 20); each screen is written down from a
# capture (named), so these run without ../shared.

# claude-3 (Claude Code 2.1.328): no numbers, the cursor on "No, exit" above the accept option.
CLAUDE_TRUST_REAL = (
    "─" * 40 + "\n Accessing workspace:\n\n /home/dev/src/acme/widgets\n\n"
    " Quick safety check: Is this a project you created or one you trust? (Like your own code, a well-known open source\n"
    " project, or work from your team). If not, take a moment to review what's in this folder first.\n\n"
    " Claude Code'll be able to read, edit, and execute files here.\n\n Security guide\n\n"
    " ❯ No, exit\n   Yes, I trust this folder\n\n Enter to confirm · Esc to cancel\n"
)
# codex-19 (codex 0.169.0)
CODEX_TRUST_REAL = (
    "\n  Folder access\n  /home/dev/src/acme/widgets2\n\n"
    "  Trust this folder? Codex can read, edit, and run files here, subject to your permission settings. Folder settings\n"
    "  can run code automatically, even without a model request. Continue only if you trust these files. Your trust\n"
    "  decision will be saved.\n\n› 1. Trust and continue\n  2. Back to Agent Command Center\n\n  enter continue · esc back\n"
)
# claude-8 (auto mode's billing notice, before the first tool call), claude-5 (API key), claude-12 (auto mode default)
CLAUDE_NOTICE_REAL = (
    "❯ Create a file proof.txt containing hello and commit it with git.\n\n● Bash(echo hello > proof.txt)\n  ⎿  Waiting…\n\n"
    + "─" * 40 + "\n  We're changing auto mode to no longer charge for classifier requests in Claude Code.\n\n"
    "  Enter to continue · Esc to cancel\n"
)
CLAUDE_API_KEY_REAL = (
    "─" * 40 + "\n  Detected a custom API key in your environment\n\n  ANTHROPIC_API_KEY: sk-ant-...0123456789abcdefghij\n\n"
    "  Do you want to use this API key?\n\n    Yes\n  ❯ No (recommended)\n\n  Enter to confirm · Esc to cancel\n"
)
CLAUDE_AUTO_MODE_REAL = (
    " ▐▛███▛█   Claude Code v2.1.328\n\n" + "─" * 40 + "\n  Make auto mode your default permission mode?\n\n"
    "  Auto mode lets Claude handle permission prompts automatically.\n\n"
    "  ❯ Yes, set auto mode as my default permission mode\n    No, keep manual mode\n"
)
# claude-15 (working: only the footer says so while TMUX is set), claude-16 (idle after the turn)
CLAUDE_BOX = "─" * 40 + "\n❯ \n" + "─" * 40 + "\n"
CLAUDE_WORKING_REAL = "● Done: I created proof.txt and committed it.\n\n✢ Combobulating… (1s · ↓ 24 tokens)\n\n" + CLAUDE_BOX + "  ⏸ manual mode on · esc to interrupt\n"
CLAUDE_IDLE_REAL = "● Done: I created proof.txt and committed it.\n\n✻ Worked for 1s · done 9:29 PM\n\n" + CLAUDE_BOX + "  ⏸ manual mode on · ? for shortcuts\n"
# opencode-4 (busy footer), opencode-1 (blank 8 s after start), opencode-3 (ready), opencode-10 (idle after a turn)
OPENCODE_BUSY_REAL = "  ┃  Build · Fake model Fake scripted model\n  ╹▀▀▀▀▀▀▀▀\n   ⬝⬝⬝⬝⬝■■■  esc interrupt        tab agents  ctrl+p commands    • OpenCode 1.18.33\n"
OPENCODE_READY_REAL = '  ┃  Ask anything… "Fix a TODO in the codebase"\n  ┃\n  ┃  Build · Fake model Fake scripted model\n     tab agents  ctrl+p commands\n'
OPENCODE_IDLE_REAL = "     ▣  Build · Fake model · 23.8s\n  ┃  Build · Fake model Fake scripted model\n   /home/dev/src/acme/widgets     1.0K (1%)  ctrl+p commands    • OpenCode 1.18.33\n"


def test_pi_exits_with_quit_never_exit() -> None:
    """pi-11/pi-12: `/exit` became a model turn and pi kept running; pi-13: `/quit` ended it."""
    from orchestrator.agents import facts
    from orchestrator.retire import default_exit_command

    assert (quirks("pi").exit_command, facts("pi").exit_command, default_exit_command("pi")) == ("/quit", "/quit", "/quit")
    assert screens.exit_commands("pi") == ("/quit",)  # and the scripted pi, like the real one, takes `/exit` as a prompt


def test_claudes_trust_dialog_without_numbers_is_accepted_by_moving_the_cursor_first() -> None:
    trust = quirks("claude").trust_on(CLAUDE_TRUST_REAL)
    assert trust is not None and trust.name == "trust folder"
    assert trust.keys_to_accept(CLAUDE_TRUST_REAL) == ("down", "enter")
    # claude-4: after Down the cursor is on the accept option, and Enter alone confirms it.
    moved = CLAUDE_TRUST_REAL.replace(" ❯ No, exit\n   Yes", "   No, exit\n ❯ Yes")
    assert trust.keys_to_accept(moved) == ("enter",)


def test_codexs_folder_access_dialog_is_a_trust_dialog_with_its_keys() -> None:
    entry = quirks("codex")
    trust = entry.trust_on(CODEX_TRUST_REAL)
    assert trust is not None and trust.name == "trust folder"
    assert trust.keys_to_accept(CODEX_TRUST_REAL) == ("enter",)
    assert entry.read(CODEX_TRUST_REAL).state == "blocked"  # never ready: a packet's Enter would trust the folder


@pytest.mark.parametrize(("screen", "state", "name"), [
    (CLAUDE_NOTICE_REAL, "blocked", "notice"),  # a form for `orch approve`, never idle
    (CLAUDE_API_KEY_REAL, "blocked", "API key question"),  # a start-up notice orch never answers
    (CLAUDE_AUTO_MODE_REAL, "blocked", "auto mode question"),
    (CLAUDE_WORKING_REAL, "working", "interrupt footer"),
    (CLAUDE_IDLE_REAL, "ready", "prompt box"),
])  # fmt: skip
def test_claudes_notices_read_as_dialogs_and_its_busy_footer_as_working(screen: str, state: str, name: str) -> None:
    reading = quirks("claude").read(screen)
    assert (reading.state, reading.sign) == (state, name)


def test_claudes_start_notices_are_never_answered_and_say_what_to_do() -> None:
    entry = quirks("claude")
    assert [n.name for n in entry.start_notices] == ["API key question", "auto mode question"]
    assert entry.notice_on(CLAUDE_API_KEY_REAL) is entry.start_notices[0]
    assert entry.trust_on(CLAUDE_API_KEY_REAL) is None and entry.approval_on(CLAUDE_API_KEY_REAL) is None
    assert entry.approval_on(CLAUDE_NOTICE_REAL) is not None and entry.notice_on(CLAUDE_NOTICE_REAL) is None


def test_claudes_title_spinner_reads_working_when_the_screen_says_nothing() -> None:
    assert quirks("claude").read("", title="⠂ Claude Code").state == "working"
    assert quirks("claude").read("", title="✳ Claude Code").state == "unknown"


@pytest.mark.parametrize(("screen", "state"), [
    (OPENCODE_BUSY_REAL, "working"),
    ("\n\n\n", "unknown"),  # opencode-1: started, nothing drawn yet; herdr reads it idle, orch waits
    (OPENCODE_READY_REAL, "ready"),
    (OPENCODE_IDLE_REAL, "idle"),  # at rest after a turn, but not the first-start ready sign
])  # fmt: skip
def test_opencode_busy_footer_and_ready_only_once_ask_anything_shows(screen: str, state: str) -> None:
    assert quirks("opencode").read(screen).state == state


def test_codexs_trust_in_a_worktree_names_the_repository_root_it_applies_to() -> None:
    """In a linked worktree codex 0.169 adds a note: its trust is saved for the repository root (the primary checkout),
    not the worktree (the real-agents lane's demo run). orch records that path with its answer."""
    screen = CODEX_TRUST_REAL.replace(
        "  /home/dev/src/acme/widgets2\n",
        "  /src/acme/widgets.worktrees/widgets-feat-greeting\n"
        "  Note: You’re in a subdirectory of a Git project. Trusting will apply to the repository root:\n  /src/acme/widgets\n")
    trust = quirks("codex").trust_on(screen)
    assert trust is not None and trust.keys_to_accept(screen) == ("enter",)
    assert (trust.scope(" ".join(screen.split())), trust.scope(CODEX_TRUST_REAL)) == ("/src/acme/widgets", None)
