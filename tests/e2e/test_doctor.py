"""`orch doctor PLAN` on the simulator: a healthy setup passes; each broken piece fails with its one line."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from herdr_sim import integrations, versions

# The hook version `integration status` shows depends on the herdr release the simulator plays (HERDR_SIM_VERSION).
HOOK = {target.name: f"current (v{target.version})" for target in integrations.targets()}

PLAN = """
organization = "acme"
repo = "widgets"
base = "main"
{policy}
[[workers]]
task = "api-docs"
kind = "codex"
objective = "Document the widgets API."
deliverable = "docs/api.md committed on docs/api-guide."
branch = "docs/api-guide"
claim = ["docs/"]
verify = ["ls docs"]

[[workers]]
task = "cli-help"
kind = "claude"
objective = "Improve the CLI help text."
deliverable = "src/cli/ changes committed on feat/cli-help."
branch = "feat/cli-help"
claim = ["src/cli/"]
verify = ["ls src/cli"]
"""

TRUSTING = """
[agents.codex]
trust_dialog = true

[agents.claude]
trust_dialog = true
"""


def _timed(text: str) -> str:
    """Probe times, scratch dirs and run ids vary: `in N.Ns` reads `in T`, the probes' temp dir `SCRATCH`, the run `RUN`."""
    text = re.sub(r"\S*/orch-doctor-[^/ ]+/", "SCRATCH/", text)
    text = re.sub(r"\bw[0-9]+:p[0-9]+-[0-9]{8}T[0-9]{6}Z\b", "RUN", text)
    return re.sub(r" in [0-9]+\.[0-9]s$", " in T", text, flags=re.MULTILINE)


def test_doctor_passes_on_a_healthy_setup_and_leaves_nothing_behind(world: Any) -> None:
    world.write_scenarios(TRUSTING)
    plan = world.write_plan(PLAN.format(policy=""))
    workspaces_before = world.herdr("workspace", "list")["result"]["workspaces"]

    done = world.orch("doctor", str(plan))

    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert _timed(done.stdout) == (
        f"orch doctor {plan}: 2 agent kinds\n"
        "codex: PASS in T\n"
        "  installed: yes (`codex`)\n"
        f"  integration: {HOOK['codex']}\n"
        "  trust dialog: trust folder, answered with enter\n"
        "  prompt: accepted\n"
        "  callback: update #1 accepted\n"
        "  cleanup: agent exited, workspace closed, scratch worktree removed\n"
        "claude: PASS in T\n"
        "  installed: yes (`claude`)\n"
        f"  integration: {HOOK['claude']}\n"
        "  trust dialog: trust folder, answered with down enter\n"
        "  prompt: accepted\n"
        "  callback: update #2 accepted\n"
        "  cleanup: agent exited, workspace closed, scratch worktree removed\n"
        "doctor: every agent kind passed (codex, claude); the fleet can start\n"
    )
    # Nothing of the probes is left: no workspace, no agent, no worktree, no run in the person's ledger.
    assert world.herdr("workspace", "list")["result"]["workspaces"] == workspaces_before
    assert world.herdr("agent", "list")["result"]["agents"] == []
    assert len(world.repo.git("worktree", "list").splitlines()) == 1
    assert not (world.orch_home / "ledger.sqlite3").exists()


def test_doctor_offline_probes_the_same_path_on_the_scripted_model(world: Any) -> None:
    # --offline: each probe's workspace carries the agent's offline configuration and a scripted model serves it.
    # The simulator's agents answer the probe themselves, so the model sees no request and the report says so (the
    # real-agents lane runs the real agents against it: tests/real_agents/test_doctor_offline.py).
    world.write_scenarios(TRUSTING)
    plan = world.write_plan(PLAN.format(policy=""))

    done = world.orch("doctor", str(plan), "--offline")

    unasked = "  scripted model: 0 requests (the agent never asked it: check that it reads the offline configuration)\n"
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert _timed(done.stdout) == (
        f"orch doctor {plan}: 2 agent kinds, offline on the scripted model (no tokens spent)\n"
        "codex: PASS in T\n"
        "  installed: yes (`codex`)\n"
        f"  integration: {HOOK['codex']}\n"
        "  trust dialog: trust folder, answered with enter\n"
        "  prompt: accepted\n"
        "  callback: update #1 accepted\n"
        f"{unasked}"
        "  cleanup: agent exited, workspace closed, scratch worktree removed\n"
        "claude: PASS in T\n"
        "  installed: yes (`claude`)\n"
        f"  integration: {HOOK['claude']}\n"
        "  trust dialog: trust folder, answered with down enter\n"
        "  prompt: accepted\n"
        "  callback: update #2 accepted\n"
        f"{unasked}"
        "  cleanup: agent exited, workspace closed, scratch worktree removed\n"
        "doctor: every agent kind passed (codex, claude); the fleet can start\n"
    )
    assert world.herdr("agent", "list")["result"]["agents"] == []
    assert len(world.repo.git("worktree", "list").splitlines()) == 1
    assert not (world.orch_home / "ledger.sqlite3").exists()


def test_doctor_offline_refuses_a_kind_it_has_no_configuration_for(make_world: Any) -> None:
    world = make_world(integrations="cursor")
    plan = world.write_plan(ONE_CLAUDE.format(policy='[policy]\nallowed_kinds = ["cursor"]\ndefault_kind = "cursor"\n').replace('kind = "claude"', 'kind = "cursor"'))

    done = world.orch("doctor", str(plan), "--offline")

    failure = "cursor: no offline configuration for this kind (--offline knows pi, claude, codex, opencode)"
    assert (done.returncode, _timed(done.stdout)) == (1, (
        f"orch doctor {plan}: 1 agent kind, offline on the scripted model (no tokens spent)\n"
        "cursor: FAIL in T\n"
        "  installed: yes (`cursor-agent`)\n"
        f"  integration: {HOOK['cursor']}\n"
        "  trust dialog: not reached\n"
        "  prompt: not sent\n"
        "  callback: none\n"
        f"  failure: {failure}\n"
        "doctor: 1 of 1 agent kind failed (cursor); fix it before the fleet\n"
    )), done.stderr
    assert done.stderr == (f"orch: {failure}\nhint: probe it live with `orch doctor PLAN` (without --offline; its model is then "
                           "the agent's own, and spends tokens)\n")


ONE_CLAUDE = """
organization = "acme"
repo = "widgets"
base = "main"
{policy}
[[workers]]
task = "cli-help"
kind = "claude"
objective = "Improve the CLI help text."
deliverable = "src/cli/ changes committed on feat/cli-help."
branch = "feat/cli-help"
claim = ["src/cli/"]
verify = ["ls src/cli"]
"""


def _failed(world: Any, plan: Any, done: Any, facts: str, failure: str, hint: str) -> None:
    """A one-kind doctor that failed: the whole report, its one `orch:` line and hint, exit 1, nothing left behind."""
    assert (done.returncode, _timed(done.stdout)) == (1, (
        f"orch doctor {plan}: 1 agent kind\n"
        "claude: FAIL in T\n"
        f"{facts}"
        f"  failure: {failure}\n"
        "doctor: 1 of 1 agent kind failed (claude); fix it before the fleet\n"
    )), done.stderr
    assert _timed(done.stderr) == f"orch: {failure}\nhint: {hint}\n"
    assert world.herdr("agent", "list")["result"]["agents"] == []
    assert len(world.repo.git("worktree", "list").splitlines()) == 1


def test_doctor_fails_for_a_kind_that_is_not_installed(world: Any) -> None:
    (world.sim.paths.bin / "claude").unlink()
    plan = world.write_plan(ONE_CLAUDE.format(policy=""))

    done = world.orch("doctor", str(plan))

    _failed(world, plan, done,
            f"  installed: no (`claude`)\n  integration: {HOOK['claude']}\n  trust dialog: not reached\n  prompt: not sent\n  callback: none\n",
            "claude: not installed: `claude` is not on PATH",
            f"install the agent so its executable is on PATH in herdr's panes, then run `orch doctor {plan}` again")  # fmt: skip

    # Under --json: the same report as one document, with the failure object every orch command prints.
    as_json = world.orch("doctor", str(plan), "--json")
    report = json.loads(as_json.stdout)
    line = "claude: not installed: `claude` is not on PATH"
    # The hint an agent controller reads names the command as it would run it, with --json (cli.with_caller_flags),
    # in the document as on the hint line.
    hint = f"install the agent so its executable is on PATH in herdr's panes, then run `orch doctor {plan} --json` again"
    assert (as_json.returncode, report["ok"], report["failure"]) == (1, False, {
        "ok": False, "error": "DoctorFailed", "reason": line, "problems": [line], "hint": hint, "exit_code": 1})
    assert report["kinds"] == [{
        "kind": "claude", "ok": False, "executable": "claude", "installed": False, "executable_path": None,
        "integration": HOOK["claude"], "dialog": None, "dialog_answered": False, "dialog_keys": [], "prompt_accepted": False,
        "callback": None, "model_requests": None, "seconds": report["kinds"][0]["seconds"], "cleanup": [], "failure": line, "hint": hint}]
    assert as_json.stderr == f"orch: {line}\nhint: {hint}\n"
    # Run as printed, it is the same doctor again.
    (command,) = re.findall(r"`(orch doctor [^`]+)`", hint)
    again = world.orch(*shlex.split(command)[1:])
    rerun = json.loads(again.stdout)
    rerun["kinds"][0]["seconds"] = report["kinds"][0]["seconds"]
    assert (again.returncode, rerun, again.stderr) == (1, report, as_json.stderr)


def test_doctor_fails_for_a_kind_without_its_herdr_integration(make_world: Any) -> None:
    world = make_world(integrations="codex")
    plan = world.write_plan(ONE_CLAUDE.format(policy=""))

    done = world.orch("doctor", str(plan))

    _failed(world, plan, done,
            "  installed: yes (`claude`)\n  integration: not installed\n  trust dialog: not reached\n  prompt: not sent\n  callback: none\n",
            "claude: no current herdr integration (not installed): lifecycle detection would not be authoritative",
            "ask the person to run `herdr integration install claude` (orch never installs one: it changes durable machine state)")  # fmt: skip


def test_doctor_fails_when_no_valid_callback_arrives(world: Any) -> None:
    # The agent follows the probe, but its message says it comes from someone else: validation keeps it aside.
    world.write_scenarios('[[task.doctor-claude]]\ndo = "send"\nkind = "update"\nmessage = "probe ok"\nfrom = "someone-else"\n')
    plan = world.write_plan(ONE_CLAUDE.format(policy=""))

    done = world.orch("doctor", str(plan), "--timeout", "5")

    _failed(world, plan, done,
            f"  installed: yes (`claude`)\n  integration: {HOOK['claude']}\n  trust dialog: none\n  prompt: accepted\n  callback: none\n"
            "  cleanup: agent exited, workspace closed, scratch worktree removed\n",
            'claude: no valid callback within 5s; the callback path does not work (1 kept aside, first: wrong_sender: sender "someone-else" is not "orch-doctor-claude", the worker registered for task "doctor-claude")',
            "the probe's callback must reach `orch inbox add` from the agent's shell: run it there by hand to see why not")  # fmt: skip


SAFETY_CHECK = " Quick safety check: Is this a project you created or one you trust? (Like your"


def _wrapped(line: str) -> str:
    """A screen line as the pane shows it: wrapped at the width of the herdr release the simulator plays."""
    width = versions.current().width
    return " / ".join(line[i : i + width].strip() for i in range(0, len(line), width))


def test_doctor_fails_at_a_dialog_orch_may_not_answer(world: Any) -> None:
    world.write_scenarios(TRUSTING)
    plan = world.write_plan(ONE_CLAUDE.format(policy="[policy]\ntrust_run_worktrees = false\n"))

    done = world.orch("doctor", str(plan))

    _failed(world, plan, done,
            f"  installed: yes (`claude`)\n  integration: {HOOK['claude']}\n  trust dialog: trust folder, not answered\n  prompt: not sent\n  callback: none\n"
            "  cleanup: agent was blocked: closed with its workspace, workspace closed, scratch worktree removed\n",
            "claude: stopped at a dialog orch cannot answer: orch-doctor-claude (claude) stopped at its trust folder dialog and nothing was typed "
            f"(policy trust_run_worktrees is off, from plan [policy]). Screen: {_wrapped(SAFETY_CHECK)} / "
            "own code, a well-known open source project, or work from your team). If not, / take a moment to review what's in this folder first. / "
            "Claude Code'll be able to read, edit, and "
            "execute files here. / Security guide / ❯ No, exit / Yes, I trust this folder / Enter to confirm · Esc to cancel",
            f"answer it in the pane yourself, or allow it with `[policy] trust_run_worktrees = true`, then run `orch doctor {plan}` again")  # fmt: skip
    # The agent still waited at its dialog when its workspace closed: no key reached it.
    assert not list((world.sim.home / "agents").glob("trusted-*.txt"))


def test_doctor_fails_at_an_approval_form_and_never_approves_it(world: Any) -> None:
    # A real agent may ask before running the callback command; orch doctor never answers such a form.
    world.write_scenarios('[[task.doctor-claude]]\ndo = "approval"\ncommand = "orch inbox add"\n\n'
                          '[[task.doctor-claude]]\ndo = "send"\nkind = "update"\nmessage = "probe ok"\n')
    plan = world.write_plan(ONE_CLAUDE.format(policy=""))

    done = world.orch("doctor", str(plan))

    _failed(world, plan, done,
            f"  installed: yes (`claude`)\n  integration: {HOOK['claude']}\n  trust dialog: none\n  prompt: accepted\n  callback: none\n"
            "  cleanup: agent was blocked: closed with its workspace, workspace closed, scratch worktree removed\n",
            "claude: stopped at a dialog orch cannot answer: the probe waits at its permission prompt and orch never approves on its own. "
            "Screen: Run a command / │ orch inbox add / This command requires approval / Do you want to proceed? / "
            "❯ 1. Yes / 2. Yes, and don't ask again for this command / 3. No / Esc to cancel · Tab to amend",
            f"orch doctor never approves anything: let the agent run `orch` without asking (its permission settings), then run `orch doctor {plan}` again")  # fmt: skip
