"""The `herdr-sim` command: herdr 0.7.5's CLI grammar, envelopes, streams and exit codes, plus server and faults."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Only light modules at import time: --version, --help and usage errors never load the state or the engine.
from herdr_sim import alive, help as helptext, machines, procs, versions
from herdr_sim.errors import ApiError
from herdr_sim.ids import AGENT_NAME_RE, SESSION_RE
from herdr_sim.paths import Paths, resolve_home

if TYPE_CHECKING:
    from herdr_sim.engine import Engine
    from herdr_sim.state import Pane, Store

POLL_S = 0.1
STATUSES = ("idle", "working", "blocked", "done", "unknown")
DEFAULT_UNTIL = ("idle", "done", "blocked")
NAMED_KEYS = {
    "enter": "Enter", "return": "Enter", "esc": "Escape", "escape": "Escape", "tab": "Tab", "backspace": "BSpace",
    "space": "Space", "up": "Up", "down": "Down", "left": "Left", "right": "Right", "home": "Home", "end": "End",
    "pageup": "PPage", "pagedown": "NPage", "delete": "DC", "insert": "IC", "minus": "-", "plus": "+",
    "backtab": "BTab",
}


class Usage(Exception):
    """A usage error: text on stderr, exit 2."""


class Custom(Exception):
    """A parse error herdr reports as Rust's `Error: Custom {…}` with exit 1."""


# Set by a fault that kills the client after the command acted: it dies instead of writing its answer.
_DIE_BEFORE_ANSWER = False


def emit(obj: Any, stream: Any = None) -> None:
    """One compact JSON line, as serde_json writes it."""
    if _DIE_BEFORE_ANSWER and stream in (None, sys.stdout):
        from herdr_sim import faults

        faults.die("after")
    print(json.dumps(obj, separators=(",", ":"), ensure_ascii=False), file=stream or sys.stdout, flush=True)


def tmux_key(key: str) -> str | None:
    """herdr key-combo syntax to a tmux key name; None when herdr would reject it."""
    k = {"C-c": "ctrl+c", "c-c": "ctrl+c", "+": "plus"}.get(key.strip(), key.strip())
    lower = k.lower()
    if lower in NAMED_KEYS:
        return NAMED_KEYS[lower]
    if re.fullmatch(r"f([1-9]|1[0-2])", lower):
        return lower.upper()
    mods = lower.split("+")
    if len(mods) > 1 and all(m in ("ctrl", "alt", "shift") for m in mods[:-1]) and mods[-1]:
        base = mods[-1]
        name = NAMED_KEYS.get(base) or (base if len(base) == 1 else None)
        if name is None:
            return None
        prefix = "".join({"ctrl": "C-", "alt": "M-", "shift": "S-"}[m] for m in mods[:-1])
        return prefix + name
    if len(k) == 1:
        return k
    return None


class Flags:
    """A tiny hand-written flag scanner, like herdr's: values, booleans, repeats, positionals."""

    def __init__(self, args: list[str], values: tuple[str, ...] = (), bools: tuple[str, ...] = (),
                 multi: tuple[str, ...] = ()) -> None:
        self.values: dict[str, str] = {}
        self.bools: set[str] = set()
        self.multi: dict[str, list[str]] = {m: [] for m in multi}
        self.positional: list[str] = []
        i = 0
        while i < len(args):
            arg = args[i]
            if arg in values or arg in multi:
                if i + 1 >= len(args):
                    raise Usage(f"missing value for {arg}")
                if arg in multi:
                    self.multi[arg].append(args[i + 1])
                else:
                    self.values[arg] = args[i + 1]
                i += 2
            elif arg in bools:
                self.bools.add(arg)
                i += 1
            elif arg.startswith("-") and arg != "-":
                raise Usage(f"unknown option: {arg}")
            else:
                self.positional.append(arg)
                i += 1

    def focus(self, default: bool) -> bool:
        if "--focus" in self.bools:
            return True
        if "--no-focus" in self.bools:
            return False
        return default


def parse_env(items: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or "\0" in item:
            raise Usage(f"invalid --env value: {item} (expected KEY=VALUE)")
        env[key] = value
    return env


# Rust's str::parse for unsigned integers: ASCII digits with an optional leading '+', nothing else (no spaces,
# no '_', no other Unicode digits, which Python's isdigit/int would take).
_RUST_UINT = re.compile(r"\+?[0-9]+")
# Rust's str::parse::<f32> for finite values: ASCII decimal with optional sign, fraction and exponent.
_RUST_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_F32_MAX = 3.4028234663852886e38


def rust_uint(value: str, bits: int) -> int | None:
    """herdr's `value.parse::<u32|u64>()` (src/cli.rs:857-867); None where Rust would fail."""
    if not _RUST_UINT.fullmatch(value):
        return None
    number = int(value)
    return number if number < 2**bits else None


def parse_u64(flag: str, value: str) -> int:
    """src/cli.rs:863-867: a parse failure is an io::Error, i.e. `Error: Custom {…}` and exit 1."""
    number = rust_uint(value, 64)
    if number is None:
        raise Custom(f"invalid value for {flag}: {value}")
    return number


def parse_u32(flag: str, value: str) -> int:
    """src/cli.rs:857-861 (`--lines`): like parse_u64, with u32's range."""
    number = rust_uint(value, 32)
    if number is None:
        raise Custom(f"invalid value for {flag}: {value}")
    return number


def parse_timeout(value: str) -> int:
    """src/cli/agent.rs:811-816: agent start/wait/prompt print the parse error and exit 2 (not Custom/1)."""
    number = rust_uint(value, 64)
    if number is None:
        raise Usage(f"invalid value for --timeout: {value}")
    return number


def parse_ratio(value: str) -> float:
    """src/cli/pane.rs:567-579 and :708-720: `parse::<f32>()` and `is_finite()`, else exit 2."""
    number = float(value) if _RUST_FLOAT.fullmatch(value) else math.nan
    if not math.isfinite(number) or abs(number) > _F32_MAX:
        raise Usage(f"invalid ratio: {value}")
    return number


def split_global_flags(args: list[str]) -> tuple[list[str], str | None, str | None]:
    """herdr's argv cleaning before any subcommand parser (src/session.rs:54-78, src/remote.rs:39-119).

    Returns (cleaned args, the last --session value or None, an exit-2 error line or None). Both scans stop at
    `--`; `--handoff` without `--remote` moves to the end; `--remote` with a subcommand is refused by main.rs:472-485.
    """
    cleaned: list[str] = []
    session: str | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            cleaned += args[i:]
            break
        if arg == "--session":
            if i + 1 >= len(args):
                return cleaned, session, "missing value for --session"
            session, i = args[i + 1], i + 2
            continue
        if arg.startswith("--session="):
            session, i = arg.split("=", 1)[1], i + 1
            continue
        cleaned.append(arg)
        i += 1
    out: list[str] = []
    remote: str | None = None
    keybindings = handoff = False
    i = 0
    while i < len(cleaned):
        arg = cleaned[i]
        if arg == "--":
            out += cleaned[i:]
            break
        if arg == "--handoff":
            handoff, i = True, i + 1
            continue
        name, eq, inline = arg.partition("=")
        if name in ("--remote", "--remote-keybindings"):
            if name == "--remote" and remote is not None or name == "--remote-keybindings" and keybindings:
                return out, session, f"{name} can only be specified once"
            if not eq:
                if i + 1 >= len(cleaned):
                    return out, session, f"missing value for {name}"
                inline, i = cleaned[i + 1], i + 2
            else:
                i += 1
            if name == "--remote":
                if not inline or inline.startswith("-"):
                    return out, session, "missing value for --remote" if not inline else "--remote target must not start with '-'"
                remote = inline
            else:
                keybindings = True
            continue
        out.append(arg)
        i += 1
    if remote is None and keybindings:
        return out, session, "--remote-keybindings requires --remote"
    if remote is None and handoff:
        out.append("--handoff")
    if remote is not None and out and not any(a in ("--help", "-h", "--version", "-V", "--default-config") for a in out):
        return out, session, "--remote can only be used with the default launch command"
    return out, session, None


def abspath(value: str) -> str:
    return str(Path(os.path.expanduser(value)).absolute())


class Cli:
    """One invocation: resolves the home, checks the server, runs requests under the state lock."""

    def __init__(self, session: str | None = None, explicit: bool = False) -> None:
        self.paths = Paths(resolve_home())
        self.session_name = session  # herdr's active_name(): None for the default session
        env_socket = os.environ.get("HERDR_SOCKET_PATH")
        # src/session.rs active_api_socket_path: an explicit --session beats HERDR_SOCKET_PATH, which beats the name.
        self.socket = Path(env_socket) if env_socket and not explicit else self.paths.socket_for(session)
        self.explicit = explicit
        self.profile = versions.current()

    @property
    def store(self) -> Store:
        """The state store (imported on first use: only commands that touch state load it)."""
        from herdr_sim.state import Store
        return Store(self.paths)

    def up_at(self, sock: Path) -> bool:
        """herdr's is_running_at: a server answers on this socket (only the running session's socket exists)."""
        return sock.exists() and alive.running(self.paths)

    # ---- plumbing -----------------------------------------------------------------------------

    def server_release(self) -> versions.Release:
        """The running server's release (0.9 DELTA rows 11-12: it may differ from this client's)."""
        try:
            found = versions.parse_release(self.paths.release.read_text())
        except OSError:
            found = None
        return found or versions.Release(self.profile, self.profile.version)

    def require_server(self, rid: str = "cli:request") -> None:
        """No server: 0.7.5's Rust `Error: Os {…}`; 0.8.2+ a JSON `server_not_running` (src/cli/server_not_running.rs:27-40).
        A server this client cannot talk to: `protocol_mismatch` (src/cli.rs ensure_server_protocol_compatible)."""
        if self.socket.exists() and alive.running(self.paths):
            server = self.server_release()
            if not versions.compatible(self.profile, server):
                raise SystemExit(self.error(rid, "protocol_mismatch", self._mismatch(server.profile.protocol)))
            return
        if self.profile.no_server_json:
            # src/cli/server_not_running.rs:42-53: the session's attach command, or plain `herdr` for a socket override.
            own = self.socket == self.paths.socket_for(self.session_name)
            attach = f"herdr session attach {self.session_name}" if own and self.session_name else "herdr"
            raise SystemExit(self.error(rid, "server_not_running",
                                        f"no herdr server is running at {self.socket}; run `{attach}` to start or attach it"))
        if not self.socket.exists():
            raise SystemExit(self._os_error(2, "NotFound", "No such file or directory"))
        raise SystemExit(self._os_error(111, "ConnectionRefused", "Connection refused"))

    def _mismatch(self, server_protocol: int) -> str:
        """src/cli/protocol_guard.rs:16-43 with src/session.rs:121-146's restart guidance (a 0.9 client facing a pre-0.9
        server says the same: 0.9's own message is not documented, docs/simulator.md)."""
        mine = self.profile.protocol
        if mine < server_protocol:
            return f"client protocol {mine} is older than server protocol {server_protocol}; upgrade the Herdr client before using this command"
        if os.environ.get("HERDR_SOCKET_PATH") and not self.explicit:
            restart = f"Run `HERDR_SOCKET_PATH={os.environ['HERDR_SOCKET_PATH']} herdr server stop`, then restart Herdr with the same socket override."
        elif self.session_name:
            restart = f"Run `herdr session stop {self.session_name}`, then run `herdr session attach {self.session_name}` again."
        else:
            restart = "Run `herdr server stop`, then run `herdr` again."
        return (f"client protocol {mine} is newer than server protocol {server_protocol}; restart the Herdr server before using "
                f"this command. Stop the old server to use the new version.\nStopping exits pane processes.\n{restart}")

    @staticmethod
    def _os_error(code: int, kind: str, message: str) -> int:
        print(f'Error: Os {{ code: {code}, kind: {kind}, message: "{message}" }}', file=sys.stderr)
        return 1

    def request(self, req_id: str, command: str, fn: Callable[[Engine], Any], *, quiet: bool = False) -> int:
        """Run fn under the lock and print its result as herdr does (or nothing when quiet)."""
        self.require_server("cli:request" if quiet else req_id)
        from herdr_sim import faults
        from herdr_sim.engine import Engine
        delay = 0
        error: ApiError | None = None
        result: Any = None
        with self.store.transaction() as world:
            # An error still saves: a consumed fault stays consumed, as a failed herdr request stays answered.
            eng = Engine(self.paths, world)
            eng.reconcile()
            fault = faults.take(world, command)
            if fault is not None and fault.delay_ms:
                delay = fault.delay_ms
            try:
                if fault is not None and fault.code:
                    raise ApiError(fault.code, fault.message or f"injected fault for {command}")
                if fault is None or (fault.die != "before" and not fault.hang):
                    result = fn(eng)
            except ApiError as exc:
                error = exc
            if fault is not None and fault.drop_root_pane and isinstance(result, dict):
                result.pop("root_pane", None)
        if fault is not None and fault.hang:
            raise SystemExit(faults.hang(self.paths, self.socket))  # outside the lock: a wedged server blocks no one else's call here
        if fault is not None and fault.die:
            faults.die(fault.die)  # after the world is saved: the fault is used up, and "after" has acted
        if error is not None:
            exc = error
            time.sleep(delay / 1000)
            emit({"id": "cli:request" if quiet else req_id, "error": {"code": exc.code, "message": exc.message}},
                 sys.stderr)
            return 1
        time.sleep(delay / 1000)
        if quiet:
            return 0
        if isinstance(result, str):
            sys.stdout.write(result)
            sys.stdout.flush()
            return 0
        emit({"id": req_id, "result": result})
        return 0

    def error(self, req_id: str, code: str, message: str) -> int:
        emit({"id": req_id, "error": {"code": code, "message": message}}, sys.stderr)
        return 1

    def fire_fault(self, rid: str, command: str) -> int | None:
        """For commands that poll: consume one matching fault before any work; an exit code when it fails the call."""
        from herdr_sim import faults
        with self.store.transaction() as world:
            fault = faults.take(world, command)
        if fault is None:
            return None
        if fault.hang:
            raise SystemExit(faults.hang(self.paths, self.socket))
        if fault.die == "before":
            faults.die("before")
        if fault.die == "after":
            global _DIE_BEFORE_ANSWER
            _DIE_BEFORE_ANSWER = True
        time.sleep((fault.delay_ms or 0) / 1000)
        if fault.code:
            return self.error(rid, fault.code, fault.message or f"injected fault for {command}")
        return None

    def poll(self, fn: Callable[[Engine], Any]) -> Any:
        """One locked look at the world (reconciled first); the caller sleeps outside the lock."""
        from herdr_sim.engine import Engine
        with self.store.transaction() as world:
            eng = Engine(self.paths, world)
            eng.reconcile()
            return fn(eng)

    # ---- groups -------------------------------------------------------------------------------

    def workspace(self, sub: str, args: list[str]) -> int:
        rid = f"cli:workspace:{sub}"
        cmd = f"workspace {sub}"
        if sub == "list":
            if args:
                raise Usage("usage: herdr workspace list")
            return self.request(rid, cmd, lambda e: {"type": "workspace_list", "workspaces": [
                e.workspace_info(w) for w in e.world.workspaces]})
        if sub == "create":
            f = Flags(args, values=("--cwd", "--label"), bools=("--focus", "--no-focus"), multi=("--env",))
            if f.positional:
                raise Usage(f"unknown option: {f.positional[0]}")
            env = parse_env(f.multi["--env"])
            cwd = abspath(f.values["--cwd"]) if "--cwd" in f.values else None

            def create(e: Engine) -> dict[str, Any]:
                ws, tab, pane = e.create_workspace(cwd, f.values.get("--label"), env, f.focus(False))
                return {"type": "workspace_created", "workspace": e.workspace_info(ws), "tab": e.tab_info(tab),
                        "root_pane": e.pane_info(pane)}
            return self.request(rid, cmd, create)
        if sub == "close" and self.profile.workspace_group_close and "--group" in args[1:]:
            args = [a for a in args if a != "--group"]
            return self.by_id("workspace", sub, args, lambda e: (e.resolve_ws, e.close_workspace, e.focus_workspace, e.workspace_info))
        if sub == "close" and self.profile.workspace_group_close:
            return self.by_id("workspace", sub, args, lambda e: (e.resolve_ws, lambda ws: self._close_no_group(e, ws), e.focus_workspace, e.workspace_info))
        if sub in ("get", "close", "focus", "rename"):
            return self.by_id("workspace", sub, args, lambda e: (e.resolve_ws, e.close_workspace, e.focus_workspace, e.workspace_info))
        return self.group_help("workspace", sub)

    def tab(self, sub: str, args: list[str]) -> int:
        rid = f"cli:tab:{sub}"
        cmd = f"tab {sub}"
        if sub == "list":
            f = Flags(args, values=("--workspace",))
            if f.positional:
                raise Usage("usage: herdr tab list [--workspace <workspace_id>]")

            def listing(e: Engine) -> dict[str, Any]:
                spaces = e.world.workspaces
                if "--workspace" in f.values:
                    ws = e.resolve_ws(f.values["--workspace"])
                    if ws is None:
                        raise ApiError("workspace_not_found", f"workspace {f.values['--workspace']} not found")
                    spaces = [ws]
                return {"type": "tab_list", "tabs": [e.tab_info(t) for w in spaces for t in w.tabs]}
            return self.request(rid, cmd, listing)
        if sub == "create":
            f = Flags(args, values=("--workspace", "--cwd", "--label"), bools=("--focus", "--no-focus"),
                      multi=("--env",))
            if f.positional:
                raise Usage(f"unknown option: {f.positional[0]}")
            env = parse_env(f.multi["--env"])
            cwd = abspath(f.values["--cwd"]) if "--cwd" in f.values else None

            def create(e: Engine) -> dict[str, Any]:
                if "--workspace" in f.values:
                    ws = e.resolve_ws(f.values["--workspace"])
                    if ws is None:
                        raise ApiError("workspace_not_found", f"workspace {f.values['--workspace']} not found")
                elif e.world.active_workspace_id:
                    ws = e.ws(e.world.active_workspace_id)
                else:
                    raise ApiError("workspace_not_found", "no active workspace")
                tab, pane = e.create_tab(ws, cwd, f.values.get("--label"), env, f.focus(False))
                return {"type": "tab_created", "tab": e.tab_info(tab), "root_pane": e.pane_info(pane)}
            return self.request(rid, cmd, create)
        if sub in ("get", "close", "focus", "rename"):
            return self.by_id("tab", sub, args, lambda e: (e.resolve_tab, e.close_tab, e.focus_tab, e.tab_info))
        return self.group_help("tab", sub)

    @staticmethod
    def _close_no_group(e: Engine, ws: Any) -> None:
        """0.9 (#2874): a primary workspace with open linked-worktree workspaces closes only with `--group`."""
        if ws.group_parent is None and e.group_members(ws):
            raise ApiError("workspace_group_close_required",
                           f"workspace {ws.workspace_id} has open worktree workspaces; use `workspace close {ws.workspace_id} --group`")
        e.close_workspace(ws)

    def by_id(self, noun: str, sub: str, args: list[str], ops: Callable[[Engine], tuple[Any, Any, Any, Any]]) -> int:
        """`<noun> get|close|focus|rename <id> [label…]`: the same grammar and answers for workspaces and tabs."""
        if not args or (sub != "rename" and len(args) != 1) or (sub == "rename" and len(args) < 2):
            raise Usage(f"usage: herdr {noun} {sub} <{noun}_id>" + (" <label>" if sub == "rename" else ""))

        def act(e: Engine) -> dict[str, Any]:
            resolve, close, focus, info = ops(e)
            found = resolve(args[0])
            if found is None:
                raise ApiError(f"{noun}_not_found", f"{noun} {args[0]} not found")
            if sub == "close":
                close(found)
                return {"type": "ok"}
            if sub == "focus":
                focus(found)
            if sub == "rename":
                found.custom_label = " ".join(args[1:])
            return {"type": f"{noun}_info", noun: info(found)}
        return self.request(f"cli:{noun}:{sub}", f"{noun} {sub}", act)

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

    # ---- agents -------------------------------------------------------------------------------

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
        pane = next((p for p in e.world.panes.values() if p.terminal_id == pin["terminal_id"]), None)
        if pane is None or pane.pane_id != pin["pane_id"] or not e.is_agent(pane):
            return None
        if pin["kind"] and e.effective_label(pane) != pin["kind"]:
            return None
        if pin["name"] and pane.name != pin["name"]:
            return None
        return e.agent_info(pane)

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
                info = self.poll(lambda e: self._observe(e, pin))
                if info is None:
                    return self.error(rid, "agent_not_running", "agent is no longer running in the target pane")
                # 0.9: only an observed working or blocked passes the gate; an unrelated idle/done change does not.
                passes = info["state_change_seq"] > baseline and (
                    not profile.strict_prompt_gate or info["agent_status"] in ("working", "blocked"))
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

    # ---- worktrees ----------------------------------------------------------------------------

    def worktree(self, sub: str, args: list[str]) -> int:
        rid = f"cli:worktree:{sub}"
        cmd = f"worktree {sub}"
        if sub not in ("list", "create", "open", "remove"):
            return self.group_help("worktree", sub)
        from herdr_sim import worktrees
        # Each subcommand has its own flag set (src/cli/worktree.rs:27-283); any other flag is an unknown option.
        values, bools = {
            "list": (("--workspace", "--cwd"), ("--json",)),
            "create": (("--workspace", "--cwd", "--branch", "--base", "--path", "--label"),
                       ("--focus", "--no-focus", "--json")),
            "open": (("--workspace", "--cwd", "--path", "--branch", "--label"), ("--focus", "--no-focus", "--json")),
            "remove": (("--workspace",), ("--force", "--json")),
        }[sub]
        if self.profile.trust_repository:
            bools += ("--trust-repository",)  # 0.9 (#3044): trust the resolved repo path for this one request
        f = Flags(args, values=values, bools=bools)
        if f.positional:
            raise Usage(f"unknown option: {f.positional[0]}")
        if "--workspace" in f.values and "--cwd" in f.values:
            raise Usage("--workspace and --cwd are mutually exclusive")
        cwd = abspath(f.values["--cwd"]) if "--cwd" in f.values else None
        path = abspath(f.values["--path"]) if "--path" in f.values else None
        ws = f.values.get("--workspace")
        if sub == "list":
            return self.request(rid, cmd, lambda e: worktrees.listing(
                e, worktrees.resolve_source(e, ws, cwd, allow_linked=True)))
        if sub == "create":
            return self.request(rid, cmd, lambda e: worktrees.create(
                e, worktrees.resolve_source(e, ws, cwd), f.values.get("--branch"), f.values.get("--base"), path,
                f.values.get("--label"), f.focus(False)))
        if sub == "open":
            if ("--path" in f.values) == ("--branch" in f.values):
                raise Usage("usage: herdr worktree open [--workspace ID | --cwd PATH] (--path PATH | --branch NAME) [--label TEXT] "
                            "[--focus] [--no-focus] [--json]")  # src/cli/worktree.rs:230-235
            return self.request(rid, cmd, lambda e: worktrees.open_(
                e, worktrees.resolve_source(e, ws, cwd), path, f.values.get("--branch"), f.values.get("--label"),
                f.focus(False)))
        if ws is None:
            raise Usage("usage: herdr worktree remove --workspace ID [--force] [--json]")
        return self.request(rid, cmd, lambda e: worktrees.remove(e, ws, "--force" in f.bools))

    # ---- local commands -----------------------------------------------------------------------

    def group_help(self, group: str, sub: str) -> int:
        print(helptext.group_help(group), end="", file=sys.stderr)
        return 0 if sub == "help" else 2

    def status(self, args: list[str]) -> int:
        as_json = "--json" in args
        rest = [a for a in args if a != "--json"]
        if len(rest) > 1 or (rest and rest[0] not in ("server", "client")):
            print("usage: herdr status [server|client] [--json]", file=sys.stderr)
            return 2
        up = self.up_at(self.socket)
        version, protocol = self.profile.version, self.profile.protocol
        client = {"version": version, "channel": "stable", "protocol": protocol,
                  "binary": str(self.paths.bin / "herdr"), "session": self.session_name}
        server = self.server_release()
        fits = versions.compatible(self.profile, server)
        # src/cli/status.rs:296-305: a restart is needed whenever the server's version is not the client's.
        restart = up and server.version != version
        capabilities: dict[str, bool] = {"live_handoff": True, "detached_server_daemon": True}
        if server.profile.negotiates:
            capabilities.update(surface_interest=True, health_check=True)  # 0.9 DELTA row 11 (CM): saved machines need them
        srv: dict[str, Any] = {"status": "running" if up else "not_running", "running": up,
                               "version": server.version if up else None, "protocol": server.profile.protocol if up else None,
                               "capabilities": capabilities if up else None,
                               "compatible": fits if up else None, "socket": str(self.socket),
                               "session": self.session_name, "restart_needed": restart}
        if as_json:
            full = {"client": client, "server": srv, "update": {"restart_needed": restart}}
            emit(full if not rest else full[rest[0]])
            return 0
        lines = []
        if rest != ["server"]:
            lines += ["client:", f"  version: {version}", "  channel: stable", f"  protocol: {protocol}"]
        if not rest:
            lines.append("")
        if rest != ["client"]:
            lines.append("server:")
            if up:
                lines += ["  status: running", f"  version: {server.version}", f"  protocol: {server.profile.protocol}",
                          f"  compatible: {'yes' if fits else 'no'}"]
            else:
                lines.append("  status: not running")
            lines.append(f"  socket: {self.socket}")
        if not rest:
            lines += ["", "update:", f"  restart_needed: {'yes' if restart else 'no'}"]
        print("\n".join(lines))
        return 0

    def session(self, sub: str, args: list[str]) -> int:
        if sub != "list":
            return self.group_help("session", sub)
        if args not in ([], ["--json"]):
            print("usage: herdr session list [--json]", file=sys.stderr)
            return 2
        names: list[str | None] = [None]
        try:
            found = sorted(d.name for d in (self.paths.home / "sessions").iterdir() if d.is_dir())
        except OSError:
            found = []
        names += [n for n in found if n != "default" and SESSION_RE.match(n) and n not in (".", "..")]
        rows = [{"name": name or "default", "default": name is None, "running": self.up_at(self.paths.socket_for(name)),
                 "socket_path": str(self.paths.socket_for(name)), "session_dir": str(self.paths.session_dir(name))}
                for name in names]
        if args:
            emit({"sessions": rows})
        else:
            # src/cli.rs:901-916: a padded table, widths 20/8/48.
            print(f"{'name':<20} {'status':<8} {'directory':<48} socket")
            for row in rows:
                print(f"{row['name']:<20} {'running' if row['running'] else 'stopped':<8} {row['session_dir']:<48} "
                      f"{row['socket_path']}")
        return 0

    def integration(self, sub: str, args: list[str]) -> int:
        """§4: local only; install states come from HERDR_SIM_INTEGRATIONS (docs/simulator.md)."""
        from herdr_sim import integrations
        if sub != "status" or args not in ([], ["--outdated-only"]):
            return self.group_help("integration", sub) if sub != "status" else self._usage_int()
        env = dict(os.environ)
        try:
            if args:
                notice = integrations.outdated_notice(env)
                if notice:
                    print(notice, file=sys.stderr)
            else:
                print("\n".join(integrations.status_lines(env)))
        except ValueError as exc:
            print(f"herdr-sim: {exc}", file=sys.stderr)
            return 2
        return 0

    @staticmethod
    def _usage_int() -> int:
        print("usage: herdr integration status [--outdated-only]", file=sys.stderr)
        return 2

    def api(self, sub: str, args: list[str]) -> int:
        if sub != "schema":
            return self.group_help("api", sub)
        if args not in ([], ["--json"]):
            print("usage: herdr api schema [--json]", file=sys.stderr)
            return 2
        # Real herdr prints the schema embedded in its binary: no server needed (src/cli/api.rs).
        from herdr_sim import schema
        doc = schema.document(self.profile)
        print(json.dumps(doc, indent=None if args else 2, separators=(",", ":") if args else None))
        return 0

    def fault(self, sub: str, args: list[str]) -> int:
        from herdr_sim import faults
        if sub == "add":
            f = Flags(args, values=("--command", "--code", "--message", "--delay-ms", "--times", "--die"),
                      bools=("--drop-root-pane", "--hang"))
            kinds = sum(("--code" in f.values, "--drop-root-pane" in f.bools, "--delay-ms" in f.values, "--die" in f.values,
                         "--hang" in f.bools))
            if f.positional or "--command" not in f.values or kinds != 1 or f.values.get("--die", "before") not in ("before", "after"):
                raise Usage('usage: herdr-sim fault add --command "<group> <sub>" (--code CODE [--message M] | '
                            "--drop-root-pane | --delay-ms N | --die before|after | --hang) [--times N]")
            faults.add(self.paths.home, f.values["--command"], code=f.values.get("--code"),
                       message=f.values.get("--message"), drop_root_pane="--drop-root-pane" in f.bools,
                       delay_ms=int(f.values["--delay-ms"]) if "--delay-ms" in f.values else None,
                       times=int(f.values.get("--times", "1")), die=f.values.get("--die"), hang="--hang" in f.bools)
            return 0
        if sub == "list" and not args:
            for fault in faults.listed(self.paths.home):
                emit(fault.dump())
            return 0
        if sub == "clear" and not args:
            faults.clear(self.paths.home)
            return 0
        raise Usage('usage: herdr-sim fault add|list|clear')


GROUPS = ("workspace", "tab", "pane", "agent", "worktree")


def machine_prefix(args: list[str]) -> tuple[str, list[str]] | str | None:
    """herdr 0.9.1's `--machine <selector>` before the command (0.9 DELTA, multi-machine: src/cli/target.rs at
    b04bda09): (selector, the command's args), an exit-2 error line, or None when there is no prefix."""
    machine: str | None = None
    other = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--machine" or arg.startswith("--machine="):
            if machine is not None:
                return "--machine can only be specified once"
            if arg.startswith("--machine="):
                value = arg.split("=", 1)[1]
            elif i + 1 < len(args):
                i += 1
                value = args[i]
            else:
                return "missing value for --machine"
            if not value.strip() or value.startswith("-"):
                return "--machine requires a saved machine label or profile ID"
            machine = value
        elif arg.startswith("-") and arg != "--":
            other = True
            if arg in ("--session", "--remote", "--remote-keybindings"):
                i += 1  # their value is not the command
        else:
            break
        i += 1
    if machine is None:
        return None
    if other:
        return "--machine cannot be combined with other launch options; it uses the saved machine's session"
    if i >= len(args) or args[i] == "--":
        return "usage: herdr --machine <label-or-id> <command>"
    return machine, args[i:]


# What `--machine` forwards: the API-backed commands (0.9 DELTA, "What is forwarded").
_FORWARDED = {"workspace": None, "worktree": None, "tab": None, "pane": None, "notification": None, "api": ("snapshot",),
              "status": ("server",), "plugin": ("link", "unlink", "enable", "disable", "list", "action", "log", "logs", "pane"),
              "server": ("stop", "reload-config", "agent-manifests", "reload-agent-manifests")}


def machine_command(selector: str, args: list[str]) -> int:
    """A `--machine` call: the command must be one herdr forwards; then the selector must name a saved machine, whose
    simulated server runs it (herdr_sim/machines.py)."""
    command = args[0]
    sub = args[1] if len(args) > 1 else ""
    if command == "agent":
        forwarded = sub != "attach" and not (sub == "explain" and any(a == "--file" or a.startswith("--file=") for a in args[2:]))
    else:
        subs = _FORWARDED.get(command, ())
        forwarded = command in _FORWARDED and (subs is None or sub in subs)
    if not forwarded:
        print(f"error: `{command} {sub}` is not an API-backed machine command; --machine does not run local management "
              "commands or attach a TUI", file=sys.stderr)
        return 2
    long_help = helptext.requested_help(args)
    if long_help is not None:
        print(long_help, end="")
        return 0
    return machines.forward(resolve_home(), selector, args)


def machine_local(args: list[str]) -> int:
    """`herdr machine list|add|status|reconnect` (0.9.0; status and reconnect 0.9.2, 0.9.5 DELTA rows 4-5): local
    commands over this client's saved machine profiles (herdr_sim/machines.py)."""
    return machines.local(resolve_home(), args)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `herdr-sim` (and of `<home>/bin/herdr`)."""
    raw = list(sys.argv[1:] if argv is None else argv)
    try:
        profile = versions.current()
    except versions.UnknownVersion as exc:
        print(f"herdr-sim: {exc}", file=sys.stderr)
        return 2
    if profile.machine_prefix:
        routed = machine_prefix(raw)
        if isinstance(routed, str):
            print(f"error: {routed}", file=sys.stderr)
            return 2
        if routed is not None:
            return machine_command(*routed)
    args, requested, refused = split_global_flags(raw)
    if refused is not None:
        print(f"error: {refused}\nrun 'herdr --help' for usage", file=sys.stderr)
        return 2
    # src/session.rs:80-92: --session is validated; HERDR_SESSION only when HERDR_SOCKET_PATH does not override it.
    check = requested if requested is not None else (
        None if os.environ.get("HERDR_SOCKET_PATH") else os.environ.get("HERDR_SESSION"))
    if check is not None and (not SESSION_RE.match(check) or check in (".", "..")):
        print(f"error: invalid session name: {check}\nrun 'herdr --help' for usage", file=sys.stderr)
        return 2
    name = requested if requested is not None else os.environ.get("HERDR_SESSION")
    session = name if name and name != "default" and SESSION_RE.match(name) and name not in (".", "..") else None
    if not args:
        print("herdr-sim: the interactive TUI is not simulated; use a subcommand", file=sys.stderr)
        return 2
    top, rest = args[0], args[1:]
    if top in ("--version", "-V"):
        print(f"herdr {profile.version}")
        return 0
    if top in ("--help", "-h"):
        print(helptext.main_help(profile.no_session_launch), end="")
        return 0
    if top.startswith("-") and top != "--":
        # src/main.rs:750-769: a launch option starts the TUI; any other option is refused (0.9 removed --no-session).
        if top in ("--handoff", "--default-config") or (top == "--no-session" and profile.no_session_launch):
            print("herdr-sim: the interactive TUI is not simulated; use a subcommand", file=sys.stderr)
            return 2
        print(f"unknown option: {top}\nrun 'herdr --help' for usage", file=sys.stderr)
        return 2
    long_help = helptext.requested_help(args)
    if long_help is not None:
        print(long_help, end="")  # clap prints it before any dispatch (src/cli.rs:76-78)
        return 0
    cli = Cli(session, explicit=requested is not None)
    try:
        if top == "server":
            from herdr_sim import server
            if rest == ["stop"]:
                return server.stop_server(cli.paths)
            if rest:
                raise Usage("usage: herdr-sim server [--session NAME] | herdr-sim server stop")
            return server.serve(cli.paths, session)
        if top == "status":
            return cli.status(rest)
        if top == "machine" and profile.machine_status:
            return machine_local(rest)
        if top in ("session", "integration", "api", "fault", *GROUPS):
            if not rest:
                if top == "fault":
                    raise Usage("usage: herdr-sim fault add|list|clear")
                return cli.group_help(top, "")
            sub, sub_args = rest[0], rest[1:]
            return int(getattr(cli, top)(sub, sub_args))
        print(f"unknown command: {top}\nrun 'herdr --help' for usage", file=sys.stderr)
        return 2
    except Usage as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except Custom as exc:
        print(f'Error: Custom {{ kind: Other, error: "{exc}" }}', file=sys.stderr)
        return 1
    except SystemExit as exc:
        return int(exc.code or 0)
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
