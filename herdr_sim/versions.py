"""The herdr releases the simulator plays (HERDR_SIM_VERSION): what each does differently, one field per DELTA row."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

ENV = "HERDR_SIM_VERSION"
# 0.9 DELTA rows 11-12: the server a client talks to may run another release (read by `herdr-sim server` at start).
SERVER_ENV = "HERDR_SIM_SERVER_VERSION"


@dataclass(frozen=True)
class Profile:
    """One herdr release as the simulator plays it; every field cites the DELTA row it comes from."""

    name: str  # what HERDR_SIM_VERSION selects it by
    version: str  # `herdr --version`, `status --json` client and server version
    protocol: int  # 0.8.2 DELTA row 1 (src/protocol/wire.rs:16); 0.9 DELTA row 11 (third-party: 22)
    # 0.8.2 row 2: a socket command with no server prints a JSON `server_not_running` error instead of `Error: Os`.
    no_server_json: bool
    # 0.8.2 row 3: `integration status` can say `needs repair (vN)` (src/cli/integration.rs:50-56).
    needs_repair: bool
    # 0.8.2 row 4: `agent prompt` to a blocked agent is refused with `agent_blocked` (src/app/api/agents.rs:82-91).
    prompt_refuses_blocked: bool
    # 0.8.2 row 5: Enter follows the text 300 ms after the answer (src/app/api/agents.rs:13); 0.9 row 1: before it.
    enter_after_answer_ms: int | None
    # 0.8.2 row 6: blocked at start-up keeps the name and answers `agent_not_ready` (src/cli/agent.rs:589-612).
    start_blocked_not_ready: bool
    # 0.8.2 row 6: the CLI retries `agent_pane_busy` for 2 s while a new pane's shell starts (#2410).
    start_busy_retry_ms: int
    # 0.8.2 row 7: `send-keys shift+tab` reaches the agent as Shift+Tab (0.7.5 drops Shift: plain Tab).
    shift_tab: bool
    # 0.8.2 row 8: reading `recent` of an idle alternate-screen agent scrolls its viewport (seconds).
    alt_screen_scroll: bool
    # 0.8.2 row 9: the headless terminal size (#2828).
    width: int
    height: int
    # 0.8.2 row 10: `pane layout --current` resolves the caller (HERDR_PANE_ID), not the UI-focused pane (#2297).
    current_is_caller: bool
    # 0.8.2 row 11: `tab close` of a workspace's last tab closes the workspace (or `confirmation_required`).
    last_tab_closes_workspace: bool
    # 0.8.2 row 12: read results carry `truncated` (#1717).
    read_truncated_field: bool
    # 0.9 row 2: `agent prompt --wait` needs observed `working`/`blocked` and the timeout includes submission.
    strict_prompt_gate: bool
    # 0.9 row 5: `pane report-agent` options may come before the pane id, and `--option=value` is accepted.
    report_agent_any_order: bool
    # 0.9 row 6: worktree commands take `--trust-repository`.
    trust_repository: bool
    # 0.9 row 8: `workspace close` of a primary with open worktree workspaces needs `--group`.
    workspace_group_close: bool
    # 0.9 row 16: new panes get TERM_PROGRAM=herdr and TERM_PROGRAM_VERSION.
    term_program: bool
    # 0.9 row 10: `herdr --no-session` (single-process mode) is gone: an unknown option.
    no_session_launch: bool
    # 0.9 multi-machine (0.9.1, PR #3918): `herdr --machine <selector> <command>` routes to a saved machine.
    machine_prefix: bool
    # 0.9 row 11: capability negotiation instead of equal protocols; a pre-0.9 server needs a one-time upgrade.
    negotiates: bool
    # 0.8.2 "Unchanged": `api schema` gains workspace.move_block (0.8.0) and pane.input.set (0.8.2).
    extra_methods: tuple[str, ...]
    # 0.9.5 row 1 (0.9.2): agent info carries `completion_seq`, a per-agent count of finished turns.
    completion_seq: bool = False
    # 0.9.5 row 2 (0.9.2): pane info carries `restore_error` when a pane could not be restored after a restart.
    restore_error: bool = False
    # 0.9.5 rows 4-5 (0.9.2): `herdr machine status [<label-or-id>] [--json]` and `machine reconnect <label-or-id>`.
    machine_status: bool = False
    # 0.9.5 row 6 (0.9.2): `pane report-agent[-session] … -- RESUME_ARG…` records the command that resumes the session.
    resume_command: bool = False
    # 0.9.5 row 10 (0.9.3): `agent start` counts a codex agent that is `unknown` but interactive-ready as ready.
    codex_unknown_ready: bool = False
    # 0.9.5 row 12 (0.9.2): new panes lose inherited Claude Code, Codex and terminal session markers.
    strips_session_markers: bool = False


V075 = Profile(
    name="0.7.5", version="0.7.5", protocol=17, no_server_json=False, needs_repair=False, prompt_refuses_blocked=False,
    enter_after_answer_ms=None, start_blocked_not_ready=False, start_busy_retry_ms=0, shift_tab=False,
    alt_screen_scroll=False, width=80, height=24, current_is_caller=False, last_tab_closes_workspace=False,
    read_truncated_field=False, strict_prompt_gate=False, report_agent_any_order=False, trust_repository=False,
    workspace_group_close=False, term_program=False, no_session_launch=True, machine_prefix=False,
    negotiates=False, extra_methods=(),
)  # fmt: skip
V082 = Profile(
    name="0.8.2", version="0.8.2", protocol=20, no_server_json=True, needs_repair=True, prompt_refuses_blocked=True,
    enter_after_answer_ms=300, start_blocked_not_ready=True, start_busy_retry_ms=2000, shift_tab=True,
    alt_screen_scroll=True, width=120, height=40, current_is_caller=True, last_tab_closes_workspace=True,
    read_truncated_field=True, strict_prompt_gate=False, report_agent_any_order=False, trust_repository=False,
    workspace_group_close=False, term_program=False, no_session_launch=True, machine_prefix=False,
    negotiates=False, extra_methods=("workspace.move_block", "pane.input.set"),
)  # fmt: skip
# 0.9.x: where its docs are silent the profile keeps 0.8.2's behaviour (docs/simulator.md lists those rows).
V09 = Profile(
    name="0.9", version="0.9.1", protocol=22, no_server_json=True, needs_repair=True, prompt_refuses_blocked=True,
    enter_after_answer_ms=None, start_blocked_not_ready=True, start_busy_retry_ms=2000, shift_tab=True,
    alt_screen_scroll=True, width=120, height=40, current_is_caller=True, last_tab_closes_workspace=True,
    read_truncated_field=True, strict_prompt_gate=True, report_agent_any_order=True, trust_repository=True,
    workspace_group_close=True, term_program=True, no_session_launch=False, machine_prefix=True,
    negotiates=True, extra_methods=("workspace.move_block", "pane.input.set"),
)  # fmt: skip

# 0.9.2-0.9.5 (../herdr-0.9.5/DELTA.md): 0.9.1 plus the additive fields, `machine status`, resume commands and codex
# readiness; where that DELTA is silent the profile keeps 0.9.1's behaviour (docs/simulator.md lists those rows).
V095 = replace(
    V09, name="0.9.5", version="0.9.5", completion_seq=True, restore_error=True, machine_status=True,
    resume_command=True, codex_unknown_ready=True, strips_session_markers=True,
)

PROFILES: dict[str, Profile] = {p.name: p for p in (V075, V082, V09, V095)}
NEWEST = V095


class UnknownVersion(ValueError):
    """HERDR_SIM_VERSION names no profile."""


def current(env: Mapping[str, str] | None = None) -> Profile:
    """The profile HERDR_SIM_VERSION selects (unset or empty: the newest)."""
    raw = (os.environ if env is None else env).get(ENV, "").strip()
    if not raw:
        return NEWEST
    profile = PROFILES.get(raw) or PROFILES.get({"0.9.1": "0.9", "0.9.x": "0.9"}.get(raw, ""))
    if profile is None:
        raise UnknownVersion(f"invalid {ENV}: {raw} (expected one of {', '.join(PROFILES)})")
    return profile


@dataclass(frozen=True)
class Release:
    """What a running server plays: a profile's behaviour under the version number it reports."""

    profile: Profile
    version: str

    def dump(self) -> str:
        return f"{self.profile.name} {self.version}\n"


def _numbers(text: str) -> tuple[int, ...] | None:
    parts = text.split(".")
    return tuple(int(p) for p in parts) if len(parts) == 3 and all(p.isdigit() for p in parts) else None


def server_release(env: Mapping[str, str] | None = None) -> Release:
    """HERDR_SIM_SERVER_VERSION: unset or empty, the client's own release; a profile name; or any X.Y.Z from 0.9.0
    on, played under that number as the 0.9 profile (0.9.0-0.9.1) or the 0.9.5 one (0.9.2 and later: a server left
    running across a client update, or a newer one)."""
    env = os.environ if env is None else env
    raw = env.get(SERVER_ENV, "").strip()
    if not raw:
        own = current(env)
        return Release(own, own.version)
    profile = PROFILES.get(raw)
    if profile is not None:
        return Release(profile, profile.version)
    numbers = _numbers(raw)
    if numbers is None or numbers < (0, 9, 0):
        raise UnknownVersion(f"invalid {SERVER_ENV}: {raw} (expected one of {', '.join(PROFILES)}, or a version from 0.9.0 on)")
    return Release(V09 if numbers < (0, 9, 2) else V095, raw)


def parse_release(text: str) -> Release | None:
    """A running server's release as `Release.dump` wrote it; None when unreadable."""
    name, _, version = text.strip().partition(" ")
    profile = PROFILES.get(name)
    return Release(profile, version) if profile is not None and version else None


def compatible(client: Profile, server: Release) -> bool:
    """Whether this client may talk to that server: 0.7.5 and 0.8.2 need equal protocols (src/cli/protocol_guard.rs);
    0.9 negotiates capabilities with servers of endpoint generation 1 (0.9 DELTA row 11), i.e. 0.9 and later."""
    if client.negotiates:
        return server.profile.negotiates
    return client.protocol == server.profile.protocol
