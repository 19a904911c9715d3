"""`orch demo`: a whole 3-worker plan run by the real engine on a private simulated herdr, then torn down.

`orch demo --hosts` runs the same plan with one worker on a build box: a second simulated herdr reached as a saved
machine, and the simulator's `ssh` (herdr_sim/ssh.py) for git and orch there, on a simulated network of two hosts.

This is the only orchestrator module allowed to import `herdr_sim`: the simulator is the demo's stage (a server,
tmux and scripted agents of its own), never something the engine depends on. The engine still talks to it only
through `herdr` on PATH, exactly as it talks to a real herdr.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import string
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from types import FrameType
from typing import TextIO

from pydantic import BaseModel, ConfigDict

from herdr_sim import machines, ssh, versions
from herdr_sim.testing import SimServer
from herdr_sim.tmux import Tmux
from orchestrator.config import Settings
from orchestrator.engine import Engine, orch_executable
from orchestrator.locations import LEDGER_FILE
from orchestrator.errors import ExitCode, OrchError
from orchestrator.git import run_git
from orchestrator.herdr import HerdrCli
from orchestrator.preflight import PreflightResult, render_preflight
from orchestrator.progress import Progress
from orchestrator.report import Report
from orchestrator.run import Interrupted, run_plan

# herdr 0.7.5 waits 3 s after `agent start` before an agent counts as ready; the demo keeps herdr's real pace.
SETTLE_MS = 3000

DISCLAIMER = (
    "orch demo: the real `orch run` engine drives a 3-worker plan on a private, simulated herdr.",
    "The agents are scripted stand-ins (herdr_sim), not real coding agents; your herdr, tmux and repositories are not touched.",
    "With a real herdr the same plan drives real agents: inside a herdr pane, run `orch run plan.toml`.",
)
HOSTS_DISCLAIMER = (
    "orch demo --hosts: the real `orch run` engine drives a 3-worker plan across two simulated hosts, this machine and a build box.",
    "The build box is a second private simulated herdr (its ids collide with this one's), reached as herdr's saved machine `buildbox`",
    "and over a simulated ssh; its worker's callbacks wait in a spool there until the controller collects them, and its commit is",
    "fetched home by SHA, verified and merged here. The agents are scripted stand-ins (herdr_sim); your herdr, tmux, ssh and",
    "repositories are not touched. With real machines the same plan drives real agents: README \"Fleets across machines\".",
)
# The build box: its name in the plan, its herdr saved machine's label, and the ssh target both reach it by.
BOX = "buildbox"
BOX_TARGET = "me@buildbox"

# Variables that would point the demo at the person's real herdr, tmux, git setup or simulator knobs.
_LEAKY = (
    "HERDR_ENV", "HERDR_SOCKET_PATH", "HERDR_SESSION", "HERDR_WORKSPACE_ID", "HERDR_TAB_ID", "HERDR_PANE_ID",
    "HERDR_SIM_HOME", "HERDR_SIM_AGENT_START_DELAY_MS", "HERDR_SIM_AGENT_MODULE", "ORCH_HERDR", "TMUX", "TMUX_PANE",
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_SSH", "GIT_SSH_COMMAND", machines.NETWORK_ENV,
)
# A fixed identity and no global/system git config: the demo commits even on a machine with no git identity, and a
# person's signing or hook settings cannot break (or be exercised by) the scripted agents' commits.
_GIT_ISOLATION = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "orch demo",
    "GIT_AUTHOR_EMAIL": "demo@orch.invalid",
    "GIT_COMMITTER_NAME": "orch demo",
    "GIT_COMMITTER_EMAIL": "demo@orch.invalid",
}


class DemoInterrupted(OrchError):
    """Ctrl-C or SIGTERM stopped the demo; everything it started was removed."""

    exit_code = ExitCode.INTERRUPTED


class Cleanup(BaseModel):
    """What the demo started and what became of it (the evidence that nothing was left behind)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temp_dir: str
    sim_home: str
    tmux_socket: str
    herdr_socket: str
    server_pid: int | None
    process_ids: tuple[int, ...]  # every process that ran inside the simulated herdr at the end (panes, agents, tmux)
    removed: bool  # False with --keep-going: the simulated herdr and the temp dir were left running on purpose
    problems: tuple[str, ...]


class DemoOutcome(BaseModel):
    """How the demo ended: the run, its report, where its ledger and report live, and the clean-up."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    finished: bool
    state_dir: str
    ledger: str
    report_path: str
    plan: str
    report: Report
    exit_code: int
    cleanup: Cleanup


class HostsOutcome(DemoOutcome):
    """How `orch demo --hosts` ended: as the demo, and the build box's own simulated herdr (``cleanup`` covers every
    process of both hosts)."""

    buildbox: Cleanup


def demo_data(name: str) -> str:
    """One of the demo's shipped files (`orchestrator/demo_data/`): plan.toml, scenarios.toml, project.toml."""
    return resources.files("orchestrator").joinpath("demo_data", name).read_text(encoding="utf-8")


def state_dir(env: Mapping[str, str]) -> Path:
    """Where demo runs keep their ledger and reports: `$ORCH_HOME/demo` (default `$XDG_STATE_HOME/orch/demo`)."""
    return Settings.from_env(env).orch_home / "demo"


@contextmanager
def _signals_interrupt() -> Iterator[None]:
    # A supervisor's SIGTERM or a closed terminal's SIGHUP must tear the demo down like Ctrl-C does.
    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextmanager
def _isolated_environ(overrides: Mapping[str, str]) -> Iterator[None]:
    # git.py and the verification re-runs read os.environ; for the demo's duration it must not lead to the
    # person's herdr, tmux or git configuration. Restored afterwards (the process usually ends right after).
    saved = dict(os.environ)
    for name in _LEAKY:
        os.environ.pop(name, None)
    os.environ.update(overrides)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def build_project(repo: Path) -> None:
    """The throwaway repository: the tiny package from project.toml, one commit on main."""
    files: dict[str, str] = tomllib.loads(demo_data("project.toml"))["files"]
    for relpath, text in files.items():
        target = repo / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    run_git(["init", "--quiet", "--initial-branch=main"], cwd=repo)
    run_git(["add", "--all"], cwd=repo)
    run_git(["commit", "--quiet", "--no-verify", "-m", "widgets: area()"], cwd=repo)


def sim_processes(sim_home: Path) -> list[int]:
    """Live processes carrying this simulator home in their environment: its server, tmux, panes and agents."""
    needle = f"HERDR_SIM_HOME={sim_home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone, or not ours to read (then it is not one we started either)
        if needle in environ.split(b"\0") and stat[stat.rindex(")") + 2] != "Z":
            found.append(int(entry.name))
    return sorted(found)


class Stage:
    """The demo's world: a temp dir with the repository, plan and scenarios, and the simulated herdr server.

    With ``hosts``, a build box too: a checkout of its own (a clone of the repository), its own simulated herdr in the
    same session (its ids collide with the controller's), a saved machine on the controller's herdr reaching it, and
    the simulator's `ssh` first on the controller's PATH, both over one simulated network file.
    """

    def __init__(self, root: Path, organization: str, *, hosts: bool = False) -> None:
        self.root = root
        self.organization = organization
        self.src_root = root / "src"
        self.sim_home = root / "sim"
        self.sim: SimServer | None = None
        self.server_pid: int | None = None
        self.seen: set[int] = set()
        self.hosts = hosts
        self.box_root = root / BOX  # the build box's HOME; its checkout is box_root/src/<organization>/<repo>
        self.box_sim_home = root / "box-sim"
        self.box: SimServer | None = None
        self.box_server_pid: int | None = None
        self.box_seen: set[int] = set()
        self._outer_path = os.environ.get("PATH", "/usr/bin:/bin")  # the machine's own PATH, both hosts start from

    def overrides(self) -> dict[str, str]:
        """What the simulated server (and so every pane and agent) runs with."""
        hosts = {
            machines.NETWORK_ENV: str(self.root / "network.json"),
            "PATH": f"{self.root / 'bin'}:{self._outer_path}",  # the simulated `ssh` first, on the controller
            # Saved machines are played by the newest profile (`herdr machine status` is 0.9.2+), client and server.
            versions.ENV: versions.NEWEST.name,
            versions.SERVER_ENV: "",
        } if self.hosts else {}
        return {
            "HERDR_SIM_SETTLE_MS": str(SETTLE_MS),
            "HERDR_SIM_SCENARIOS": str(self.root / "scenarios.toml"),
            "HERDR_SIM_INTEGRATIONS": "codex,claude,opencode,pi",
            # A HOME of the stage's own: nothing the simulator, its tmux, pane shells or agents start may read or write
            # the person's dotfiles (a pane's bash once cut their ~/.bash_history to 500 lines, issue 21).
            "HOME": str(self.root / "home"),
            # Agents write check reports under $TMPDIR: keep them inside the temp dir so they go with it.
            "TMPDIR": str(self.root / "tmp"),
            # Running the tests must not leave __pycache__ in a worktree (untracked files count as changes).
            "PYTHONDONTWRITEBYTECODE": "1",
            **_GIT_ISOLATION,
            **hosts,
        }

    @property
    def box_checkout(self) -> Path:
        """The repository's primary checkout on the build box."""
        return self.box_root / "src" / self.organization / "widgets"

    def box_login(self) -> dict[str, str]:
        """The build box's environment as its sshd gives it to a command: its own HOME, herdr and PATH (orch there)."""
        assert self.box is not None
        env = {name: value for name, value in self._box_overrides().items() if name != machines.NETWORK_ENV}
        env.update(
            PATH=f"{self.box.paths.bin}:{env['PATH']}",
            HERDR_SIM_HOME=str(self.box.home),
            HERDR_SOCKET_PATH=str(self.box.paths.socket_for(self.organization)),
            HERDR_SESSION=self.organization,
            LANG="C.UTF-8",
        )
        return env

    def start(self) -> dict[str, str]:
        """Start the simulated herdr (and the build box's) and open the controller's workspace; returns the
        controller pane's env."""
        (self.root / "tmp").mkdir()
        (self.root / "home").mkdir()
        (self.root / "policies").mkdir()
        (self.root / "scenarios.toml").write_text(demo_data("scenarios.toml"), encoding="utf-8")
        self.sim = SimServer(self.sim_home, self.overrides(), session=self.organization)
        try:
            self.sim.__enter__()
        finally:
            self.server_pid = self.sim.proc.pid if self.sim.proc is not None else None
        if self.hosts:
            self._start_box(self.sim)
        env = self.sim.env()
        herdr = HerdrCli(str(self.sim.paths.bin / "herdr"), env=env)
        created = herdr.workspace_create(cwd=self.src_root / self.organization / "widgets")
        pane = created.root_pane
        env.update(
            HERDR_ENV="1",
            HERDR_PANE_ID=pane.pane_id,
            HERDR_TAB_ID=pane.tab_id,
            HERDR_WORKSPACE_ID=pane.workspace_id,
            ORCH_SRC_ROOT=str(self.src_root),
            ORCH_POLICY_DIR=str(self.root / "policies"),
        )
        return env

    def _start_box(self, controller: SimServer) -> None:
        # The box's checkout is a clone of the controller's repository at the same base, as a person would make it.
        (self.box_root / "home").mkdir(parents=True)
        run_git(["clone", "--quiet", str(self.src_root / self.organization / "widgets"), str(self.box_checkout)], cwd=self.root)
        self.box = SimServer(self.box_sim_home, self._box_overrides(), session=self.organization)
        try:
            self.box.__enter__()
        finally:
            self.box_server_pid = self.box.proc.pid if self.box.proc is not None else None
        network = {"targets": {BOX_TARGET: {"home": str(self.box.home), "env": self.box_login(), "cwd": str(self.box_root)}}}
        (self.root / "network.json").write_text(json.dumps(network, indent=2) + "\n", encoding="utf-8")
        ssh.install(self.root / "bin")
        saved = controller.run(["machine", "add", BOX_TARGET, "--label", BOX, "--remote-session", self.organization])
        if saved.returncode != 0:
            raise OrchError(f"the demo could not save its build box as a herdr machine: {saved.stderr.strip()}")

    def _box_overrides(self) -> dict[str, str]:
        # The box's server, panes and agents: a HOME of their own there, orch on the PATH (as on a real box).
        return {**self.overrides(), "HOME": str(self.box_root / "home"), "PATH": f"{Path(orch_executable()).parent}:{self._outer_path}"}

    def plan_text(self) -> str:
        """The plan this stage runs: the demo's, or with ``hosts`` the two-host one with the build box's paths."""
        if not self.hosts:
            return demo_data("plan.toml")
        return string.Template(demo_data("plan-hosts.toml")).substitute(
            checkout=self.box_checkout, orch=orch_executable(), orch_home=self.box_root / "orch-home")

    def _servers(self) -> list[tuple[SimServer | None, Path, set[int]]]:
        servers = [(self.sim, self.sim_home, self.seen)]
        return [*servers, (self.box, self.box_sim_home, self.box_seen)] if self.hosts else servers

    def tear_down(self) -> Cleanup:
        """Stop the servers (and with them tmux, panes and agents), make sure nothing survived, remove the temp dir."""
        problems: list[str] = []
        servers = self._servers()
        tmuxes = [Tmux(sim.paths.tmux_socket) for sim, _, _ in servers if sim is not None]
        for sim, home, seen in servers:
            seen.update(sim_processes(home))
            if sim is not None:
                try:
                    sim.stop()
                except (OSError, subprocess.SubprocessError) as exc:
                    problems.append(f"herdr-sim server stop failed ({exc}); killing what is left")

        def left() -> list[int]:
            return sorted(pid for _, home, _ in servers for pid in sim_processes(home))

        # Whatever outlived the orderly stop is still ours (it carries our simulator home): end it.
        deadline = time.monotonic() + 5
        while (alive := left()) or any(tmux.alive() for tmux in tmuxes):
            if time.monotonic() > deadline:
                for pid in alive:
                    _kill(pid)
                for tmux in tmuxes:
                    tmux.kill()
                time.sleep(0.2)
                still = left()
                if still:
                    problems.append(f"processes still running after the stop: {', '.join(map(str, still))}")
                problems.extend(f"the tmux server at {tmux.socket} still answers" for tmux in tmuxes if tmux.alive())
                break
            time.sleep(0.05)
        shutil.rmtree(self.root, ignore_errors=True)
        if self.root.exists():
            problems.append(f"could not remove {self.root}")
        return self.cleanup(removed=True, problems=problems)

    def drop_checkouts(self, state: Path) -> None:
        """Remove the run folders' integration worktrees of this stage's repository, which is gone with the stage.

        What they held (the demo's merges) lived in that throwaway repository; left behind they are broken checkouts.
        """
        for dot_git in state.glob("runs/*/integration/.git"):
            text = dot_git.read_text(errors="replace") if dot_git.is_file() else ""
            gitdir = Path(text.removeprefix("gitdir:").strip()) if text.startswith("gitdir:") else None
            if gitdir is not None and gitdir.is_relative_to(self.root):
                shutil.rmtree(dot_git.parent, ignore_errors=True)

    def cleanup(self, *, removed: bool, problems: list[str] | None = None) -> Cleanup:
        """The clean-up record (also for a kept stage, then listing what still runs); with ``hosts`` its processes
        are both servers' (the build box's own record is ``box_cleanup``)."""
        if not removed:
            for _, home, seen in self._servers():
                seen.update(sim_processes(home))
        return self._record(self.sim, self.sim_home, self.server_pid, self.seen | self.box_seen, removed, problems)

    def box_cleanup(self, *, removed: bool) -> Cleanup:
        """The build box's simulated herdr: what it ran and where its sockets were (its problems are the stage's)."""
        return self._record(self.box, self.box_sim_home, self.box_server_pid, self.box_seen, removed, None)

    def _record(self, sim: SimServer | None, home: Path, pid: int | None, seen: set[int], removed: bool,
                problems: list[str] | None) -> Cleanup:
        return Cleanup(
            temp_dir=str(self.root),
            sim_home=str(home),
            tmux_socket=str(sim.paths.tmux_socket if sim is not None else home / "tmux.sock"),
            herdr_socket=str(sim.paths.socket_for(self.organization) if sim is not None else home / "herdr.sock"),
            server_pid=pid,
            process_ids=tuple(sorted(seen)),
            removed=removed,
            problems=tuple(problems or ()),
        )


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def run_demo(
    *,
    out: Callable[[str], None],
    progress_stream: TextIO,
    keep_going: bool = False,
    hosts: bool = False,
    env: Mapping[str, str] | None = None,
) -> DemoOutcome:
    """Build the stage, run the demo plan through `run_plan` as the controller pane would, tear the stage down.

    ``out`` receives the narrative lines (disclaimer first); live progress goes to ``progress_stream``.
    Teardown happens on every way out (failure, Ctrl-C, SIGTERM, SIGHUP) unless ``keep_going`` asked to keep
    the stage after a run that reached its report. ``hosts``: the two-host plan, one worker on a simulated build box.
    """
    base_env = dict(os.environ if env is None else env)
    home = state_dir(base_env)
    for line in HOSTS_DISCLAIMER if hosts else DISCLAIMER:
        out(line)
    organization = str(tomllib.loads(demo_data("plan.toml"))["organization"])
    stage = Stage(Path(tempfile.mkdtemp(prefix="orch-demo-")), organization, hosts=hosts)
    if hosts:
        out(f"Stage: {stage.root} (both hosts' repositories, worktrees and simulated herdrs, the simulated network; removed at the end)")
    else:
        out(f"Stage: {stage.root} (repository, worktrees, simulated herdr; removed at the end)")
    out(f"State: {home} (the run's ledger and report stay here)")
    keep = False

    def show_checks(checked: PreflightResult) -> None:
        progress_stream.write(render_preflight(checked, symbols=progress_stream.isatty()))
        progress_stream.flush()

    try:
        with _signals_interrupt(), _isolated_environ({**stage.overrides(), "ORCH_HOME": str(home)}):
            repo = stage.src_root / organization / "widgets"
            repo.mkdir(parents=True)
            build_project(repo)
            pane_env = stage.start()
            plan = stage.root / "plan.toml"
            plan.write_text(stage.plan_text(), encoding="utf-8")
            pane_env["ORCH_HOME"] = str(home)
            engine = Engine.from_env(pane_env, herdr_binary=str(stage.sim_home / "bin" / "herdr"), log_calls=True)
            engine.controller = "run"
            engine.command = "orch demo"
            try:
                outcome = run_plan(engine, plan, Progress(progress_stream), on_preflight=show_checks)
                run_dir = engine.run_dir(outcome.run_id)
            finally:
                engine.close()
            keep = keep_going
    except (KeyboardInterrupt, Interrupted):
        with _no_interrupts():
            done = stage.tear_down()
            stage.drop_checkouts(home)
        raise DemoInterrupted(
            f"demo interrupted; everything it started was removed ({_cleanup_words(done)})",
            hint=f"its ledger stays in {home}; run `orch demo` again for a fresh one",
        ) from None
    except BaseException:
        with _no_interrupts():
            stage.tear_down()
            stage.drop_checkouts(home)
        raise
    if keep:
        cleanup = stage.cleanup(removed=False)
    else:
        with _no_interrupts():
            cleanup = stage.tear_down()
            stage.drop_checkouts(home)
    ended = DemoOutcome(
        run_id=outcome.run_id,
        finished=outcome.finished,
        state_dir=str(home),
        ledger=str(home / LEDGER_FILE),
        report_path=str(run_dir / "report.md"),
        plan=str(run_dir / "plan.toml"),
        report=outcome.report,
        exit_code=outcome.exit_code if not cleanup.problems else int(ExitCode.FAILURE),
        cleanup=cleanup,
    )
    return HostsOutcome(**dict(ended), buildbox=stage.box_cleanup(removed=cleanup.removed)) if hosts else ended


@contextmanager
def _no_interrupts() -> Iterator[None]:
    # A second Ctrl-C (or a SIGTERM) must not abandon the teardown halfway and leave tmux and agents running.
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _hosts_closing(c: Cleanup, box: Cleanup) -> list[str]:
    """The clean-up lines of a two-host demo: both simulated herdrs, stopped or kept."""
    if c.removed:
        return [
            f"Cleaned up: the simulated herdrs of both hosts (server pids {c.server_pid} and {box.server_pid}, "
            f"{len(c.process_ids)} processes ended, {c.temp_dir} removed); tmux sockets {c.tmux_socket} and {box.tmux_socket} closed.",
            *(f"Clean-up problem: {p}" for p in c.problems),
        ]
    here, there = (f"HERDR_SIM_HOME={shlex.quote(s.sim_home)} HERDR_SOCKET_PATH={shlex.quote(s.herdr_socket)}" for s in (c, box))
    return [
        f"Kept (--keep-going): the simulated herdrs (server pids {c.server_pid} and {box.server_pid}) and {c.temp_dir}.",
        f"Look around: {here} herdr-sim pane list",
        f"Look around the build box: {there} herdr-sim pane list",
        f"Stop them: {here} herdr-sim server stop && {there} herdr-sim server stop && rm -rf {shlex.quote(c.temp_dir)}",
    ]


def _cleanup_words(cleanup: Cleanup) -> str:
    pid = f"server pid {cleanup.server_pid}, " if cleanup.server_pid is not None else ""
    return f"{pid}{len(cleanup.process_ids)} processes ended, {cleanup.temp_dir} removed"


def closing_lines(outcome: DemoOutcome) -> list[str]:
    """What the person reads after the report: where things are, and what was cleaned up or kept."""
    c = outcome.cleanup
    lines = [
        f"Report: {outcome.report_path}",
        f"Ledger: {outcome.ledger} (`ORCH_HOME={shlex.quote(outcome.state_dir)} orch report --run {outcome.run_id}`)",
        f"Plan: {outcome.plan} (inside a real herdr pane: `orch run plan.toml`)",
    ]
    if isinstance(outcome, HostsOutcome):
        return [*lines[:2], f"Plan: {outcome.plan} (a two-host plan: point its [hosts.buildbox] at a real build box as README "
                            "\"Fleets across machines\" says, then inside a herdr pane: `orch run plan.toml`)", *_hosts_closing(c, outcome.buildbox)]
    if c.removed:
        lines.append(f"Cleaned up: the simulated herdr ({_cleanup_words(c)}); tmux socket {c.tmux_socket} closed.")
        lines.extend(f"Clean-up problem: {p}" for p in c.problems)
    else:
        env = f"HERDR_SIM_HOME={shlex.quote(c.sim_home)} HERDR_SOCKET_PATH={shlex.quote(c.herdr_socket)}"
        lines += [
            f"Kept (--keep-going): the simulated herdr (server pid {c.server_pid}) and {c.temp_dir}.",
            f"Look around: {env} herdr-sim pane list",
            f"Stop it: {env} herdr-sim server stop && rm -rf {shlex.quote(c.temp_dir)}",
        ]
    return lines

