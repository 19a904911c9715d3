"""`orch plan check --commands`: every herdr and git command a run of the plan would make on its happy path, in order.

The herdr argv is built by ``HerdrCli`` itself through a recording runner (``orchestrator.herdr.argv_of``) (so the listing cannot drift from what orch
sends); ids herdr assigns are placeholders (`<pane:TASK>`, `<workspace:TASK>`…). The happy path: every gate passes,
the repo workspace and its tab are new, each agent takes its packet and sends one result, every worker is accepted on
its first verification. Questions, retries, read-back repairs and check-ins add commands that are not listed.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from orchestrator import remote
from orchestrator.agents import facts
from orchestrator.checks import remote_argv
from orchestrator.fetch import SCRATCH_TEMPLATE
from orchestrator.herdr import HerdrCli, argv_of, call_argv, record_call
from orchestrator.plan import ResolvedPlan, ResolvedWorker
from orchestrator.retire import default_exit_command
from registry.kinds import CONTROLLER_HOST

Add = Callable[..., None]

PACKET = "<packet:{task}>"
CONTROLLER = "<controller-pane>"
BASE = "<base-sha>"


@dataclass(frozen=True)
class Command:
    """One command of the run: which tool, its argv after the tool's name, where it runs (git), and why."""

    tool: str  # "herdr" or "git"
    argv: tuple[str, ...]
    why: str
    cwd: str | None = None

    def line(self) -> str:
        """The command as one shell-quoted line."""
        where = f"(in {self.cwd}) " if self.cwd else ""
        return f"{where}{shlex.join((self.tool, *self.argv))}  # {self.why}"


def _host_commands(resolved: ResolvedPlan) -> list[Command]:
    """Preflight of each host (orchestrator.hosts), in its order."""
    out: list[Command] = []
    kinds = {name: list(dict.fromkeys(w.kind for w in resolved.workers if w.host == name)) or [resolved.policy.policy.default_kind] for name in resolved.plan.hosts}
    for name, host in resolved.plan.hosts.items():
        def add(argv: Sequence[str], why: str, name: str = name) -> None:
            out.append(Command(argv[0], tuple(argv[1:]), f"preflight {name}: {why}"))

        local = HerdrCli("herdr", runner=record_call, sleep=lambda _s: None)
        add(call_argv(local, "machine_status", (host.machine,)), "the saved machine is reachable")
        add(call_argv(HerdrCli("herdr", machine=host.machine, runner=record_call), "server_status"), "its herdr server and session")
        add(call_argv(HerdrCli("herdr", ssh=host.ssh, runner=record_call), "integration_status"), "its integrations")
        for kind in kinds[name]:
            add(remote.ssh_argv(host.ssh, ["command", "-v", facts(kind).executable]), f"{kind} installed")
        add(remote.ssh_argv(host.ssh, ["git", "-C", host.checkout, "rev-parse", "--verify", "--quiet", f"{BASE}^{{commit}}"]), "the checkout has the base")
        add(remote.ssh_argv(host.ssh, [host.orch, "--version"]), "orch installed")
    return out


def plan_commands(resolved: ResolvedPlan) -> list[Command]:
    """The ordered commands of one run of ``resolved`` on its happy path."""
    plan, repo = resolved.plan, resolved.repo
    checkout = str(repo.checkout)
    out: list[Command] = []

    def herdr(why: str, call: str, *args: object, host: str = CONTROLLER_HOST, **kwargs: object) -> None:
        if host == CONTROLLER_HOST:
            out.append(Command("herdr", argv_of(call, args, kwargs), why))
            return
        # Another host's herdr, through the controller's saved machine: the argv HerdrCli builds for it.
        there = HerdrCli("herdr", machine=resolved.plan.hosts[host].machine, runner=record_call, sleep=lambda _s: None)
        out.append(Command("herdr", call_argv(there, call, args, kwargs)[1:], why))

    def git(why: str, *argv: str, cwd: str = checkout, host: str = CONTROLLER_HOST) -> None:
        if host == CONTROLLER_HOST:
            out.append(Command("git", tuple(argv), why, cwd))
            return
        ssh = remote.ssh_argv(resolved.plan.hosts[host].ssh, ["git", "-C", cwd, *argv])
        out.append(Command(ssh[0], tuple(ssh[1:]), why))

    def ssh(why: str, host: str, *argv: str) -> None:
        line = remote.ssh_argv(resolved.plan.hosts[host].ssh, list(argv))
        out.append(Command(line[0], tuple(line[1:]), why))

    repo_ws = "<workspace:repo>"
    noted: set[str] = set()  # hosts whose `<checkout>.worktrees/` provisioning has looked for
    herdr("preflight: herdr version", "version")
    herdr("preflight: commands this herdr has", "api_schema_methods")
    herdr("preflight: server running", "status")
    herdr("preflight: session", "session_list")
    herdr("preflight: integrations", "integration_status")
    herdr("preflight: the controller pane", "pane_current")
    herdr("preflight: agents already running", "agent_list")
    git("preflight: the checkout", "rev-parse", "--show-toplevel")
    git("preflight: its branch", "rev-parse", "--abbrev-ref", "HEAD")
    git("preflight: the base ref", "rev-parse", "--verify", "--quiet", f"{plan.base}^{{commit}}")
    out.extend(_host_commands(resolved))
    herdr("preflight: workspaces", "workspace_list")
    herdr("preflight: panes", "pane_list")
    herdr("preflight: the repo workspace (new)", "workspace_create", cwd=checkout, label=repo.workspace)
    herdr("preflight: its tabs", "tab_list", workspace=repo_ws)
    herdr("preflight: first tab label", "tab_rename", "<tab:repo>", repo.first_tab)

    cap = plan.defaults.concurrency
    waves = _waves(resolved, cap)
    exited: set[str] = set()
    for number, tasks in enumerate(waves, start=1):
        workers = [w for t in tasks for w in resolved.workers if w.task == t]
        head = f"schedule wave {number} (at most {cap} at once): {', '.join(tasks)}"
        out.append(Command("#", (), head))
        herdr("provision: worktrees", "worktree_list", workspace=repo_ws)
        herdr("provision: tabs", "tab_list", workspace=repo_ws)
        herdr("provision: panes", "pane_list", workspace=repo_ws)
        herdr("provision: agents", "agent_list")
        for name in dict.fromkeys(w.host for w in workers if w.host != CONTROLLER_HOST):
            there = resolved.plan.hosts[name].checkout
            herdr(f"provision on {name}: worktrees", "worktree_list", cwd=there, host=name)
            herdr(f"provision on {name}: tabs", "tab_list", host=name)
            herdr(f"provision on {name}: panes", "pane_list", host=name)
            herdr(f"provision on {name}: agents", "agent_list", host=name)
        git("provision: remotes (fetch gate)", "remote")
        for w in workers:
            if w.placement == "worktree" and w.host != CONTROLLER_HOST and w.host not in noted:
                noted.add(w.host)
                ssh(f"provision {w.task}: does {w.host}'s worktrees folder exist yet (once per host; retire removes one the run made, once empty)",
                    w.host, "test", "-e", str(w.worktree.path.parent))
            _provision(w, resolved, herdr, git, repo_ws)
        for w in workers:
            _dispatch(w, herdr)
        for w in workers:
            _verify(w, git, resolved, out)
        if plan.integration.enabled and plan.integration.branch:
            for w in workers:
                git(f"integrate: merge {w.task}", "merge", "--no-ff", "--no-edit", "-m", f"<merge message:{w.task}>", f"<head:{w.task}>",
                    cwd="<run-folder>/integration")
                git(f"integrate: prove {w.task} landed", "merge-base", "--is-ancestor", f"<head:{w.task}>", f"refs/heads/{plan.integration.branch}",
                    cwd="<run-folder>/integration")
        if number < len(waves):
            # A queued worker waits for these slots: the finished agents exit now, their panes stay.
            for w in workers[: len(waves[number])]:
                _exit_agent(w, herdr, f"free {w.task}'s slot")
                exited.add(w.task)
    out.append(Command("#", (), "retire"))
    for w in resolved.workers:
        pane = f"<pane:{w.task}>"
        herdr(f"retire {w.task}: its pane", "pane_get", pane, host=w.host)
        if w.task not in exited:
            _exit_agent(w, herdr, f"retire {w.task}")
        herdr(f"retire {w.task}: close its pane", "pane_close", pane, host=w.host)
    for w in resolved.workers:
        if w.placement == "worktree":
            git(f"retire {w.task}: anything uncommitted", "status", "--porcelain", "--untracked-files=all", cwd=str(w.worktree.path), host=w.host)
            if plan.integration.enabled or w.host != CONTROLLER_HOST:
                # A remote worker's commits are held at home (refs/orch/…) once fetched: its checkout there may go.
                there = checkout if w.host == CONTROLLER_HOST else resolved.plan.hosts[w.host].checkout
                held = "integrated" if plan.integration.enabled else "its commits held at home"
                herdr(f"retire {w.task}: worktrees", "worktree_list", cwd=there, host=w.host)
                herdr(f"retire {w.task}: remove its checkout ({held})", "worktree_remove", f"<workspace:{w.task}>", host=w.host)
            else:
                out.append(Command("#", (), f"retire {w.task}: its checkout is kept (integration off: its commits exist only on {w.worktree.branch})"))
    for name in sorted(noted):
        folder = next(str(w.worktree.path.parent) for w in resolved.workers if w.host == name and w.placement == "worktree")
        ssh(f"retire: {name}'s worktrees folder, if the run made it (rmdir: only when empty)", name, "rmdir", "--", folder)
    return out


def _exit_agent(w: ResolvedWorker, add: Add, why: str) -> None:
    pane = f"<pane:{w.task}>"
    add(f"{why}: is its agent at rest", "agent_get", pane, host=w.host)
    add(f"{why}: exit its agent", "pane_send_text", pane, _exit(w), host=w.host)
    add(f"{why}: submit", "pane_send_keys", pane, "Enter", host=w.host)
    add(f"{why}: the agent is gone", "agent_get", pane, host=w.host)
    add(f"{why}: the shell is back", "pane_read", pane, source="recent", lines=40, host=w.host)


def _exit(w: ResolvedWorker) -> str:
    return default_exit_command(w.kind) or "<exit command>"


def _waves(resolved: ResolvedPlan, cap: int) -> list[list[str]]:
    """The scheduler's admissions when every worker is accepted as soon as it runs: in plan order, at most ``cap`` at a
    time, each once its `after` tasks finished in an earlier wave and its branch owner started."""
    done: set[str] = set()
    waves: list[list[str]] = []
    left = [w for w in resolved.workers]
    while left:
        wave: list[str] = []
        for w in left:
            if len(wave) == cap:
                break
            owner_started = w.sibling_of is None or w.sibling_of in done or w.sibling_of in wave
            if set(w.after) <= done and owner_started:
                wave.append(w.task)
        if not wave:
            break  # cannot happen for a valid plan (cycles are plan errors)
        waves.append(wave)
        done |= set(wave)
        left = [w for w in left if w.task not in done]
    return waves


def _provision(w: ResolvedWorker, resolved: ResolvedPlan, add_herdr: Add, add_git: Add, repo_ws: str) -> None:
    layout, task, on = w.worktree, w.task, w.host
    pane = f"<pane:{task}>"
    if w.placement == "worktree" and on != CONTROLLER_HOST:
        # No repo workspace on another host: the worker keeps the workspace `worktree create` opens there.
        host = resolved.plan.hosts[on]
        there, into = host.checkout, resolved.plan.integration
        base = BASE
        if w.after and into.enabled and into.branch:
            # A dependant starts from the integration branch, which lives on the controller: that commit is sent into
            # orch's ref of the host's checkout, and read back there, before the worktree is made from it.
            base, ref = f"<tip:{into.branch}>", f"refs/orch/<run>/base/{task}"
            add_git(f"provision {task}: its start, the integration branch", "rev-parse", "--verify", "--quiet", f"refs/heads/{into.branch}^{{commit}}")
            add_git(f"provision {task}: that commit sent to {on}'s checkout", "push", "--quiet", "--no-verify", "--end-of-options",
                    f"{host.ssh}:{there}", f"+{base}:{ref}")
            add_git(f"provision {task}: read back on {on}", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=there, host=on)
        else:
            add_git(f"provision {task}: the base is in {on}'s checkout", "rev-parse", "--verify", "--quiet", f"{BASE}^{{commit}}", cwd=there, host=on)
        add_git(f"provision {task}: an existing branch", "rev-parse", "--verify", "--quiet", f"refs/heads/{layout.branch}^{{commit}}", cwd=there, host=on)
        add_herdr(f"provision {task}: its worktree on {on}", "worktree_create", cwd=there, branch=layout.branch, base=base, path=layout.path,
                  label=layout.label, host=on)
        add_git(f"provision {task}: its branch holds the base", "rev-parse", "--verify", "--quiet", f"refs/heads/{layout.branch}^{{commit}}", cwd=there, host=on)
        add_git(f"provision {task}: its branch holds the base", "merge-base", "--is-ancestor", base, f"<head:{task}>", cwd=there, host=on)
        add_herdr(f"provision {task}: its pane", "pane_get", f"<root-pane:{task}>", host=on)
        add_herdr(f"provision {task}: read back the tab", "tab_list", workspace=f"<workspace:{task}>", host=on)
        add_git(f"provision {task}: read back the branch", "rev-parse", "--abbrev-ref", "HEAD", cwd=str(layout.path), host=on)
        add_git(f"provision {task}: read back the checkout", "rev-parse", "--show-toplevel", cwd=str(layout.path), host=on)
    elif w.placement == "worktree":
        add_git(f"provision {task}: fetch gate, base", "rev-parse", "--verify", "--quiet", f"{resolved.plan.base}^{{commit}}")
        add_herdr(f"provision {task}: its worktree tab", "worktree_create", workspace=repo_ws, branch=layout.branch, base=BASE,
                  path=layout.path, label=layout.label)
        add_herdr(f"provision {task}: into the repo workspace", "pane_move_new_tab", f"<root-pane:{task}>", workspace=repo_ws, label=layout.label)
        add_herdr(f"provision {task}: read back the tab", "tab_list", workspace=repo_ws)
        add_git(f"provision {task}: read back the branch", "rev-parse", "--abbrev-ref", "HEAD", cwd=str(layout.path))
        add_git(f"provision {task}: read back the checkout", "rev-parse", "--show-toplevel", cwd=str(layout.path))
    else:
        owner = f"<pane:{w.sibling_of}>"
        add_herdr(f"provision {task}: the owner's pane size", "pane_layout", owner, host=on)
        add_herdr(f"provision {task}: a sibling pane", "pane_split", owner, direction="right", cwd=str(layout.path), host=on)
    add_herdr(f"provision {task}: start guard", "pane_get", pane, host=on)
    add_git(f"provision {task}: start guard", "rev-parse", "--show-toplevel", cwd=str(layout.path), host=on)
    add_herdr(f"provision {task}: start {w.kind}", "agent_start", w.name, kind=w.kind, pane=pane,
              timeout_ms=resolved.plan.defaults.agent_start_timeout_s * 1000, args=w.worker.agent_args, host=on)


def _dispatch(w: ResolvedWorker, add: Add) -> None:
    on = w.host
    add(f"dispatch {w.task}: resolve its agent", "agent_get", w.name, host=on)
    add(f"dispatch {w.task}: its packet", "agent_prompt", w.name, PACKET.format(task=w.task), host=on)
    add(f"dispatch {w.task}: acceptance", "agent_wait", w.name, until=("working",), timeout_ms=5000, host=on)
    add(f"check-in: {w.task}'s state", "agent_list", host=on)
    add(f"check-in: {w.task}'s screen", "agent_read", w.name, source="recent-unwrapped", lines=60, host=on)


def _verify(w: ResolvedWorker, add: Add, resolved: ResolvedPlan, out: list[Command]) -> None:
    head = f"<head:{w.task}>"
    if w.host != CONTROLLER_HOST:
        # Its head read back on its host, then exactly that commit fetched home (orchestrator.fetch).
        host = resolved.plan.hosts[w.host]
        add(f"verify {w.task}: its head on {w.host}", "rev-parse", "--verify", "--quiet", f"refs/heads/{w.worktree.branch}^{{commit}}",
            cwd=host.checkout, host=w.host)
        add(f"verify {w.task}: that commit fetched home", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--end-of-options",
            f"{host.ssh}:{host.checkout}", f"+{head}:refs/orch/<run>/{w.task}")
    else:
        add(f"verify {w.task}: its head", "rev-parse", "--verify", "--quiet", f"refs/heads/{w.worktree.branch}^{{commit}}")
    add(f"verify {w.task}: its commits", "rev-list", "--reverse", f"{BASE}..{head}")
    add(f"verify {w.task}: its changed files", "diff", "--name-only", "--no-renames", "-z", BASE, head)
    if w.worker.verify and w.checks_on != CONTROLLER_HOST:
        # verify_on = "host": re-run on its host, in a checkout of its head orch makes there (orchestrator.fetch.rerun_on_host).
        on, host = w.checks_on, resolved.plan.hosts[w.checks_on]

        def ssh(why: str, argv: Sequence[str]) -> None:
            line = remote.ssh_argv(host.ssh, argv)
            out.append(Command(line[0], tuple(line[1:]), f"verify {w.task}: {why}"))

        ssh(f"a fresh folder on {on} for its checks", ["mktemp", "-d", "-t", SCRATCH_TEMPLATE])
        add(f"verify {w.task}: a scratch checkout of its head on {on}", "worktree", "add", "--detach", "--quiet", "<scratch>/checkout", head,
            cwd=host.checkout, host=on)
        for command in w.worker.verify:
            ssh(f"re-run a check on {on}", remote_argv(command, "<scratch>/checkout"))
        add(f"verify {w.task}: remove the scratch checkout on {on}", "worktree", "remove", "--force", "<scratch>/checkout", cwd=host.checkout, host=on)
        add(f"verify {w.task}: forget it on {on}", "worktree", "prune", cwd=host.checkout, host=on)
        ssh(f"remove the folder on {on}", ["rm", "-rf", "--", "<scratch>"])
    elif w.worker.verify:
        add(f"verify {w.task}: a scratch checkout for its checks", "worktree", "add", "--detach", "--quiet", "<scratch>", head)
        add(f"verify {w.task}: remove the scratch checkout", "worktree", "remove", "--force", "<scratch>")


def render_commands(commands: Sequence[Command]) -> str:
    """One line per command, a blank line and a heading before each scheduling wave."""
    lines: list[str] = []
    for command in commands:
        if command.tool == "#":
            lines += ["", f"# {command.why}"]
        else:
            lines.append(command.line())
    return "\n".join(lines).lstrip("\n") + "\n"
