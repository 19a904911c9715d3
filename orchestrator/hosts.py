"""Preflight of a plan's other hosts: each reached as the run would reach it, and the first thing that fails named.

herdr forwards workspace, worktree, tab, pane and agent commands to a saved machine (`herdr --machine LABEL`), but not
`status --json`, `integration status`, `api schema` or anything outside herdr (../shared/herdr-0.9.1/DELTA.md
"Multi-machine"). So a host is checked in two ways: through the controller's herdr (the saved machine reachable, its
server's version and session) and over SSH (the host's herdr integrations, the agents' and orch's executables, the
checkout holding the base commit). Nothing here changes anything on any host.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from orchestrator import git, remote
from orchestrator.agents import facts
from orchestrator.errors import HerdrFailure
from orchestrator.herdr import MACHINE_STATUS_VERSION, MACHINE_VERSION, HerdrCli, parse_version, version_support
from orchestrator.layout import quote
from orchestrator.plan import Host
from orchestrator.preflight import describe_integration, integration_problems


@dataclass(frozen=True)
class HostVerdict:
    """One host's preflight: what was found (one line), or why it cannot serve the run and what to do."""

    name: str
    evidence: str
    reason: str | None = None
    hint: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """Whether the host can serve the run."""
        return self.reason is None


class _Failed(Exception):
    def __init__(self, evidence: str, reason: str, hint: str | None = None) -> None:
        super().__init__(reason)
        self.evidence, self.reason, self.hint = evidence, reason, hint


def _version(version: tuple[int, int, int]) -> str:
    return ".".join(str(n) for n in version)


def controller_problem(server_version: str | None) -> str | None:
    """Why the controller's herdr cannot reach saved machines (`herdr --machine` is 0.9.1+), or None."""
    parsed = parse_version(server_version or "")
    if parsed is None or parsed < MACHINE_VERSION:
        return f"the controller's herdr is {server_version or 'unknown'}; hosts are reached through `herdr --machine`, which needs herdr {_version(MACHINE_VERSION)} or later"
    return None


def check_host(
    name: str,
    host: Host,
    *,
    kinds: Sequence[str],
    organization: str,
    base: str,
    base_sha: str,
    local: HerdrCli,
    through_machine: HerdrCli,
    over_ssh: HerdrCli,
    controller_version: str,
    orch_version: str,
    runner: remote.Runner = remote.run_process,
) -> HostVerdict:
    """Check one host, in the order the run depends on it; stop at its first failure."""
    found: list[str] = []
    notes: list[str] = []
    try:
        _machine(host, local, controller_version, found)
        _server(host, through_machine, organization, found)
        _integrations(host, over_ssh, kinds, found)
        for kind in kinds:
            executable = facts(kind).executable
            result = remote.which(host.ssh, executable, runner=runner)
            _reached(host, result)
            if result.returncode != 0 or not result.stdout.strip():
                raise _Failed(
                    f"`{executable}` is not on its PATH",
                    f"{kind} is not installed there: `{executable}` is not on the PATH of a non-interactive ssh shell",
                    f"install {kind} on {name} so that `ssh {host.ssh} command -v {executable}` finds it",
                )
        found.append(f"{_and_words(list(kinds))} installed")
        checkout = git.remote_rev_parse(host.ssh, host.checkout, base_sha, runner=runner)
        _reached(host, checkout)
        if checkout.returncode != 0:
            lacks = checkout.returncode == 1
            raise _Failed(
                f"{host.checkout} lacks {base_sha[:12]}" if lacks else f"{host.checkout} is not a git checkout",
                f"the checkout {host.checkout} lacks the base commit {base_sha} ({base} on the controller)" if lacks
                else f"{host.checkout} is not a git checkout ({checkout.detail()})",
                f"fetch it there (`git -C {host.checkout} fetch`), then preflight again" if lacks
                else f"clone the repository to {host.checkout} on {name}, or fix hosts.{name}.checkout",
            )
        found.append(f"checkout {host.checkout} has the base")
        answer = remote.orch_version(host.ssh, host.orch, runner=runner)
        _reached(host, answer)
        said = answer.stdout.strip()
        if answer.returncode != 0 or not said.startswith("orch "):
            raise _Failed(
                f"{host.orch} --version: {answer.detail()}",
                f"orch is not installed there (`{host.orch} --version` failed: {answer.detail()})",
                f"install orch on {name}, or set hosts.{name}.orch to its path",
            )
        found.append(said)
        if said != f"orch {orch_version}":
            notes.append(f"{name} has {said}, the controller orch {orch_version}")
    except _Failed as failed:
        return HostVerdict(name=name, evidence=f"{name}: {failed.evidence}", reason=f"host {name}: {failed.reason}", hint=failed.hint)
    return HostVerdict(name=name, evidence=f"{name}: {', '.join(found)}", notes=tuple(notes))


def _name(host: Host) -> str:
    return quote(host.machine)


def _machine(host: Host, local: HerdrCli, controller_version: str, found: list[str]) -> None:
    """The saved machine is known to the controller's herdr and reachable (`machine status`, 0.9.2+)."""
    parsed = parse_version(controller_version)
    if parsed is None or parsed < MACHINE_STATUS_VERSION:
        return  # 0.9.1 has no `machine status`: the forwarded `status server` below is the reachability check
    try:
        status = local.machine_status(host.machine)
    except HerdrFailure as exc:
        raise _Failed(
            f"herdr machine status {host.machine}: {exc.herdr_message or exc.message}",
            f"the controller's herdr has no usable saved machine {_name(host)}: {exc.herdr_message or exc.message}",
            f"save it on the controller: `herdr machine add {host.ssh} --label {host.machine}` (`herdr machine list` shows what is saved)",
        ) from None
    if status.reachable is not True:
        raise _Failed(
            f"saved machine {host.machine} unreachable" + (f": {status.error}" if status.error else ""),
            f"herdr cannot reach the saved machine {_name(host)}" + (f" ({status.error})" if status.error else ""),
            f"`herdr machine reconnect {host.machine}` finishes its SSH sign-in in a terminal; then preflight again",
        )
    found.append(f"saved machine {host.machine} reachable")


def _server(host: Host, through_machine: HerdrCli, organization: str, found: list[str]) -> None:
    """The host's herdr server, asked through `herdr --machine`: running, compatible, new enough, in the session."""
    try:
        server = through_machine.server_status()
    except HerdrFailure as exc:
        raise _Failed(
            f"herdr --machine {host.machine} status server: {exc.herdr_message or exc.message}",
            f"herdr --machine {host.machine} failed: {exc.herdr_message or exc.message}",
            f"`herdr machine status {host.machine}` says whether herdr can reach it; forwarding never starts its server",
        ) from None
    if not server.running:
        raise _Failed("its herdr server is not running", "its herdr server is not running", "start herdr on that host (forwarding never starts it)")
    version = server.version or "unknown"
    parsed = parse_version(version)
    if parsed is None or parsed < MACHINE_VERSION or version_support(version) == "older":
        raise _Failed(
            f"herdr {version} there",
            f"its herdr server is {version}; forwarding needs herdr {_version(MACHINE_VERSION)} or later on both ends",
            "upgrade herdr on that host and restart its server",
        )
    if server.compatible is False:
        raise _Failed(f"herdr {version} there, not compatible", f"its herdr server ({version}) is not compatible with the controller's herdr", "run the same herdr release on both machines")
    session = server.session or "default"
    if session != organization:
        raise _Failed(
            f"its session is {session}",
            f"its saved machine serves herdr session {quote(session)}, but the plan's organization {quote(organization)} needs the session {quote(organization)}",
            f"save the machine with `--remote-session {organization}` (`herdr machine add {host.ssh} --label {host.machine} --remote-session {organization}`)",
        )
    found.append(f"herdr {version} in session {session}")


def _integrations(host: Host, over_ssh: HerdrCli, kinds: Sequence[str], found: list[str]) -> None:
    """`herdr integration status` on the host itself (not forwarded): every kind it runs has a current one."""
    try:
        entries = over_ssh.integration_status()
    except HerdrFailure as exc:
        raise _Failed(
            exc.message,  # it names the ssh target and the command already
            f"cannot run herdr there over ssh ({exc.message})",
            f"orch needs `ssh -o BatchMode=yes {host.ssh} herdr --version` to work without a prompt",
        ) from None
    problems = integration_problems(kinds, entries)
    if problems:
        said = "; ".join(f"{kind}: {text}" for kind, text in problems)
        commands = " and ".join(f"`herdr integration install {kind}`" for kind, text in problems if text != "herdr offers no integration for it")
        raise _Failed(
            said,
            f"no current herdr integration there for {', '.join(kind for kind, _ in problems)}: lifecycle detection would not be authoritative",
            f"ask the person to run {commands} on that host (orch never installs one)" if commands else "use a worker kind herdr has an integration for",
        )
    by_target = {entry.target: entry for entry in entries}
    found.append("integrations " + ", ".join(f"{kind} {describe_integration(by_target[kind])}" for kind in kinds))


def _reached(host: Host, result: remote.RemoteResult) -> None:
    if result.unreachable:
        raise _Failed(
            f"ssh {host.ssh}: {result.detail()}",
            f"ssh {host.ssh} failed: {result.detail()}",
            f"orch needs `ssh -o BatchMode=yes {host.ssh} true` to work without a prompt",
        )


def _and_words(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
