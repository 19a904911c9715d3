"""The simulated herdr server: a foreground process owning the private tmux server and a reconcile loop."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from pathlib import Path

from herdr_sim import forks, procs, versions
from herdr_sim.alive import pid_alive, running, server_pid
from herdr_sim.engine import Engine
from herdr_sim.paths import UNIX_PATH_MAX, Paths
from herdr_sim.state import Store
from herdr_sim.tmux import Tmux

__all__ = ["pid_alive", "running", "serve", "server_pid", "stop_server", "teardown", "write_bin"]

AGENT_SCRIPTS = ("codex", "claude", "opencode", "pi", "gemini", "cursor-agent", "amp", "droid")
RECONCILE_S = 0.2


def write_bin(paths: Paths, zygote: bool = False) -> None:
    """`herdr` and one executable per agent kind, all running this interpreter (`herdr` the zygote's client if asked)."""
    paths.bin.mkdir(parents=True, exist_ok=True)
    # HERDR_SIM_AGENT_MODULE lets a test substitute its own scripted agent for herdr_sim.agent.
    module = os.environ.get("HERDR_SIM_AGENT_MODULE", "herdr_sim.agent")
    # The herdr CLI needs only the standard library: `-S` skips site (site-packages, .pth hooks such as editable
    # finders), ~45 ms of CPU per call; the simulator's own root goes on the path instead (after any PYTHONPATH).
    root = str(Path(__file__).resolve().parent.parent)
    # (herdr_sim.forks.run_call: herdr_sim.cli.main, logging each call when HERDR_SIM_CALL_LOG names a file.)
    herdr = f"import os\nsys.path.append({root!r})\nfrom herdr_sim.forks import run_call\nraise SystemExit(run_call(sys.argv, os.getppid()))\n"
    scripts = {"herdr": (f"#!{sys.executable} -S\n", herdr)}
    if zygote:
        del scripts["herdr"]
        forks.write_client(paths.bin / "herdr", sys.executable, root, paths.calls_socket)
    for kind in AGENT_SCRIPTS:
        label = procs.parse_kind(kind) or kind
        scripts[kind] = (f"#!{sys.executable}\n", f'from {module} import main\nmain("{label}")\n')
    # Every herdr call is a fresh interpreter: with PYTHONDONTWRITEBYTECODE set, each one compiled the simulator's
    # sources again (~0.1 s of CPU per call). Let it keep the usual __pycache__ beside them (gitignored, written
    # atomically, invalidated by source mtime); behaviour is unchanged.
    cache = "import sys\nsys.dont_write_bytecode = False\n"
    for name, (shebang, body) in scripts.items():
        target = paths.bin / name
        target.write_text(f"{shebang}{cache}{body}")
        target.chmod(0o755)


def serve(paths: Paths, session: str | None) -> int:
    """Run the server in the foreground until SIGTERM/SIGINT, then tear everything down."""
    if running(paths):
        print(f"herdr-sim: a server is already running for {paths.home}", file=sys.stderr)
        return 1
    paths.home.mkdir(parents=True, exist_ok=True)
    sock = paths.socket_for(session)
    sock.parent.mkdir(parents=True, exist_ok=True)
    try:
        release = versions.server_release()
    except versions.UnknownVersion as exc:
        print(f"herdr-sim: {exc}", file=sys.stderr)
        return 2
    for stale in (paths.ready, paths.socket, sock, paths.state, paths.release):
        stale.unlink(missing_ok=True)
    paths.marker.write_text("herdr-sim\n")
    os.environ["HERDR_SIM_HOME"] = str(paths.home)
    # HERDR_SIM_FORKSERVER=1: every `herdr` call is forked from a warm zygote (herdr_sim.forks) instead of a cold
    # Python start; same CLI, answers and effects, a quarter of the CPU. Off by default.
    zygote = os.environ.get("HERDR_SIM_FORKSERVER") == "1" and len(str(paths.calls_socket)) <= UNIX_PATH_MAX
    if zygote:
        paths.calls_pidfile.write_text(f"{forks.start(paths.calls_socket)}\n")
    write_bin(paths, zygote)
    if session is not None:
        os.environ["HERDR_SESSION"] = session  # herdr exports it before spawning a named server; panes inherit it
    else:
        os.environ.pop("HERDR_SESSION", None)
    settle = int(os.environ.get("HERDR_SIM_SETTLE_MS", "3000"))
    tmux = Tmux(paths.tmux_socket)
    tmux.start()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if len(str(sock)) <= UNIX_PATH_MAX:
        listener.bind(str(sock))
        listener.listen(1)
    else:
        sock.write_text("")  # too long for a unix socket; the file still marks the server's presence
    store = Store(paths)
    with store.transaction() as world:
        world.server_pid = os.getpid()
        world.session = session
        world.settle_ms = settle
    paths.release.write_text(release.dump())
    paths.pidfile.write_text(f"{os.getpid()}\n")
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    paths.ready.write_text(f"{os.getpid()}\n")
    print(f"herdr-sim server ready: home={paths.home} socket={sock}", flush=True)
    try:
        tick = 0
        while not stop:
            tick += 1
            try:
                with store.transaction() as world:
                    # Screen detection every other tick (0.4 s): each agent pane costs one tmux capture.
                    Engine(paths, world).reconcile(screens=tick % 2 == 0)
            except Exception as exc:  # the loop must survive a transient tmux hiccup
                print(f"herdr-sim: reconcile failed: {exc}", file=sys.stderr, flush=True)
            time.sleep(RECONCILE_S)
    finally:
        teardown(paths, tmux)
        listener.close()
    return 0


def teardown(paths: Paths, tmux: Tmux) -> None:
    """Kill every pane process and the tmux server; remove the liveness files."""
    paths.ready.unlink(missing_ok=True)
    # First the call zygote and any call still running in its process group: no call may act after the tear-down.
    try:
        zygote = int(paths.calls_pidfile.read_text().strip())
    except (OSError, ValueError):
        zygote = 0
    if zygote > 1 and pid_alive(zygote):
        with contextlib.suppress(OSError):
            os.killpg(zygote, signal.SIGKILL)
    paths.calls_pidfile.unlink(missing_ok=True)
    paths.calls_socket.unlink(missing_ok=True)
    world = Store(paths).load()
    tmux_pid = None
    try:
        tmux_pid = int(tmux.run("display", "-p", "#{pid}", check=False).strip() or 0) or None
    except Exception:
        tmux_pid = None
    victims = [p.shell_pid for p in world.panes.values()]
    if tmux_pid:
        victims += procs.descendants(tmux_pid)
    tmux.kill()
    for pid in victims:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    paths.socket_for(world.session).unlink(missing_ok=True)
    paths.pidfile.unlink(missing_ok=True)
    paths.release.unlink(missing_ok=True)
    if paths.tmux_socket.parent != paths.home:
        # The short socket directory under /tmp (paths.short_dir) is the server's too: nothing of it may outlive it.
        paths.tmux_socket.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            paths.tmux_socket.parent.rmdir()


def stop_server(paths: Paths, timeout: float = 15.0, quiet: bool = False) -> int:
    """`herdr-sim server stop`: signal the server and wait until it has torn everything down."""
    pid = server_pid(paths)
    if not pid_alive(pid):
        teardown(paths, Tmux(paths.tmux_socket))
        if not quiet:
            print("herdr-sim: no server running", file=sys.stderr)
        return 0
    assert pid is not None
    with contextlib.suppress(ProcessLookupError):  # it may have ended on its own since
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        teardown(paths, Tmux(paths.tmux_socket))
    return 0
