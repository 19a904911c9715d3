"""The per-kind quirk table: what each agent kind shows and accepts (trust dialogs, approval forms, exit, plan mode), with sources.

One table, read by agent start (trust dialogs), observation (approval forms), retire (the exit command) and dispatch
(plan mode). Every entry names where its fact comes from; docs/agent-quirks.md renders the same table for people.
Keys use herdr's key syntax (`enter`, `esc`, `shift+tab`: CONTRACT §6 `pane send-keys`), so herdr passes them on.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Screen(BaseModel):
    """A dialog or form recognised on screen: every pattern (case-insensitive regex) must match the visible screen."""

    model_config = _FROZEN

    name: str
    patterns: tuple[str, ...]
    accept_keys: tuple[str, ...]  # the agent's own keys for "yes" once the cursor is on the accept option
    decline_keys: tuple[str, ...]  # the agent's own keys for "no" / cancel
    source: str
    # A numbered menu whose cursor may open on any option: the option that accepts, and the cursor's mark. Enter
    # confirms whatever the cursor is on, so orch first moves the cursor there, reading where it is from the screen.
    accept_option: str | None = None
    cursor: str | None = None

    def matches(self, screen: str) -> bool:
        """Whether this dialog is what the screen shows."""
        return all(re.search(pattern, screen, re.IGNORECASE | re.MULTILINE) for pattern in self.patterns)

    def keys_to_accept(self, screen: str) -> tuple[str, ...] | None:
        """The keys that confirm the accept option from where the screen shows the cursor; None when it cannot be told.

        A form without a menu (``accept_option`` unset) is accepted with its keys as they are.
        """
        if self.accept_option is None or self.cursor is None:
            return self.accept_keys
        options = [m for line in screen.splitlines() if (m := _OPTION.match(line))]
        at = [i for i, m in enumerate(options) if m.group(1) == self.cursor]
        target = [i for i, m in enumerate(options) if m.group(2).strip() == self.accept_option]
        if len(at) != 1 or len(target) != 1:
            return None
        moves = target[0] - at[0]
        return ("down",) * moves + ("up",) * -moves + self.accept_keys


# A numbered menu line: an optional cursor mark, the number, the option's words (`❯ 1. Yes, I trust this folder`).
_OPTION = re.compile(r"^\s*([^\s\d\w]?)\s*\d+\.\s+(.+?)\s*$")


class PlanMode(BaseModel):
    """How an agent enters plan mode: press ``key`` (herdr key syntax) until ``confirm_text`` is on screen."""

    model_config = _FROZEN

    key: str
    confirm_text: str
    # Mode keys cycle through several modes; more presses than this means the mode is not where we expect it.
    max_presses: int
    source: str


class Quirks(BaseModel):
    """Everything orch knows about one kind's screens and keys."""

    model_config = _FROZEN

    kind: str
    exit_command: str | None = None
    exit_source: str | None = None
    trust_dialog: Screen | None = None
    approval_forms: tuple[Screen, ...] = ()
    plan_mode: PlanMode | None = None

    def approval_on(self, screen: str) -> Screen | None:
        """The approval or permission form the screen shows, if any."""
        return next((form for form in self.approval_forms if form.matches(screen)), None)


_EXIT_SOURCE = "spec §7 retire ladder (`/exit`); the agent's own slash command"
_DELTA_13 = "herdr 0.8.2 changelog #2268 and detection manifest claude.toml (`live_blocked_form`, `generic_permission_prompt`)"

QUIRKS: dict[str, Quirks] = {
    "claude": Quirks(
        kind="claude",
        exit_command="/exit",
        exit_source=_EXIT_SOURCE,
        trust_dialog=Screen(
            name="trust folder",
            patterns=(r"trust (this folder|the files in this folder)", r"enter to confirm"),
            accept_keys=("enter",),
            decline_keys=("esc",),
            source="Claude Code's first-start folder trust dialog (`Quick safety check: Is this a project you created or one you trust?`, `❯ 1. Yes, I trust this folder` / `2. No, exit`, `Enter to confirm · Esc to cancel`; public captures show the cursor opening on `No, exit` in later releases, so orch moves it to the accept option first); " + _DELTA_13,
            accept_option="Yes, I trust this folder",
            cursor="❯",
        ),
        approval_forms=(
            Screen(
                name="permission prompt",
                patterns=(r"do you want to proceed\?", r"^\s*❯?\s*1\.\s*yes\b", r"esc to cancel"),
                accept_keys=("enter",),
                decline_keys=("esc",),
                source="Claude Code's tool permission form (`❯ 1. Yes` preselected, `Esc to cancel`); " + _DELTA_13,
            ),
        ),
        plan_mode=PlanMode(
            key="shift+tab",
            confirm_text="plan mode on",
            max_presses=3,
            source="Claude Code: Shift+Tab cycles permission modes (default -> accept edits on -> plan mode on) and the footer shows `plan mode on`; herdr sends Shift+Tab only from 0.8.2 on (DELTA 0.8.2 #7, #1561)",
        ),
    ),
    "codex": Quirks(
        kind="codex",
        exit_command="/exit",
        exit_source=_EXIT_SOURCE,
        trust_dialog=Screen(
            name="trust directory",
            patterns=(r"^> You are in ", r"do\s+you\s+trust\s+the\s+contents\s+of\s+this\s+directory\?"),
            accept_keys=("enter",),
            decline_keys=("esc",),
            source="codex first start in a directory (`› 1. Yes, continue` preselected, `Press enter to continue`); herdr 0.8.2 detection manifest codex.toml `trust_directory` and src/detect/manifest/tests.rs `codex_trust_directory_requires_live_top_region`",
            accept_option="Yes, continue",
            cursor="›",
        ),
        approval_forms=(
            Screen(
                name="approval form",
                patterns=(r"press enter to confirm or esc to cancel|allow command\?",),
                accept_keys=("enter",),
                decline_keys=("esc",),
                source="codex command approval (`› 1. Yes, proceed (y)` preselected, `Press enter to confirm or esc to cancel`); herdr 0.8.2 detection manifest codex.toml `live_strong_blocker`",
            ),
        ),
    ),
    "opencode": Quirks(
        kind="opencode",
        exit_command="/exit",
        exit_source=_EXIT_SOURCE,
        approval_forms=(
            Screen(
                name="permission required",
                patterns=(r"△ Permission required",),
                accept_keys=("enter",),
                decline_keys=("esc",),
                source="opencode's permission box (`Allow once` preselected, `enter confirm`, `esc dismiss`); herdr 0.8.2 detection manifest opencode.toml `permission_required`",
            ),
        ),
    ),
    # pi asks for no approvals and shows no trust dialog (herdr's pi manifest knows only its `Working...` line).
    "pi": Quirks(kind="pi", exit_command="/exit", exit_source=_EXIT_SOURCE),
    "gemini": Quirks(kind="gemini", exit_command="/exit", exit_source=_EXIT_SOURCE),
}


def quirks(kind: str) -> Quirks:
    """The kind's quirks; a kind without an entry has none known (orch then types nothing it cannot justify)."""
    return QUIRKS.get(kind) or Quirks(kind=kind)


def excerpt(screen: str, lines: int = 12) -> str:
    """The last non-blank lines of a screen, for a ledger record or a message (callers make it inert before printing)."""
    rows = [row.rstrip() for row in screen.splitlines()]
    while rows and not rows[-1]:
        rows.pop()
    while rows and not rows[0]:
        rows.pop(0)
    return "\n".join(rows[-lines:])


def render_reference() -> str:
    """docs/agent-quirks.md: the table above for people, one row per fact with its source (tests keep it in step)."""
    out = [
        "# Agent quirks: what each kind shows and which keys answer it",
        "",
        "Generated from `orchestrator/quirks.py` (`tests/orchestrator/test_quirks.py` fails when they differ; `ORCH_UPDATE_GOLDEN=1` rewrites it).",
        "orch types only these keys, only through a recorded effect, and only when policy or a person said so:",
        "",
        "- **Trust dialog** (first start of an agent in a directory): answered at provisioning with the accept keys when `[policy] trust_run_worktrees` is on (the default) and the run created the worktree (a menu's cursor is first moved to the accept option, from where the screen shows it; a screen that does not show it is reported, nothing typed); otherwise the worker fails with the dialog's text and nothing is typed. Any other dialog at start is reported the same way. Recorded as a `dialog` fact and in the report's `Dialogs:` line.",
        "- **Approval forms** (mid-turn): the worker becomes `blocked` with the form's text (observation reads the screen when herdr says `blocked`); `orch approve --run RUN_ID TASK` (or `--deny`) sends the agent's own keys, as the person or the agent controller decides. orch never approves on its own.",
        "- **Exit command**: typed by `orch retire --run RUN_ID` into an agent at rest; a kind without one keeps its pane.",
        "- **Plan mode**: the key pressed until the confirmation text shows (`mode = \"plan-first\"`).",
        "",
        "Patterns are case-insensitive regular expressions that must all match the visible screen. Keys use herdr's key syntax (`pane send-keys`).",
        "",
        "| Kind | Quirk | Recognised by | Keys | Source |",
        "|---|---|---|---|---|",
    ]

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    for kind, entry in QUIRKS.items():
        if entry.trust_dialog is not None:
            d = entry.trust_dialog
            pats = ", ".join(f"`{cell(p)}`" for p in d.patterns)
            accept = f"`{' '.join(d.accept_keys)}`" + (f" once the cursor (`{d.cursor}`) is on `{d.accept_option}` (`down`/`up` first, read from the screen)" if d.accept_option else "")
            out.append(f"| {kind} | trust dialog: {d.name} | {pats} | accept {accept}, decline `{' '.join(d.decline_keys)}` | {cell(d.source)} |")
        for form in entry.approval_forms:
            pats = ", ".join(f"`{cell(p)}`" for p in form.patterns)
            out.append(f"| {kind} | approval form: {form.name} | {pats} | approve `{' '.join(form.accept_keys)}`, deny `{' '.join(form.decline_keys)}` | {cell(form.source)} |")
        if entry.exit_command is not None:
            out.append(f"| {kind} | exit command | - | `{entry.exit_command}` then `enter` | {cell(entry.exit_source or '')} |")
        if entry.plan_mode is not None:
            m = entry.plan_mode
            out.append(f"| {kind} | plan mode | `{cell(m.confirm_text)}` on screen | `{m.key}`, at most {m.max_presses} presses | {cell(m.source)} |")
        if entry.trust_dialog is None and not entry.approval_forms:
            out.append(f"| {kind} | no trust dialog, no approval forms known | - | - | herdr 0.8.2 detection manifests: none for {kind} |")
    return "\n".join(out) + "\n"
