"""Shared fixtures: every test runs with a private HOME, state dirs and git identity, never the user's real ones."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Variables that would connect a test to the developer's real herdr, tmux or git setup.
_LEAKY_ENV = (
    "HERDR_ENV",
    "HERDR_SOCKET_PATH",
    "HERDR_SESSION",
    "HERDR_WORKSPACE_ID",
    "HERDR_TAB_ID",
    "HERDR_PANE_ID",
    "HERDR_SIM_HOME",
    "ORCH_HOME",
    "ORCH_HERDR",
    "TMUX",
    "TMUX_PANE",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "XDG_DATA_HOME",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "NO_COLOR",
    "COLUMNS",  # a developer's terminal width would reshape tables the goldens pin
)


@pytest.fixture(scope="session", autouse=True)
def private_tmpdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One temp dir for the whole session (TMPDIR for this process and every process it starts), removed at the end.

    Whatever orch, the simulator and its scripted agents put in "the temp dir" (verify checkouts, agents' reports,
    demo stages) lands here, so a run leaves nothing in the system temp dir. pytest's own tmp_path stays where it
    was (its socket paths must stay short; pyproject keeps only failed tests' folders). ORCH_KEEP_TMP=1 keeps this
    folder to look at after a failure.
    """
    tmp_path_factory.getbasetemp()  # fixed before TMPDIR changes
    root = Path(tempfile.mkdtemp(prefix=f"orch-tests-{os.getpid()}-"))  # the pid: .ci/run tells a live session's from a leftover
    previous = (os.environ.get("TMPDIR"), tempfile.tempdir, os.environ.get("PATH"))
    # As if the venv were activated: `.venv/bin/python -m pytest` (the README's Quick start) finds the `orch` and
    # `herdr-sim` scripts installed beside this interpreter before any other on PATH.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    os.environ["TMPDIR"] = str(root)
    tempfile.tempdir = str(root)
    # Every simulator of the session answers `herdr` from its call zygote (herdr_sim/forks.py): the same answers, exit
    # codes and effects as the cold executable (tests/herdr_sim/test_forks.py), at a fraction of the CPU of a cold
    # Python start per call, which was most of the e2e tests' CPU (README, "Tests and CI"). Its C client is built once
    # per session process, in this folder. HERDR_SIM_FORKSERVER=0 in the outer environment runs the cold executable.
    zygote = {"HERDR_SIM_FORKSERVER": "1", "HERDR_SIM_CLIENT_CACHE": str(root / "herdr-client")}
    zygote = {name: value for name, value in zygote.items() if name not in os.environ}
    os.environ.update(zygote)
    try:
        yield root
    finally:
        for name in zygote:
            os.environ.pop(name, None)
        if previous[0] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = previous[0]
        tempfile.tempdir = previous[1]
        if previous[2] is not None:
            os.environ["PATH"] = previous[2]
        if os.environ.get("ORCH_KEEP_TMP") != "1":
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HOME, XDG dirs, TMUX_TMPDIR and git at a throwaway directory for this test."""
    home = tmp_path_factory.mktemp("home")
    for name in _LEAKY_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("TMUX_TMPDIR", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Orch Test")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "orch-test@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Orch Test")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "orch-test@example.invalid")
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
    return home


# What this session puts in the system temp dir outside TMPDIR (short socket paths cannot live under it): each name
# carries the session's pid, so the end of the session can tell its own leftovers from other sessions' files.
SYSTEM_TMP_NAMES = ("orch-e2e-{pid}-*", "od-{pid}-*", "orch-inert-{pid}-*")


def leftovers(pid: int, root: Path = Path("/tmp")) -> list[Path]:
    """What the test session with this pid left in the system temp dir (its simulator homes, demo dirs, sockets)."""
    roots = {root, Path(os.environ.get("ORCH_E2E_TMP", str(root)))}
    return sorted(path for where in roots for pattern in SYSTEM_TMP_NAMES for path in where.glob(pattern.format(pid=pid)))


# What the xdist workers (`-n N`) left, each found by the worker itself (the names carry its pid) and handed to the
# controlling process, whose exit status is the run's.
_WORKERS_LEFT: list[str] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when it left anything of its own in the system temp dir (issue 15: the suite removes what it creates)."""
    left = [str(path) for path in leftovers(os.getpid())]
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: its exit status is not the run's, so the controller says it
        workeroutput["orch_leftovers"] = left
        return
    left += _WORKERS_LEFT
    if left:
        names = ", ".join(left[:10]) + (f" and {len(left) - 10} more" if len(left) > 10 else "")
        sys.stderr.write(f"\nthe test session left {len(left)} in the system temp dir (exit 1): {names}\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """An xdist worker ended: keep what it left in the system temp dir for the run's own check."""
    _WORKERS_LEFT.extend(getattr(node, "workeroutput", {}).get("orch_leftovers", []))


SHARED = Path(__file__).resolve().parents[1].parent / "shared"


class Golden:
    """Golden files of one test directory: compare text byte for byte, or rewrite the file when ORCH_UPDATE_GOLDEN=1."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.update = os.environ.get("ORCH_UPDATE_GOLDEN") == "1"

    def check(self, name: str, text: str) -> None:
        """Assert ``text`` equals golden/<name> exactly (or write it there in update mode)."""
        path = self.directory / name
        if self.update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode("utf-8"))
            return
        assert path.is_file(), f"golden file {path} is missing; run with ORCH_UPDATE_GOLDEN=1 to create it"
        assert text == path.read_bytes().decode("utf-8")

    __call__ = check


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Golden:
    """The golden files beside the requesting test module (its directory's golden/): `golden("name.txt", text)`."""
    return Golden(request.path.parent / "golden")


@pytest.fixture
def shared_dir() -> Path:
    """The read-only shared reference folder beside the project (spec, herdr contract, upstream schema)."""
    if not SHARED.is_dir():
        pytest.skip(f"shared reference folder not found at {SHARED}")
    return SHARED


class GitRepo:
    """A real git repository in a temp dir, with a few builder methods for tests."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def git(self, *args: str, cwd: Path | None = None) -> str:
        import subprocess

        proc = subprocess.run(
            ["git", *args], cwd=cwd or self.path, capture_output=True, text=True, check=True, timeout=30
        )
        return proc.stdout.strip()

    def write(self, relpath: str, text: str, *, cwd: Path | None = None) -> Path:
        target = (cwd or self.path) / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return target

    def commit(self, message: str, files: dict[str, str] | None = None, *, cwd: Path | None = None) -> str:
        for relpath, text in (files or {}).items():
            self.write(relpath, text, cwd=cwd)
        self.git("add", "-A", cwd=cwd)
        self.git("commit", "--quiet", "--allow-empty", "-m", message, cwd=cwd)
        return self.git("rev-parse", "HEAD", cwd=cwd)

    def head(self, cwd: Path | None = None) -> str:
        return self.git("rev-parse", "HEAD", cwd=cwd)


def make_git_repo(path: Path) -> GitRepo:
    """A repository on branch main with one commit (README.md) at ``path``."""
    path.mkdir(parents=True)
    repo = GitRepo(path)
    repo.git("init", "--quiet", "--initial-branch=main")
    repo.commit("initial", {"README.md": "# widgets\n"})
    return repo


@pytest.fixture
def git_repo_factory() -> Any:
    """``factory(path) -> GitRepo``: a fresh repository on main with one commit."""
    return make_git_repo


@pytest.fixture
def git_repo(tmp_path: Path) -> GitRepo:
    """A repository `widgets` on branch main with one commit (README.md), at <tmp>/src/acme/widgets."""
    return make_git_repo(tmp_path / "src" / "acme" / "widgets")
