"""The crash matrix's warm orch: a zygote that has imported orch once and forks each case's `python -m orchestrator` from it."""

# Why: every case starts `orch run` and one or more `orch resume` as fresh processes, and each spent ~0.3 s of CPU
# importing (mostly pydantic building orch's ~160 models) before ~0.15 s of its own work; the lane is CPU-bound.
# The zygote (`python tests/crash/warm.py SOCKET`, started by matrix.main, single-threaded) imports orch's packages
# once and serves requests on a unix socket in the matrix's temp folder. The matrix is the client (`Zygote.popen`):
# it sends argv, env and cwd with stdin (/dev/null) and the write ends of stdout/stderr pipes (SCM_RIGHTS); the
# zygote forks, answers with the child's pid at once (its process group exists by then) and with its wait status
# when it ends. When the matrix goes away (EOF on the zygote's stdin) or a request's connection drops, the zygote
# kills the children's process groups. `matrix.py --cold` runs every orch process cold, as does a zygote that
# cannot start.
#
# The child is what a cold `python -m orchestrator ARGS` started by the matrix would be (`_become`): a session of
# its own (setsid; the crash seam's SIGINT goes to orch's own process group), the received descriptors on 0/1/2 and
# nothing else open, fresh sys.std* streams built as CPython builds them (encoding and errors as the zygote's own,
# buffering from the passed PYTHONUNBUFFERED), the passed cwd and environment (os.environ replaced wholesale),
# sys.argv/sys.orig_argv/sys.path[0] as -m sets them, sys.dont_write_bytecode from PYTHONDONTWRITEBYTECODE, the
# signal dispositions and mask the zygote itself started with (an exec from the matrix: SIGINT to
# default_int_handler, SIGPIPE and SIGXFSZ ignored, the rest as inherited), `random` reseeded, `tempfile`'s cached
# temp dir forgotten (TMPDIR differs per case), time.tzset() for TZ. It runs the module as -m does (runpy), with
# CPython's exit semantics: SystemExit codes, an uncaught exception's traceback and exit 1, an uncaught
# KeyboardInterrupt as death by SIGINT after finalising, non-daemon threads joined and atexit handlers run, stdio
# flushed (120 if that fails), then os._exit. A request whose environment changes how the interpreter itself
# starts (any other PYTHON*, LANG, LC_*, PYDANTIC_* variable differs from the zygote's) is refused and runs cold.
# What stays different, knowingly: the hash seed (every child shares the zygote's, as if PYTHONHASHSEED were fixed
# for the matrix; a cold process draws its own); models of lazily imported modules are built at the zygote's
# import with pydantic plugins off (orch uses none; cold processes find none either); and /proc/PID/cmdline and
# /proc/PID/environ show the zygote's exec (the kernel keeps those). Nothing reads the latter of an orch process:
# the simulator's /proc reads are of pane processes, and a stage's leftover scan runs after its orch processes ended.
#
# Audit of import-time state in orchestrator/, packets/, registry/ (what a forked child would otherwise inherit
# from the zygote instead of computing from its own environment, cwd, clock, pid or random state), by walking every
# module's import-time code (`test_warm.py::test_nothing_reads_the_process_at_import` keeps it so):
# - orchestrator/herdr.py built its crash seam (ORCH_TEST_CRASH_AT, ORCH_TEST_HERDR_CALLS) from os.environ at
#   import, so a warm child would never crash. Moved to its first herdr call (`crash_seam.current()`).
# - orchestrator/claims.py's functools.lru_cache maps a claim pattern to its regex: pure, filled at call time only.
# - Nothing else: no module-level os.environ/getcwd/time/getpid/random use, no cache filled at import, no stream
#   captured at import (click, tabulate and logging look sys.std* up when they write). The standard library's
#   import-time state is handled in the child (random, tempfile.tempdir, the TZ, the streams).

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import json
import os
import random
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PACKAGES = ("orchestrator", "packets", "registry")
# Imported lazily by no `orch run`/`orch resume` (and the demo pulls in the simulator): left out of the preload.
SKIP = {"orchestrator.__main__", "orchestrator.demo"}
# Read by the interpreter as it starts (or by pydantic as models are built): a request must agree with the zygote.
HANDLED = {"PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE"}
READY = b"warm orch ready\n"


def _startup_vars(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items()
            if k not in HANDLED and (k.startswith(("PYTHON", "LC_", "PYDANTIC_")) or k in ("LANG", "LANGUAGE"))}


# ---------------------------------------------------------------------------------------------------- the client


class WarmProcess:
    """An orch process the zygote forked, with the part of Popen's interface the matrix uses."""

    def __init__(self, args: list[str], conn: socket.socket, pid: int, out: int, err: int) -> None:
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self.cpu = 0.0
        self._conn: socket.socket | None = conn
        self._answer = b""
        self._pipes = {out: bytearray(), err: bytearray()}
        self._open = {out, err}
        self._out, self._err = out, err

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Read stdout and stderr to their end and wait for the exit status, as Popen.communicate does (text mode)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            for fd in self._open:
                sel.register(fd, selectors.EVENT_READ)
            if self._conn is not None:
                sel.register(self._conn, selectors.EVENT_READ)
            while self._open or self._conn is not None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0)
                for key, _ in sel.select(left):
                    if key.fileobj is self._conn:
                        self._read_status(sel)
                        continue
                    fd = key.fd
                    chunk = os.read(fd, 65536)
                    if chunk:
                        self._pipes[fd] += chunk
                    else:
                        sel.unregister(fd)
                        os.close(fd)
                        self._open.discard(fd)
        return _text(self._pipes[self._out]), _text(self._pipes[self._err])

    def _read_status(self, sel: selectors.BaseSelector) -> None:
        assert self._conn is not None
        chunk = self._conn.recv(4096)
        self._answer += chunk
        if b"\n" not in self._answer:
            if chunk:
                return
            raise RuntimeError(f"the warm orch zygote went away before process {self.pid} ended")
        sel.unregister(self._conn)
        self._conn.close()
        self._conn = None
        answer = json.loads(self._answer)
        self.returncode = os.waitstatus_to_exitcode(answer["status"])
        self.cpu = float(answer["cpu"])  # CPU seconds of the process and the children it waited for

    def close(self) -> None:
        """Drop what is still open (the zygote then kills the process's group if it still runs)."""
        for fd in self._open:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._open.clear()
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _text(data: bytes | bytearray) -> str:
    # What Popen(text=True) makes of the same bytes: the locale's encoding, universal newlines.
    return io.TextIOWrapper(io.BytesIO(bytes(data))).read()


class Zygote:
    """The matrix's handle on the zygote process: start it, ask it for orch processes, end it (and them)."""

    def __init__(self, proc: subprocess.Popen[bytes], sock: Path) -> None:
        self.proc = proc
        self.sock = sock
        self.env = dict(os.environ)
        self.cold = 0  # requests the zygote refused (they ran cold)

    @classmethod
    def start(cls, folder: Path, timeout: float = 120) -> Zygote | None:
        """The zygote listening in ``folder``, once it has imported orch; None (and why, on stderr) if it cannot start."""
        sock = folder / "warm.sock"
        if len(os.fsencode(sock)) >= 100:
            print(f"warm orch: {sock} is too long for a unix socket; every orch process runs cold", file=sys.stderr)
            return None
        # Its own session: a terminal's Ctrl-C reaches the matrix, whose interrupt path then ends the zygote.
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), str(sock)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, start_new_session=True)
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            ready = sel.select(timeout) and proc.stdout.readline() == READY
        if not ready:
            print("warm orch: the zygote did not start; every orch process runs cold", file=sys.stderr)
            cls(proc, sock).stop()
            return None
        return cls(proc, sock)

    def popen(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None = None) -> WarmProcess | None:
        """`argv` (``python -m MODULE ...``, orch's or a test's) forked from the zygote; None if it must run cold instead."""
        if len(argv) < 3 or list(argv[:2]) != [sys.executable, "-m"] or _startup_vars(env) != _startup_vars(self.env):
            self.cold += 1
            return None
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(60)
            body = json.dumps({"argv": list(argv), "env": dict(env), "cwd": cwd or os.getcwd()}).encode()
            data = len(body).to_bytes(8, "little") + body
            try:
                conn.connect(str(self.sock))
                sent = conn.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, b"".join(fd.to_bytes(4, sys.byteorder) for fd in (null, out_w, err_w)))])
            except OSError as exc:  # nothing reached the zygote, so nothing was started: this one runs cold
                print(f"warm orch: the zygote is not answering ({exc}); this orch process runs cold", file=sys.stderr)
                conn.close()
                os.close(out_r)
                os.close(err_r)
                self.cold += 1
                return None
            conn.sendall(data[sent:])
            answer = b""
            while b"\n" not in answer:
                chunk = conn.recv(4096)
                if not chunk:
                    raise RuntimeError("the warm orch zygote closed the connection before answering")
                answer += chunk
            conn.settimeout(None)
        except BaseException:
            conn.close()
            for fd in (out_r, err_r):
                os.close(fd)
            raise
        finally:
            for fd in (null, out_w, err_w):
                os.close(fd)
        line, rest = answer.split(b"\n", 1)
        reply = json.loads(line)
        if "refused" in reply:
            conn.close()
            os.close(out_r)
            os.close(err_r)
            self.cold += 1
            return None
        proc = WarmProcess(list(argv), conn, int(reply["pid"]), out_r, err_r)
        proc._answer = rest
        return proc

    def stop(self) -> None:
        """End the zygote and every process it forked that still runs; idempotent."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()  # EOF: the zygote kills its children's groups and exits
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self.sock.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------------- the zygote


class _Startup:
    """What this interpreter started with, which is what an exec of `python` from the matrix starts with."""

    def __init__(self) -> None:
        self.signals = {sig: signal.getsignal(sig) for sig in signal.valid_signals() if sig not in (signal.SIGKILL, signal.SIGSTOP)}
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        self.streams = {fd: (stream.encoding, stream.errors) for fd, stream in ((0, sys.__stdin__), (1, sys.__stdout__), (2, sys.__stderr__))
                        if stream is not None}
        self.env = dict(os.environ)


def _preload() -> None:
    """Import what `orch run` and `orch resume` import, the commands the way the CLI loads them."""
    import pkgutil

    from orchestrator import cli

    for name in cli.COMMANDS:
        cli.cli.get_command(None, name)  # type: ignore[arg-type]  # OrchGroup.get_command does not use the context
    with cli._no_pydantic_plugins():
        for package in PACKAGES:
            root = __import__(package)
            for info in pkgutil.walk_packages(root.__path__, f"{package}."):
                if info.name not in SKIP:
                    __import__(info.name)


def serve(sock: Path) -> None:
    """The zygote: preload, listen on ``sock``, fork a child per request until stdin reaches its end."""
    startup = _Startup()
    # Children are watched through pidfds (Linux 5.3): without them (an old kernel, a seccomp filter) there is no
    # zygote, and the matrix, never told it is ready, runs every orch process cold.
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError) as exc:
        print(f"warm orch: no pidfd_open ({exc})", file=sys.stderr)
        return
    sys.path[0] = os.getcwd()  # as -m has it: the modules come from where a cold orch would find them
    _preload()
    sock.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock))
    listener.listen(64)
    children: dict[int, tuple[socket.socket, int]] = {}  # pid -> (its request's connection, its pidfd)

    def end(signum: int, frame: object) -> None:
        raise SystemExit(0)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, end)
    gc.freeze()  # the warm heap stays shared with the children (no copy-on-write from collections)
    sel = selectors.DefaultSelector()
    sel.register(0, selectors.EVENT_READ, "stdin")
    sel.register(listener, selectors.EVENT_READ, "listener")
    os.write(1, READY)
    try:
        while True:
            for key, _ in sel.select():
                if key.data == "stdin":
                    if not os.read(0, 4096):
                        return
                elif key.data == "listener":
                    conn, _ = listener.accept()
                    _accept(conn, startup, sel, listener, children)
                elif key.data[0] == "conn":  # the client went away (it never sends more) before its process ended
                    pid = key.data[1]
                    sel.unregister(children[pid][0])
                    with contextlib.suppress(OSError):
                        os.killpg(pid, signal.SIGKILL)
                else:  # ("pid", pid): it ended
                    _reap(key.data[1], children, sel)
    finally:
        for pid in children:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        for pid in list(children):
            _reap(pid, children, sel)
        listener.close()
        sock.unlink(missing_ok=True)


def _reap(pid: int, children: dict[int, tuple[socket.socket, int]], sel: selectors.BaseSelector) -> None:
    """Wait for a child that ended (or was killed) and tell its client how, if it still listens."""
    conn, pidfd = children.pop(pid)
    _, status, usage = os.wait4(pid, 0)
    for fileobj in (pidfd, conn):
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(fileobj)
    os.close(pidfd)
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps({"status": status, "cpu": usage.ru_utime + usage.ru_stime}).encode() + b"\n")
    conn.close()


def _accept(conn: socket.socket, startup: _Startup, sel: selectors.BaseSelector, listener: socket.socket,
            children: dict[int, tuple[socket.socket, int]]) -> None:
    conn.settimeout(30)
    fds: list[int] = []
    try:
        first, ancillary, _, _ = conn.recvmsg(1 << 16, socket.CMSG_SPACE(3 * 4))
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += [int.from_bytes(data[i:i + 4], sys.byteorder) for i in range(0, len(data) - len(data) % 4, 4)]
        size = int.from_bytes(first[:8], "little")
        body = bytearray(first[8:])
        while len(body) < size:
            chunk = conn.recv(size - len(body))
            if not chunk:
                raise OSError("request cut short")
            body += chunk
        request = json.loads(body)
        env = request["env"]
        if len(fds) != 3:
            raise OSError(f"a request came with {len(fds)} descriptors, not 3")
        if _startup_vars(env) != _startup_vars(startup.env):
            conn.sendall(b'{"refused": "its environment changes how the interpreter starts"}\n')
            conn.close()
            return
        sync_r, sync_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(sync_r)
                _become(request, fds, sync_w, startup, [conn, listener], sel)
            finally:
                os._exit(70)
        os.close(sync_w)
        os.read(sync_r, 1)  # EOF once the child has its own session: a killpg of its pid reaches it from now on
        os.close(sync_r)
        pidfd = os.pidfd_open(pid)
        children[pid] = (conn, pidfd)
        sel.register(pidfd, selectors.EVENT_READ, ("pid", pid))
        conn.settimeout(None)
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        sel.register(conn, selectors.EVENT_READ, ("conn", pid))
    except (OSError, ValueError, KeyError) as exc:
        print(f"warm orch: a request failed: {exc}", file=sys.stderr, flush=True)
        conn.close()
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def _become(request: dict[str, Any], fds: list[int], sync_w: int, startup: _Startup, sockets: list[socket.socket],
            sel: selectors.BaseSelector) -> None:
    """In the forked child: turn into the cold `python -m orchestrator` of the request, run it, exit (never returns)."""
    os.setsid()
    for sig, handler in startup.signals.items():
        if handler is not None:
            signal.signal(sig, handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, startup.mask)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for held in sockets:
        held.close()
    sel.close()  # the epoll instance is shared with the zygote: close it, never unregister from it
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the pidfds, the received descriptors, sync_w (the zygote reads on)
    env: dict[str, str] = request["env"]
    argv: list[str] = request["argv"]
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(env)
    sys.orig_argv = list(argv)
    sys.argv = ["-m", *argv[3:]]  # runpy puts the module's path in argv[0], as -m does
    sys.path[0] = os.getcwd()
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
    tempfile.tempdir = None
    time.tzset()
    random.seed()
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    sys.stdin = sys.__stdin__ = _stdio(0, "r", startup, unbuffered)  # type: ignore[misc]
    sys.stdout = sys.__stdout__ = _stdio(1, "w", startup, unbuffered)  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = _stdio(2, "w", startup, unbuffered)  # type: ignore[misc]
    code, interrupted = 0, False
    try:
        runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None  # not this function's frame
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        code = 1
    code = _finalize(code)
    if interrupted:  # as CPython ends on an uncaught KeyboardInterrupt: by SIGINT, so the parent sees the signal
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 128 + signal.SIGINT
    os._exit(code)


def _stdio(fd: int, mode: str, startup: _Startup, unbuffered: bool) -> io.TextIOWrapper:
    """A standard stream on ``fd`` as CPython's create_stdio makes it."""
    encoding, errors = startup.streams.get(fd, ("utf-8", "backslashreplace" if fd == 2 else "strict"))
    buffered = mode == "r" or not unbuffered
    # As create_stdio: io.open picks the buffer size from the descriptor; the stream lives as long as the process.
    buf = open(fd, mode + "b", buffering=-1 if buffered else 0, closefd=False)  # noqa: SIM115
    raw: Any = buf.raw if buffered else buf  # type: ignore[attr-defined]
    raw.name = ("<stdin>", "<stdout>", "<stderr>")[fd]
    stream = io.TextIOWrapper(buf, encoding=encoding, errors=errors, newline="\n",
                              line_buffering=not unbuffered and (raw.isatty() or fd == 2), write_through=unbuffered)
    stream.mode = mode  # type: ignore[misc]
    return stream


def _exit_code(exc: SystemExit) -> int:
    """CPython's exit code for an uncaught SystemExit (None: 0, an int: it, anything else: printed, 1)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF  # what the exit status keeps of it
    with contextlib.suppress(Exception):
        print(exc.code, file=sys.stderr)
    return 1


def _finalize(code: int) -> int:
    """What Py_FinalizeEx does before the process exits: join non-daemon threads, run atexit, flush stdio."""
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            if stream is sys.stdout:
                code = 120
    return code


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
