"""The per-kind quirk table: what each agent kind shows and accepts (trust dialogs, approval forms, exit, plan mode), with sources.

One table, read by agent start (trust dialogs), observation (approval forms), retire (the exit command) and dispatch
(plan mode). Every entry names where its fact comes from; docs/agent-quirks.md renders the same table for people.
Keys use herdr's key syntax (`enter`, `esc`, `shift+tab`: CONTRACT §6 `pane send-keys`), so herdr passes them on.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Proof(BaseModel):
    """Where an entry was seen on a real agent: the agent's version and the captured screens (file names) showing it.

    The captures are the real-agents lane's (`../shared/real-agents/screens/`, re-captured when an agent releases);
    `tests/orchestrator/test_captured_screens.py` runs every one of them through this table.
    """

    model_config = _FROZEN

    version: str
    captures: tuple[str, ...] = ()
    # For what no capture of ../shared shows (claude's title spinner: drawn only outside tmux, and those captures were
    # taken inside it): the real-agents lane test that sees it on the real agent at every run.
    lane: str | None = None


class Screen(BaseModel):
    """A dialog or form recognised on screen: every pattern (case-insensitive regex) must match the visible screen."""

    model_config = _FROZEN

    name: str
    patterns: tuple[str, ...]
    accept_keys: tuple[str, ...]  # the agent's own keys for "yes" once the cursor is on the accept option
    decline_keys: tuple[str, ...]  # the agent's own keys for "no" / cancel
    source: str
    # A menu whose cursor may open on any option: the option that accepts, and the cursor's mark. Enter confirms
    # whatever the cursor is on, so orch first moves the cursor there, reading where it is from the screen.
    accept_option: str | None = None
    cursor: str | None = None
    # Every option's words: a menu without numbers (Claude Code's trust dialog) is read by these. Empty: numbered lines.
    options: tuple[str, ...] = ()
    # For a dialog orch never answers: what the person can do (answer it in the pane, or the setting that avoids it).
    hint: str | None = None
    proof: Proof | None = None  # None: no captured real screen confirms this entry
    # A trust dialog that says its answer applies wider than the pane's folder: one group, the path it names.
    applies_to: str | None = None

    def scope(self, screen: str) -> str | None:
        """The wider path the screen says this answer applies to (codex: the repository root), or None."""
        found = re.search(self.applies_to, screen, re.IGNORECASE) if self.applies_to else None
        return found.group(1).strip() if found else None

    def matches(self, screen: str) -> bool:
        """Whether this dialog is what the screen shows."""
        return all(re.search(pattern, screen, re.IGNORECASE | re.MULTILINE) for pattern in self.patterns)

    def keys_to_accept(self, screen: str) -> tuple[str, ...] | None:
        """The keys that confirm the accept option from where the screen shows the cursor; None when it cannot be told.

        A form without a menu (``accept_option`` unset) is accepted with its keys as they are.
        """
        if self.accept_option is None or self.cursor is None:
            return self.accept_keys
        options = [found for line in screen.splitlines() if (found := self._option(line)) is not None]
        at = [i for i, (cursor, _) in enumerate(options) if cursor]
        target = [i for i, (_, words) in enumerate(options) if words == self.accept_option]
        if len(at) != 1 or len(target) != 1:
            return None
        moves = target[0] - at[0]
        return ("down",) * moves + ("up",) * -moves + self.accept_keys

    def _option(self, line: str) -> tuple[bool, str] | None:
        """(cursor on it, the option's words) for a menu line (`❯ Yes, I trust this folder`, `  2. No, exit`), else None."""
        assert self.cursor is not None
        text = line.strip()
        cursor = text.startswith(self.cursor)
        if cursor:
            text = text[len(self.cursor) :].strip()
        numbered = _NUMBER.match(text)
        if numbered:
            text = text[numbered.end() :].strip()
        if self.options:
            return (cursor, text) if text in self.options else None
        return (cursor, text) if numbered else None


# A menu line's number (`1. `), before the option's words.
_NUMBER = re.compile(r"\d+\.\s+")


class Sign(BaseModel):
    """A state shown on screen: every pattern matches and no ``absent`` one does, or ``title`` matches the pane title."""

    model_config = _FROZEN

    name: str
    patterns: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    title: str | None = None  # a regex over the terminal title (herdr reads it; orch's pane reads do not carry it)
    source: str
    proof: Proof | None = None

    def matches(self, screen: str, title: str = "") -> bool:
        """Whether the screen (or the title) shows this sign."""
        flags = re.IGNORECASE | re.MULTILINE
        if self.patterns and all(re.search(p, screen, flags) for p in self.patterns) and not any(re.search(p, screen, flags) for p in self.absent):
            return True
        return self.title is not None and bool(title) and re.search(self.title, title) is not None


class PlanMode(BaseModel):
    """How an agent enters plan mode: press ``key`` (herdr key syntax) until ``confirm_text`` is on screen."""

    model_config = _FROZEN

    key: str
    confirm_text: str
    # Mode keys cycle through several modes; more presses than this means the mode is not where we expect it.
    max_presses: int
    source: str
    proof: Proof | None = None


ReadState = Literal["blocked", "working", "ready", "idle", "unknown"]


class Reading(BaseModel):
    """What orch's table reads on one screen: a dialog (blocked), busy, ready for a first prompt, at rest, or unknown."""

    model_config = _FROZEN

    state: ReadState
    sign: str | None = None  # the dialog's or sign's name
    dialog: Screen | None = None


class Quirks(BaseModel):
    """Everything orch knows about one kind's screens and keys."""

    model_config = _FROZEN

    kind: str
    exit_command: str | None = None
    exit_source: str | None = None
    exit_proof: Proof | None = None
    trust_dialogs: tuple[Screen, ...] = ()  # newest first: agents change their wording between releases
    start_notices: tuple[Screen, ...] = ()  # other dialogs at start-up: orch never answers them (each has a hint)
    approval_forms: tuple[Screen, ...] = ()
    plan_mode: PlanMode | None = None
    # The agent can take its first prompt (dispatch never pastes before it shows). None: herdr's readiness alone.
    ready: Sign | None = None
    idle: tuple[Sign, ...] = ()  # at rest after a turn, where the first-start sign may be gone
    busy: tuple[Sign, ...] = ()

    def trust_on(self, screen: str) -> Screen | None:
        """The trust dialog the screen shows, if any."""
        return next((dialog for dialog in self.trust_dialogs if dialog.matches(screen)), None)

    def notice_on(self, screen: str) -> Screen | None:
        """The start-up notice (a dialog orch never answers) the screen shows, if any."""
        return next((notice for notice in self.start_notices if notice.matches(screen)), None)

    def approval_on(self, screen: str) -> Screen | None:
        """The approval or permission form the screen shows, if any."""
        return next((form for form in self.approval_forms if form.matches(screen)), None)

    def dialog_on(self, screen: str) -> Screen | None:
        """Any dialog of the table on this screen: a trust dialog, a start-up notice or an approval form."""
        return self.trust_on(screen) or self.notice_on(screen) or self.approval_on(screen)

    def dialog_named(self, name: str) -> Screen | None:
        """The table's dialog of this name (an effect names the dialog it answered)."""
        return next((s for s in (*self.trust_dialogs, *self.start_notices, *self.approval_forms) if s.name == name), None)

    def read(self, screen: str, title: str = "") -> Reading:
        """The table's reading of a screen: a dialog wins, then a busy sign, then the ready sign, then an idle sign."""
        dialog = self.dialog_on(screen)
        if dialog is not None:
            return Reading(state="blocked", sign=dialog.name, dialog=dialog)
        busy = next((s for s in self.busy if s.matches(screen, title)), None)
        if busy is not None:
            return Reading(state="working", sign=busy.name)
        if self.ready is not None and self.ready.matches(screen, title):
            return Reading(state="ready", sign=self.ready.name)
        idle = next((s for s in self.idle if s.matches(screen, title)), None)
        if idle is not None:
            return Reading(state="idle", sign=idle.name)
        return Reading(state="unknown")


_EXIT_SOURCE = "spec §7 retire ladder (`/exit`); the agent's own slash command"
_DELTA_13 = "herdr 0.8.2 changelog #2268 and detection manifest claude.toml (`live_blocked_form`, `generic_permission_prompt`)"
_LANE = "captured by the real-agents lane (`../shared/real-agents/`)"
CLAUDE = "claude 2.1.328"
CODEX = "codex 0.169.0"
OPENCODE = "opencode 1.18.33"
PI = "pi 0.73.1"


def _seen(version: str, *captures: str) -> Proof:
    return Proof(version=version, captures=captures)


QUIRKS: dict[str, Quirks] = {
    "claude": Quirks(
        kind="claude",
        exit_command="/exit",
        exit_source=_EXIT_SOURCE + "; " + _LANE + ": `/exit` then Enter returns the shell",
        exit_proof=_seen(CLAUDE, "claude-11.txt"),
        trust_dialogs=(
            Screen(
                name="trust folder",
                patterns=(r"trust (this folder|the files in this folder)", r"enter to confirm"),
                accept_keys=("enter",),
                decline_keys=("esc",),
                source="Claude Code's first-start folder trust dialog (`Quick safety check: Is this a project you created or one you trust?`, options without numbers, the cursor `❯` opening on `No, exit` above `Yes, I trust this folder`, `Enter to confirm · Esc to cancel`): Down then Enter accepts; " + _LANE + "; " + _DELTA_13,
                accept_option="Yes, I trust this folder",
                cursor="❯",
                options=("Yes, I trust this folder", "No, exit"),
                proof=_seen(CLAUDE, "claude-3.txt", "claude-4.txt", "claude-5.txt"),
            ),
        ),
        start_notices=(
            Screen(
                name="API key question",
                patterns=(r"do you want to use this api key\?", r"enter to confirm"),
                accept_keys=("up", "enter"),
                decline_keys=("enter",),
                source="Claude Code asks once per HOME whether to use `ANTHROPIC_API_KEY` (cursor on `No (recommended)`); " + _LANE,
                hint="it is the person's account decision: answer it in the pane, or pre-approve the key in the agent's `~/.claude.json` (`customApiKeyResponses.approved`: the key's last 20 characters)",
                proof=_seen(CLAUDE, "claude-5.txt", "claude-6.txt", "claude-7.txt"),
            ),
            Screen(
                name="auto mode question",
                patterns=(r"make auto mode your default permission mode\?",),
                accept_keys=("enter",),
                decline_keys=("down", "enter"),
                source="Claude Code asks once whether auto mode becomes the default permission mode (cursor on `Yes, set auto mode …`, no footer); " + _LANE,
                hint="it changes the person's default permission mode: answer it in the pane, or set `disableAutoMode` in the agent's `~/.claude/settings.json`",
                proof=_seen(CLAUDE, "claude-12.txt", "claude-13.txt"),
            ),
        ),
        approval_forms=(
            Screen(
                name="permission prompt",
                patterns=(r"do you want to proceed\?", r"^\s*❯?\s*1\.\s*yes\b", r"esc to cancel"),
                accept_keys=("enter",),
                decline_keys=("esc",),
                source="Claude Code's tool permission form (`❯ 1. Yes` preselected, `Esc to cancel · Tab to amend`); " + _LANE + "; " + _DELTA_13,
                proof=_seen(CLAUDE, "claude-14.txt", "claude-18.txt", "claude-26.txt"),
            ),
            Screen(
                name="notice",
                patterns=(r"enter to continue\s*·\s*esc to cancel",),
                accept_keys=("enter",),
                decline_keys=("esc",),
                source="Claude Code's mid-turn notices (`Enter to continue · Esc to cancel`; in auto mode a billing notice before the first tool call): the turn waits on it, so it is a form for `orch approve`, never read as idle; " + _LANE,
                proof=_seen(CLAUDE, "claude-8.txt", "claude-9.txt", "claude-10.txt"),
            ),
        ),
        plan_mode=PlanMode(
            key="shift+tab",
            confirm_text="plan mode on",
            max_presses=3,
            source="Claude Code: Shift+Tab cycles permission modes (default -> accept edits on -> plan mode on) and the footer shows `plan mode on`; herdr sends Shift+Tab only from 0.8.2 on (DELTA 0.8.2 #7, #1561)",
        ),
        ready=Sign(
            name="prompt box",
            patterns=(r"^❯\s*$",),
            source="the empty input line `❯` of Claude Code's prompt box (the dialogs' `❯` lines carry an option); " + _LANE,
            proof=_seen(CLAUDE, "claude-7.txt", "claude-13.txt", "claude-22.txt", "claude-27.txt"),
        ),
        busy=(
            Sign(
                name="interrupt footer",
                patterns=(r"·\s*esc to interrupt\s*$",),
                source="the footer `⏸ manual mode on · esc to interrupt` while a turn runs (`? for shortcuts` at rest); " + _LANE,
                proof=_seen(CLAUDE, "claude-15.txt", "claude-17.txt", "claude-19.txt", "claude-20.txt"),
            ),
            Sign(
                name="title spinner",
                title=r"^[\u2800-\u28ff\u25d0-\u25d3] ",
                source="the terminal title's spinner (braille up to 2.1.227, half circles from 2.1.228: `◐ Claude Code`, `◑ Claude Code` while a turn runs; `✳ Claude Code` at rest), drawn only when `TMUX` is unset in the agent's environment (herdr's own panes; the lane's launcher unsets it), so none of ../shared's captures (all taken inside tmux) shows it; at a turn's start it is the only busy sign besides the model's spinner word (`✽ Fluttering…`), before the footer says `esc to interrupt`; herdr 0.8.2 detection manifest claude.toml `osc_title_working`",
                proof=Proof(version=CLAUDE, lane="test_demo_plan_passes_with_three_real_workers[claude]"),
            ),
        ),
    ),
    "codex": Quirks(
        kind="codex",
        exit_command="/exit",
        exit_source=_EXIT_SOURCE + "; " + _LANE,
        exit_proof=_seen(CODEX, "codex-16.txt"),
        trust_dialogs=(
            Screen(
                name="trust folder",
                patterns=(r"^\s*folder access\s*$", r"trust this folder\?", r"enter continue"),
                accept_keys=("enter",),
                decline_keys=("esc",),
                source="codex's folder access dialog (`Trust this folder?`, `› 1. Trust and continue` / `2. Back to Agent Command Center`, `enter continue · esc back`); a prompt pasted into it is lost and its Enter trusts the folder; in a linked worktree it notes that the trust applies to the repository root (the primary checkout), which orch records with its answer and the report shows; it is drawn a moment after the input line, so the ready sign must hold for 3 s; " + _LANE,
                accept_option="Trust and continue",
                cursor="›",
                options=("Trust and continue", "Back to Agent Command Center"),
                # In a linked worktree codex adds "Note: You're in a subdirectory of a Git project. Trusting will apply
                # to the repository root: <primary checkout>" (the real-agents lane's worktrees): recorded and reported.
                applies_to=r"trusting will apply to the repository root:\s*(\S+)",
                proof=_seen(CODEX, "codex-6.txt", "codex-7.txt", "codex-19.txt", "codex-20.txt"),
            ),
            Screen(
                name="trust directory",
                patterns=(r"^> You are in ", r"do\s+you\s+trust\s+the\s+contents\s+of\s+this\s+directory\?"),
                accept_keys=("enter",),
                decline_keys=("esc",),
                source="older codex releases (`> You are in <dir>`, `› 1. Yes, continue` preselected, `Press enter to continue`); herdr 0.8.2 detection manifest codex.toml `trust_directory` and src/detect/manifest/tests.rs `codex_trust_directory_requires_live_top_region`",
                accept_option="Yes, continue",
                cursor="›",
            ),
        ),
        start_notices=(
            Screen(
                name="sign-in chooser",
                patterns=(r"welcome to codex", r"press enter to continue"),
                accept_keys=("enter",),
                decline_keys=("esc",),
                source="codex without a configured provider asks how to sign in; " + _LANE,
                hint="configure a model provider in the agent's `~/.codex/config.toml` (`model_provider`, `[model_providers.<id>]`), or sign in in the pane",
                proof=_seen(CODEX, "codex-2.txt", "codex-3.txt"),
            ),
        ),
        approval_forms=(
            Screen(
                name="approval form",
                patterns=(r"press enter to confirm or esc to cancel|allow command\?",),
                accept_keys=("enter",),
                decline_keys=("esc",),
                source="codex command approval (`› 1. Yes, proceed (y)` preselected, `Press enter to confirm or esc to cancel`, title `[ . ] Action Required`); " + _LANE + "; herdr 0.8.2 detection manifest codex.toml `live_strong_blocker`",
                proof=_seen(CODEX, "codex-14.txt", "codex-15.txt"),
            ),
        ),
        ready=Sign(
            name="input line",
            patterns=(r"^›(\s|$)",),
            source="codex's input line `› Ask Codex to do anything` (the menus' `›` lines are dialogs, read first); " + _LANE,
            proof=_seen(CODEX, "codex-4.txt", "codex-7.txt", "codex-17.txt"),
        ),
        busy=(
            Sign(
                name="working line",
                patterns=(r"^[•◦]\s+Working \([^)]*esc to interrupt\)",),
                title=r"(?:^| )[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏](?: |$)",
                source="`• Working (3s • esc to interrupt)` above the input line, and a braille spinner before the title; " + _LANE + "; herdr 0.8.2 detection manifest codex.toml",
                proof=_seen(CODEX, "codex-9.txt", "codex-10.txt", "codex-11.txt", "codex-12.txt", "codex-13.txt"),
            ),
        ),
    ),
    "opencode": Quirks(
        kind="opencode",
        exit_command="/exit",
        exit_source=_EXIT_SOURCE + "; " + _LANE,
        exit_proof=_seen(OPENCODE, "opencode-11.txt"),
        approval_forms=(
            Screen(
                name="permission required",
                patterns=(r"△ Permission required",),
                accept_keys=("enter",),
                decline_keys=("esc",),
                source="opencode's permission box (`Allow once` preselected, `Allow always`, `Reject`, `enter confirm`); " + _LANE + "; the same box asks before any tool, bash included, touches a path outside the folder opencode started in (`← Access external directory …`, its `permission.external_directory`, asked even with `bash` allowed: a worker writing its report into orch's report dir), seen by the real-agents lane at 1.18.33; herdr 0.8.2 detection manifest opencode.toml `permission_required`",
                proof=_seen(OPENCODE, "opencode-7.txt", "opencode-8.txt"),
            ),
        ),
        ready=Sign(
            name="Ask anything",
            patterns=(r"ask anything",),
            source="opencode takes a prompt only once `Ask anything…` shows in its input box, about 10 s after start (a prompt sent earlier is lost; herdr reads the blank screen before it as idle); " + _LANE,
            proof=_seen(OPENCODE, "opencode-1.txt", "opencode-2.txt", "opencode-3.txt"),
        ),
        idle=(
            Sign(
                name="commands footer",
                patterns=(r"ctrl\+p commands",),
                absent=(r"esc interrupt",),
                source="after a turn the input box is empty (no `Ask anything`) and the footer shows `ctrl+p commands` without `esc interrupt`; " + _LANE,
                proof=_seen(OPENCODE, "opencode-10.txt", "opencode-12.txt"),
            ),
        ),
        busy=(
            Sign(
                name="interrupt footer",
                patterns=(r"esc (to )?interrupt",),
                source="the footer `⬝⬝⬝⬝⬝■■■  esc interrupt` (no `to`) while a turn runs; " + _LANE + "; herdr 0.8.2 detection manifest opencode.toml `progress_bar_working`",
                proof=_seen(OPENCODE, "opencode-4.txt", "opencode-5.txt", "opencode-6.txt", "opencode-8.txt", "opencode-9.txt"),
            ),
        ),
    ),
    # pi asks for no approvals and shows no trust dialog; `/exit` is no command of pi's: it goes to the model as a
    # prompt (pi-11, pi-12), so the stop ladder types `/quit`.
    "pi": Quirks(
        kind="pi",
        exit_command="/quit",
        exit_source="pi's own command (`/quit`, or Ctrl-D on an empty editor); `/exit` is sent to the model as a prompt; " + _LANE,
        exit_proof=_seen(PI, "pi-2.txt", "pi-11.txt", "pi-12.txt", "pi-13.txt"),
        ready=Sign(
            name="key help",
            patterns=(r"ctrl\+c/ctrl\+d clear/exit",),
            source="pi draws its key help (`escape interrupt · ctrl+c/ctrl+d clear/exit · / commands`) with its editor, ~5 s after start; " + _LANE,
            proof=_seen(PI, "pi-1.txt", "pi-3.txt", "pi-10.txt"),
        ),
        busy=(
            Sign(
                name="working line",
                patterns=(r"Working\.\.\.",),
                source="`⠇ Working...` above the editor while a turn runs; " + _LANE + "; herdr 0.8.2 detection manifest pi.toml `working_literal`",
                proof=_seen(PI, "pi-4.txt", "pi-5.txt", "pi-6.txt", "pi-7.txt", "pi-8.txt", "pi-9.txt"),
            ),
        ),
    ),
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


def _verified(proof: Proof | None) -> str:
    if proof is None:
        return "unverified: no captured real screen shows it"
    shown = [", ".join(f"`{name}`" for name in proof.captures)] if proof.captures else []
    if proof.lane:
        shown.append(f"seen at every run of the real-agents lane's `{proof.lane}`")
    return f"{proof.version}: " + "; ".join(shown)


def render_reference() -> str:
    """docs/agent-quirks.md: the table above for people, one row per fact with its source and proof (tests keep it in step)."""
    out = [
        "# Agent quirks: what each kind shows and which keys answer it",
        "",
        "Generated from `orchestrator/quirks.py` (`tests/orchestrator/test_quirks.py` fails when they differ; `ORCH_UPDATE_GOLDEN=1` rewrites it).",
        "orch types only these keys, only through a recorded effect, and only when policy or a person said so:",
        "",
        "- **Trust dialog** (first start of an agent in a directory): answered at provisioning with the accept keys when `[policy] trust_run_worktrees` is on (the default) and the run created the worktree (a menu's cursor is first moved to the accept option, from where the screen shows it; a screen that does not show it is reported, nothing typed); otherwise the worker fails with the dialog's text and nothing is typed. Recorded as a `dialog` fact and in the report's `Dialogs:` line.",
        "- **Start-up notice** (any other dialog before the first prompt: an API key, a default permission mode, a sign-in): never answered by orch, since each is the person's own account or settings decision; the worker fails with the dialog's text and the hint (answer it in the pane, or the agent setting that avoids it), nothing typed. A dialog the table does not know is reported the same way.",
        "- **Ready sign** (the agent can take its first prompt): provisioning reads the pane (`pane read`) until it shows, after herdr's own readiness (herdr reads a blank, still-starting screen as idle), for up to `agent_start_timeout_s` (at least 120 s; the sign must hold 3 s, since codex draws its trust dialog a moment after its input line); dispatch reads the screen again right before pasting and sends nothing when a dialog or form is there or the sign is missing. A packet's Enter never answers a dialog.",
        "- **Approval forms** (mid-turn, including notices a turn waits on): the worker becomes `blocked` with the form's text (observation reads the screen when herdr says `blocked`, and when it says `idle` mid-turn); `orch approve --run RUN_ID TASK` (or `--deny`) sends the agent's own keys, as the person or the agent controller decides. orch never approves on its own.",
        "- **Busy and idle signs**: what the screen shows while a turn runs and at rest after it (herdr decides the state; these rows are what the captures show, and what the simulator's screen rules read).",
        "- **Exit command**: typed by `orch retire --run RUN_ID` into an agent at rest; a kind without one keeps its pane.",
        "- **Plan mode**: the key pressed until the confirmation text shows (`mode = \"plan-first\"`).",
        "",
        "Patterns are case-insensitive regular expressions that must all match the visible screen. Keys use herdr's key syntax (`pane send-keys`).",
        "**Verified** names the agent version and the captured screens (`../shared/real-agents/screens/`, re-captured by the real-agents lane when an agent releases) that show the entry, or, for what no capture shows (a title drawn only outside tmux), the real-agents lane test that sees it at every run; \"unverified\" where neither does. `tests/orchestrator/test_captured_screens.py` runs every capture through this table and the simulator's screen rules and fails on a capture without a written-down state.",
        "",
        "| Kind | Quirk | Recognised by | Keys | Source | Verified |",
        "|---|---|---|---|---|---|",
    ]

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    def pats(patterns: tuple[str, ...]) -> str:
        return ", ".join(f"`{cell(p)}`" for p in patterns)

    def sign(s: Sign) -> str:
        shown = pats(s.patterns) + (f", none of {pats(s.absent)}" if s.absent else "")
        title = f"title `{cell(s.title)}`" if s.title else ""
        return " or ".join(part for part in (shown, title) if part)

    for kind, entry in QUIRKS.items():
        for d in entry.trust_dialogs:
            accept = f"`{' '.join(d.accept_keys)}`" + (f" once the cursor (`{d.cursor}`) is on `{d.accept_option}` (`down`/`up` first, read from the screen)" if d.accept_option else "")
            out.append(f"| {kind} | trust dialog: {d.name} | {pats(d.patterns)} | accept {accept}, decline `{' '.join(d.decline_keys)}` | {cell(d.source)} | {_verified(d.proof)} |")
        for n in entry.start_notices:
            out.append(f"| {kind} | start-up notice: {n.name} | {pats(n.patterns)} | never answered by orch: {cell(n.hint or '')} | {cell(n.source)} | {_verified(n.proof)} |")
        if entry.ready is not None:
            out.append(f"| {kind} | ready sign: {entry.ready.name} | {sign(entry.ready)} | - | {cell(entry.ready.source)} | {_verified(entry.ready.proof)} |")
        for s in entry.idle:
            out.append(f"| {kind} | idle sign: {s.name} | {sign(s)} | - | {cell(s.source)} | {_verified(s.proof)} |")
        for s in entry.busy:
            out.append(f"| {kind} | busy sign: {s.name} | {sign(s)} | - | {cell(s.source)} | {_verified(s.proof)} |")
        for form in entry.approval_forms:
            out.append(f"| {kind} | approval form: {form.name} | {pats(form.patterns)} | approve `{' '.join(form.accept_keys)}`, deny `{' '.join(form.decline_keys)}` | {cell(form.source)} | {_verified(form.proof)} |")
        if entry.exit_command is not None:
            out.append(f"| {kind} | exit command | - | `{entry.exit_command}` then `enter` | {cell(entry.exit_source or '')} | {_verified(entry.exit_proof)} |")
        if entry.plan_mode is not None:
            m = entry.plan_mode
            out.append(f"| {kind} | plan mode | `{cell(m.confirm_text)}` on screen | `{m.key}`, at most {m.max_presses} presses | {cell(m.source)} | {_verified(m.proof)} |")
        if not entry.trust_dialogs and not entry.approval_forms:
            seen = "; none in the real-agents captures" if entry.exit_proof else ""
            out.append(f"| {kind} | no trust dialog, no approval forms known | - | - | herdr 0.8.2 detection manifests: none for {kind}{seen} | {_verified(entry.exit_proof)} |")
        if entry.ready is None:
            out.append(f"| {kind} | no ready sign known: herdr's readiness alone | - | - | - | unverified: no captured real screen shows it |")
    refresh = [
        "",
        "## When an agent releases: refreshing the captures and this table",
        "",
        "The captured screens are not kept in the project (they are large, change with every release, and the real-agents lane re-captures them); the tests that must run everywhere write down short excerpts of the named captures as facts (`tests/orchestrator/test_quirks.py`, `tests/herdr_sim/test_detect.py`, `tests/orchestrator/test_dispatch.py`). To refresh:",
        "",
        "1. Re-capture the kind's screens with the real-agents lane (one file per screen, and `<kind>-index.txt` with the time, the pane title and a note for each).",
        "2. Run `ORCH_REAL_AGENT_SCREENS=<folder> python3 -m pytest tests/orchestrator/test_captured_screens.py`: every capture needs its expected state (simulator and quirk table, with the reason) in the test's table, and every entry's named captures must show it.",
        "3. Where a screen changed, change the entry here (patterns, options, keys, signs), its `Proof` (version and capture names), the simulator's rule (`herdr_sim/detect.py`) and the scripted agent's screen (`herdr_sim/agent/screens.py`); then `ORCH_UPDATE_GOLDEN=1 python3 -m pytest tests/orchestrator/test_quirks.py` rewrites this page.",
        "4. A new kind: an entry in `QUIRKS` with its exit command, dialogs and ready sign (without one, herdr's readiness alone decides when it takes a packet), each with its proof, or left unverified.",
        "",
    ]
    return "\n".join(out + refresh) + "\n"
