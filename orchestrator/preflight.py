"""Preflight (spec §1): prove the session can run a plan, resolve the repo workspace and tab, and create the run.

Read-only gates come first and stop at the first failure without creating anything; the run is created only once
every read-only gate passed, right before the first side effect (workspace create, tab rename) goes through engine.once.
"""

from __future__ import annotations

import shlex

import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from orchestrator.engine import Done, Engine, NotDone, Settlement
from orchestrator.errors import ConfigError, ExitCode, HerdrError, HerdrNotFound, OrchError
from orchestrator.git import rev_parse, run_git
from orchestrator.resume import RESUME
from orchestrator.herdr import INSTALL_HINT, MINIMUM_VERSION, TESTED_VERSIONS, features_of, version_support
from orchestrator.herdr_models import (
    AgentInfo,
    HerdrFeatures,
    HerdrStatus,
    IntegrationEntry,
    PaneInfo,
    SessionList,
    TabInfo,
    VersionSupport,
    WorkspaceCreated,
    WorkspaceInfo,
)
from orchestrator.intake import save_message_limit
from orchestrator.layout import quote
from orchestrator.plan import ResolvedPlan, load_plan
from registry import Effect, EffectStatus, Run, RunStatus, WorkerState, make_run_id
from registry.facts import FactKind, HerdrLostPanes, read_fact

DEFAULT_SESSION = "default"
CAUSE = {"phase": "preflight"}

# Every herdr command a run uses (CLI words, socket method in `api schema`), so a missing one fails here, not halfway.
REQUIRED_COMMANDS: tuple[tuple[str, str], ...] = (
    ("workspace list", "workspace.list"),
    ("workspace create", "workspace.create"),
    ("workspace close", "workspace.close"),
    ("tab list", "tab.list"),
    ("tab rename", "tab.rename"),
    ("pane current", "pane.current"),
    ("pane list", "pane.list"),
    ("pane get", "pane.get"),
    ("pane layout", "pane.layout"),
    ("pane split", "pane.split"),
    ("pane move", "pane.move"),
    ("pane read", "pane.read"),
    ("pane send-text", "pane.send_text"),
    ("pane send-keys", "pane.send_keys"),
    ("pane run", "pane.send_input"),
    ("pane close", "pane.close"),
    ("worktree list", "worktree.list"),
    ("worktree create", "worktree.create"),
    ("worktree open", "worktree.open"),
    ("worktree remove", "worktree.remove"),
    ("agent list", "agent.list"),
    ("agent get", "agent.get"),
    ("agent start", "agent.start"),
    ("agent prompt", "agent.prompt"),
    ("agent wait", "agent.wait"),
    ("agent read", "agent.read"),
    ("agent send-keys", "agent.send_keys"),
    ("agent explain", "agent.explain"),
)

# The checklist, in order; fixed so the rendering keeps one column width whichever gate stops it.
CHECK_NAMES: tuple[str, ...] = (
    "herdr env", "plan", "herdr", "capabilities", "server", "features", "session", "integrations", "caller pane", "agents",
    "repo checkout", "base ref", "hosts", "repo workspace", "repo tab", "run",
)  # fmt: skip


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Check(_Model):
    """One line of the checklist: a named gate, whether it passed, and what herdr or git said."""

    name: str
    ok: bool
    evidence: str
    notes: tuple[str, ...] = ()


class Failure(_Model):
    """Why preflight stopped, and what the person should do."""

    check: str
    reason: str
    hint: str | None = None
    # 3 (HERDR_UNAVAILABLE) when herdr cannot be run or its server is down, as for every other command; else 1.
    exit_code: int = int(ExitCode.FAILURE)

    def error(self) -> OrchError:
        """The failure as the error the CLI prints (its reason, hint and exit code)."""
        error = OrchError(self.reason, hint=self.hint)
        error.exit_code = ExitCode(self.exit_code)
        return error


class Controller(_Model):
    """The pinned controller: its target (always HERDR_PANE_ID) and where it sits."""

    target: str
    pane_id: str
    workspace_id: str
    tab_id: str
    session: str


class RepoPlace(_Model):
    """The repo under the Layout Contract: checkout, workspace, first tab, default branch and base."""

    organization: str
    repo: str
    checkout: str
    default_branch: str | None = None
    default_branch_source: str | None = None
    base: str
    base_sha: str | None = None
    workspace_id: str | None = None
    workspace_created: bool = False
    tab_id: str | None = None
    tab_renamed: bool = False


class PreflightResult(_Model):
    """What `orch preflight` reports: the checklist, the run it created (if any), the controller and the repo."""

    ok: bool
    checks: tuple[Check, ...]
    run_id: str | None = None
    controller: Controller | None = None
    repo: RepoPlace | None = None
    failure: Failure | None = None


class _Stop(Exception):
    """A gate failed: the check's evidence, the one-line reason, and the hint."""

    def __init__(self, evidence: str, reason: str, hint: str | None = None, exit_code: ExitCode = ExitCode.FAILURE, notes: Sequence[str] = ()) -> None:
        super().__init__(reason)
        self.notes = tuple(notes)
        self.evidence = evidence
        self.reason = reason
        self.hint = hint
        self.exit_code = exit_code


# --- pure decisions (unit-tested on small models) --------------------------------------------------------------------


def missing_methods(methods: Iterable[str]) -> list[str]:
    """The CLI commands of REQUIRED_COMMANDS whose socket method is not among ``methods``."""
    known = set(methods)
    return [command for command, method in REQUIRED_COMMANDS if method not in known]


def missing_groups(help_text: str) -> list[str]:
    """Fallback when `api schema` is unavailable: the command groups the run needs that `herdr --help` does not list."""
    groups = dict.fromkeys(command.split()[0] for command, _ in REQUIRED_COMMANDS)
    return [group for group in groups if f"herdr {group} <subcommand>" not in help_text]


def current_session(status: HerdrStatus) -> str:
    """The session this CLI talks to: herdr reports its active name, null for the default session."""
    return status.client.session or status.server.session or DEFAULT_SESSION


def integration_problems(kinds: Sequence[str], entries: Sequence[IntegrationEntry]) -> list[tuple[str, str]]:
    """For each kind without a current integration: (kind, what herdr said); empty when every kind is usable."""
    by_target = {entry.target: entry for entry in entries}
    problems: list[tuple[str, str]] = []
    for kind in kinds:
        entry = by_target.get(kind)
        if entry is None:
            problems.append((kind, "herdr offers no integration for it"))
        elif not entry.is_usable:
            problems.append((kind, describe_integration(entry)))
    return problems


def describe_integration(entry: IntegrationEntry) -> str:
    """One integration line in herdr's own words, without its path."""
    installed = "legacy" if entry.legacy else f"v{entry.installed_version}"
    if entry.state == "current":
        return f"current ({installed})"
    if entry.state == "outdated":
        return f"outdated ({installed} < v{entry.expected_version})"
    if entry.state == "needs_repair":
        return f"needs repair ({installed})"
    if entry.state == "unknown":
        return f"a state orch does not know: {quote(entry.line)}"
    return "not installed"


def pick_default_branch(origin_head: str | None, base: str, local: set[str], remote: set[str]) -> tuple[str, str]:
    """(default branch, where it came from): `origin/HEAD`, else the base's branch, else main or master."""
    if origin_head:
        return origin_head.split("/", 1)[1] if "/" in origin_head else origin_head, "origin/HEAD"
    name = base.removeprefix("refs/heads/").removeprefix("refs/remotes/")
    if name in remote and "/" in name:
        return name.split("/", 1)[1], f"the base {base}"
    if name in local:
        return name, f"the base {base}"
    for candidate in ("main", "master"):
        if candidate in local:
            return candidate, "the local branch"
    # Nothing names it; main is the safer guess for the "never start an agent on the default branch" rule.
    return "main", "no origin/HEAD, base branch, main or master found"


_MINIMUM = ".".join(str(n) for n in MINIMUM_VERSION)
_INSTALL_HINT = INSTALL_HINT


def _untested(version: str, support: VersionSupport, what: str, because: str = "its api schema has every method orch uses") -> list[str]:
    """The warning for a herdr orch was not tested against (preflight proceeds: the capabilities gate passed)."""
    if support == "tested" or (what == "server" and support == "older"):
        return []
    tested = ", ".join(TESTED_VERSIONS)
    return [f"herdr {version} ({what}) is not a version orch is tested against ({tested}); proceeding because {because}"]


def feature_summary(features: HerdrFeatures, *, trust_repository: bool) -> str:
    """The herdr features orch uses on this release, and the ones it lacks that orch would use, in one line."""
    parts = ["completion_seq for finished turns" if features.completion_seq else "agent state for finished turns (completion_seq needs 0.9.2)"]
    parts.append("shift+tab for plan mode" if features.shift_tab else "no plan-first (shift+tab needs 0.8.2)")
    if features.resume_commands:
        parts.append(f"resume commands for {_and(list(RESUME))} sessions")
    if features.prompt_enter_delay_s:
        parts.append(f"a {features.prompt_enter_delay_s:g} s wait for each prompt's Enter")
    if trust_repository:
        parts.append("--trust-repository on worktree commands (policy)" if features.trust_repository
                     else "no --trust-repository (needs 0.9.0; the policy asks for it)")
    return ", ".join(parts)


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _inside(path: str | None, root: Path) -> bool:
    if not path:
        return False
    real = Path(os.path.realpath(path))
    return real == root or root in real.parents


def match_repo_workspace(
    workspaces: Sequence[WorkspaceInfo], panes: Sequence[PaneInfo], checkout: Path, repo: str, caller_workspace: str | None
) -> WorkspaceInfo | None:
    """The workspace that serves the repo's primary checkout, or None.

    herdr reports `worktree` membership only for workspaces a worktree operation touched (CONTRACT §2), so a plain
    workspace opened on the repo is recognised by its panes' cwd. Linked-worktree workspaces never count. Among
    several: the caller's own workspace, then one labelled `<repo>`, then the first in herdr's order.
    """
    root = Path(os.path.realpath(checkout))
    candidates: list[WorkspaceInfo] = []
    for ws in workspaces:
        if ws.worktree is not None:
            if not ws.worktree.is_linked_worktree and Path(os.path.realpath(ws.worktree.repo_root)) == root:
                candidates.append(ws)
            continue
        if any(p.workspace_id == ws.workspace_id and _inside(p.foreground_cwd or p.cwd, root) for p in panes):
            candidates.append(ws)
    if not candidates:
        return None
    return min(candidates, key=lambda ws: (ws.workspace_id != caller_workspace, ws.label != repo, ws.number))


# --- the phase ------------------------------------------------------------------------------------------------------


class _Preflight:
    """One preflight: the steps in order, each adding a Check or raising _Stop."""

    def __init__(self, engine: Engine, plan_path: Path, existing: Run | None = None) -> None:
        self.existing = existing  # a run whose preflight a crash cut short: finish it, never make another
        self.engine = engine
        self.herdr = engine.herdr
        self.plan_path = plan_path
        self.checks: list[Check] = []
        self.plan: ResolvedPlan | None = None
        self.pane_id = ""
        self.session = DEFAULT_SESSION
        self.status: HerdrStatus | None = None
        self.caller: PaneInfo | None = None
        self.repo: RepoPlace | None = None
        self.run_id: str | None = None

    def ok(self, name: str, evidence: str, notes: Iterable[str] = ()) -> None:
        self.checks.append(Check(name=name, ok=True, evidence=evidence, notes=tuple(notes)))

    def run(self) -> PreflightResult:
        steps: list[tuple[str, Callable[[], None]]] = [
            ("herdr env", self.check_env),
            ("plan", self.check_plan),
            ("herdr", self.check_herdr),
            ("capabilities", self.check_capabilities),
            ("server", self.check_server),
            ("features", self.check_features),
            ("session", self.check_session),
            ("integrations", self.check_integrations),
            ("caller pane", self.check_caller),
            ("agents", self.check_agents),
            ("repo checkout", self.check_checkout),
            ("base ref", self.check_base),
            ("hosts", self.check_hosts),
            ("repo workspace", self.check_workspace),
            ("repo tab", self.check_tab),
            ("run", self.check_run),
        ]
        assert tuple(name for name, _ in steps) == CHECK_NAMES
        for name, step in steps:
            if name == "hosts" and (self.plan is None or not self.plan.plan.hosts):
                continue  # a plan without hosts checks exactly what it did before hosts existed
            if name == "herdr" and self.existing is None:
                # After the local gates, before the first herdr call: the ledger and ORCH_HOME take a write (a full
                # or read-only store is one line now, not after herdr was asked anything). Not a gate of its own.
                self.engine.check_storage()
            try:
                step()
            except _Stop as stop:
                return self.stopped(name, stop.evidence, stop.reason, stop.hint, stop.exit_code, stop.notes)
            except OrchError as exc:
                # An unexpected herdr or git failure inside a step: the step failed with herdr's own words.
                reason = exc.message.splitlines()[0] if exc.message else type(exc).__name__
                return self.stopped(name, reason, exc.message, exc.hint, exc.exit_code)
        assert self.caller is not None
        return PreflightResult(ok=True, checks=tuple(self.checks), run_id=self.run_id, controller=self.controller(), repo=self.repo)

    def stopped(self, name: str, evidence: str, reason: str, hint: str | None, exit_code: ExitCode = ExitCode.FAILURE, notes: Sequence[str] = ()) -> PreflightResult:
        self.checks.append(Check(name=name, ok=False, evidence=evidence, notes=tuple(notes)))
        if self.run_id is not None:
            # The run holds what preflight already created (e.g. a workspace); keep it, resumable, never delete it.
            self.engine.ledger.set_run_status(self.run_id, RunStatus.INTERRUPTED, stopped_at=f"preflight: {name}")
            hint = f"{hint + '; ' if hint else ''}run {self.run_id} records what preflight created; re-run `orch preflight PLAN` for a new run"
        return PreflightResult(
            ok=False,
            checks=tuple(self.checks),
            run_id=self.run_id,
            controller=self.controller(),
            repo=self.repo,
            failure=Failure(check=name, reason=reason, hint=hint, exit_code=int(exit_code)),
        )

    def controller(self) -> Controller | None:
        if self.caller is None:
            return None
        return Controller(target=self.pane_id, pane_id=self.caller.pane_id, workspace_id=self.caller.workspace_id, tab_id=self.caller.tab_id, session=self.session)

    # --- 1. the execution boundary ---

    def check_env(self) -> None:
        value = self.engine.env.get("HERDR_ENV")
        if value != "1":
            shown = "unset" if value is None else f"{quote(value)}"
            if self.engine.controller == "run":
                # `orch run` is typed by a person, not an agent following SKILL.md: say what to do in their terms.
                raise _Stop(
                    f"HERDR_ENV is {shown}",
                    "orch run works only inside herdr, and this shell is not in a herdr pane (HERDR_ENV is not 1)",
                    "start herdr, then run `orch run PLAN` from a shell in one of its panes; `orch demo` shows a whole run without herdr",
                )
            raise _Stop(
                f"HERDR_ENV is {shown}",
                "this agent is outside herdr (HERDR_ENV is not 1); stop: orch orchestrates only from a herdr pane",
                "run orch from a shell or agent inside a herdr pane",
            )
        self.ok("herdr env", "HERDR_ENV=1")

    def check_plan(self) -> None:
        try:
            self.plan = load_plan(self.plan_path, self.engine.settings)
        except ConfigError as exc:
            raise _Stop(exc.message.splitlines()[0], exc.message, f"`orch plan check {shlex.quote(str(self.plan_path))}` shows every problem") from None
        p = self.plan
        kinds = ", ".join(dict.fromkeys(w.kind for w in p.workers))
        self.ok("plan", f"{p.repo.organization}/{p.repo.repo}, base {p.plan.base}, {_count(len(p.workers), 'worker')} ({kinds})")

    # --- 2-4. herdr itself ---

    def check_herdr(self) -> None:
        try:
            self.herdr.version()  # the binary runs at all; status --json below says which release it is
        except HerdrError as exc:
            binary = getattr(self.herdr, "binary", "herdr")
            raise _Stop(
                f"cannot run {binary}",
                f"herdr is not available: {exc.message}",
                _INSTALL_HINT,
                exc.exit_code,
            ) from None
        self.status = self.herdr.status()
        client = self.status.client
        support = version_support(client.version)
        if support == "older":
            raise _Stop(
                f"herdr {client.version} client, protocol {client.protocol}: older than {_MINIMUM}",
                f"this herdr is {client.version}; orch needs herdr {_MINIMUM} or later",
                _INSTALL_HINT,
            )
        self.ok("herdr", f"herdr {client.version} client, protocol {client.protocol}", _untested(client.version, support, "client"))

    def check_capabilities(self) -> None:
        try:
            methods = self.herdr.api_schema_methods()
        except HerdrError as exc:
            # An older or stripped herdr may lack `api schema`; its --help still names the command groups.
            groups = missing_groups(self.herdr.help_text())
            if groups:
                raise _Stop(
                    f"no api schema ({exc.code or type(exc).__name__}); herdr --help lacks: {', '.join(groups)}",
                    f"this herdr lacks command groups the run needs: {', '.join(groups)}",
                    _INSTALL_HINT,
                ) from None
            self.ok("capabilities", f"no api schema ({exc.code or type(exc).__name__}); herdr --help lists every command group the run uses")
            return
        missing = missing_methods(methods)
        if missing:
            raise _Stop(
                f"missing from herdr api schema: {', '.join(missing)}",
                f"this herdr lacks commands the run needs: {', '.join('herdr ' + m for m in missing)}",
                _INSTALL_HINT,
            )
        self.ok("capabilities", f"all {len(REQUIRED_COMMANDS)} herdr commands the run uses are in herdr api schema")

    def check_server(self) -> None:
        status = self.status or self.herdr.status()
        self.status = status
        server = status.server
        if not server.running:
            raise _Stop(
                "not running",
                f"the herdr server is not running (socket {server.socket})",
                "start herdr from a shell outside herdr, then run orch from one of its panes",
                ExitCode.HERDR_UNAVAILABLE,
            )
        # herdr itself says whether client and server fit: 0.7.5/0.8.2 need equal protocols, 0.9 negotiates
        # capabilities, so a client and server of different versions may be compatible (../herdr-0.9.1/DELTA.md row 11).
        if server.compatible is not True:
            newer = server.protocol is not None and server.protocol > status.client.protocol
            raise _Stop(
                f"server protocol {server.protocol}, client protocol {status.client.protocol}, not compatible",
                f"the herdr server (version {server.version}, protocol {server.protocol}) is not compatible with this herdr CLI (version {status.client.version}, protocol {status.client.protocol})",
                # herdr's own protocol_mismatch advice: an older CLI is upgraded, an older server restarted.
                f"upgrade the herdr CLI to {server.version} or later (or point orch at one with `orch --herdr PATH` or ORCH_HERDR)" if newer
                else "restart the herdr server with the installed herdr (`herdr server stop`, then `herdr`)",
            )
        version = server.version or "unknown"
        support = version_support(version)
        if support == "older":
            raise _Stop(
                f"running herdr {version}, protocol {server.protocol}: older than {_MINIMUM}",
                f"the herdr server is {version}; orch needs herdr {_MINIMUM} or later",
                "restart the herdr server with a newer herdr (`herdr server stop`, then `herdr`)",
            )
        notes: list[str] = []
        if version != status.client.version:
            # herdr sets restart_needed for any version difference; this note says that and which one orch judges.
            notes.append(f"the server ({version}) and this CLI ({status.client.version}) are different herdr versions; orch goes by the server's")
        elif status.update.restart_needed:
            notes.append("the server runs an older herdr build than the CLI; restart it when convenient")
        # `api schema` is the CLI's own (embedded in its binary): of another server release orch knows only that
        # herdr negotiated with it and found it compatible.
        because = "herdr reports it compatible with this CLI, whose api schema has every method orch uses" if version != status.client.version else None
        notes += _untested(version, support, "server", *([because] if because else []))
        self.ok("server", f"running herdr {version}, protocol {server.protocol}, compatible", notes)

    def check_features(self) -> None:
        """What orch uses of this herdr, decided by the server's version (orchestrator.herdr.features_of)."""
        assert self.status is not None and self.plan is not None
        features = features_of(self.status.server.version or self.status.client.version)
        self.ok("features", feature_summary(features, trust_repository=self.plan.policy.policy.trust_repository))

    def check_session(self) -> None:
        assert self.plan is not None and self.status is not None
        organization = self.plan.repo.session
        self.session = current_session(self.status)
        sessions: SessionList = self.herdr.session_list()
        listed = ", ".join(f"{s.name} ({'running' if s.running else 'stopped'})" for s in sessions.sessions)
        if self.session != organization:
            raise _Stop(
                f"this is session {self.session}, the plan's organization is {organization} (sessions: {listed})",
                f"this herdr session is {quote(self.session)}, but the plan's organization {quote(organization)} needs the session {quote(organization)}",
                f"from a shell outside herdr run `herdr --session {organization}`, then run orch from a pane of that session",
            )
        self.ok("session", f"{self.session} serves organization {organization}")

    def check_integrations(self) -> None:
        assert self.plan is not None
        kinds = list(dict.fromkeys(w.kind for w in self.plan.workers))
        entries = self.herdr.integration_status()
        problems = integration_problems(kinds, entries)
        if problems:
            said = "; ".join(f"{kind}: {text}" for kind, text in problems)
            installable = [kind for kind, text in problems if text != "herdr offers no integration for it"]
            commands = " and ".join(f"`herdr integration install {kind}`" for kind in installable)
            hint = f"ask the person to run {commands} (orch never installs one: it changes durable machine state)" if commands else "use a worker kind herdr has an integration for"
            raise _Stop(said, f"no current herdr integration for {', '.join(kind for kind, _ in problems)}: lifecycle detection would not be authoritative", hint)
        by_target = {entry.target: entry for entry in entries}
        self.ok("integrations", ", ".join(f"{kind} {describe_integration(by_target[kind])}" for kind in kinds))

    # --- 5-6. the caller and what already runs ---

    def check_caller(self) -> None:
        pane_id = self.engine.env.get("HERDR_PANE_ID", "")
        if not pane_id:
            raise _Stop(
                "HERDR_PANE_ID is unset",
                "HERDR_PANE_ID is not set; orch pins the controller target to it and never to UI focus",
                "run orch from a herdr pane (herdr sets HERDR_PANE_ID in every pane)",
            )
        try:
            pane = self.herdr.pane_current()
        except HerdrNotFound:
            raise _Stop(
                f"herdr has no pane {pane_id}",
                f"HERDR_PANE_ID={pane_id} is not a pane of this herdr session",
                "run orch from a live pane of the session that serves the organization",
            ) from None
        if pane.pane_id != pane_id:
            raise _Stop(
                f"herdr pane current --current is {pane.pane_id}, HERDR_PANE_ID is {pane_id}",
                f"herdr resolved the caller to pane {pane.pane_id}, not HERDR_PANE_ID {pane_id}",
                "the pane may have moved to another workspace; run orch from a fresh pane",
            )
        self.pane_id = pane_id
        self.caller = pane
        notes: list[str] = []
        try:
            agent = self.herdr.agent_get(pane_id)
            what = f"agent {agent.name or agent.agent} ({agent.agent or 'unknown kind'}, {agent.agent_status})"
        except HerdrNotFound:
            what = "a shell, not an agent"
        self.ok("caller pane", f"{pane_id} in workspace {pane.workspace_id}, tab {pane.tab_id}: {what}; controller target pinned to {pane_id}", notes)

    def check_agents(self) -> None:
        assert self.plan is not None
        agents: tuple[AgentInfo, ...] = self.herdr.agent_list()
        planned = {w.name: w for w in self.plan.workers}
        notes: list[str] = []
        for agent in agents:
            worker = planned.get(agent.name or "")
            if worker is None:
                continue
            where = agent.foreground_cwd or agent.cwd
            checkout = worker.worktree.path
            if _inside(where, Path(os.path.realpath(checkout))):
                notes.append(f"agent {agent.name} in pane {agent.pane_id} sits in {checkout}: provisioning will reuse it for worker {worker.task}")
            else:
                notes.append(
                    f"agent {agent.name} in pane {agent.pane_id} has worker {worker.task}'s name but sits in {where or 'an unknown directory'}, "
                    f"not {checkout}: provisioning will not reuse it and herdr refuses a second agent of that name"
                )
        listed = ", ".join(f"{a.name or '(unnamed)'} ({a.agent or 'unknown'}, {a.agent_status}, {a.pane_id})" for a in agents)
        self.ok("agents", f"{len(agents)} running: {listed}" if agents else "none running", notes)

    # --- 7-8. the repo checkout and base (git, read-only) ---

    def check_checkout(self) -> None:
        assert self.plan is not None
        layout, base = self.plan.repo, self.plan.plan.base
        checkout = layout.checkout
        self.repo = RepoPlace(organization=layout.organization, repo=layout.repo, checkout=str(checkout), base=base)
        if not checkout.is_dir():
            raise _Stop(f"{checkout} does not exist", f"the repo checkout {checkout} does not exist", f"clone {layout.repo} to {checkout}, or set `path` in the plan")
        probe = run_git(["rev-parse", "--path-format=absolute", "--show-toplevel", "--git-dir", "--git-common-dir"], cwd=checkout, check=False)
        lines = probe.stdout.split("\n")
        if probe.returncode != 0 or len(lines) < 3:
            raise _Stop(f"{checkout} is not a git repository", f"{checkout} is not a git repository", f"clone {layout.repo} to {checkout}, or set `path` in the plan")
        top, git_dir, common = (Path(os.path.realpath(line)) for line in lines[:3])
        if top != Path(os.path.realpath(checkout)):
            raise _Stop(f"{checkout} is inside the repository at {top}", f"{checkout} is not the top of a git checkout (that is {top})", "set the plan's `path` to the checkout's top directory")
        if git_dir != common:
            raise _Stop(
                f"{checkout} is a linked worktree of {common.parent}",
                f"{checkout} is a linked worktree, not the repo's primary checkout",
                f"set the plan's `path` to the primary checkout {common.parent}",
            )
        head = run_git(["symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD"], cwd=checkout, check=False)
        refs = run_git(["for-each-ref", "--format=%(refname)", "refs/heads", "refs/remotes"], cwd=checkout).stdout.split()
        local = {r.removeprefix("refs/heads/") for r in refs if r.startswith("refs/heads/")}
        remote = {r.removeprefix("refs/remotes/") for r in refs if r.startswith("refs/remotes/")}
        branch, source = pick_default_branch(head.stdout.strip() if head.returncode == 0 else None, base, local, remote)
        self.repo = self.repo.model_copy(update={"default_branch": branch, "default_branch_source": source})
        self.ok("repo checkout", f"{checkout}: primary checkout; default branch {branch} (from {source})")

    def check_base(self) -> None:
        assert self.plan is not None and self.repo is not None
        base = self.plan.plan.base
        sha = rev_parse(self.plan.repo.checkout, base)
        if sha is None:
            raise _Stop(
                f"{base} names no commit in {self.plan.repo.checkout}",
                f"the base {base} does not resolve in {self.plan.repo.checkout}",
                f"fetch it first (`git -C {self.plan.repo.checkout} fetch`) or fix `base` in the plan",
            )
        self.repo = self.repo.model_copy(update={"base_sha": sha})
        self.ok("base ref", f"{base} is {sha}")

    # --- 8b. the plan's other hosts (read-only, before anything is created) ---

    def check_hosts(self) -> None:
        """Every host the plan names, reached as the run would reach it; the first that fails is named, before anything
        is created on any host."""
        from orchestrator import __version__
        from orchestrator.hosts import HostVerdict, check_host, controller_problem

        assert self.plan is not None and self.repo is not None and self.status is not None and self.repo.base_sha is not None
        plan = self.plan
        controller_version = self.status.server.version or self.status.client.version
        if problem := controller_problem(controller_version):
            raise _Stop(f"herdr {controller_version} on the controller", problem, "upgrade herdr on the controller and restart its server")
        verdicts: list[HostVerdict] = []
        for name, host in plan.plan.hosts.items():
            kinds = list(dict.fromkeys(w.kind for w in plan.workers if w.host == name))
            verdict = check_host(
                name, host, kinds=kinds or [plan.policy.policy.default_kind], organization=plan.repo.session, base=plan.plan.base,
                base_sha=self.repo.base_sha, local=self.engine.herdr_on(), through_machine=self.engine.herdr_on(machine=host.machine),
                over_ssh=self.engine.herdr_on(ssh=host.ssh), controller_version=controller_version, orch_version=__version__,
                **({"runner": self.engine.remote_runner} if self.engine.remote_runner is not None else {}),
            )
            if not verdict.ok:
                assert verdict.reason is not None
                raise _Stop(verdict.evidence, verdict.reason, verdict.hint, notes=[v.evidence for v in verdicts])
            verdicts.append(verdict)
        notes = [v.evidence for v in verdicts] + [note for v in verdicts for note in v.notes]
        remote = plan.remote_workers
        placed = "; ".join(f"{', '.join(tasks)} on {host}" for host, tasks in remote.items())
        self.ok("hosts", f"{_count(len(verdicts), 'host')} ready" + (f": {placed}" if placed else ", no worker placed on one"), notes)

    # --- 9. the repo workspace and its first tab (side effects through engine.once) ---

    def create_run(self) -> str:
        """The run, created whole once every read-only gate passed: the run row, its workers, where its controller
        lives and who receives its callbacks, in one transaction (the plan snapshot is written just before), so a
        crash leaves either no run or one `orch resume` can finish. A run id names a second; a clash waits."""
        assert self.plan is not None and self.repo is not None and self.caller is not None
        if self.existing is not None:
            self.run_id = self.existing.run_id
            return self.run_id
        ledger = self.engine.ledger
        for _ in range(3):
            run_id = make_run_id(self.pane_id, self.engine.clock.now())
            if not any(r.run_id == run_id for r in ledger.list_runs()):
                break
            self.engine.clock.sleep(1.0)
        else:
            raise OrchError(f"run id {run_id} is already taken", hint="run `orch preflight PLAN` again")
        snapshot = self.engine.run_dir(run_id) / "plan.toml"
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        self.engine.drive(run_id)  # before the run exists: no other process may drive it from its first effect on
        shutil.copyfile(self.plan_path, snapshot)
        save_message_limit(self.engine, run_id, self.plan.message_limit)
        workers = [
            {
                "task_label": w.task, "name": w.name, "kind": w.kind, "host": w.host, "objective": w.worker.objective, "cause": CAUSE,
                "claimed_files": w.worker.claim, "branch": w.worktree.branch, "worktree_path": str(w.worktree.path),
                "tab_label": w.worktree.label, "initial": WorkerState.QUEUED,
            }
            for w in self.plan.workers
        ]  # fmt: skip
        ledger.create_run(
            run_id,
            controller_target=self.pane_id,
            session=self.session,
            organization=self.repo.organization,
            repo=self.repo.repo,
            repo_path=self.repo.checkout,
            base_ref=self.repo.base,
            base_sha=self.repo.base_sha,
            plan_path=self.plan_path.absolute(),
            fields={
                "controller_workspace_id": self.caller.workspace_id,
                "controller_tab_id": self.caller.tab_id,
                "default_branch": self.repo.default_branch,
                "controller_kind": "run" if self.engine.controller == "run" else "agent",
            },
            workers=workers,
        )
        self.run_id = run_id
        self.engine.attach_log_id(run_id)  # preflight's own calls so far go first into the new run's orch.log
        return run_id

    def world_key(self, key: str) -> str:
        """A preflight effect's key: as given, or ``KEY:worldN`` once herdr lost the run's workspace N-1 times (a
        restart while orch was stopped, ``orchestrator.run.reread_world``), so what the run made in a world herdr no
        longer has is never replayed (nor taken for the workspace found now)."""
        if self.existing is None:
            return key
        lost = sum(1 for e in self.engine.ledger.events(self.existing.run_id) if e.kind == FactKind.HERDR_LOST_PANES and e.task_label is None and read_fact(e, HerdrLostPanes).get("workspace_gone"))
        return key if lost == 0 else f"{key}:world{lost + 1}"

    def check_workspace(self) -> None:
        assert self.plan is not None and self.repo is not None and self.caller is not None
        run_id = self.create_run()
        layout = self.plan.repo
        workspaces = self.herdr.workspace_list()
        panes = self.herdr.pane_list()
        found = match_repo_workspace(workspaces, panes, layout.checkout, layout.repo, self.caller.workspace_id)
        if found is not None and found.workspace_id != self.caller.workspace_id and self.existing is not None:
            # A create this run intended before a crash: it was intended only because no workspace served the
            # checkout then, so the one serving it now is the run's (settled by read-back, never made twice).
            effect = self.engine.ledger.find_effect(run_id, self.world_key("preflight:workspace_create"))
            if effect is not None and effect.status is EffectStatus.INTENDED:
                self.engine.settle_effect(self.existing, effect)
            if effect is not None and self.engine.ledger.get_effect(effect.id).status is EffectStatus.CONFIRMED:
                self.engine.ledger.update_run(run_id, cause=CAUSE, created_workspace_ids=(found.workspace_id,))
                self.repo = self.repo.model_copy(update={"workspace_id": found.workspace_id, "workspace_created": True})
                self.ok("repo workspace", f"{found.workspace_id} {quote(found.label)} created on {layout.checkout} without focus")
                return
        if found is not None:
            whose = "the caller's workspace" if found.workspace_id == self.caller.workspace_id else "an existing workspace"
            notes = [f"workspace {found.workspace_id} is labelled {quote(found.label)}, not {quote(layout.workspace)} as the Layout Contract says"] if found.label != layout.workspace else []
            self.repo = self.repo.model_copy(update={"workspace_id": found.workspace_id})
            self.ok("repo workspace", f"{found.workspace_id} {quote(found.label)} ({whose}) serves {layout.checkout}", notes)
            return
        request = {"cwd": str(layout.checkout), "label": layout.workspace}
        created = self.engine.once(
            run_id,
            None,
            "workspace_create",
            self.world_key("preflight:workspace_create"),
            request,
            lambda: self.herdr.workspace_create(cwd=layout.checkout, label=layout.workspace),
            model=WorkspaceCreated,
        )
        ws_id = created.workspace.workspace_id
        self.engine.ledger.update_run(run_id, cause=CAUSE, created_workspace_ids=(ws_id,))
        self.repo = self.repo.model_copy(update={"workspace_id": ws_id, "workspace_created": True})
        self.ok("repo workspace", f"{ws_id} {quote(created.workspace.label)} created on {layout.checkout} without focus")

    def check_tab(self) -> None:
        assert self.plan is not None and self.repo is not None and self.repo.workspace_id is not None and self.run_id is not None
        label = self.plan.repo.first_tab
        tabs = self.herdr.tab_list(workspace=self.repo.workspace_id)
        first = tabs[0]
        if first.label == label:
            self.repo = self.repo.model_copy(update={"tab_id": first.tab_id})
            self.ok("repo tab", f"{first.tab_id} is labelled {quote(label)}")
            return

        renamed = self.engine.once(
            self.run_id,
            None,
            "tab_rename",
            self.world_key(f"preflight:tab_rename:{first.tab_id}"),
            {"tab_id": first.tab_id, "label": label},
            lambda: self.herdr.tab_rename(first.tab_id, label),
            model=TabInfo,
        )
        self.repo = self.repo.model_copy(update={"tab_id": renamed.tab_id, "tab_renamed": True})
        self.ok("repo tab", f"{renamed.tab_id} renamed {quote(first.label)} -> {quote(renamed.label)}")

    # --- 10. the run: snapshot, workers, and where it lives in herdr ---

    def check_run(self) -> None:
        assert self.plan is not None and self.repo is not None and self.caller is not None and self.run_id is not None
        run_id, ledger = self.run_id, self.engine.ledger
        snapshot = self.engine.run_dir(run_id) / "plan.toml"
        ledger.update_run(run_id, cause=CAUSE, workspace_id=self.repo.workspace_id, repo_tab_id=self.repo.tab_id)
        self.ok("run", f"{_count(len(self.plan.workers), 'worker')} registered as queued (concurrency {self.plan.plan.defaults.concurrency}); plan snapshot {snapshot}")


def settle_workspace_create(engine: Engine, run: Run, effect: Effect) -> Settlement[WorkspaceCreated]:
    """Done if a workspace other than the controller's serves the checkout (the create was intended only because
    none did); else not done."""
    cwd, label = effect.request["cwd"], effect.request["label"]
    herdr = engine.herdr
    others = [w for w in herdr.workspace_list() if w.workspace_id != run.controller_workspace_id]
    found = match_repo_workspace(others, herdr.pane_list(), Path(cwd), label, None)
    if found is None:
        return NotDone(f"no workspace serves {cwd}")
    tab = herdr.tab_list(workspace=found.workspace_id)[0]
    root = next(p for p in herdr.pane_list(workspace=found.workspace_id) if p.tab_id == tab.tab_id)
    created = WorkspaceCreated(type="workspace_created", workspace=found, tab=tab, root_pane=root)
    return Done(created, f"workspace {found.workspace_id} serves {cwd}")


def preflight(engine: Engine, plan_path: Path) -> PreflightResult:
    """Run every preflight gate in order; on success the run exists in the ledger with one row per worker."""
    return _Preflight(engine, plan_path).run()


def finish_preflight(engine: Engine, run: Run) -> PreflightResult:
    """Finish the preflight of a run a crash cut short (it has no repo workspace or tab yet): the same gates on its
    plan snapshot, settling the workspace create or tab rename left in flight, with no second run."""
    return _Preflight(engine, engine.run_dir(run.run_id) / "plan.toml", existing=run).run()


def render_preflight(result: PreflightResult, *, symbols: bool = True) -> str:
    """The human checklist (✓/✗, or ok/FAIL for plain output); the run id alone on the last line when one was created."""
    width = max(len(name) for name in CHECK_NAMES)
    lines = []
    for check in result.checks:
        mark = ("✓" if check.ok else "✗") if symbols else ("ok  " if check.ok else "FAIL")
        lines.append(f"{mark} {check.name:<{width}}  {check.evidence}")
        lines.extend(f"{' ' * (len(mark) + width + 3)}note: {note}" for note in check.notes)
    if result.ok and result.run_id:
        lines.append(result.run_id)
    return "\n".join(lines) + "\n"
