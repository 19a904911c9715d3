"""What each scripted kind puts on screen like the real agent: trust dialogs, approval forms, titles, busy lines, pastes.

Texts follow the real agents' screens captured by the real-agents lane (`../shared/real-agents/screens/`: claude
2.1.328, codex 0.169.0, opencode 1.18.33, pi 0.73.1; the file named next to each text shows it), and herdr 0.8.2's
detection manifests where no capture exists; herdr_sim.detect must classify every one of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

RULE = "─" * 72
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


@dataclass(frozen=True)
class Dialog:
    """A modal choice: its lines, the options, and the keys that pick an option directly."""

    lines: tuple[str, ...]
    options: tuple[str, ...]
    marker_line: int  # index in lines of the first option
    shortcuts: dict[str, int]  # key -> option index, confirmed at once
    cancel: int  # the option Esc picks
    marker: str = "›"
    accept: int = 0  # the option that says yes
    opens_on: int = 0  # where the cursor is when the dialog opens
    numbered: bool = True
    indent: str = ""

    def render(self, selected: int) -> list[str]:
        """The dialog's lines with the selection marker on the selected option."""
        out = list(self.lines)
        for i, option in enumerate(self.options):
            number = f"{i + 1}. " if self.numbered else ""
            out[self.marker_line + i] = f"{self.indent}{self.marker if i == selected else ' '} {number}{option}"
        return out


def _with_options(head: list[str], options: tuple[str, ...], tail: list[str]) -> tuple[tuple[str, ...], int]:
    return tuple(head + [""] * len(options) + tail), len(head)


def trust_dialog(kind: str, cwd: str) -> Dialog | None:
    """The first-run "trust this directory" dialog of the kind, or None when the real agent has none."""
    if kind == "codex":
        # codex 0.169 (codex-6, codex-19): "Folder access" on a fresh screen, Enter on the preselected
        # "Trust and continue" trusts the folder (a paste is swallowed, its Enter trusts: codex-20).
        options = ("Trust and continue", "Back to Agent Command Center")
        lines, at = _with_options(
            ["", "  Folder access", f"  {cwd}", "",
             "  Trust this folder? Codex can read, edit, and run files here, subject to your",
             "  permission settings. Folder settings can run code automatically, even without",
             "  a model request. Continue only if you trust these files. Your trust decision",
             "  will be saved.", ""],
            options, ["", "  enter continue · esc back"])  # fmt: skip
        return Dialog(lines, options, at, {"1": 0, "2": 1}, cancel=1)
    if kind == "claude":
        # Claude Code 2.1.328 (claude-3, claude-4): a form under a rule, options without numbers, the cursor opening
        # on "No, exit" above "Yes, I trust this folder"; Down then Enter trusts, Enter alone quits.
        options = ("No, exit", "Yes, I trust this folder")
        lines, at = _with_options(
            ["", RULE, " Accessing workspace:", "", f" {cwd}", "",
             " Quick safety check: Is this a project you created or one you trust? (Like your",
             " own code, a well-known open source project, or work from your team). If not,",
             " take a moment to review what's in this folder first.", "",
             " Claude Code'll be able to read, edit, and execute files here.", "", " Security guide", ""],
            options, ["", " Enter to confirm · Esc to cancel"])  # fmt: skip
        return Dialog(lines, options, at, {}, cancel=0, marker="❯", accept=1, opens_on=0, numbered=False, indent=" ")
    return None


def approval_form(kind: str, command: str) -> Dialog | None:
    """The kind's form asking to run a command, or None when the real agent never asks (pi)."""
    if kind == "claude":
        # claude-26: the command between dashed rules, then the numbered menu and "Esc to cancel · Tab to amend".
        options = ("Yes", "Yes, and don't ask again for this command", "No")
        dashes = "╌" * 72
        lines, at = _with_options(
            [RULE, " Bash command", " Run a command", dashes, f" │ {command}", dashes, " This command requires approval", "",
             " Do you want to proceed?"],
            options, ["", " Esc to cancel · Tab to amend"])  # fmt: skip
        return Dialog(lines, options, at, {"1": 0, "2": 1, "3": 2}, cancel=2, marker="❯", indent=" ")
    if kind == "codex":
        # codex-14
        options = ("Yes, proceed (y)", "Yes, and don't ask again for this command (p)", "No, and tell Codex what to do differently (esc)")
        lines, at = _with_options(
            ["  Would you like to run the following command?", "", "  Environment: local", "", f"  $ {command}", ""],
            options, ["", "  Press enter to confirm or esc to cancel"])  # fmt: skip
        return Dialog(lines, options, at, {"y": 0, "p": 1, "1": 0, "2": 1, "3": 2}, cancel=2)
    if kind == "opencode":
        # opencode-7 shows the options on one line ("Allow once   Allow always   Reject … ⇆ select  enter confirm");
        # a menu line each here, the words and keys the same.
        options = ("Allow once", "Allow always", "Reject")
        lines, at = _with_options(["  ┃  △ Permission required", "  ┃    # Shell command", "  ┃", f"  ┃  $ {command}", "  ┃"],
                                  options, ["  ┃", "  ┃  ⇆ select  enter confirm"])  # fmt: skip
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
        return f"{SPINNER[seconds % len(SPINNER)]} Working..."  # pi-4
    if kind == "opencode":
        return "⬝⬝⬝⬝⬝■■■  esc interrupt"  # opencode-4: no "to", no clock
    if kind == "claude":
        return "  ⏸ manual mode on · esc to interrupt"  # the footer under the prompt box (claude-15)
    return f"• Working ({seconds}s • esc to interrupt)"  # codex-9


def prompt(kind: str) -> str:
    """The input line's mark: Claude Code's `❯` (claude-13), `›` for the others."""
    return "❯ " if kind == "claude" else "› "


def ready_lines(kind: str) -> tuple[str, ...]:
    """What the kind shows once it can take its first prompt, besides its input line (the orch quirk table's ready sign)."""
    if kind == "opencode":
        return ('  ┃  Ask anything… "Fix a TODO in the codebase"',)  # opencode-3
    if kind == "pi":
        return (" escape interrupt · ctrl+c/ctrl+d clear/exit · / commands · ! bash · ctrl+o more",)  # pi-3
    return ()


def exit_commands(kind: str) -> tuple[str, ...]:
    """The slash commands that end the agent: pi's is `/quit` (`/exit` goes to its model as a prompt: pi-11)."""
    return ("/quit",) if kind == "pi" else ("/exit",)


def paste_placeholder(kind: str, text: str, count: int) -> str | None:
    """How the kind's input line collapses a multi-line paste (None: show the generic summary)."""
    lines = text.count("\n") + 1
    if kind == "claude":
        return f"[Pasted text #{count} +{lines} lines]"
    if kind == "codex":
        return f"[Pasted Content {len(text)} chars]"
    return None
