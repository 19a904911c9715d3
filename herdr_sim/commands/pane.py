"""`herdr pane …`: list, get, current, split, run, send-text/keys, read, wait-output, close, report-agent, move."""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Any

from herdr_sim.commands.base import (
    POLL_S, Custom, Flags, Usage, abspath, emit, parse_env, parse_ratio, parse_u32, parse_u64, tmux_key,
)
from herdr_sim.errors import ApiError

if TYPE_CHECKING:
    from herdr_sim.engine import Engine
    from herdr_sim.state import Pane


class PaneCommands:
    """The pane noun (and the reads agent commands share)."""

    def pane_or_error(self, e: Engine, raw: str, message: str | None = None) -> Pane:
        pane = e.resolve_pane(raw)
        if pane is None:
            raise ApiError("pane_not_found", message or "pane not found")
        return pane

    def read_text(self, e: Engine, pane: Pane, source: str, lines: int | None, ansi: bool) -> str:
        return self.read(e, pane, source, lines, ansi)[0]

    def read(self, e: Engine, pane: Pane, source: str, lines: int | None, ansi: bool) -> tuple[str, bool]:
        """The text of a read and whether older rows were left out (0.8.0's `truncated`, #1717)."""
        history = source in ("recent", "recent-unwrapped")
        rows = e.tmux.capture(pane.tmux, history=history, joined=source == "recent-unwrapped", ansi=ansi)
        while rows and not rows[-1].strip():
            rows.pop()
        total = len(rows)
        if history:
            rows = rows[-min(lines or 80, 1000):]
        elif lines is not None:
            rows = rows[-lines:] if lines else []
        if history and self.profile.alt_screen_scroll and e.status(pane) in ("idle", "done") and e.is_agent(pane) \
                and e.tmux.alternate_on(pane.tmux):
            # 0.8.x collects an idle alternate-screen agent's history by scrolling its viewport
            # (v0.8.2 src/server/headless.rs:3397-3454): reads take seconds. HERDR_SIM_ALT_READ_MS sets the cost.
            time.sleep(int(os.environ.get("HERDR_SIM_ALT_READ_MS", "1500")) / 1000)
        return "\n".join(rows) + ("\n" if rows else ""), len(rows) < total

    def parse_read(self, args: list[str], agent: bool) -> tuple[str, str, int | None, bool]:
        # src/cli/pane.rs:443-496, src/cli/agent.rs:725-774: the first word is the target whatever it looks like;
        # every later word must be an option (`pane read --source recent P` reads pane "--source" and fails).
        if not args:
            raise Usage(f"usage: herdr {'agent' if agent else 'pane'} read <{'target' if agent else 'pane_id'}>"
                        " [--source visible|recent|recent-unwrapped] [--lines N] [--format text|ansi] [--ansi]")
        f = Flags(args[1:], values=("--source", "--lines", "--format"), bools=("--ansi", "--raw") if not agent
                  else ("--ansi",))
        if f.positional:
            raise Usage(f"unknown option: {f.positional[0]}")
        f.positional = [args[0]]
        # src/cli.rs:810-820: `recent_unwrapped` is accepted as an alias.
        source = {"recent_unwrapped": "recent-unwrapped"}.get(f.values.get("--source", "recent"),
                                                              f.values.get("--source", "recent"))
        if source not in ("visible", "recent", "recent-unwrapped", "detection"):
            raise Custom(f"invalid read source: {source}")
        lines = parse_u32("--lines", f.values["--lines"]) if "--lines" in f.values else None
        fmt = f.values.get("--format", "text")
        if fmt not in ("text", "ansi"):
            raise Custom(f"invalid read format: {fmt}")
        ansi = fmt == "ansi" or bool(f.bools & {"--ansi", "--raw"})
        return f.positional[0], "visible" if source == "detection" else source, lines, ansi

    def pane(self, sub: str, args: list[str]) -> int:
        rid = f"cli:pane:{sub}"
        cmd = f"pane {sub}"
        if sub == "list":
            f = Flags(args, values=("--workspace",))
            if f.positional:
                raise Usage("usage: herdr pane list [--workspace <workspace_id>]")

            def listing(e: Engine) -> dict[str, Any]:
                spaces = e.world.workspaces
                if "--workspace" in f.values:
                    ws = e.resolve_ws(f.values["--workspace"])
                    if ws is None:
                        raise ApiError("workspace_not_found", f"workspace {f.values['--workspace']} not found")
                    spaces = [ws]
                return {"type": "pane_list", "panes": [e.pane_info(e.world.panes[p]) for w in spaces
                                                       for p in e.ws_panes(w)]}
            return self.request(rid, cmd, listing)
        if sub == "get":
            if len(args) != 1:
                raise Usage("usage: herdr pane get <pane_id>")
            return self.request(rid, cmd, lambda e: {"type": "pane_info", "pane": e.pane_info(
                self.pane_or_error(e, args[0], f"pane {args[0]} not found"))})
        if sub in ("current", "layout"):
            f = Flags(args, values=("--pane",), bools=("--current",))
            if f.positional or ("--pane" in f.values and "--current" in f.bools):
                raise Usage(f"usage: herdr pane {sub} [--pane ID|--current]")
            # 0.8.2 (#2297, src/cli/pane.rs:227-250): `layout --current` is the caller too, not the UI-focused pane.
            caller = sub == "current" or (self.profile.current_is_caller and "--current" in f.bools)
            own = os.environ.get("HERDR_PANE_ID", "").strip() if caller else ""

            def where(e: Engine) -> dict[str, Any]:
                raw = f.values.get("--pane") or own
                if raw:
                    pane = self.pane_or_error(e, raw)
                else:
                    ws_id = e.world.active_workspace_id
                    tab = e.tab(e.ws(ws_id).active_tab_id or "") if ws_id else None
                    if tab is None or tab.focused_pane_id is None:
                        raise ApiError("pane_not_found", "pane not found")
                    pane = e.world.panes[tab.focused_pane_id]
                if sub == "current":
                    return {"type": "pane_current", "pane": e.pane_info(pane)}
                return {"type": "pane_layout", "layout": e.layout(e.tab_of(pane))}
            return self.request(rid, cmd, where)
        if sub == "split":
            positional = args[0] if args and not args[0].startswith("--") else None
            f = Flags(args[1:] if positional else args, values=("--pane", "--direction", "--ratio", "--cwd"),
                      bools=("--current", "--focus", "--no-focus"), multi=("--env",))
            if f.positional:
                raise Usage(f"unknown option: {f.positional[0]}")
            direction = f.values.get("--direction")
            if direction is None:
                raise Usage("usage: herdr pane split [<pane_id>|--pane ID|--current] --direction right|down [--ratio FLOAT] "
                            "[--cwd PATH] [--env KEY=VALUE] [--focus] [--no-focus]")  # src/cli/pane.rs:607-611
            if direction not in ("right", "down"):
                raise Usage(f"invalid split direction: {direction}")
            ratio = parse_ratio(f.values["--ratio"]) if "--ratio" in f.values else 0.5
            env = parse_env(f.multi["--env"])
            cwd = abspath(f.values["--cwd"]) if "--cwd" in f.values else None
            raw = positional or f.values.get("--pane") or os.environ.get("HERDR_PANE_ID", "").strip()

            def split(e: Engine) -> dict[str, Any]:
                if raw:
                    source = self.pane_or_error(e, raw)
                else:
                    ws_id = e.world.active_workspace_id
                    tab = e.tab(e.ws(ws_id).active_tab_id or "") if ws_id else None
                    if tab is None or tab.focused_pane_id is None:
                        raise ApiError("pane_not_found", "pane not found")
                    source = e.world.panes[tab.focused_pane_id]
                new = e.split(source, direction, min(max(ratio, 0.1), 0.9), cwd, env, f.focus(False))
                return {"type": "pane_info", "pane": e.pane_info(new)}
            return self.request(rid, cmd, split)
        if sub == "move":
            return self.pane_move(args)
        if sub == "read":
            target, source, lines, ansi = self.parse_read(args, agent=False)
            return self.request(rid, cmd, lambda e: self.read_text(e, self.pane_or_error(e, target), source, lines,
                                                                   ansi))
        if sub in ("send-text", "run"):
            if len(args) < 2:
                raise Usage(f"usage: herdr pane {sub} <pane_id> <{'text' if sub == 'send-text' else 'command'}>")
            text = " ".join(args[1:])

            def send(e: Engine) -> None:
                pane = self.pane_or_error(e, args[0])
                if sub == "send-text":
                    e.tmux.send_literal(pane.tmux, text)
                else:
                    e.world.prompt_counter += 1
                    e.tmux.paste(pane.tmux, text, f"herdr-sim-{e.world.prompt_counter}")
                    e.tmux.send_keys(pane.tmux, ["Enter"])
            return self.request(rid, cmd, send, quiet=True)
        if sub == "send-keys":
            if len(args) < 2:
                raise Usage("usage: herdr pane send-keys <pane_id> <key> [key ...]")

            def keys(e: Engine) -> None:
                pane = self.pane_or_error(e, args[0])
                e.tmux.send_keys(pane.tmux, self.map_keys(args[1:]))
            return self.request(rid, cmd, keys, quiet=True)
        if sub == "close":
            if len(args) != 1:
                raise Usage("usage: herdr pane close <pane_id>")

            def close(e: Engine) -> dict[str, Any]:
                e.close_pane(self.pane_or_error(e, args[0]))
                return {"type": "ok"}
            return self.request(rid, cmd, close)
        if sub == "rename":
            if len(args) < 2:
                raise Usage("usage: herdr pane rename <pane_id> <label>|--clear")

            def rename(e: Engine) -> dict[str, Any]:
                pane = self.pane_or_error(e, args[0])
                pane.label = None if args[1:] == ["--clear"] else " ".join(args[1:])
                pane.revision += 1
                return {"type": "pane_info", "pane": e.pane_info(pane)}
            return self.request(rid, cmd, rename)
        if sub in ("report-agent", "release-agent") or (sub == "report-agent-session" and self.profile.resume_command):
            return self.pane_report(sub, args)
        if sub == "wait-output":
            return self.wait_output(args)
        return self.group_help("pane", sub)

    def map_keys(self, keys: list[str]) -> list[str]:
        mapped = []
        for key in keys:  # every key is checked before any is sent
            name = tmux_key(key)
            if name is None:
                raise ApiError("invalid_key", f"unsupported key {key}")
            if name == "S-Tab":
                # v0.7.5 src/config/keybinds.rs:1232-1235, src/pane/input.rs:16,208: Shift is dropped, a plain Tab goes
                # out; 0.8.2 (commit adb50cba, #1561) sends a real Shift+Tab, which tmux calls BTab (it would type
                # "S-Tab" literally).
                name = "BTab" if self.profile.shift_tab else "Tab"
            mapped.append(name)
        return mapped

    def pane_report(self, sub: str, args: list[str]) -> int:
        usage = (f"usage: herdr pane {sub} <pane_id> --source ID --agent LABEL"
                 + (" --state idle|working|blocked|unknown" if sub == "report-agent" else ""))
        values = ("--source", "--agent", "--seq") + (
            ("--state", "--message", "--agent-session-id", "--agent-session-path") if sub == "report-agent" else
            ("--agent-session-id", "--agent-session-path", "--session-start-source") if sub == "report-agent-session" else ())
        resume: list[str] | None = None
        if self.profile.resume_command and sub != "release-agent" and "--" in args:
            # 0.9.5 row 6 (0.9.2): `-- RESUME_ARG…`, the command that resumes the session after a restart; it starts
            # with a plain command name.
            at = args.index("--")
            args, resume = args[:at], args[at + 1:]
            if not resume or resume[0].startswith("-") or "/" in resume[0] or not resume[0].strip():
                raise Usage("the resume command must start with a plain command name")
        if self.profile.report_agent_any_order:
            # 0.9 (#2926): options may come before the pane id, and `--option=value` is accepted.
            split: list[str] = []
            for arg in args:
                name, eq, value = arg.partition("=")
                split += [name, value] if eq and name in values else [arg]
            f = Flags(split, values=values)
            if len(f.positional) != 1:
                raise Usage(usage if not f.positional else f"unknown option: {f.positional[1]}")
            args = f.positional
        else:
            if not args or args[0].startswith("--"):
                raise Usage(usage)
            f = Flags(args[1:], values=values)
            if f.positional:
                raise Usage(f"unknown option: {f.positional[0]}")
        if sub == "report-agent" and "--state" in f.values and f.values["--state"] not in (
                "idle", "working", "blocked", "unknown"):
            raise Custom(f"invalid pane agent state: {f.values['--state']} "
                         "(expected idle, working, blocked, or unknown)")
        seq = parse_u64("--seq", f.values["--seq"]) if "--seq" in f.values else None
        for required in ("--source", "--agent") + (("--state",) if sub == "report-agent" else ()):
            if required not in f.values:
                raise Usage(f"missing required {required}")

        def report(e: Engine) -> None:
            pane = self.pane_or_error(e, args[0])
            if not f.values["--agent"].strip():
                raise ApiError("invalid_agent", "agent label must not be empty")
            if sub == "report-agent":
                e.report(pane, f.values["--source"], f.values["--agent"], f.values["--state"], seq,
                         f.values.get("--agent-session-id"), f.values.get("--agent-session-path"))
            elif sub == "report-agent-session":
                e.report_session(pane, f.values["--source"], f.values["--agent"], seq,
                                 f.values.get("--agent-session-id"), f.values.get("--agent-session-path"))
            else:
                e.release(pane, f.values["--source"], f.values["--agent"])
            if resume is not None:
                pane.resume_command = resume
        return self.request("cli:request", f"pane {sub}", report, quiet=True)

    MOVE_USAGE = ("usage: herdr pane move <pane_id> --tab <tab_id> --split right|down [--target-pane ID] "
                  "[--ratio FLOAT] [--focus|--no-focus]\n"
                  "       herdr pane move <pane_id> --new-tab [--workspace ID] [--label TEXT] [--focus|--no-focus]\n"
                  "       herdr pane move <pane_id> --new-workspace [--label TEXT] [--tab-label TEXT] "
                  "[--focus|--no-focus]")

    def pane_move(self, args: list[str]) -> int:
        """§7 move: the client checks the flag combination (src/cli/pane.rs:649-796), the server moves."""
        if not args or args[0].startswith("-"):
            raise Usage(self.MOVE_USAGE)
        values: dict[str, str] = {}
        bools: set[str] = set()
        focus = True  # on by default for pane move; the last of --focus/--no-focus wins
        i = 1
        while i < len(args):
            arg = args[i]
            if arg in ("--tab", "--workspace", "--target-pane", "--split", "--ratio", "--label", "--tab-label"):
                if i + 1 >= len(args):
                    raise Usage(f"missing value for {arg}")
                value = args[i + 1]
                if arg == "--split" and value not in ("right", "down"):
                    raise Usage(f"invalid split direction: {value}")
                if arg == "--ratio":
                    parse_ratio(value)
                values[arg] = value
                i += 2
            elif arg in ("--new-tab", "--new-workspace"):
                bools.add(arg)
                i += 1
            elif arg in ("--focus", "--no-focus"):
                focus = arg == "--focus"
                i += 1
            else:
                raise Usage(f"unknown option: {arg}")
        if ("--tab" in values) + len(bools) != 1:
            raise Usage(self.MOVE_USAGE)
        if "--tab" in values:
            if "--split" not in values or values.keys() & {"--workspace", "--label", "--tab-label"}:
                raise Usage(self.MOVE_USAGE)
            dest: dict[str, Any] = {"kind": "tab", "tab": values["--tab"], "split": values["--split"],
                                    "target": values.get("--target-pane"),
                                    "ratio": float(values.get("--ratio", "0.5"))}
        elif "--new-tab" in bools:
            if values.keys() & {"--split", "--target-pane", "--tab-label"}:
                raise Usage(self.MOVE_USAGE)
            dest = {"kind": "new_tab", "workspace": values.get("--workspace"), "label": values.get("--label")}
        else:
            if values.keys() & {"--split", "--target-pane", "--workspace"}:
                raise Usage(self.MOVE_USAGE)
            dest = {"kind": "new_workspace", "label": values.get("--label"), "tab_label": values.get("--tab-label")}
        return self.request("cli:pane:move", "pane move",
                            lambda e: {"type": "pane_move", "move_result": e.move_pane(args[0], dest, focus)})

    def wait_output(self, args: list[str]) -> int:
        if not args or args[0].startswith("--"):
            raise Usage("usage: herdr pane wait-output <pane_id> (--match TEXT | --regex PATTERN)")
        f = Flags(args[1:], values=("--match", "--regex", "--source", "--lines", "--timeout"), bools=("--raw",))
        if f.positional:
            raise Usage(f"unknown option: {f.positional[0]}")
        if ("--match" in f.values) == ("--regex" in f.values):
            raise Usage("pane wait-output requires exactly one of --match or --regex")
        source = f.values.get("--source", "recent")
        if source not in ("visible", "recent", "recent-unwrapped"):
            raise Custom(f"invalid read source: {source}")
        lines = parse_u32("--lines", f.values["--lines"]) if "--lines" in f.values else None
        timeout = parse_u64("--timeout", f.values["--timeout"]) if "--timeout" in f.values else None
        rid = "cli:pane:wait-output"
        pattern = None
        if "--regex" in f.values:
            try:
                pattern = re.compile(f.values["--regex"])
            except re.error as exc:
                self.require_server(rid)
                return self.error(rid, "invalid_regex", f"invalid regex: {exc}")
        self.require_server(rid)
        if (failed := self.fire_fault(rid, "pane wait-output")) is not None:
            return failed
        deadline = None if timeout is None else time.monotonic() + timeout / 1000
        while True:
            try:
                found = self.poll(lambda e: self._match(e, args[0], source, lines, "--raw" in f.bools,
                                                        f.values.get("--match"), pattern))
            except ApiError as exc:
                return self.error(rid, exc.code, exc.message)
            if found is not None:
                emit({"id": rid, "result": found})
                return 0
            if deadline is not None and time.monotonic() >= deadline:
                return self.error(rid, "timeout", "timed out waiting for output match")
            time.sleep(POLL_S)

    def _match(self, e: Engine, raw: str, source: str, lines: int | None, ansi: bool, needle: str | None,
               pattern: re.Pattern[str] | None) -> dict[str, Any] | None:
        pane = self.pane_or_error(e, raw)
        text, truncated = self.read(e, pane, source, lines, ansi)
        for line in text.split("\n"):
            if (needle is not None and needle in line) or (pattern is not None and pattern.search(line)):
                read = {"pane_id": pane.pane_id, "workspace_id": pane.workspace_id, "tab_id": pane.tab_id,
                        "source": source, "format": "ansi" if ansi else "text", "text": text, "revision": 0,
                        # 0.7.5 always says false (src/app/api/panes.rs:1189-1203); 0.8.0 tells the truth (#1717).
                        "truncated": truncated and self.profile.read_truncated_field}
                return {"type": "output_matched", "pane_id": pane.pane_id, "revision": pane.revision,
                        "matched_line": line, "read": read}
        return None
