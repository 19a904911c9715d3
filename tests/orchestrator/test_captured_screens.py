"""Every captured real-agent screen through the simulator's rules (herdr_sim.detect) and orch's quirk table.

The captures are the real-agents lane's (`../shared/real-agents/screens/`, or the folder `ORCH_REAL_AGENT_SCREENS`
names, for fresh captures after an agent release): one file per screen and a `<kind>-index.txt` with the time, the
pane title and a note. The state each screen was in when it was captured is written down below from those notes,
each with its reason; a capture without an entry fails, so a re-capture cannot pass unread.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from herdr_sim import detect
from orchestrator.quirks import QUIRKS, Proof, quirks

ROOT = Path(__file__).resolve().parents[2]
SCREENS = Path(os.environ.get("ORCH_REAL_AGENT_SCREENS") or ROOT.parent / "shared" / "real-agents" / "screens")
KINDS = ("claude", "codex", "opencode", "pi")
HOST_TITLE = "vm"  # the capture machine's host name: tmux's title until the agent sets one (herdr reads no title then)

if not SCREENS.is_dir():
    pytest.skip(f"no captured real-agent screens at {SCREENS}", allow_module_level=True)

# name: (simulator's state, orch's reading, why). orch reads "ready" (its first-prompt sign), "idle" (at rest after a
# turn), "working", "blocked" (a dialog or form of the table) or "unknown" (no sign: orch sends nothing). "exited": the
# agent process had ended (the file says EXITED), so no detection applies.
EXPECTED: dict[str, tuple[str, str, str]] = {
    "claude-1": ("exited", "exited", "no model service configured: claude exits 1 at start"),
    "claude-2": ("exited", "exited", "as claude-1, without the proxy"),
    "claude-3": ("blocked", "blocked", "the trust dialog, cursor on 'No, exit', options without numbers"),
    "claude-4": ("blocked", "blocked", "the trust dialog after Down: the cursor on 'Yes, I trust this folder'"),
    "claude-5": ("blocked", "blocked", "after Enter on trust: the API key question, cursor on 'No (recommended)'"),
    "claude-6": ("blocked", "blocked", "the API key question after Up"),
    "claude-7": ("idle", "ready", "the prompt box after the API key was accepted (auto mode's banner above it)"),
    "claude-8": ("blocked", "blocked", "auto mode's billing notice before the first tool call: the turn waits for Enter"),
    "claude-9": ("blocked", "blocked", "the same notice 3 s later: still waiting, not idle"),
    "claude-10": ("idle", "ready", "after Enter on the notice the turn ended at the prompt box"),
    "claude-11": ("exited", "exited", "`/exit` ended claude"),
    "claude-12": ("blocked", "blocked", "the auto-mode question covers the prompt box (the note's 'idle prompt' is under it)"),
    "claude-13": ("idle", "ready", "after Down+Enter on 'No, keep manual mode': the prompt box, `? for shortcuts`"),
    "claude-14": ("blocked", "blocked", "the tool approval form (manual mode)"),
    "claude-15": ("working", "working", "right after approving: the footer says `esc to interrupt` (the title stays ✳ with TMUX set)"),
    "claude-16": ("idle", "ready", "idle after the turn"),
    "claude-17": ("working", "working", "streaming: `esc to interrupt` in the footer"),
    "claude-18": ("blocked", "blocked", "the second approval form"),
    "claude-19": ("working", "working", "running `sleep 5`"),
    "claude-20": ("working", "working", "streaming its final text"),
    "claude-21": ("idle", "ready", "idle after the second turn"),
    "claude-22": ("idle", "ready", "start screen, no dialog"),
    "claude-23": ("idle", "ready", "one Ctrl-C at idle: the turn shows Interrupted, the prompt box is at rest"),
    "claude-24": ("idle", "ready", "TMUX unset, idle after a turn (title ✳)"),
    "claude-25": ("idle", "ready", "start screen; the title is a start-up terminal query, not claude's: the prompt box decides"),
    "claude-26": ("blocked", "blocked", "the approval form without auto mode's option"),
    "claude-27": ("idle", "ready", "`permissions.allow = [\"Bash\"]`: no form, idle after the turn"),
    "codex-1": ("idle", "unknown", "nothing drawn 5 s after start: herdr's fallback reads idle, orch waits for the input line"),
    "codex-2": ("blocked", "blocked", "no provider configured: the sign-in chooser"),
    "codex-3": ("blocked", "blocked", "the sign-in chooser's second page"),
    "codex-4": ("idle", "ready", "the input line (the title is still the host name: herdr's fallback)"),
    "codex-5": ("exited", "exited", "the app-server daemon's socket was in use: codex exits 1 (start it with --no-daemon)"),
    "codex-6": ("blocked", "blocked", "codex 0.169's trust dialog ('Folder access / Trust this folder?')"),
    "codex-7": ("idle", "ready", "after Enter on 'Trust and continue'"),
    "codex-8": ("idle", "unknown", "the F2 warnings view over an idle codex: no input line, so orch would not paste"),
    "codex-9": ("working", "working", "turn 1 after 1 s: title spinner and `• Working (1s • esc to interrupt)`"),
    "codex-10": ("working", "working", "turn 1 after 3 s"),
    "codex-11": ("working", "working", "turn 1 after 4 s"),
    "codex-12": ("working", "working", "turn 1 after 6 s"),
    "codex-13": ("working", "working", "later in turn 1: only the title spinner shows it"),
    "codex-14": ("blocked", "blocked", "the escalation approval form, title `[ . ] Action Required`"),
    "codex-15": ("idle", "ready", "after approving, idle"),
    "codex-16": ("exited", "exited", "`/exit` ended codex"),
    "codex-17": ("idle", "ready", "pre-seeded config (trusted, no approvals): the input line"),
    "codex-18": ("idle", "ready", "idle after a turn"),
    "codex-19": ("blocked", "blocked", "the trust dialog in a second repository, before the paste"),
    "codex-20": ("idle", "ready", "the paste was lost and its Enter chose 'Trust and continue': why dispatch reads the screen first"),
    "opencode-1": ("idle", "unknown", "nothing drawn 8 s after start: herdr's fallback reads idle, orch waits for `Ask anything`"),
    "opencode-2": ("idle", "ready", "`Ask anything` after 15 s (no provider yet)"),
    "opencode-3": ("idle", "ready", "configured: `Ask anything`"),
    "opencode-4": ("working", "working", "turn 1 after 1 s: `⬝⬝⬝⬝⬝■■■  esc interrupt` (no `to`)"),
    "opencode-5": ("working", "working", "turn 1 after 3 s"),
    "opencode-6": ("working", "working", "turn 1 after 4 s"),
    "opencode-7": ("blocked", "blocked", "the bash permission form"),
    "opencode-8": ("working", "working", "running after 'Allow once'"),
    "opencode-9": ("working", "working", "the note says idle, but the footer still says `esc interrupt` and the turn's time is not shown yet (opencode-10 adds `· 23.8s`): still finishing"),
    "opencode-10": ("idle", "idle", "at rest after the turn: the footer lost `esc interrupt`; `Ask anything` shows only at start"),
    "opencode-11": ("exited", "exited", "`/exit` ended opencode"),
    "opencode-12": ("idle", "idle", "`permission.bash = allow`: no form, idle after the turn"),
    "pi-1": ("idle", "ready", "no model configured, but its editor takes input"),
    "pi-2": ("exited", "exited", "Ctrl-D at the empty editor ended pi"),
    "pi-3": ("idle", "ready", "configured, offline: the editor"),
    "pi-4": ("working", "working", "turn 1 after 1 s: `⠇ Working...`"),
    "pi-5": ("working", "working", "turn 1 after 3 s"),
    "pi-6": ("working", "working", "turn 1 after 4 s"),
    "pi-7": ("working", "working", "turn 1 after 6 s"),
    "pi-8": ("working", "working", "turn 1 after 7 s"),
    "pi-9": ("working", "working", "turn 1 after 9 s"),
    "pi-10": ("idle", "ready", "idle after the turn"),
    "pi-11": ("working", "working", "`/exit` is no pi command: it went to the model as a prompt"),
    "pi-12": ("working", "working", "the `/exit` prompt's turn still running"),
    "pi-13": ("exited", "exited", "`/quit` ended pi (its last frame is still on screen)"),
}


def _captures() -> list[tuple[str, str, str]]:
    """(name, pane title, note) of every capture, from the index files."""
    found = []
    # Every index there: ../shared has all four kinds, a lane re-capture (`DIR/<test>`) the one kind its test ran.
    for index in sorted(SCREENS.glob("*-index.txt")):
        for line in index.read_text().splitlines():
            match = re.fullmatch(r"(\S+) \S+ title=\[(.*)\] (.*)", line)
            assert match, f"{index.name}: unreadable line {line!r}"
            found.append((match.group(1), match.group(2), match.group(3)))
    return found


def _title(raw: str) -> str:
    return "" if raw == HOST_TITLE else detect.app_title(raw)  # a lane re-capture: this machine's host name


def test_every_capture_has_an_expected_state_and_every_expectation_a_capture() -> None:
    assert {path.name.removesuffix("-index.txt") for path in SCREENS.glob("*-index.txt")} <= set(KINDS)
    names = {name for name, _, _ in _captures()}
    files = {p.stem for p in SCREENS.glob("*.txt") if not p.stem.endswith("-index")}
    assert names == files
    assert sorted(names) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_capture_reads_as_it_was_through_the_simulator_and_the_quirk_table(name: str) -> None:
    sim_state, orch_state, why = EXPECTED[name]
    title = _title(next(t for n, t, _ in _captures() if n == name))
    screen = (SCREENS / f"{name}.txt").read_text()
    kind = name.rsplit("-", 1)[0]
    if sim_state == "exited":
        assert "EXITED rc=" in screen, why
        return
    found = detect.explain(kind, screen, title)
    reading = quirks(kind).read(screen, title)
    assert (found.state, reading.state) == (sim_state, orch_state), why


def test_every_verified_entry_is_shown_by_one_of_its_captures() -> None:
    """An entry's proof names captures that show it (a dialog or sign the table reads on at least one of them)."""

    def screen(name: str) -> tuple[str, str]:
        title = next(t for n, t, _ in _captures() if f"{n}.txt" == name)
        return (SCREENS / name).read_text(), _title(title)

    def check(what: str, proof: Proof | None, shows: object) -> None:
        if proof is None or not proof.captures:
            return  # unverified, or proven by a lane test at every run (tests/orchestrator/test_quirks.py checks it exists)
        assert all((SCREENS / name).is_file() for name in proof.captures), what
        assert any(shows(*screen(name)) for name in proof.captures), f"{what}: none of {proof.captures} shows it"  # type: ignore[operator]

    for kind, entry in QUIRKS.items():
        for dialog in (*entry.trust_dialogs, *entry.start_notices, *entry.approval_forms):
            check(f"{kind} {dialog.name}", dialog.proof, lambda text, _t, d=dialog: d.matches(text))
        for sign in (*entry.busy, *entry.idle, *((entry.ready,) if entry.ready else ())):
            check(f"{kind} {sign.name}", sign.proof, lambda text, title, s=sign: s.matches(text, title))


@pytest.mark.parametrize(("name", "keys"), [
    ("claude-3", ("down", "enter")),  # the cursor opens on "No, exit"
    ("claude-4", ("enter",)),  # after Down
    ("codex-6", ("enter",)),
    ("codex-19", ("enter",)),
])  # fmt: skip
def test_the_trust_dialogs_keys_are_read_from_the_captured_screens(name: str, keys: tuple[str, ...]) -> None:
    screen = (SCREENS / f"{name}.txt").read_text()
    trust = quirks(name.rsplit("-", 1)[0]).trust_on(screen)
    assert trust is not None and trust.keys_to_accept(screen) == keys
