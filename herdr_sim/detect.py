"""Screen detection like herdr's: per-kind rules over regions of an agent's screen and terminal title decide its state.

The facts (which texts real agents show, in which part of the screen, and which state they mean) come from herdr
0.8.2's detection manifests and their tests (`src/detect/manifests/*.toml`, `src/detect/manifest/tests.rs`); the
rules here are our own, and cover only what the scripted agents and orch rely on. Standard library only.
"""

from __future__ import annotations

import json
import re
import socket
from dataclasses import dataclass, field
from typing import Any

BRAILLE_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
MANIFEST_VERSION = "herdr-sim.1"
FALLBACK = "default_known_agent_idle_fallback"
# 0.9.5 DELTA row 10 (0.9.3): a codex screen no rule matches is `unknown`, not idle (the reason's name is ours).
CODEX_FALLBACK = "codex_no_matching_rule_unknown"
# A newly detected agent is left unknown this long before its screen is read (src/pane/agent_detection.rs:11-12).
STARTUP_GRACE_S = 3.0


@dataclass(frozen=True)
class Gate:
    """A matcher: every `contains` (case-insensitive), `regex` and `line_regex`, all `every`, one of `one_of`, none of `none_of`."""

    contains: tuple[str, ...] = ()
    regex: tuple[str, ...] = ()
    line_regex: tuple[str, ...] = ()
    every: tuple[Gate, ...] = ()
    one_of: tuple[Gate, ...] = ()
    none_of: tuple[Gate, ...] = ()

    def matches(self, text: str) -> bool:
        """Whether the region text satisfies this gate."""
        lower = text.lower()
        if not all(needle.lower() in lower for needle in self.contains):
            return False
        if not all(re.search(pattern, text) for pattern in self.regex):
            return False
        lines = text.splitlines()
        if not all(any(re.search(pattern, line) for line in lines) for pattern in self.line_regex):
            return False
        if not all(gate.matches(text) for gate in self.every):
            return False
        if self.one_of and not any(gate.matches(text) for gate in self.one_of):
            return False
        return not any(gate.matches(text) for gate in self.none_of)


@dataclass(frozen=True)
class Rule:
    """One detection rule: the state it means, its priority (highest match wins), the region it reads, its gate."""

    id: str
    state: str
    priority: int
    region: str
    gate: Gate
    visible: bool = False  # a visible idle prompt, blocker or working indicator (herdr's visible_* flags)
    skip_update: bool = False  # an overlay (a transcript viewer): keep the previous state


@dataclass(frozen=True)
class Explained:
    """What detection concluded for one screen: the state, the winning rule (None: the idle fallback), every rule's verdict."""

    agent: str
    state: str
    rule: Rule | None
    evaluated: tuple[tuple[Rule, bool, str], ...] = field(default=())

    fallback: str = FALLBACK

    @property
    def visible_blocker(self) -> bool:
        return self.rule is not None and self.rule.visible and self.state == "blocked"

    def to_json(self) -> dict[str, Any]:
        """herdr's `agent explain --json` object (src/detect/manifest.rs explain_to_json_value)."""
        rule = self.rule
        return {
            "agent": self.agent,
            "state": self.state,
            "manifest_source": "bundled",
            "manifest_version": MANIFEST_VERSION,
            "cached_remote_version": None,
            "local_override_shadowing_remote": False,
            "remote_update_status": None,
            "remote_update_error": None,
            "matched_rule": None if rule is None else {"id": rule.id, "priority": rule.priority, "region": rule.region, "state": rule.state},
            "visible_idle": rule is not None and rule.visible and self.state == "idle",
            "visible_blocker": self.visible_blocker,
            "visible_working": rule is not None and rule.visible and self.state == "working",
            "screen_detection_skipped": False,
            "skip_state_update": rule is not None and rule.skip_update,
            "skipped_update_reason": f"matched_rule:{rule.id}" if rule is not None and rule.skip_update else None,
            "fallback_reason": self.fallback if rule is None else None,
            "warning": None,
            "evaluated_rules": [
                {"id": r.id, "priority": r.priority, "region": r.region, "state": r.state, "matched": matched,
                 "evidence": {"region_bytes": len(text.encode()), "region_preview": preview(text)}}
                for r, matched, text in self.evaluated
            ],
        }  # fmt: skip

    def text(self) -> str:
        """herdr's plain `agent explain` lines (src/cli/agent.rs print_agent_explain_text)."""
        lines = [f"agent: {self.agent}", f"state: {self.state}", f"manifest: bundled {MANIFEST_VERSION}"]
        if self.rule is None:
            lines += ["rule: none", f"fallback_reason: {self.fallback}"]
        else:
            lines.append(f"rule: {self.rule.id} (region={self.rule.region} priority={self.rule.priority})")
            evidence = next(text for r, _, text in self.evaluated if r is self.rule)
            lines.append(f"evidence: {json.dumps(preview(evidence), ensure_ascii=False)}")  # Rust's {:?} of a string
        return "\n".join(lines) + "\n"


def preview(text: str, limit: int = 160) -> str:
    """A bounded preview of a region, as herdr shows in explain evidence."""
    return text if len(text) <= limit else text[:limit] + "..."


# --- regions (herdr's names; src/detect/manifest.rs `region`) ---


def _is_rule_line(line: str) -> bool:
    """A horizontal rule: a line of box-drawing dashes (three or more when followed by a label)."""
    stripped = line.strip()
    dashes = len(stripped) - len(stripped.lstrip("─"))
    return dashes > 0 and (not stripped[dashes:].strip() or dashes >= 3)


def _is_prompt_marker(line: str) -> bool:
    return line == "›" or line.startswith("› ")


def region(name: str, screen: str, title: str) -> str:
    """The text of one named region of the screen (or the terminal title)."""
    if name == "osc_title":
        return title
    lines = screen.splitlines()
    if name == "whole_recent":
        return screen
    if name == "after_last_horizontal_rule":
        rules = [i for i, line in enumerate(lines) if _is_rule_line(line)]
        return "\n".join(lines[rules[-1] + 1 :]) if rules else screen
    if name == "after_last_prompt_marker":
        markers = [i for i, line in enumerate(lines) if _is_prompt_marker(line)]
        return "\n".join(lines[markers[-1] + 1 :]) if markers else screen
    if name == "prompt_box_body":
        rules = [i for i, line in enumerate(lines) if _is_rule_line(line)]
        if len(rules) < 2:
            return ""
        return "\n".join(lines[rules[-2] + 1 : rules[-1]])
    match = re.fullmatch(r"(top|bottom)_non_empty_lines\((\d+)\)", name)
    if match:
        count = int(match.group(2))
        filled = [i for i, line in enumerate(lines) if line.strip()]
        if not filled:
            return ""
        if match.group(1) == "top":
            return "\n".join(lines[: filled[: count][-1] + 1])
        return "\n".join(lines[filled[-count:][0] :])
    raise ValueError(f"unknown region {name}")


# --- the rules per kind ---

_YES_LINE = Gate(one_of=(Gate(line_regex=(r"(?i)^\s*❯?\s*1\.\s*yes\b",)), Gate(line_regex=(r"(?i)^\s*2\.\s*no\b",))))

RULES: dict[str, tuple[Rule, ...]] = {
    # Claude Code: the title's first character spins while busy (braille, half circles from 2.1.228) and is ✳ when
    # idle, but only with TMUX unset in its environment; forms end with "Esc to cancel" after the form's top rule
    # (changelog 0.8.2 #2268). From real screens (claude 2.1.328, ../shared/real-agents): notices a turn waits on
    # end "Enter to continue · Esc to cancel", the auto-mode question has no footer at all, and the footer under the
    # prompt box says "esc to interrupt" while a turn runs (the only busy sign on screen when the title stays ✳).
    "claude": (
        Rule("title_spinner", "working", 1100, "osc_title", Gate(regex=(r"^[\u2800-\u28ff\u25d0-\u25d3] ",)), visible=True),
        Rule("confirm_form", "blocked", 980, "after_last_horizontal_rule", visible=True, gate=Gate(
            contains=("esc to cancel",),
            one_of=(
                Gate(contains=("enter to confirm",)),
                Gate(contains=("enter to continue",)),
                Gate(contains=("enter to select",), one_of=(Gate(contains=("arrow keys to navigate",)), Gate(contains=("↑/↓ to navigate",)))),
            ),
        )),
        Rule("auto_mode_question", "blocked", 980, "after_last_horizontal_rule", visible=True,
             gate=Gate(contains=("make auto mode your default permission mode?",))),
        Rule("interrupt_footer", "working", 960, "bottom_non_empty_lines(1)", visible=True,
             gate=Gate(line_regex=(r"·\s*esc to interrupt\s*$",))),
        Rule("prompt_box", "idle", 950, "prompt_box_body", visible=True, gate=Gate(
            line_regex=(r"^\s*❯",), none_of=(Gate(contains=("esc to cancel",)), Gate(contains=("enter to select",))))),
        Rule("permission_prompt", "blocked", 840, "after_last_horizontal_rule", visible=True,
             gate=Gate(contains=("do you want to proceed?", "esc to cancel"), every=(_YES_LINE,))),
        Rule("title_idle", "idle", 250, "osc_title", Gate(regex=("^\u2733 ",)), visible=True),
    ),
    # codex: a braille spinner word in the title while busy, "Action Required" when waiting; the first-run trust
    # dialog is at the top of a fresh screen; approval forms follow the last `›` line.
    "codex": (
        Rule("title_action_required", "blocked", 1100, "osc_title", Gate(contains=("Action Required",)), visible=True),
        Rule("title_spinner", "working", 1050, "osc_title", Gate(regex=(rf"(?:^| )[{BRAILLE_SPINNER}](?: |$)",)), visible=True),
        Rule("trust_directory", "blocked", 950, "top_non_empty_lines(20)", visible=True, gate=Gate(
            regex=(r"\A> You are in [^\n]+", r"Do\s+you\s+trust\s+the\s+contents\s+of\s+this\s+directory\?"))),
        # codex 0.169's trust dialog (../shared/real-agents codex-19), and its sign-in chooser without a provider.
        Rule("trust_folder", "blocked", 950, "top_non_empty_lines(20)", visible=True, gate=Gate(
            line_regex=(r"^\s*Folder access\s*$",), contains=("trust this folder?", "enter continue"))),
        Rule("sign_in", "blocked", 940, "whole_recent", visible=True, gate=Gate(contains=("welcome to codex", "press enter to continue"))),
        Rule("approval_form", "blocked", 900, "after_last_prompt_marker", visible=True, gate=Gate(one_of=(
            Gate(contains=("press enter to confirm or esc to cancel",)), Gate(contains=("allow command?",))))),
        Rule("yes_no_question", "blocked", 600, "whole_recent", Gate(one_of=(Gate(contains=("[y/n]",)), Gate(contains=("yes (y)",))))),
        Rule("working_line", "working", 500, "bottom_non_empty_lines(3)", visible=True,
             gate=Gate(line_regex=(r"^[•◦]\s+Working \([^)]*esc to interrupt\)",), none_of=(Gate(contains=("■ Conversation interrupted",)),))),
        Rule("title_idle", "idle", 100, "osc_title", visible=True,
             gate=Gate(regex=(r"\S",), none_of=(Gate(regex=(rf"(?:^| )[{BRAILLE_SPINNER}](?: |$)",)), Gate(contains=("Action Required",))))),
    ),
    # opencode: a "Permission required" box; under the input while busy a progress bar and "esc interrupt" (no "to"
    # in opencode 1.18, ../shared/real-agents opencode-4; older releases said "esc to interrupt").
    "opencode": (
        Rule("permission_required", "blocked", 300, "whole_recent", Gate(contains=("△ Permission required",)), visible=True),
        Rule("interrupt_hint", "working", 110, "whole_recent", visible=True,
             gate=Gate(one_of=(Gate(contains=("esc to interrupt",)), Gate(contains=("esc interrupt",))))),
        Rule("progress_bar", "working", 100, "whole_recent", Gate(regex=(r"(■|⬝){4,}",)), visible=True),
    ),
    # pi: a "Working..." line while busy; no approval forms at all.
    "pi": (Rule("working_line", "working", 100, "whole_recent", Gate(contains=("Working...",)), visible=True),),
}


def app_title(title: str) -> str:
    """The title an application set: tmux shows the host name until one does (herdr's OSC title is then empty)."""
    return "" if title == socket.gethostname() else title


def explain(kind: str, screen: str, title: str = "", *, codex_unknown: bool = False) -> Explained:
    """Evaluate every rule of the kind; the highest-priority match wins, else the known-agent idle fallback (for
    codex from 0.9.3, ``codex_unknown``: `unknown`)."""
    evaluated: list[tuple[Rule, bool, str]] = []
    best: Rule | None = None
    for rule in RULES.get(kind, ()):
        text = region(rule.region, screen, title)
        matched = rule.gate.matches(text)
        evaluated.append((rule, matched, text))
        if matched and (best is None or rule.priority > best.priority):
            best = rule
    if best is None and codex_unknown and kind == "codex":
        return Explained(agent=kind, state="unknown", rule=None, evaluated=tuple(evaluated), fallback=CODEX_FALLBACK)
    return Explained(agent=kind, state=best.state if best else "idle", rule=best, evaluated=tuple(evaluated))
