"""The engine's shared context: settings, the herdr boundary, the ledger, the clock and a run's files.

Every phase (preflight, provision, dispatch, observe, verify, retire, report) is a function taking an Engine;
this is the one place herdr, the ledger and the plan meet. Nothing here talks to herdr itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar, Union, cast

from orchestrator import git
from orchestrator.clock import Clock, SystemClock
from orchestrator.config import Settings
from orchestrator.errors import HerdrProtocolError, HerdrTimeout, HostUnreachable, OrchError, one_line, storage_error
from orchestrator.locations import LEDGER_FILE, run_dir
from orchestrator.runlog import RunLog
from registry.facts import EffectSettled, EffectUnknown, FactKind
from registry import Effect, EffectStatus, Ledger, LedgerMissing, Run, RunNotFound, RunStatus, Worker
from registry.kinds import CONTROLLER_HOST

if TYPE_CHECKING:  # imported where used: a command that reads only the ledger (`orch inbox add`) loads neither
    from orchestrator.herdr import Herdr, HerdrCli
    from orchestrator.plan import ResolvedPlan, ResolvedWorker

# An effect's result: a plain record of orch's own, or one of herdr's response models (orchestrator.effects.to_json).
M = TypeVar("M")

RUN_LOG_FILE = "orch.log"


class LedgerLost(OrchError):
    """The ledger vanished or was replaced under recorded runs: orch stops rather than start over and send again."""


class InFlightEffect(OrchError):
    """An effect was intended by an earlier (crashed or concurrent) process and read-back cannot say if it happened."""


@dataclass(frozen=True)
class Done(Generic[M]):
    """Read-back proves the effect happened: ``result`` is what the call would have answered; ``how`` says why."""

    result: M
    how: str


@dataclass(frozen=True)
class NotDone:
    """Read-back proves the effect did not happen: make it now (under a new attempt key); ``how`` says why."""

    how: str


@dataclass(frozen=True)
class CannotTell:
    """Read-back cannot decide: one question for the person and the command that answers it."""

    question: str
    command: str


# What a settle function answers. A bare result is Done and None is CannotTell (both without saying how).
Settlement: TypeAlias = Union[Done[M], NotDone, CannotTell, M, None]  # noqa: UP007 (a generic alias needs Union)


def _silent(line: str) -> None:
    return None


class _HerdrOnFirstUse:
    """A HerdrCli built on first use, so commands that never call herdr do not import orchestrator.herdr.

    Every worker callback is an `orch inbox add` process: its start-up is paid once per callback.
    """

    def __init__(self, binary: str, env: Mapping[str, str], on_call: Callable[[Any], None] | None) -> None:
        object.__setattr__(self, "_args", (binary, env, on_call))
        object.__setattr__(self, "_cli", None)

    def _real(self) -> HerdrCli:
        cli: HerdrCli | None = object.__getattribute__(self, "_cli")
        if cli is None:
            from orchestrator.herdr import HerdrCli

            binary, env, on_call = object.__getattribute__(self, "_args")
            cli = HerdrCli(binary, env=env, on_call=on_call)
            object.__setattr__(self, "_cli", cli)
        return cli

    def __getattr__(self, name: str) -> Any:
        if name == "binary" and object.__getattribute__(self, "_cli") is None:
            return object.__getattribute__(self, "_args")[0]
        return getattr(self._real(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._real(), name, value)


def orch_executable() -> str:
    """The absolute path of the `orch` command workers call back (the run process cannot be prompted by herdr)."""
    beside = Path(sys.executable).parent / "orch"
    found = str(beside) if beside.exists() else shutil.which("orch")
    if not found:
        raise OrchError("cannot find the `orch` executable to put in worker callbacks", hint="install orch into the Python that runs it (`.venv/bin/pip install -e .`, see the README)")
    return str(Path(found).absolute())


@dataclass
class Engine:
    """What every phase needs; build one with ``Engine.from_env`` (or directly in tests)."""

    settings: Settings
    herdr: Herdr
    clock: Clock = field(default_factory=SystemClock)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    echo: Callable[[str], None] = _silent
    # "agent": an LLM controller in a herdr pane (SKILL.md door); "run": the `orch run` process.
    controller: str = "agent"
    # The run's orch.log (every herdr and git call); attached to a run's folder once the run is known.
    run_log: RunLog = field(default_factory=RunLog, repr=False)
    _stop_logging: Callable[[], None] | None = field(default=None, repr=False)
    _local: threading.local = field(default_factory=threading.local, repr=False)
    _opened: list[Ledger] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Whether opening the ledger may create it: "open" (tests, the demo, doctor's probe), "existing" (the CLI's
    # commands that read or act on runs: a missing ledger means no run, or a lost one; nothing is created),
    # "new-runs" (`orch run`, `orch preflight`: created only where no run folder says runs were recorded before).
    ledger_mode: str = "open"
    # The ledger file's (device, inode) when this engine first opened it: checked at every use (see ``ledger``).
    _identity: tuple[int, int] | None = field(default=None, repr=False)
    # What drives runs from this process, for the holder note of the one-driver lock (orchestrator.driver).
    command: str = "orch"
    _driving: list[Path] = field(default_factory=list, repr=False)
    # The run this process last drove (kept after ``let_go``): a herdr outage that ends a door command stops it
    # (orchestrator.door.stop_for_outage).
    acting_on: str | None = None
    _starting: Path | None = field(default=None, repr=False)  # the plan's start lock, while `orch run` or `orch preflight` creates its run
    # Resolved plan snapshots, by path and content (see plan_for).
    _plans: dict[tuple[str, bytes], ResolvedPlan] = field(default_factory=dict, repr=False)
    # An effect whose call was lost (timed out, killed, garbled) is read back this many times, this far apart,
    # before the run stops to ask (Engine.settle_lost).
    settle_attempts: int = 4
    settle_pause_s: float = 1.0
    # How ssh commands to a plan's other hosts are run (orchestrator.remote); None is the real runner. Tests script it.
    remote_runner: Any = field(default=None, repr=False)
    # One herdr boundary per host of a run (``herdr_at``): the controller's is ``herdr``; another host's is built on
    # first use (``herdr --machine LABEL``) or set here by tests, by plan host name.
    host_herdrs: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        herdr_binary: str | None = None,
        clock: Clock | None = None,
        echo: Callable[[str], None] = _silent,
        on_call: Callable[[Any], None] | None = None,
        defer_herdr: bool = False,
        log_calls: bool = False,
    ) -> Engine:
        """The real wiring: settings and the herdr binary (``--herdr``, else ``ORCH_HERDR``, else ``herdr``) from env.

        ``defer_herdr``: build the HerdrCli on its first use (the CLI: most callbacks never touch herdr).
        ``log_calls``: write every herdr and git call to the run's orch.log (the CLI and the demo; one engine per
        process, since git's observer is process-wide; ``close`` stops it).
        """
        env = dict(os.environ if env is None else env)
        binary = herdr_binary or env.get("ORCH_HERDR") or "herdr"
        run_log = RunLog()

        def each_call(call: Any) -> None:
            if log_calls:
                run_log.herdr(call)
            if on_call is not None:
                on_call(call)

        if defer_herdr:
            herdr = cast("Herdr", _HerdrOnFirstUse(binary, env, each_call))
        else:
            from orchestrator.herdr import HerdrCli

            herdr = HerdrCli(binary, env=env, on_call=each_call)
        return cls(
            settings=Settings.from_env(env),
            herdr=herdr,
            clock=clock or SystemClock(),
            env=env,
            echo=echo,
            run_log=run_log,
            _stop_logging=git.observe(run_log.git) if log_calls else None,
        )

    def herdr_on(self, *, machine: str | None = None, ssh: str | None = None) -> HerdrCli:
        """A herdr client for another host: ``herdr --machine MACHINE`` through the controller's herdr, or the host's
        own herdr over ``ssh``; with the controller's binary, environment, runner and call log."""
        from orchestrator.herdr import HerdrCli, RetryPolicy, run_process

        mine = self.herdr
        return HerdrCli(
            # Over ssh it is the host's own `herdr` on its PATH, run through the remote runner.
            "herdr" if ssh is not None else mine.binary,
            env=getattr(mine, "env_overlay", None),
            runner=(self.remote_runner or run_process) if ssh is not None else getattr(mine, "runner", run_process),
            retry=getattr(mine, "retry", None) or RetryPolicy(),
            on_call=getattr(mine, "on_call", None),
            machine=machine,
            ssh=ssh,
        )

    def herdr_at(self, run_id: str, host: str) -> Herdr:
        """The herdr boundary of one host of a run: the controller's own for ``local``, else the host's herdr server
        through the controller's saved machine (``herdr --machine LABEL``). Its ids mean something only to it."""
        from registry.kinds import CONTROLLER_HOST

        if host == CONTROLLER_HOST:
            return self.herdr
        with self._lock:
            found = self.host_herdrs.get(host)
        if found is not None:
            return cast("Herdr", found)
        config = self.host_config(run_id, host)
        cli = self.herdr_on(machine=config.machine)
        cli.trust_repository = bool(getattr(self.herdr, "trust_repository", False))
        with self._lock:
            return cast("Herdr", self.host_herdrs.setdefault(host, cli))

    def herdr_of(self, worker: Worker) -> Herdr:
        """The herdr boundary of the host ``worker`` runs on (every herdr id on the worker row is that host's)."""
        return self.herdr_at(worker.run_id, worker.host)

    def effect_herdr(self, effect: Effect) -> Herdr:
        """The herdr boundary an effect was made through: its request's ``host``, else its worker's (a run-level
        effect: the controller's)."""
        return self.herdr_at(effect.run_id, self.effect_host(effect))

    def effect_host(self, effect: Effect) -> str:
        """The host an effect was made on: its request's ``host``, else its worker's (a run-level effect: the controller)."""
        host = effect.request.get("host")
        if host is None and effect.task_label is not None:
            host = self.ledger.get_worker(effect.run_id, effect.task_label).host
        return str(host or CONTROLLER_HOST)

    @staticmethod
    def on_host(host: str) -> dict[str, str]:
        """What an effect's request adds to say which host's herdr its ids belong to: nothing for the controller's
        (every request recorded before hosts existed reads the same), ``{"host": NAME}`` for another host's."""
        from registry.kinds import CONTROLLER_HOST

        return {} if host == CONTROLLER_HOST else {"host": host}

    def host_config(self, run_id: str, host: str) -> Any:
        """The run's plan entry ``[hosts.<host>]`` (orchestrator.plan.Host): how the host is reached, where its checkout is."""
        plan = self.plan_for(self.ledger.get_run(run_id))
        config = plan.plan.hosts.get(host)
        if config is None:
            raise OrchError(f"run {run_id} names host {host}, which its plan does not declare")
        return config

    # --- the ledger: one connection per thread, since provisioning runs workers concurrently ---

    @property
    def ledger_path(self) -> Path:
        """Where the ledger lives: ``$ORCH_HOME/ledger.sqlite3``."""
        return self.settings.orch_home / LEDGER_FILE

    @property
    def ledger(self) -> Ledger:
        """This thread's connection to the ledger (SQLite connections are not shared across threads).

        The file's identity is checked at every use: a ledger deleted or replaced under this process (its writes would
        go to a file nobody reads, and the next process would start from one that forgot the run) stops it with
        LedgerLost instead of carrying on.
        """
        ledger: Ledger | None = getattr(self._local, "ledger", None)
        if ledger is None:
            ledger = self._open_ledger()
            self._local.ledger = ledger
            with self._lock:
                self._opened.append(ledger)
        elif self._file_identity() != self._identity:
            raise self._replaced()
        return ledger

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            found = os.stat(self.ledger_path)
        except FileNotFoundError:
            return None
        return found.st_dev, found.st_ino

    def _replaced(self) -> LedgerLost:
        how = "deleted" if self._file_identity() is None else "replaced by another file"
        return LedgerLost(
            f"the ledger {self.ledger_path} was {how} while this orch process used it; stopped so that nothing is made or sent twice",
            hint="put the original ledger file back at that path, then run the command again (`orch resume RUN` for an `orch run` run); "
            "orch never carries on from a ledger that forgot what it did",
        )

    def _open_ledger(self) -> Ledger:
        path = self.ledger_path
        if self.ledger_mode != "open" and not path.is_file():
            self._refuse_lost_ledger()
            if self.ledger_mode == "existing":
                raise OrchError(f"no run in {path}", hint="start one with `orch run PLAN` (step by step: `orch preflight PLAN`)")
        try:
            ledger = Ledger.open(path, now=self.clock.now, create=self.ledger_mode != "existing")
        except LedgerMissing:
            raise OrchError(f"no run in {path}", hint="start one with `orch run PLAN` (step by step: `orch preflight PLAN`)") from None
        identity = self._file_identity()
        with self._lock:
            first = self._identity is None
            if first:
                self._identity = identity
        if not first and identity != self._identity:
            ledger.close()
            raise self._replaced()
        return ledger

    def check_storage(self) -> None:
        """Before preflight reads herdr: ORCH_HOME takes a file (written, synced, removed) and the ledger opens (made and
        migrated if new) and takes a write. A full, read-only or damaged store is one line now, not after herdr calls."""
        home = self.settings.orch_home
        probe = home / f".write-probe-{os.getpid()}"
        try:
            home.mkdir(parents=True, exist_ok=True)
            with open(probe, "wb") as out:
                out.write(b"\0" * 65536)  # room for a plan snapshot, packets and the first ledger pages
                out.flush()
                os.fsync(out.fileno())
        except OSError as exc:
            raise storage_error(exc, str(home)) or exc from None
        finally:
            with contextlib.suppress(OSError):
                probe.unlink()
        try:
            self.ledger.probe_write()
        except Exception as exc:  # SQLite's own errors (only registry imports sqlite3): translated when they are storage's
            stored = storage_error(exc, str(home))
            if stored is None:
                raise
            raise stored from None

    def run_folders(self) -> list[Path]:
        """The run folders under ORCH_HOME (each run recorded in the ledger has one), oldest name first."""
        try:
            return sorted(p for p in (self.settings.orch_home / "runs").iterdir() if p.is_dir())
        except (FileNotFoundError, NotADirectoryError):
            return []

    def _refuse_lost_ledger(self) -> None:
        """A missing ledger where run folders say runs were recorded is LedgerLost: starting over would send again."""
        folders = self.run_folders()
        if folders:
            raise LedgerLost(
                f"the ledger {self.ledger_path} is missing, but {self.settings.orch_home / 'runs'} holds {len(folders)} run folder(s) "
                f"(the newest: {max(folders, key=lambda p: p.stat().st_mtime).name}): it was deleted or moved",
                hint="put it back at that path (orch then carries on, making and sending nothing twice); orch never starts over from an "
                f"empty ledger, which would send every packet again. To start afresh on purpose, move {self.settings.orch_home} aside",
            )

    def has_ledger(self) -> bool:
        """Whether there is a ledger to read (LedgerLost when it vanished under recorded runs); opens nothing."""
        if self.ledger_path.is_file():
            return True
        self._refuse_lost_ledger()
        return False

    def _unknown_folder(self, names: set[str]) -> Path | None:
        """The newest run folder whose run the ledger does not know (``names``: the folders of the runs it knows)."""
        unknown = [p for p in self.run_folders() if p.name not in names]
        return max(unknown, key=lambda p: p.stat().st_mtime) if unknown else None

    def _forgotten(self, folder: Path) -> LedgerLost:
        return LedgerLost(
            f"the ledger {self.ledger_path} does not know run {folder.name}, whose folder {folder} exists: the ledger was replaced or reset",
            hint="put back the ledger that recorded it; orch does not act on a run it cannot read back, so nothing is sent twice. "
            f"(If orch was stopped at the very moment it recorded that run, nothing was made for it: move {folder} aside.)",
        )

    def close(self) -> None:
        """Close every ledger connection this engine opened, let go of the runs it drove (and stop logging git calls)."""
        from orchestrator import driver

        with self._lock:
            driving, self._driving = self._driving, []
        for path in driving:
            driver.release(path)
        if self._stop_logging is not None:
            self._stop_logging()
            self._stop_logging = None
        with self._lock:
            for ledger in self._opened:
                ledger.close()
            self._opened.clear()
        self._local = threading.local()

    # --- runs and their files ---

    def run_dir(self, run_id: str) -> Path:
        """The run's folder under ORCH_HOME (plan snapshot, packets, reports)."""
        return run_dir(self.settings.orch_home, run_id)

    def find_run(self, run_id: str | None = None) -> Run:
        """The named run, or the newest unfinished run of this controller pane (else of anyone)."""
        if self.ledger_mode == "existing" and not self.has_ledger():  # a read creates no ledger
            if run_id:
                raise OrchError(f"no run {run_id} in {self.ledger_path}", hint="`orch status --all` lists the runs")
            raise OrchError("no unfinished run in the ledger", hint="start one with `orch run PLAN` (step by step: `orch preflight PLAN`)")
        if run_id:
            try:
                return self.attach_log(self.ledger.get_run(run_id))
            except RunNotFound:
                folder = self.run_dir(run_id)
                if folder.is_dir():
                    raise self._forgotten(folder) from None
                raise OrchError(f"no run {run_id} in {self.ledger_path}", hint="`orch status --all` lists the runs") from None
        runs = self.ledger.list_runs()
        open_runs = [r for r in runs if r.status is not RunStatus.FINISHED]
        mine = [r for r in open_runs if r.controller_target == self.env.get("HERDR_PANE_ID")]
        candidates = mine or open_runs
        if not candidates:
            forgotten = self._unknown_folder({self.run_dir(r.run_id).name for r in runs})
            if forgotten is not None:
                raise self._forgotten(forgotten)
            raise OrchError("no unfinished run in the ledger", hint="start one with `orch run PLAN` (step by step: `orch preflight PLAN`)")
        return self.attach_log(max(candidates, key=lambda r: r.created_at))

    def drive(self, run_id: str) -> None:
        """Make this process the run's one driver until ``close`` (orchestrator.driver); RunDriven names the one that is.

        Every command that acts on a run calls this before it changes anything; a worker's callback never does.
        """
        from orchestrator import driver

        path = self.run_dir(run_id) / driver.LOCK_FILE
        with self._lock:
            self.acting_on = run_id
            if path in self._driving:
                return
        self._hold(path, run_id, f"run {run_id}")
        with self._lock:
            self._driving.append(path)

    def _hold(self, path: Path, run_id: str, what: str, doing: str | None = None) -> None:
        """Take the lock at ``path`` (orchestrator.driver); a failing lock file is the one storage line."""
        from orchestrator import driver

        try:
            driver.acquire(path, run_id, command=self.command, since=self.clock.now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), doing=doing)
        except OSError as exc:
            raise storage_error(exc, str(self.settings.orch_home)) or OrchError(
                f"cannot lock {what} at {path}: {exc.strerror or exc}",
                hint=f"orch keeps its state in {self.settings.orch_home}: make it writable (or point ORCH_HOME elsewhere)",
            ) from None

    def let_go(self, run_id: str) -> None:
        """Stop driving the run (``drive`` undone): `orch wait` drives only while it checks in, so a person's
        `orch answer` or `orch approve` can run while it idles."""
        from orchestrator import driver

        path = self.run_dir(run_id) / driver.LOCK_FILE
        with self._lock:
            if path not in self._driving:
                return
            self._driving.remove(path)
        driver.release(path)

    def refuse_second_run(self, plan_path: Path) -> None:
        """`orch run PLAN` where this pane has an unfinished run of the same plan file is refused: it would take over
        that run's worktrees and agents and send their packets again. Reads the ledger only when there is one.

        Between this check and the run's creation (preflight: herdr reads, then the run recorded and its own lock
        taken) a second `orch run PLAN` started in the same pane at the same instant would find no run either, and
        start a second one. So this process holds the plan's start lock (``hold_start``) from here until ``started``:
        the second is refused naming it, before it reads herdr."""
        pane = self.hold_start(plan_path)
        if pane is None:
            return
        try:
            self._refuse_unfinished(plan_path, str(plan_path.absolute()), pane)
        except BaseException:
            self.started()
            raise

    def hold_start(self, plan_path: Path) -> str | None:
        """Hold the start lock of ``plan_path`` in this pane (``<ORCH_HOME>/starting/``, one per pane and plan file)
        until ``started``; RunDriven names the process that holds it. Returns the pane (None outside herdr: no lock).

        `orch run PLAN` (``refuse_second_run``) and `orch preflight PLAN` (the agent controller's first call that
        makes anything) take it: two of them started in one pane at the same instant would each make a run of the
        plan, with its worktrees and agents. The second is refused before it reads herdr."""
        pane = self.env.get("HERDR_PANE_ID")
        if not pane:
            return None
        plan = str(plan_path.absolute())
        digest = hashlib.sha256(f"{pane}\0{plan}".encode()).hexdigest()[:20]
        lock = self.settings.orch_home / "starting" / f"{digest}.lock"
        self._hold(lock, "", f"the start of {plan_path}", doing=f"a run of {plan_path} is being started in pane {pane}")
        with self._lock:
            self._driving.append(lock)
            self._starting = lock
        return pane

    def started(self) -> None:
        """The run ``refuse_second_run`` checked for is recorded (with its own lock), or none will be: let the start
        lock go, so the next `orch run PLAN` in this pane finds that run (and its driver) instead."""
        from orchestrator import driver

        with self._lock:
            lock, self._starting = self._starting, None
            if lock is None or lock not in self._driving:
                return
            self._driving.remove(lock)
        driver.release(lock, remove=True)

    def _refuse_unfinished(self, plan_path: Path, plan: str, pane: str) -> None:
        from orchestrator import driver

        if not self.ledger_path.exists():
            return
        for run in self.ledger.list_runs():
            if run.status is RunStatus.FINISHED or run.controller_target != pane or run.plan_path != plan:
                continue
            found = driver.holder(self.run_dir(run.run_id) / driver.LOCK_FILE)
            if found is not None:
                raise driver.RunDriven(
                    f"run {run.run_id} of {plan_path} is being driven by another orch process: {found.describe()}",
                    hint="one orch process drives a run at a time, so nothing is sent twice: wait for it to end, or stop it "
                    f"(Ctrl-C in its pane) and continue with `orch resume {run.run_id}`",
                )
            stopped = f": {run.stopped_at}" if run.stopped_at else ""
            raise OrchError(
                f"run {run.run_id} of {plan_path} is unfinished ({run.status}{stopped}); a second run would take over its worktrees and agents",
                hint=f"`orch resume {run.run_id}` continues it (nothing is made or sent twice); `orch cancel {run.run_id}` ends it",
            )

    def drive_run(self, run_id: str | None = None, *, go_on: bool = True) -> Run:
        """``find_run``, then ``drive`` it (and take it up again when its agent controller goes on after a stop):
        what every command that acts on a run starts with. ``go_on=False``: a command that ends the run (`orch
        cancel`) takes nothing up: it would start again workers it is about to abandon."""
        run = self.find_run(run_id)
        self.drive(run.run_id)
        if go_on and run.status is RunStatus.INTERRUPTED and run.controller_kind != "run":
            # The agent controller going on after a stop (a herdr outage…): the world read back first, as `orch resume`
            # does for `orch run`'s runs (orchestrator.door.take_up, which says which stops).
            from orchestrator.door import take_up, taken_up_by_door

            if taken_up_by_door(run):
                run = take_up(self, run)[0]
        return run

    def attach_log(self, run: Run) -> Run:
        """From now on this engine's herdr and git calls go to ``run``'s orch.log; returns the run."""
        self.run_log.attach(self.run_dir(run.run_id) / RUN_LOG_FILE)
        return run

    def attach_log_id(self, run_id: str) -> None:
        """``attach_log`` for a run known by id only (preflight, right after creating it)."""
        self.run_log.attach(self.run_dir(run_id) / RUN_LOG_FILE)

    def plan_for(self, run: Run) -> ResolvedPlan:
        """The plan snapshot taken when the run was created (later edits to the plan file do not change a run)."""
        snapshot = self.run_dir(run.run_id) / "plan.toml"
        try:
            text = snapshot.read_bytes()
        except FileNotFoundError:
            raise OrchError(f"run {run.run_id} has no plan snapshot at {snapshot}") from None
        # Resolving validates the file and asks git about every branch (four git processes for the demo's plan), and
        # a run's phases ask for the plan dozens of times: resolve a snapshot once per process. Keyed by the content,
        # so a snapshot that is rewritten (tests do) is resolved again.
        key = (str(snapshot), text)
        with self._lock:
            cached = self._plans.get(key)
        if cached is None:
            from orchestrator.plan import load_plan

            cached = load_plan(snapshot, self.settings, display=run.plan_path or str(snapshot))
            with self._lock:
                self._plans[key] = cached
        if cached.policy.policy.trust_repository:
            # The run's worktree commands trust its repository only where the plan's policy says the person verified
            # it (orchestrator.herdr.HerdrCli._trust; off by default); one process drives one run.
            self.herdr.trust_repository = True  # type: ignore[attr-defined]
        return cached

    def planned(self, plan: ResolvedPlan, task: str) -> ResolvedWorker:
        """The plan entry of one task."""
        for worker in plan.workers:
            if worker.task == task:
                return worker
        raise OrchError(f"task {task} is not in the plan {plan.source}")

    def start_key(self, run_id: str, task: str, suffix: str) -> str:
        """The effect key of a step that starts a worker (provisioning, its start-up dialog): ``TASK:SUFFIX``.

        A worker started again because herdr lost what its first start made before any packet was sent (a restart;
        ``orchestrator.run.reread_world``) gets ``TASK:startN:SUFFIX`` from its N-th start on, so nothing the first
        start confirmed (a pane id, an agent) is replayed into a world that no longer has it."""
        starts = 1 + sum(1 for e in self.ledger.events(run_id, task_label=task) if e.kind == FactKind.RESTARTED)
        return f"{task}:{suffix}" if starts == 1 else f"{task}:start{starts}:{suffix}"

    def workers(self, run: Run) -> list[Worker]:
        """The run's workers in plan order."""
        return self.ledger.list_workers(run.run_id)

    # --- side effects: intended before, confirmed after, never repeated blindly ---

    def once(
        self,
        run_id: str,
        task: str | None,
        kind: str,
        key: str,
        request: Mapping[str, Any],
        act: Callable[[], M],
        *,
        model: type[M],
        settle: Callable[[], Settlement[M]] | None = None,
        unknown_on: tuple[type[Exception], ...] = (),
    ) -> M:
        """Make a side effect at most once per key: replay a confirmed one, settle an in-flight one by read-back.

        ``kind`` must be one of ``orchestrator.effects.EFFECTS`` (each kind says there how read-back settles it).
        ``request`` is the plan-derived intent, stable across resume: never something the effect itself changes.
        A failed attempt may be retried (a new attempt key ``key#2``…): "retry only the half that failed".
        ``settle`` reads herdr or git back when an earlier process left the effect in flight and answers
        ``Done(result, how)`` (confirmed with that result), ``NotDone(how)`` (abandoned, then made now under the next
        attempt key) or ``CannotTell(question, command)`` (raises InFlightEffect naming both); how it decided is
        journalled as an ``effect_settled`` fact. ``unknown_on``: exceptions that leave the outcome unknown besides a
        timed-out or killed herdr call, garbled output and a dropped link to another host (always unknown). Such an outcome is never retried blindly:
        it is settled here, in this process, by the same read-back (``settle_lost``); done returns its result, not
        done makes it again under the next attempt key, and what read-back cannot tell raises InFlightEffect.
        """
        from orchestrator.effects import EFFECTS, to_json, from_json  # the table imports nothing of the engine

        if kind not in EFFECTS:
            raise OrchError(f"effect kind {kind} is not in orchestrator.effects.EFFECTS; say there how read-back settles it")
        ledger = self.ledger
        # A dropped link to another host (HostUnreachable) is unknown too: the command may have run before it dropped.
        unknown: tuple[type[Exception], ...] = (*unknown_on, HerdrTimeout, HerdrProtocolError, HostUnreachable)
        attempt = 1
        while True:
            attempt_key = key if attempt == 1 else f"{key}#{attempt}"
            effect = ledger.intend(run_id, task, kind, attempt_key, dict(request))
            attempt += 1
            if effect.status in (EffectStatus.FAILED, EffectStatus.ABANDONED):
                continue
            if effect.status is EffectStatus.CONFIRMED:
                return from_json(model, effect.response or {})
            if not effect.is_new:
                answer = self._apply(effect, settle() if settle is not None else self._read_back(run_id, effect))
                if isinstance(answer, NotDone):
                    continue
                if isinstance(answer, Done):
                    return from_json(model, to_json(answer.result))
                raise self._cannot_tell(effect, answer)
            try:
                result = act()
            except unknown as exc:
                # It may have happened: only a read-back may say, never a second attempt. Read-back needs to know it
                # ran to its limit (or answered garbage), which is evidence of its own.
                detail = EffectUnknown(effect_id=effect.id, kind=kind, key=effect.key, error=type(exc).__name__, message=one_line(str(exc)))
                ledger.record_fact(run_id, FactKind.EFFECT_UNKNOWN, task_label=task, detail=detail)
                settled = self.settle_lost(run_id, effect, settle, exc)
                if isinstance(settled, NotDone):
                    continue  # proven not made: made now under the next attempt key
                return from_json(model, to_json(settled.result))
            except Exception as exc:
                ledger.fail(effect, one_line(str(exc)) or type(exc).__name__)
                raise
            ledger.confirm(effect, to_json(result))
            return result

    def settle_lost(self, run_id: str, effect: Effect, settle: Callable[[], Settlement[Any]] | None, lost: Exception) -> Done[Any] | NotDone:
        """Settle an effect whose own call left its outcome unknown, in this process, by its kind's read-back.

        Read back up to ``settle_attempts`` times with ``settle_pause_s`` between (a call that was slow, not lost,
        lands meanwhile): done or not done as read-back says. A read-back that itself gets no answer means herdr is
        not answering at all (HerdrUnavailable: the run stops until it is back, resume settles the effect). A
        read-back that finds what the effect was about gone (HerdrNotFound) abandons the effect and raises that
        error, which the phase meets as it would without the lost call. What read-back still cannot tell raises
        InFlightEffect with the person's question (the effect stays in flight, ``orch resume`` asks again).
        """
        import tenacity  # only when a call was lost: most orch processes never need it

        from orchestrator.errors import HerdrNotFound, HerdrUnavailable

        def read_back() -> Done[Any] | NotDone | CannotTell:
            return self._apply(effect, settle() if settle is not None else self._read_back(run_id, effect))

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(max(1, self.settle_attempts)),
            wait=tenacity.wait_fixed(self.settle_pause_s),
            retry=tenacity.retry_if_result(lambda answer: isinstance(answer, CannotTell)) | tenacity.retry_if_exception_type(HerdrTimeout),
            sleep=self.clock.sleep,
            retry_error_callback=lambda state: state.outcome.result() if state.outcome is not None else None,
        )
        try:
            answer = retrying(read_back)
        except HerdrTimeout as exc:
            raise HerdrUnavailable(
                f"herdr did not answer the read-back of {effect.kind} (effect {effect.id}) after its call was lost: {exc.message}",
                call=exc.call, hint=exc.hint,
            ) from None
        except HerdrNotFound as exc:
            self._settled(effect, "not_done", f"read-back found it gone: {exc.message}")
            self.ledger.abandon(effect, f"read back: gone ({one_line(exc.message)})")
            raise
        if isinstance(answer, (Done, NotDone)):
            return answer
        raise self._cannot_tell(effect, answer if isinstance(answer, CannotTell) else CannotTell("", ""), lost=lost)

    def settle_effect(self, run: Run, effect: Effect) -> Done[Any] | NotDone | CannotTell:
        """Settle one in-flight effect by its kind's read-back (orchestrator.effects): confirmed with what read-back
        found, abandoned (a later attempt makes it), or left in flight with the person's question."""
        return self._apply(effect, self._read_back(run.run_id, effect, run))

    def _read_back(self, run_id: str, effect: Effect, run: Run | None = None) -> Settlement[Any]:
        from orchestrator.effects import settler

        return settler(effect.kind)(self, run or self.ledger.get_run(run_id), effect)

    def _apply(self, effect: Effect, answer: Settlement[Any]) -> Done[Any] | NotDone | CannotTell:
        if isinstance(answer, NotDone):
            self._settled(effect, "not_done", answer.how)
            self.ledger.abandon(effect, f"read back: not done ({answer.how})")
            return answer
        if answer is None:
            return CannotTell("", "")
        if isinstance(answer, CannotTell):
            return answer
        done = answer if isinstance(answer, Done) else Done(answer, "read back")
        self._settled(effect, "done", done.how)
        from orchestrator.effects import to_json

        self.ledger.confirm(effect, to_json(done.result))
        return done

    @staticmethod
    def _cannot_tell(effect: Effect, answer: CannotTell, lost: Exception | None = None) -> InFlightEffect:
        if lost is not None:
            why = type(lost).__name__
            what = f"{effect.kind} for {effect.task_label or effect.run_id} (effect {effect.id}) got no answer from herdr ({why}) and read-back cannot tell whether it happened"
        else:
            what = f"{effect.kind} for {effect.task_label or effect.run_id} (effect {effect.id}) was started by an earlier orch process and read-back cannot tell whether it happened"
        if answer.question:
            return InFlightEffect(f"{what}: {answer.question}", hint=answer.command)
        return InFlightEffect(
            what,
            hint="inspect herdr and git, then re-run the same command (or `orch resume` for an `orch run` run) to settle it; orch never repeats a create or a prompt blindly",
        )

    def _settled(self, effect: Effect, answer: str, how: str) -> None:
        """Journal how read-back decided an in-flight effect (before the effect row itself is settled)."""
        detail = EffectSettled(effect_id=effect.id, kind=effect.kind, key=effect.key, answer=answer, how=how)
        self.ledger.record_fact(effect.run_id, FactKind.EFFECT_SETTLED, task_label=effect.task_label, detail=detail)

    # --- callbacks ---

    def callback_prefix(self, run: Run, host: str | None = None) -> tuple[str, ...]:
        """How a worker reaches its controller: it records its callback in the run's durable inbox itself.

        One transport for both controllers: the worker runs ``orch inbox add`` by absolute path from its own shell,
        with the run's ORCH_HOME, its text one argv word of its own process. Nothing a worker writes is typed into
        the controller's pane or passes through the controller's shell; an agent controller learns of callbacks
        from `orch wait`, which watches the same inbox (docs/message-contract.md). A worker on another ``host``
        (a plan host name) spools it on that host instead, for the controller to collect (``orchestrator.spool``).
        """
        if host is not None and host != CONTROLLER_HOST:
            from orchestrator import spool

            return spool.callback_prefix(self.plan_for(run).plan.hosts[host], run.run_id)
        return ("env", f"ORCH_HOME={self.settings.orch_home}", orch_executable(), "inbox", "add", "--run", run.run_id)
