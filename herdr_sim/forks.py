"""The call zygote (HERDR_SIM_FORKSERVER=1): a warm process that forks one child per `herdr` call instead of a cold Python start."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
import contextlib

# The `herdr` executable when the zygote is on: a client that hands its argv, environment, cwd and stdio descriptors
# to the zygote over a unix socket and exits with the call's code, as real herdr's CLI hands a request to its server.
# A cold herdr-sim call spends ~45 ms of CPU importing the simulator before its own ~7 ms of work; the client is a
# tiny C program (compiled with the machine's `cc` when the server starts; ~1 ms a call) or, without a compiler, this
# Python script (-S, ~10 ms). Anything that prevents the hand-over (no zygote, a vanished cwd) runs the call in the
# client's own process instead, exactly as the plain executable does. Once sent, a request runs to its end even if
# the client dies (as a request that reached real herdr's server does). The answer is the call's exit code, or minus a
# signal: a fault that kills the `herdr` process (herdr_sim.faults.die) kills the client with it, so the caller sees
# what it sees of a cold call, a process killed by that signal, not an exit code.
PY_CLIENT = """import os, sys
sys.dont_write_bytecode = False
def local():
    sys.path.append({root!r})
    from herdr_sim.forks import run_call
    raise SystemExit(run_call(sys.argv, os.getppid()))
try:
    import _socket
    fds = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            fd = os.open(os.devnull, os.O_RDWR)
        fds.append(fd)
    fields = [os.getcwd(), str(os.getppid()), str(len(sys.argv)), *sys.argv]
    fields += [k + "=" + v for k, v in os.environ.items()]
    data = "\\0".join(fields).encode("utf-8", "surrogateescape")
    data = len(data).to_bytes(8, "little") + data
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    conn.connect({sock!r})
except (OSError, ValueError):
    local()
sent = conn.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds))])
while sent < len(data):
    sent += conn.send(data[sent:])
answer = b""
while len(answer) < 4:
    chunk = conn.recv(4 - len(answer))
    if not chunk:
        os.write(2, b"herdr-sim: the call ended without an exit code\\n")
        sys.exit(1)
    answer += chunk
code = int.from_bytes(answer, "little", signed=True)
if code < 0:
    os.kill(os.getpid(), -code)
sys.exit(code)
"""

# The same client in C: the request is the same bytes (8-byte little-endian length, then NUL-separated fields);
# without a zygote it becomes the Python client (execv), which then runs the call itself. Its three paths are not
# compiled in: each is a FIELD-byte array holding a marker, which write_client overwrites in a copy of the built
# binary, so one build (cached under HERDR_SIM_CLIENT_CACHE when set) serves every server (cc costs ~0.1 s of CPU).
FIELD = 4096
C_CLIENT = r"""#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
extern char **environ;
#define FIELD @FIELD@
/* volatile: the compiler must read what write_client patched in, never fold the marker it was built with */
static volatile const char SOCK_FIELD[FIELD] = "@herdr-sim-field:sock@";
static volatile const char PYTHON_FIELD[FIELD] = "@herdr-sim-field:python@";
static volatile const char SCRIPT_FIELD[FIELD] = "@herdr-sim-field:script@";
static char SOCK[FIELD], PYTHON[FIELD], SCRIPT[FIELD];
static void field(char *out, const volatile char *raw) {
    size_t i = 0;
    while (i < FIELD - 1 && (out[i] = raw[i]) != 0) i++;
    out[i] = 0;
}
static void local(int argc, char **argv) {
    char **args = calloc((size_t)argc + 3, sizeof *args);
    if (!args) exit(1);
    args[0] = PYTHON; args[1] = "-S"; args[2] = SCRIPT;
    for (int i = 1; i < argc; i++) args[i + 2] = argv[i];
    execv(PYTHON, args);
    perror("herdr-sim client: execv");
    exit(1);
}
static size_t put(char *buf, size_t at, const char *text) {
    size_t n = strlen(text) + 1;
    if (buf) memcpy(buf + at, text, n);
    return at + n;
}
int main(int argc, char **argv) {
    char cwd[PATH_MAX], ppid[32], count[32];
    field(SOCK, SOCK_FIELD); field(PYTHON, PYTHON_FIELD); field(SCRIPT, SCRIPT_FIELD);
    if (!getcwd(cwd, sizeof cwd)) local(argc, argv);
    snprintf(ppid, sizeof ppid, "%ld", (long)getppid());
    snprintf(count, sizeof count, "%d", argc);
    size_t size = 8;
    for (int pass = 0; pass < 2; pass++) {
        static char *buf;
        size_t at = 8;
        at = put(buf, at, cwd); at = put(buf, at, ppid); at = put(buf, at, count);
        for (int i = 0; i < argc; i++) at = put(buf, at, argv[i]);
        for (char **e = environ; *e; e++) at = put(buf, at, *e);
        if (pass == 0) {
            size = at - 1;  /* the fields are NUL-separated, not NUL-terminated */
            buf = malloc(at);
            if (!buf) exit(1);
            continue;
        }
        uint64_t length = size - 8;
        for (int i = 0; i < 8; i++) buf[i] = (char)((length >> (8 * i)) & 0xff);
        int fds[3];
        for (int fd = 0; fd < 3; fd++) fds[fd] = fcntl(fd, F_GETFD) == -1 ? open("/dev/null", O_RDWR) : fd;
        int conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un addr = {0};
        addr.sun_family = AF_UNIX;
        if (conn < 0 || strlen(SOCK) >= sizeof addr.sun_path) local(argc, argv);
        strcpy(addr.sun_path, SOCK);
        if (connect(conn, (struct sockaddr *)&addr, sizeof addr) != 0) local(argc, argv);
        char control[CMSG_SPACE(sizeof fds)];
        memset(control, 0, sizeof control);
        struct iovec iov = {buf, size};
        struct msghdr msg = {0};
        msg.msg_iov = &iov; msg.msg_iovlen = 1; msg.msg_control = control; msg.msg_controllen = sizeof control;
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET; cmsg->cmsg_type = SCM_RIGHTS; cmsg->cmsg_len = CMSG_LEN(sizeof fds);
        memcpy(CMSG_DATA(cmsg), fds, sizeof fds);
        ssize_t sent;
        do sent = sendmsg(conn, &msg, 0); while (sent < 0 && errno == EINTR);
        if (sent < 0) local(argc, argv);  /* nothing reached the zygote */
        size_t done = (size_t)sent;
        while (done < size) {
            ssize_t n = send(conn, buf + done, size - done, 0);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) { fputs("herdr-sim: the call's request was cut short\n", stderr); return 1; }
            done += (size_t)n;
        }
        unsigned char answer[4];
        size_t got = 0;
        while (got < 4) {
            ssize_t n = recv(conn, answer + got, 4 - got, 0);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) { fputs("herdr-sim: the call ended without an exit code\n", stderr); return 1; }
            got += (size_t)n;
        }
        int32_t code = (int32_t)((uint32_t)answer[0] | (uint32_t)answer[1] << 8 | (uint32_t)answer[2] << 16 | (uint32_t)answer[3] << 24);
        if (code < 0 && code > -NSIG) {  /* the call's process died of signal -code: so does this one */
            signal(-code, SIG_DFL);
            kill(getpid(), -code);
            for (;;) pause();
        }
        return code & 0xff;
    }
    return 1;
}
"""


def write_client(target: Path, python: str, root: str, sock: Path) -> str:
    """Write the zygote's client as ``target`` (C if `cc` builds it, else Python); returns which one it is."""
    import shutil

    script = target.with_name(f".{target.name}-client.py")
    script.write_text(f"#!{python} -S\n" + PY_CLIENT.format(root=root, sock=str(sock)))
    script.chmod(0o755)
    cache = os.environ.get("HERDR_SIM_CLIENT_CACHE")
    built = _build_client(Path(cache) if cache else target.parent)
    if built is not None:
        try:
            binary = _patch(built.read_bytes(), {"sock": str(sock), "python": python, "script": str(script)})
            _replace(target, binary)
            return "c"
        except (OSError, ValueError):
            pass
    target.unlink(missing_ok=True)
    shutil.copyfile(script, target)
    target.chmod(0o755)
    return "python"


def _build_client(where: Path) -> Path | None:
    """The C client as built from C_CLIENT (markers in place of its paths): ``where``'s copy, else built there."""
    import hashlib
    import shutil
    import subprocess
    import tempfile

    source = C_CLIENT.replace("@FIELD@", str(FIELD))
    built = where / f".herdr-client-{hashlib.sha256(source.encode()).hexdigest()[:16]}"
    if built.is_file():
        return built
    compiler = shutil.which("cc")
    if compiler is None:
        return None
    try:
        where.mkdir(parents=True, exist_ok=True)
        # Unique names, then a rename: servers starting at once may share the cache; none sees a half-built file.
        with tempfile.TemporaryDirectory(dir=where, prefix=".herdr-client-build.") as tmp:
            (Path(tmp) / "client.c").write_text(source)
            done = subprocess.run([compiler, "-O2", "-o", str(Path(tmp) / "client"), str(Path(tmp) / "client.c")],
                                  capture_output=True, timeout=60)
            if done.returncode != 0:
                return None
            os.replace(Path(tmp) / "client", built)
    except (OSError, subprocess.SubprocessError):
        return None
    return built


def _patch(binary: bytes, values: dict[str, str]) -> bytes:
    """The built client with each field's marker replaced by its path (NUL-padded to the field's size)."""
    for name, value in values.items():
        marker = f"@herdr-sim-field:{name}@".encode()
        raw = os.fsencode(value)
        at = binary.find(marker)
        if at < 0 or binary.find(marker, at + 1) >= 0 or binary[at + len(marker):at + FIELD].strip(b"\0"):
            raise ValueError(f"the built client has no single {name} field")
        if len(raw) >= FIELD or b"\0" in raw:
            raise ValueError(f"not a path for the client: {value!r}")
        binary = binary[:at] + raw.ljust(FIELD, b"\0") + binary[at + FIELD:]
    return binary


def _replace(target: Path, content: bytes) -> None:
    tmp = target.with_name(f".{target.name}.new")
    tmp.write_bytes(content)
    tmp.chmod(0o755)
    os.replace(tmp, target)


# The call this process runs: who ran `herdr` (the client's parent, not the zygote), and under the zygote the client's
# connection, on which a call that must die as a killed `herdr` process says so (killed).
_caller: int | None = None
_client: object | None = None


def caller() -> int:
    """The pid of the process that ran this `herdr` call (what the call log names)."""
    return os.getppid() if _caller is None else _caller


def killed(signum: int) -> None:
    """The `herdr` process of this call dies of ``signum`` now, and its caller gets no answer.

    A cold call is that process; under the zygote it is the client, told so before this child dies: the caller must
    see a process killed by a signal (orch reads it as a call whose outcome is unknown), never an exit code."""
    if _client is not None:
        import socket

        assert isinstance(_client, socket.socket)
        with contextlib.suppress(OSError):
            _client.sendall((-signum).to_bytes(4, "little", signed=True))
    os.kill(os.getpid(), signum)


def run_call(argv: list[str], caller: int) -> int:
    """One herdr call in this process: `herdr_sim.cli.main`, logged to HERDR_SIM_CALL_LOG when that names a file.

    The log (one JSON line per call: caller pid, argv, exit code, stdout) is written by herdr itself, so a call
    whose caller died before reading the answer is still in it (the crash matrix counts every argv from it).
    """
    from herdr_sim.cli import main

    global _caller
    _caller = caller
    sys.argv = list(argv)
    log = os.environ.get("HERDR_SIM_CALL_LOG")
    if not log:
        return _code(main)
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = _code(main)
    line = json.dumps({"pid": caller, "argv": list(argv), "rc": code, "stdout": out.getvalue()}) + "\n"
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    sys.stdout.write(out.getvalue())
    sys.stdout.flush()
    return code


def _code(main: object) -> int:
    try:
        code = main()  # type: ignore[operator]
    except SystemExit as exc:
        code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def start(sock: Path) -> int | None:
    """Fork the zygote listening on ``sock`` (a process group of its own, so one killpg ends it and its calls)."""
    import socket

    sock.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock))
    listener.listen(64)
    # Imported here, once: every call's child starts with the whole simulator loaded.
    from herdr_sim import cli, detect, engine, faults, integrations, schema, state, worktrees  # noqa: F401

    state.warm()
    import gc

    gc.freeze()  # the warm heap stays shared with every call's child (no copy-on-write from collections)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        listener.close()
        return pid
    try:
        os.setpgid(0, 0)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        _serve(listener)
    finally:
        os._exit(1)


def _serve(listener: object) -> None:
    import socket

    assert isinstance(listener, socket.socket)
    while True:
        try:
            conn, _ = listener.accept()
        except InterruptedError:
            continue
        child = os.fork()
        if child == 0:
            listener.close()
            code = 1
            try:
                code = _call(conn)
            except BaseException:  # the client then reports a call without an exit code
                import traceback

                traceback.print_exc()
            os._exit(code)
        conn.close()
        while True:  # reap the calls that have ended
            try:
                done, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if done == 0:
                break


def _call(conn: object) -> int:
    import io
    import socket

    assert isinstance(conn, socket.socket)
    first, ancillary, _, _ = conn.recvmsg(1 << 16, socket.CMSG_SPACE(3 * 4))
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += [int.from_bytes(data[i:i + 4], sys.byteorder, signed=True) for i in range(0, len(data) - len(data) % 4, 4)]
    if len(fds) != 3 or len(first) < 8:
        raise RuntimeError(f"a call arrived without its stdio ({len(fds)} descriptors)")
    size = int.from_bytes(first[:8], "little")
    payload = bytearray(first[8:])
    while len(payload) < size:
        chunk = conn.recv(size - len(payload))
        if not chunk:
            raise RuntimeError("a call's request was cut short")
        payload += chunk
    for target, fd in enumerate(fds):
        if fd != target:
            os.dup2(fd, target)
            os.close(fd)
    fields = bytes(payload).decode("utf-8", "surrogateescape").split("\0")
    cwd, caller, count = fields[0], int(fields[1]), int(fields[2])
    argv, env = fields[3:3 + count], fields[3 + count:]
    os.environ.clear()
    os.environ.update(dict(item.split("=", 1) for item in env if "=" in item))
    os.chdir(cwd)
    # Fresh text streams on the caller's descriptors, as a process started on them would have.
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                  line_buffering=True)
    global _client
    _client = conn
    try:
        code = run_call(argv, caller)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):
            stream.flush()
    conn.sendall(int(code).to_bytes(4, "little", signed=True))
    return 0
