"""`herdr agent …`: list, get, explain, start, wait, prompt, read, send-keys and the rest of the agent noun."""

from __future__ import annotations

import shlex
import sys
import time
from typing import TYPE_CHECKING, Any

from herdr_sim.commands.base import DEFAULT_UNTIL, POLL_S, STATUSES, Flags, Usage, emit, parse_timeout
from herdr_sim import procs
from herdr_sim.errors import ApiError
from herdr_sim.ids import AGENT_NAME_RE

if TYPE_CHECKING:
    from herdr_sim.engine import Engine
    from herdr_sim.state import Pane


class AgentCommands:
    """The agent noun."""

    def agent(self, sub: str, args: list[str]) -> int:
        rid = f"cli:agent:{sub}"
        cmd = f"agent {sub}"
        if sub == "list":
            if args:
                raise Usage("usage: herdr agent list")
            return self.request(rid, cmd, lambda e: {"type": "agent_list", "agents": [
                e.agent_info(e.world.panes[p]) for w in e.world.workspaces for p in e.ws_panes(w)
                if e.is_agent(e.world.panes[p])]})
        if sub in ("get", "focus"):
            if len(args) != 1:
                raise Usage(f"usage: herdr agent {sub} <target>")

            def get(e: Engine) -> dict[str, Any]:
                pane = e.agent_target(args[0])
                if sub == "focus":
                    e.focus_pane(pane)
                return {"type": "agent_info", "agent": e.agent_info(pane)}
            return self.request(rid, cmd, get)
        if sub == "read":
            target, source, lines, ansi = self.parse_read(args, agent=True)
            return self.request(rid, cmd, lambda e: self.read_text(e, e.agent_target(target), source, lines, ansi))
        if sub == "send-keys":
            if len(args) < 2:
                raise Usage("usage: herdr agent send-keys <target> <key> [key ...]")

            def keys(e: Engine) -> dict[str, Any]:
                pane = self.promptable(e, args[0])
                e.tmux.send_keys(pane.tmux, self.map_keys(args[1:]))
                return {"type": "ok"}
            return self.request(rid, cmd, keys)
        if sub == "rename":
            if len(args) != 2:
                raise Usage("usage: herdr agent rename <target> <name>|--clear")

            def rename(e: Engine) -> dict[str, Any]:
                pane = e.agent_target(args[0])
                if pane.launch_kind:
                    raise ApiError("agent_launch_pending", f"agent {args[0]} has a pending launch")
                if args[1] == "--clear":
                    pane.name = None
                else:
                    self.check_name(e, args[1], pane)
                    pane.name = args[1]
                pane.revision += 1
                return {"type": "agent_info", "agent": e.agent_info(pane)}
            return self.request(rid, cmd, rename)
        if sub == "start":
            return self.agent_start(args)
        if sub == "prompt":
            return self.agent_prompt(args)
        if sub == "wait":
            return self.agent_wait(args)
        if sub == "explain":
            f = Flags(args, values=("--format",), bools=("--json", "--verbose", "-v"))
            if len(f.positional) != 1:
                raise Usage("usage: herdr agent explain <target> [--json]")
            if f.values.get("--format", "text") not in ("text", "json"):
                # src/cli/agent.rs:68-82
                raise Usage(f"invalid --format: {f.values['--format']} (expected text or json)")
            as_json = "--json" in f.bools or f.values.get("--format") == "json"
            self.require_server(rid)
            if (failed := self.fire_fault(rid, "agent explain")) is not None:
                return failed
            try:
                explained = self.poll(lambda e: self.explain(e, f.positional[0]))
            except ApiError as exc:
                return self.error(rid, exc.code, exc.message)
            text = explained.pop("_text")
            if as_json:
                emit(explained)
            else:
                sys.stdout.write(text)
            return 0
        return self.group_help("agent", sub)

    def explain(self, e: Engine, target: str) -> dict[str, Any]:
        """src/app/api/agents.rs:174-243: full-lifecycle hook authority skips the screen; no known label is
        agent_explain_unavailable; otherwise the screen rules (herdr_sim.detect) over a fresh capture."""
        from herdr_sim import detect
        pane = e.agent_target(target)
        full = pane.hook_source == f"herdr:{pane.hook_agent}" and pane.hook_agent in ("pi", "opencode")
        label = e.effective_label(pane)
        kind = procs.parse_kind(label) if label else None
        if full:
            doc = {"agent": label, "state": pane.state, "matched_rule": None, "screen_detection_skipped": True,
                   "screen_detection_skip_reason": "full_lifecycle_hook_authority", "evaluated_rules": []}
            doc["_text"] = (f"agent: {label}\nstate: {pane.state}\nmanifest: none unknown\nrule: none\n"
                            "screen_detection_skip_reason: full_lifecycle_hook_authority\n")
        elif kind is None and pane.detected is None:
            raise ApiError("agent_explain_unavailable", f"agent target {target} does not have a detected agent label")
        else:
            screen = "\n".join(e.tmux.capture(pane.tmux, history=False, joined=False, ansi=False))
            found = detect.explain(kind or pane.detected or "", screen, detect.app_title(e.tmux.titles().get(pane.tmux, "")),
                                   codex_unknown=e.profile.codex_unknown_ready)
            doc = found.to_json()
            doc["_text"] = found.text()
        return doc

    def check_name(self, e: Engine, name: str, own: Pane | None) -> None:
        if not AGENT_NAME_RE.match(name):
            raise ApiError("invalid_agent_name", f"invalid agent name {name}: expected [a-z][a-z0-9_-]{{0,31}}")
        taken = [p for p in e.world.panes.values() if p.name == name and p is not own]
        if taken:
            cands = " ".join(f"terminal_id={p.terminal_id} pane_id={p.pane_id}" for p in taken)
            raise ApiError("agent_name_taken", f"agent name {name} is already used; candidates: {cands}")

    def promptable(self, e: Engine, target: str) -> Pane:
        """§8.2: a built-in kind, no pending launch, and that kind in the pane's foreground job."""
        pane = e.agent_target(target)
        label = e.effective_label(pane)
        kind = procs.parse_kind(label) if label else None
        if kind is None:
            raise ApiError("agent_not_ready", f"agent {target} is not an active named agent")
        if pane.launch_kind:
            raise ApiError("agent_not_ready", f"agent {target} is still launching")
        if procs.detect(pane.shell_pid) != kind:
            raise ApiError("agent_not_ready", f"agent {target} is no longer the pane foreground process")
        return pane

    def agent_start(self, args: list[str]) -> int:
        usage = "usage: herdr agent start <name> --kind KIND --pane ID [--timeout MS] [-- <agent-args...>]"
        if not args:
            raise Usage(usage)
        name = args[0]
        sep = args.index("--") if "--" in args else len(args)
        extra = args[sep + 1:]
        f = Flags(args[1:sep], values=("--kind", "--pane", "--timeout"))
        if f.positional:
            raise Usage(f"unknown option: {f.positional[0]}")
        timeout = parse_timeout(f.values["--timeout"]) if "--timeout" in f.values else None
        if "--kind" not in f.values:
            raise Usage("missing required --kind")
        if "--pane" not in f.values:
            raise Usage("missing required --pane")
        kind = procs.parse_kind(f.values["--kind"])
        if kind is None:
            raise Usage(f"unsupported interactive agent kind: {f.values['--kind']}")
        pane_raw = f.values["--pane"]
        rid = "cli:agent:start"
        argv = [procs.EXECUTABLE.get(kind, kind), *extra]

        def start(e: Engine) -> dict[str, Any]:
            if not AGENT_NAME_RE.match(name):
                raise ApiError("invalid_agent_name", f"invalid agent name {name}: expected [a-z][a-z0-9_-]{{0,31}}")
            self.check_name(e, name, None)
            if any(ord(c) < 32 or ord(c) == 127 for a in extra for c in a):
                raise ApiError("invalid_agent_argument", "agent arguments cannot be encoded safely for the target shell")
            if timeout is not None and not 3000 < timeout <= 300000:
                raise ApiError("invalid_agent_timeout",  # src/app/agents.rs:244-248
                               "agent start timeout must be greater than 3000ms and at most 300000ms")
            pane = e.world.panes.get(pane_raw)
            if pane is None:
                raise ApiError("agent_pane_not_found", f"pane {pane_raw} not found")
            if e.is_agent(pane) or pane.launch_kind or not procs.shell_at_prompt(pane.shell_pid):
                raise ApiError("agent_pane_busy", f"pane {pane_raw} is not an idle shell")
            e.tmux.send_literal(pane.tmux, shlex.join(argv))
            e.tmux.send_keys(pane.tmux, ["Enter"])
            pane.name = name
            pane.launch_kind = kind
            pane.launch_typed_at = e.now
            pane.launch_deadline = e.now + (timeout or 30000) / 1000
            launch_deadline.append(pane.launch_deadline)
            pane.revision += 1
            return {"type": "agent_started", "agent": e.agent_info(pane), "argv": argv}
        launch_deadline: list[float] = []  # the server's own deadline for this launch (wall clock)
        self.require_server(rid)
        if (failed := self.fire_fault(rid, "agent start")) is not None:
            return failed
        busy_until = time.monotonic() + self.profile.start_busy_retry_ms / 1000
        while True:
            try:
                started = self.poll(start)
                break
            except ApiError as exc:
                # 0.8.2 (#2410, src/cli/agent.rs:336-404): agent_pane_busy is retried for 2 s while the pane's
                # shell is still starting (not yet at its prompt, nothing else in the foreground).
                starting = exc.code == "agent_pane_busy" and self.poll(lambda e: self._shell_starting(e, pane_raw))
                if not starting or time.monotonic() >= busy_until:
                    return self.error(rid, exc.code, exc.message)
                time.sleep(POLL_S)
        deadline = time.monotonic() + (timeout or 30000) / 1000
        terminal = started["agent"]["terminal_id"]

        def check(e: Engine) -> tuple[str, Any]:
            pane = next((p for p in e.world.panes.values() if p.terminal_id == terminal), None)
            if pane is None:
                return "err", ("agent_start_failed", "agent process exited before becoming interactive")
            detected = pane.detected or (procs.parse_kind(pane.hook_agent) if pane.hook_agent else None)
            if detected and detected != kind:
                return "err", ("agent_kind_mismatch", f"expected {kind}, detected {detected}")
            if pane.name != name:
                # The server frees the name at its launch deadline: that is a timeout, anything earlier is not.
                if pane.launch_kind is None and not pane.interactive_ready and e.now < launch_deadline[0]:
                    return "err", ("agent_name_not_found", f"named agent {name} no longer owns the target terminal")
                return "err", ("timeout", "timed out waiting for agent startup")
            if pane.interactive_ready:
                return "ok", e.agent_info(pane)
            if self.profile.start_blocked_not_ready and e.status(pane) == "blocked" and pane.launch_kind:
                # v0.8.2 src/cli/agent.rs:589-612: the name stays, the CLI gives up on the launch.
                return "err", ("agent_not_ready", f"agent {name} is blocked during startup and is not ready for prompts")
            return "wait", None
        while True:
            status, value = self.poll(check)
            if status == "ok":
                started["agent"] = value
                emit({"id": rid, "result": started})
                return 0
            if status == "err":
                return self.error(rid, *value)
            if time.monotonic() >= deadline:
                return self.error(rid, "timeout", "timed out waiting for agent startup")
            time.sleep(POLL_S)

    @staticmethod
    def _shell_starting(e: Engine, raw: str) -> bool:
        pane = e.world.panes.get(raw)
        return pane is not None and not e.is_agent(pane) and procs.foreground(pane.shell_pid) == [pane.shell_pid] \
            and not procs.shell_at_prompt(pane.shell_pid)

    def parse_until(self, values: list[str]) -> tuple[str, ...]:
        for value in values:
            if value not in STATUSES:
                raise Usage(f"invalid agent status: {value}")
        return tuple(values) or DEFAULT_UNTIL

    def agent_wait(self, args: list[str]) -> int:
        if not args or args[0].startswith("--"):
            raise Usage("usage: herdr agent wait <target> [--until STATUS]... [--timeout MS]")
        f = Flags(args[1:], values=("--timeout",), multi=("--until",))
        if f.positional:
            raise Usage(f"unknown option: {f.positional[0]}")
        until = self.parse_until(f.multi["--until"])
        timeout = parse_timeout(f.values["--timeout"]) if "--timeout" in f.values else None
        rid = "cli:agent:wait"
        self.require_server(rid)
        if (failed := self.fire_fault(rid, "agent wait")) is not None:
            return failed
        try:
            pin = self.poll(lambda e: self._pin(e, args[0]))
        except ApiError as exc:
            return self.error(rid, exc.code, exc.message)
        deadline = None if timeout is None else time.monotonic() + timeout / 1000
        return self._wait_status(rid, args[0], pin, until, deadline, baseline=None)

    def _pin(self, e: Engine, target: str) -> dict[str, Any]:
        pane = e.agent_target(target)
        return {"terminal_id": pane.terminal_id, "pane_id": pane.pane_id,
                "name": pane.name if target == pane.name else None,
                "kind": e.effective_label(pane), "seq": pane.state_change_seq, "status": e.status(pane)}

    def _observe(self, e: Engine, pin: dict[str, Any]) -> dict[str, Any] | None:
        """The pinned agent's current info, or None when it is no longer running there."""
        pane = self._pinned(e, pin)
        return None if pane is None else e.agent_info(pane)

    def _active_seq(self, e: Engine, pin: dict[str, Any]) -> int:
        """The seq of the pinned agent's last change to working or blocked (0: none, or it is gone)."""
        pane = self._pinned(e, pin)
        return 0 if pane is None else pane.active_seq

    def _pinned(self, e: Engine, pin: dict[str, Any]) -> Pane | None:
        """The pinned agent's pane, or None when it is no longer running there."""
        pane = next((p for p in e.world.panes.values() if p.terminal_id == pin["terminal_id"]), None)
        if pane is None or pane.pane_id != pin["pane_id"] or not e.is_agent(pane):
            return None
        if pin["kind"] and e.effective_label(pane) != pin["kind"]:
            return None
        if pin["name"] and pane.name != pin["name"]:
            return None
        return pane

    def _wait_status(self, rid: str, target: str, pin: dict[str, Any], until: tuple[str, ...],
                     deadline: float | None, baseline: int | None, result_type: str = "agent_info") -> int:
        while True:
            info = self.poll(lambda e: self._observe(e, pin))
            if info is None:
                return self.error(rid, "agent_not_running", "agent is no longer running in the target pane")
            if info["agent_status"] in until and (baseline is None or info["state_change_seq"] > baseline):
                emit({"id": rid, "result": {"type": result_type, "agent": info}})
                return 0
            if deadline is not None and time.monotonic() >= deadline:
                return self.error(rid, "timeout", "timed out waiting for agent status")
            time.sleep(POLL_S)

    def agent_prompt(self, args: list[str]) -> int:
        usage = "usage: herdr agent prompt <target> <text> [--wait] [--until STATUS]... [--timeout MS]"
        if len(args) < 2:
            raise Usage(usage)
        target, text = args[0], args[1]
        f = Flags(args[2:], values=("--timeout",), bools=("--wait",), multi=("--until",))
        if f.positional:
            raise Usage(f"unknown option: {f.positional[0]}")
        wait = "--wait" in f.bools
        # herdr checks --until first, then --timeout (src/cli/agent.rs:691-698).
        if not wait and f.multi["--until"]:
            raise Usage("--until requires --wait")
        if not wait and "--timeout" in f.values:
            raise Usage("--timeout requires --wait")
        until = self.parse_until(f.multi["--until"])
        timeout = parse_timeout(f.values["--timeout"]) if "--timeout" in f.values else None
        rid = "cli:agent:prompt"

        profile = self.profile
        enter_later = profile.enter_after_answer_ms
        called = time.monotonic()

        def prompt(e: Engine) -> dict[str, Any]:
            pane = e.agent_target(target)
            if not text:
                raise ApiError("empty_agent_prompt", "agent prompt text must not be empty")
            if profile.prompt_refuses_blocked and e.status(pane) == "blocked":
                # v0.8.2 src/app/api/agents.rs:82-91 (#2788): nothing is written to an agent at a dialog.
                raise ApiError("agent_blocked", f"agent {target} is blocked and requires interactive input")
            pane = self.promptable(e, target)
            pin = self._pin(e, target)
            e.world.prompt_counter += 1
            e.tmux.paste(pane.tmux, text, f"herdr-sim-{e.world.prompt_counter}")
            if enter_later is None:
                e.tmux.send_keys(pane.tmux, ["Enter"])
            return {"pin": pin, "agent": e.agent_info(pane), "tmux": pane.tmux}
        self.require_server(rid)
        if (failed := self.fire_fault(rid, "agent prompt")) is not None:
            return failed
        try:
            done = self.poll(prompt)
        except ApiError as exc:
            return self.error(rid, exc.code, exc.message)
        if enter_later is not None:
            # 0.8.2 answers first and writes Enter 300 ms later (src/app/api/agents.rs:13, ~121-126, #1878).
            procs.send_keys_later(self.paths.tmux_socket, done["tmux"], ["Enter"], enter_later)
        if not wait:
            emit({"id": rid, "result": {"type": "agent_prompted", "agent": done["agent"]}})
            return 0
        pin = done["pin"]
        # 0.9 (#3506, #3685): the caller's timeout includes the submission; before, it started after it.
        start = called if profile.strict_prompt_gate else time.monotonic()
        deadline = None if timeout is None else start + timeout / 1000
        baseline = pin["seq"]
        if pin["status"] != "working":
            gate = time.monotonic() + min(timeout if timeout is not None else 5000, 5000) / 1000
            while True:
                info, active_seq = self.poll(lambda e: (self._observe(e, pin), self._active_seq(e, pin)))
                if info is None:
                    return self.error(rid, "agent_not_running", "agent is no longer running in the target pane")
                # 0.9: only an observed working or blocked passes the gate; an unrelated idle/done change does not.
                # herdr sees every event, so one that came and went since the submission counts (Pane.active_seq).
                passes = info["state_change_seq"] > baseline and (
                    not profile.strict_prompt_gate or info["agent_status"] in ("working", "blocked") or active_seq > baseline)
                if passes:
                    if info["agent_status"] in until:
                        emit({"id": rid, "result": {"type": "agent_prompted", "agent": info}})
                        return 0
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    return self.error(rid, "timeout", "timed out waiting for agent status")
                if time.monotonic() >= gate:
                    if timeout is not None and timeout <= 5000:
                        return self.error(rid, "timeout", "timed out waiting for agent status")
                    return self.error(rid, "agent_prompt_stalled",
                                      "agent prompt produced no observed state change within 5000 ms; status is "
                                      f"{info['agent_status']} and state_change_seq remained {baseline}")
                time.sleep(POLL_S)
            return self._wait_status(rid, target, pin, until, deadline, None, "agent_prompted")
        return self._wait_status(rid, target, pin, until, deadline, baseline, "agent_prompted")
