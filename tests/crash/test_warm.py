"""The crash matrix's warm orch (tests/crash/warm.py): a forked child answers exactly as a cold `python -m` process."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from herdr_sim.testing import eventually

PROJECT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("warm", Path(__file__).with_name("warm.py"))
assert _spec is not None and _spec.loader is not None
warm = importlib.util.module_from_spec(_spec)
sys.modules["warm"] = warm
_spec.loader.exec_module(warm)

PLAN = str(PROJECT / "orchestrator" / "demo_data" / "plan.toml")
# Prints what a process is made of: what the zygote's child must have exactly as a cold process has it.
PROBE = r'''
import json, os, random, signal, sys, tempfile, time
mode = sys.argv[1] if len(sys.argv) > 1 else ""
if mode == "raise":
    raise ValueError("probe failed")
if mode == "interrupt":
    raise KeyboardInterrupt
if mode == "exit-text":
    sys.exit("probe says bye")
if mode == "pause":
    signal.pause()
def stream(s):
    raw = s.buffer.raw if hasattr(s.buffer, "raw") else s.buffer
    return [s.encoding, s.errors, s.line_buffering, s.write_through, type(s.buffer).__name__, raw.name, s.mode]
fds = sorted(os.listdir("/proc/self/fd"))
print(json.dumps({
    "cwd": os.getcwd(), "env": dict(os.environ), "argv": sys.argv, "orig_argv": sys.orig_argv, "path0": sys.path[0],
    "main": [__name__, __file__], "bytecode": sys.dont_write_bytecode, "tmp": tempfile.gettempdir(),
    "tz": [time.timezone, list(time.tzname)], "fds": fds,
    "streams": [stream(sys.stdin), stream(sys.stdout), stream(sys.stderr)],
    "signals": {str(s): repr(signal.getsignal(s)) for s in sorted(signal.valid_signals())
                if s not in (signal.SIGKILL, signal.SIGSTOP)},
    "mask": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])),
    "leader": [os.getpgid(0) == os.getpid(), os.getsid(0) == os.getpid()],
}, sort_keys=True))
print("to stderr", file=sys.stderr)
sys.exit(int(mode) if mode.isdigit() else 0)
'''


@pytest.fixture(scope="module")
def zygote() -> Iterator[warm.Zygote]:
    folder = Path(tempfile.mkdtemp(prefix="warm-"))
    started = warm.Zygote.start(folder)
    assert started is not None
    try:
        yield started
    finally:
        started.stop()
        shutil.rmtree(folder)


@pytest.fixture()
def probe_dir(tmp_path: Path) -> Path:
    (tmp_path / "probe.py").write_text(PROBE)
    return tmp_path


def cold(argv: list[str], env: dict[str, str], cwd: str) -> tuple[int, str, str]:
    """What the matrix's cold path gives: a process of its own session, stdin /dev/null, output captured as text."""
    done = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, start_new_session=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


def hot(zygote: warm.Zygote, argv: list[str], env: dict[str, str], cwd: str) -> tuple[int, str, str]:
    proc = zygote.popen(argv, env, cwd)
    assert proc is not None, "the zygote refused the request"
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        proc.close()
    assert proc.returncode is not None
    return proc.returncode, out, err


def orch(*args: str) -> list[str]:
    return [sys.executable, "-m", "orchestrator", *args]


@pytest.mark.parametrize("args", [
    ["--version"],
    ["plan", "check", PLAN],
    ["plan", "check", "missing.toml"],
    ["plan", "check", "missing.toml", "--json"],
    ["no-such-command"],
])
def test_orch_answers_as_a_cold_process(zygote: warm.Zygote, args: list[str]) -> None:
    env = dict(os.environ)
    assert hot(zygote, orch(*args), env, str(PROJECT)) == cold(orch(*args), env, str(PROJECT))


@pytest.mark.parametrize(("crash", "code"), [(None, 4), ("1:before:INT", 130), ("1:before:TERM", -15), ("1:before:KILL", -9)])
def test_orch_run_and_its_crash_seam_as_a_cold_process(zygote: warm.Zygote, tmp_path: Path, crash: str | None, code: int) -> None:
    # The seam reads ORCH_TEST_CRASH_AT from the child's own environment (not the zygote's, at import), and SIGINT to
    # orch's own process group takes the KeyboardInterrupt path; a herdr that fails makes `orch run` exit 4.
    env = {**os.environ, "HERDR_ENV": "1", "HERDR_PANE_ID": "w1:p1", "HERDR_TAB_ID": "w1:t1", "HERDR_WORKSPACE_ID": "w1",
           "ORCH_HERDR": "/bin/false", "ORCH_HOME": str(tmp_path / "orch-home")}
    if crash:
        env["ORCH_TEST_CRASH_AT"] = crash
    warm_done = hot(zygote, orch("run", PLAN, "--json"), env, str(tmp_path))
    assert warm_done == cold(orch("run", PLAN, "--json"), env, str(tmp_path))
    assert warm_done[0] == code


@pytest.mark.parametrize("unbuffered", [True, False])
@pytest.mark.parametrize("bytecode", [True, False])
def test_the_child_is_made_as_a_cold_process(zygote: warm.Zygote, probe_dir: Path, unbuffered: bool, bytecode: bool) -> None:
    env = {**os.environ, "PROBE_ONLY": "passed", "TMPDIR": str(probe_dir), "TZ": "EST5EDT"}
    env.pop("PYTHONUNBUFFERED", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    if bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    argv = [sys.executable, "-m", "probe", "7"]
    code, out, err = hot(zygote, argv, env, str(probe_dir))
    assert (code, out, err) == cold(argv, env, str(probe_dir))
    facts = json.loads(out)
    assert (code, err, facts["cwd"], facts["env"], facts["tmp"]) == (7, "to stderr\n", str(probe_dir), env, str(probe_dir))
    assert facts["leader"] == [True, True]
    assert facts["fds"] == ["0", "1", "2", "3"]  # 3: the listing's own


def test_random_state_is_the_childs_own(zygote: warm.Zygote, probe_dir: Path) -> None:
    (probe_dir / "draw.py").write_text("import random\nprint(random.random())\n")
    argv = [sys.executable, "-m", "draw"]
    draws = {hot(zygote, argv, dict(os.environ), str(probe_dir))[1] for _ in range(3)}
    assert len(draws) == 3


@pytest.mark.parametrize("mode", ["raise", "exit-text"])
def test_an_uncaught_exception_or_exit_text_ends_as_in_a_cold_process(zygote: warm.Zygote, probe_dir: Path, mode: str) -> None:
    argv = [sys.executable, "-m", "probe", mode]
    code, out, err = hot(zygote, argv, dict(os.environ), str(probe_dir))
    cold_code, cold_out, cold_err = cold(argv, dict(os.environ), str(probe_dir))
    # The traceback's runpy frames differ (run_module instead of -m's _run_module_as_main); its last lines do not.
    assert (code, out, err.splitlines()[-2:]) == (cold_code, cold_out, cold_err.splitlines()[-2:])
    assert code == 1


def test_an_uncaught_keyboard_interrupt_is_death_by_sigint(zygote: warm.Zygote, probe_dir: Path) -> None:
    argv = [sys.executable, "-m", "probe", "interrupt"]
    code, out, err = hot(zygote, argv, dict(os.environ), str(probe_dir))
    cold_code, _, cold_err = cold(argv, dict(os.environ), str(probe_dir))
    assert (code, err.splitlines()[-1]) == (cold_code, cold_err.splitlines()[-1]) == (-signal.SIGINT, "KeyboardInterrupt")


def test_a_child_killed_with_sigkill_reports_minus_9(zygote: warm.Zygote, probe_dir: Path) -> None:
    proc = zygote.popen([sys.executable, "-m", "probe", "pause"], dict(os.environ), str(probe_dir))
    assert proc is not None
    os.killpg(proc.pid, signal.SIGKILL)  # the group exists as soon as the pid is known
    try:
        proc.communicate(timeout=60)
    finally:
        proc.close()
    assert proc.returncode == -9


def test_a_dropped_request_kills_its_process(zygote: warm.Zygote, probe_dir: Path) -> None:
    proc = zygote.popen([sys.executable, "-m", "probe", "pause"], dict(os.environ), str(probe_dir))
    assert proc is not None
    proc.close()
    eventually(lambda: not alive(proc.pid), f"process {proc.pid} of a dropped request ended", timeout_s=30, interval_s=0.05)


def test_a_request_that_changes_the_interpreter_runs_cold(zygote: warm.Zygote) -> None:
    before = zygote.cold
    assert zygote.popen(orch("--version"), {**os.environ, "PYTHONHASHSEED": "123"}) is None
    assert zygote.popen([sys.executable, "-c", "pass"], dict(os.environ)) is None
    assert zygote.cold == before + 2


def test_stop_ends_the_zygote_and_its_children_and_leaves_nothing(probe_dir: Path) -> None:
    folder = Path(tempfile.mkdtemp(prefix="warm-"))
    try:
        zygote = warm.Zygote.start(folder)
        assert zygote is not None
        procs = [zygote.popen([sys.executable, "-m", "probe", "pause"], dict(os.environ), str(probe_dir)) for _ in range(2)]
        zygote.stop()
        assert zygote.proc.returncode == 0
        assert [alive(p.pid) for p in procs if p is not None] == [False, False]
        assert list(folder.iterdir()) == []
        assert zygote.popen(orch("--version"), dict(os.environ)) is None  # a gone zygote: the matrix runs the rest cold
        for proc in procs:
            assert proc is not None
            proc.communicate(timeout=60)
            proc.close()
            assert proc.returncode == -9
    finally:
        shutil.rmtree(folder)


def test_a_zygote_that_cannot_start_is_none(capsys: pytest.CaptureFixture[str]) -> None:
    folder = Path(tempfile.mkdtemp(prefix="warm-"))
    try:
        deep = folder / ("x" * 100)
        deep.mkdir()
        assert warm.Zygote.start(deep) is None  # the matrix then starts every orch process cold
        assert capsys.readouterr().err == f"warm orch: {deep / 'warm.sock'} is too long for a unix socket; every orch process runs cold\n"
        assert list(deep.iterdir()) == []
    finally:
        shutil.rmtree(folder)


# A stand-in for the matrix: starts the zygote and one orch-like child, says their pids, and waits to be killed.
_CLIENT = r"""
import os, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import warm
zygote = warm.Zygote.start(Path(sys.argv[2]))
child = zygote.popen([sys.executable, "-m", "probe", "pause"], dict(os.environ), sys.argv[3])
print(zygote.proc.pid, child.pid, flush=True)
signal.pause()
"""


def test_a_killed_matrix_takes_the_zygote_and_its_children_with_it(probe_dir: Path) -> None:
    folder = Path(tempfile.mkdtemp(prefix="warm-"))
    client = subprocess.Popen([sys.executable, "-c", _CLIENT, str(Path(__file__).parent), str(folder), str(probe_dir)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert client.stdout is not None
        zygote_pid, child_pid = map(int, client.stdout.readline().split())
        client.kill()  # SIGKILL: no tear-down of its own; the zygote sees its stdin end
        client.wait()
        eventually(lambda: not alive(zygote_pid) and not alive(child_pid), "the zygote and its child ended", timeout_s=30, interval_s=0.05)
        assert list(folder.iterdir()) == []
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
        shutil.rmtree(folder)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# What a module may not do at import (module and class bodies, decorators, default values, and the bodies of the
# module's own functions it calls there): read the environment, the cwd, the clock, the pid or random state, or take
# a standard stream; a process forked from an imported orch (warm.py) would carry the zygote's values. A call into
# another module at import is not followed. warm.py's comment has the audit this keeps true.
_DATA = {"environ", "environb", "argv", "stdin", "stdout", "stderr"}
_CALLS = {"getenv", "getcwd", "getcwdb", "cwd", "home", "expanduser", "time", "time_ns", "monotonic", "perf_counter", "now",
          "utcnow", "today", "getpid", "getppid", "random", "randint", "randrange", "choice", "shuffle", "uuid1", "uuid4",
          "urandom", "token_hex", "gethostname", "getuid", "getlogin", "which", "isatty", "get_terminal_size",
          "getpreferredencoding", "getencoding", "StreamHandler", "basicConfig", "gettempdir", "mkdtemp", "mkstemp"}


def _import_time_uses(tree: ast.Module) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
    followed: set[str] = set()

    def scan(node: ast.AST) -> None:
        if isinstance(node, ast.Lambda):
            return  # runs when called
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name in _CALLS:
                found.append((node.lineno, name))
            if isinstance(func, ast.Name) and func.id in functions and func.id not in followed:
                followed.add(func.id)
                for statement in functions[func.id].body:
                    scan(statement)
        elif isinstance(node, ast.Attribute | ast.Name) and isinstance(node.ctx, ast.Load):
            name = node.attr if isinstance(node, ast.Attribute) else node.id
            if name in _DATA:
                found.append((node.lineno, name))
        for child in ast.iter_child_nodes(node):
            scan(child)

    def body(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                for expr in [*child.decorator_list, *child.args.defaults, *(d for d in child.args.kw_defaults if d)]:
                    scan(expr)
            elif isinstance(child, ast.ClassDef):
                for expr in [*child.decorator_list, *child.bases, *(k.value for k in child.keywords)]:
                    scan(expr)
                body(child)
            elif isinstance(child, ast.If | ast.For | ast.While | ast.With | ast.Try | ast.ExceptHandler):
                for expr in [getattr(child, "test", None), getattr(child, "iter", None), *(i.context_expr for i in getattr(child, "items", []))]:
                    if expr is not None:
                        scan(expr)
                body(child)
            elif isinstance(child, ast.stmt) and not isinstance(child, ast.Import | ast.ImportFrom):
                scan(child)

    body(tree)
    return found


def test_nothing_reads_the_process_at_import() -> None:
    offending = []
    for package in warm.PACKAGES:
        for path in sorted((PROJECT / package).rglob("*.py")):
            rel = str(path.relative_to(PROJECT))
            offending += [f"{rel}:{line}: {name}" for line, name in _import_time_uses(ast.parse(path.read_text(), rel))]
    assert offending == []


def test_the_audit_catches_an_import_time_read() -> None:
    source = """import os, time
SEAM = Seam(os.environ)
class A:
    b = os.getcwd()
def f(x=time.time(), clock=time.monotonic):
    return os.environ
def g():
    return os.getpid()
PID = g()
HANDLER = lambda: os.getcwd()
"""
    assert _import_time_uses(ast.parse(source)) == [(2, "environ"), (4, "getcwd"), (5, "time"), (8, "getpid")]
