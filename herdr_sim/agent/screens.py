"""What each scripted kind puts on screen like the real agent: trust dialogs, approval forms, titles, busy lines, pastes.

Texts follow the screens in herdr 0.8.2's detection manifests and tests (src/detect/manifests, src/detect/manifest/
tests.rs) and the agents' own first-run and permission dialogs; herdr_sim.detect must classify every one of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

RULE = "─" * 72
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


@dataclass(frozen=True)
class Dialog:
    """A modal choice: its lines, the options (the first is selected), and the keys that pick an option directly."""

    lines: tuple[str, ...]
    options: tuple[str, ...]
    marker_line: int  # index in lines of the first option
    shortcuts: dict[str, int]  # key -> option index, confirmed at once
    cancel: int  # the option Esc picks
    marker: str = "›"

    def render(self, selected: int) -> list[str]:
        """The dialog's lines with the selection marker on the selected option."""
        out = list(self.lines)
        for i, option in enumerate(self.options):
            out[self.marker_line + i] = f"{self.marker if i == selected else ' '} {i + 1}. {option}"
        return out


def _with_options(head: list[str], options: tuple[str, ...], tail: list[str]) -> tuple[tuple[str, ...], int]:
    return tuple(head + [""] * len(options) + tail), len(head)


def trust_dialog(kind: str, cwd: str) -> Dialog | None:
    """The first-run "trust this directory" dialog of the kind, or None when the real agent has none."""
    if kind == "codex":
        # codex: "> You are in <dir>" on the first row of a fresh screen (manifest rule trust_directory).
        options = ("Yes, continue", "No, quit")
        lines, at = _with_options(
            [f"> You are in {cwd}", "", "  Do you trust the contents of this directory? Working with untrusted",
             "  contents comes with higher risk of prompt injection.", ""],
            options, ["", "  Press enter to continue"])  # fmt: skip
        return Dialog(lines, options, at, {"1": 0, "2": 1}, cancel=1)
    if kind == "claude":
        # Claude Code: a form under a rule, ending "Enter to confirm · Esc to cancel" (herdr #2268).
        options = ("Yes, I trust this folder", "No, exit")
        lines, at = _with_options(
            [RULE, " Accessing workspace:", "", f" {cwd}", "",
             " Quick safety check: Is this a project you created or one you trust? If not, take a moment to",
             " review what's in this folder first.", "", " Claude Code'll be able to read, edit, and execute files here.", ""],
            options, ["", " Enter to confirm · Esc to cancel"])  # fmt: skip
        return Dialog(lines, options, at, {"1": 0, "2": 1}, cancel=1, marker="❯")
    return None


def approval_form(kind: str, command: str) -> Dialog | None:
    """The kind's form asking to run a command, or None when the real agent never asks (pi)."""
    if kind == "claude":
        options = ("Yes", "Yes, and don't ask again for this command", "No, and tell Claude what to do differently (esc)")
        lines, at = _with_options(
            [RULE, " Bash command", "", f"   {command}", "", " Do you want to proceed?"],
            options, ["", " Esc to cancel · Tab to amend · ctrl+e to explain"])  # fmt: skip
        return Dialog(lines, options, at, {"1": 0, "2": 1, "3": 2}, cancel=2, marker="❯")
    if kind == "codex":
        options = ("Yes, proceed (y)", "Yes, and don't ask again for this command (p)", "No, and tell Codex what to do differently (esc)")
        lines, at = _with_options(
            ["  Would you like to run the following command?", "", f"  $ {command}", ""],
            options, ["", "  Press enter to confirm or esc to cancel"])  # fmt: skip
        return Dialog(lines, options, at, {"y": 0, "p": 1, "1": 0, "2": 1, "3": 2}, cancel=2)
    if kind == "opencode":
        options = ("Allow once", "Allow always", "Reject")
        lines, at = _with_options(["△ Permission required", f"  $ {command}", ""], options, ["", "  ⇆ tab select  enter confirm  esc dismiss"])
        return Dialog(lines, options, at, {}, cancel=2)
    return None


def title(kind: str, cwd: str, working: bool, frame: int = 0) -> str | None:
    """The terminal title the kind sets (OSC 2): a spinner while busy; None for kinds that set none."""
    if kind == "claude":
        return f"{SPINNER[frame % len(SPINNER)] if working else '✳'} Claude Code"
    if kind == "codex":
        name = os.path.basename(cwd.rstrip("/")) or cwd
        return f"{SPINNER[frame % len(SPINNER)]} {name}" if working else name
    return None


def busy_line(kind: str, seconds: int) -> str:
    """The line under the transcript while a turn runs."""
    if kind == "pi":
        return "Working..."
    if kind == "opencode":
        return f"■■■■⬝⬝⬝⬝  esc to interrupt ({seconds}s)"
    if kind == "claude":
        return "✻ Working… (esc to interrupt)"  # no clock: only the title's spinner moves
    return f"• Working ({seconds}s • esc to interrupt)"


def paste_placeholder(kind: str, text: str, count: int) -> str | None:
    """How the kind's input line collapses a multi-line paste (None: show the generic summary)."""
    lines = text.count("\n") + 1
    if kind == "claude":
        return f"[Pasted text #{count} +{lines} lines]"
    if kind == "codex":
        return f"[Pasted Content {len(text)} chars]"
    return None
