"""What every herdr noun's commands share: flag parsing, herdr's JSON envelopes and exit codes, a request under the
state lock, and injected faults."""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Only light modules at import time: --version, --help and usage errors never load the state or the engine.
from herdr_sim import alive, help as helptext, versions
from herdr_sim.errors import ApiError
from herdr_sim.paths import Paths, resolve_home

if TYPE_CHECKING:
    from herdr_sim.engine import Engine
    from herdr_sim.state import Store

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


def abspath(value: str) -> str:
    return str(Path(os.path.expanduser(value)).absolute())


class CliBase:
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

    def group_help(self, group: str, sub: str) -> int:
        print(helptext.group_help(group), end="", file=sys.stderr)
        return 0 if sub == "help" else 2
