"""The scripted worker: takes prompts at its tty, acts out scenario steps, reports lifecycle to herdr, sends callbacks."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from herdr_sim.agent.console import Console, EndOfInput, Event, Interrupt, Submit
from herdr_sim.agent.packet import Envelope, Packet, PacketError, classify, fill_callback, parse_envelope, parse_packet, parse_probe
from herdr_sim.agent.result import Check, format_report, format_result, needs_report, tail
from herdr_sim.agent import screens
from herdr_sim.agent.scenario import (
    Approval,
    Behaviour,
    Blocked,
    Commit,
    Crash,
    Ignore,
    Question,
    Result,
    Run,
    ScenarioError,
    Send,
    Stall,
    Step,
    Update,
    Verify,
    Write,
    load_probe_steps,
    load_steps,
)

SOURCE = "custom:sim-agent"
HERDR_TIMEOUT_S = 15
CALLBACK_TIMEOUT_S = 60
COMMAND_TIMEOUT_S = 600
GIT_TIMEOUT_S = 60
INDEX_LOCK_WAIT_S = 5  # how long a git command is run again while a sibling holds one of the checkout's locks
SIBLING_LOCKS = ("index.lock", "cannot lock ref")  # git's words when a sibling's command held a lock first
UNSTAGED = "did not match any file(s) known to git"  # git commit -- PATHS after a sibling's commit dropped them
SCREEN_ONLY_THINK_S = 1.5
# What a controller writes when it asks for the last message again (orch: after a possible merge of two callbacks).
# A real agent reads the request and re-sends; the scripted one recognises these words in a follow-up.
REPEAT_REQUEST = re.compile(r"\bsend your last message again\b", re.IGNORECASE)


class TurnInterrupted(Exception):
    """Ctrl-C or a `stop` envelope arrived mid-turn."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TurnPaused(Exception):
    """The turn ends waiting for the controller (after a question or blocked)."""

    def __init__(self, state: str, message: str) -> None:
        super().__init__(message)
        self.state = state
        self.message = message


class AgentCrash(Exception):
    """The scenario asked the agent to die with this exit status."""

    def __init__(self, exit_code: int) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code


@dataclass
class Task:
    """Everything the worker remembers about its current delegation."""

    packet: Packet
    steps: list[Step]
    position: int = 0
    commits: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    checks: list[Check] | None = None
    answer: str = ""
    pending: str | None = None  # "question" or "blocked" while waiting for the controller
    last_sent: tuple[str, str, dict[str, str] | None] | None = None  # kind, message, header overrides


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A claim glob as a regex: `**` crosses directories, `*` and `?` do not."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + r"\Z")


def claim_file(claim: tuple[str, ...], task: str) -> str:
    """A concrete new file path that the first claim pattern allows (what a careful worker would pick)."""
    name = f"sim-{task}"
    for pattern in claim:
        if pattern.endswith("/"):
            candidate = f"{pattern}{name}.txt"
        else:
            candidate = pattern.replace("**/", "").replace("**", f"{name}.txt").replace("*", name).replace("?", "x")
        if _glob_regex(pattern.rstrip("/") + ("/**" if pattern.endswith("/") else "")).match(candidate):
            return candidate
    return f"{name}.txt"


class Agent:
    """One scripted agent process: the prompt loop, turns, and the steps of its scenario."""

    def __init__(
        self,
        kind: str,
        env: dict[str, str],
        console: Console,
        now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        start_delay_ms: int = 0,
        sleep: Callable[[float], None] = time.sleep,
        behaviour: Behaviour | None = None,
        start_dialog: str | None = None,
    ) -> None:
        self.kind = kind
        self.env = env
        self.console = console
        self.now_ms = now_ms
        self.pane_id = env.get("HERDR_PANE_ID", "")
        self.task: Task | None = None
        self.deferred: deque[Event] = deque()
        self._seq = 0
        self.start_delay_ms = start_delay_ms
        self.sleep = sleep
        self.behaviour = behaviour or Behaviour()
        self.cwd = os.getcwd()
        self._frame = 0
        self._busy_since: float | None = None
        self.start_dialog = start_dialog

    # --- herdr lifecycle -------------------------------------------------------------------------------------

    def show(self, working: bool) -> None:
        """What the screen says about the turn: the title (spinner while busy) and, for screen-read agents, a busy line."""
        self._frame += 1
        title = screens.title(self.kind, self.cwd, working, self._frame)
        if title is not None and (self.behaviour.title_spinner or not self.behaviour.hooks or self.behaviour.idle_while_working):
            self.console.title(title)
        if working and self._busy_since is None:
            self._busy_since = time.monotonic()
        elif not working:
            self._busy_since = None
        shows_busy = not self.behaviour.hooks or self.behaviour.idle_while_working
        if shows_busy:
            since = self._busy_since
            self.console.status(None if since is None else screens.busy_line(self.kind, int(time.monotonic() - since)))

    def report(self, state: str, message: str | None = None) -> None:
        """Report lifecycle state the way a herdr integration hook does; failures are logged, never fatal."""
        if state != "blocked":
            self.show(state == "working")
        if not self.pane_id or not self.behaviour.hooks:
            return
        # A millisecond clock keeps seq increasing across restarts in the same pane (herdr drops stale seqs).
        self._seq = max(self._seq + 1, self.now_ms())
        argv = ["herdr", "pane", "report-agent", self.pane_id, "--source", SOURCE, "--agent", self.kind, "--state", state]
        if message:
            argv += ["--message", message]
        argv += ["--seq", str(self._seq)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=HERDR_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.console.log(f"report-agent {state} failed: {exc}")
            return
        if done.returncode != 0:
            self.console.log(f"report-agent {state} exit {done.returncode}: {done.stderr.strip()}")

    # --- the prompt loop -------------------------------------------------------------------------------------

    def _known(self, what: str) -> bool:
        """Whether this kind already did `what` (started, trusted) in the working directory; remembers it from now on."""
        home = self.env.get("HERDR_SIM_HOME")
        if not home:
            return True
        path = Path(home) / "agents" / f"{what}-{self.kind}.txt"
        known = path.is_file() and self.cwd in path.read_text().splitlines()
        return known

    def _remember(self, what: str) -> None:
        home = self.env.get("HERDR_SIM_HOME")
        if home:
            path = Path(home) / "agents" / f"{what}-{self.kind}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as handle:
                handle.write(self.cwd + "\n")

    def choose(self, dialog: screens.Dialog, *, clear_screen: bool = False, selected: int = 0) -> int | None:
        """Show a modal dialog (cursor on option ``selected``) and read keys until one is confirmed; None for Ctrl-C / end of input."""
        height = self.console.draw(dialog.render(selected), clear_screen=clear_screen)
        while True:
            key = self.console.read_key()
            if key in ("ctrl+c", "ctrl+d"):
                chosen = None
                break
            if key == "enter":
                chosen = selected
                break
            if key == "esc":
                chosen = dialog.cancel
                break
            if key.lower() in dialog.shortcuts:
                chosen = dialog.shortcuts[key.lower()]
                break
            if key in ("up", "down"):
                selected = (selected + (1 if key == "down" else -1)) % len(dialog.options)
                height = self.console.draw(dialog.render(selected), replacing=height)
            # anything else (a paste, other keys) is ignored by the menu
        self.console.erase(height, clear_screen=clear_screen)
        self.console.log(f"dialog answer: {'none' if chosen is None else dialog.options[chosen]}")
        return chosen

    def start_up(self) -> bool:
        """Slow starts and the first-run trust dialog; False when the person declined to trust the directory."""
        first = not self._known("started")
        if first:
            self._remember("started")
        delay = self.start_delay_ms or (self.behaviour.first_start_delay_ms if first else 0)
        if delay:
            # A slow start: a loading indicator (herdr reads it as working) and no report until the delay is over,
            # so `agent start` keeps waiting and its --timeout is reachable.
            self.console.log(f"slow start: {delay} ms")
            title = screens.title(self.kind, self.cwd, True)
            if title is not None:
                self.console.title(title)
            self.console.status(screens.busy_line(self.kind, 0))
            self.sleep(delay / 1000)
            self.console.status(None)
        if self.behaviour.blank_start_ms:
            self.console.log(f"blank start: {self.behaviour.blank_start_ms} ms")
            self.sleep(self.behaviour.blank_start_ms / 1000)
            self.console.discard_input()  # a prompt sent before the input was drawn is lost, as with the real agent
        dialog = screens.trust_dialog(self.kind, self.cwd) if self.behaviour.trust_dialog else None
        if dialog is not None and not self._known("trusted"):
            # No hook report yet: like the real agents, the dialog comes before the integration's first event.
            focus = dialog.cancel if self.behaviour.trust_focus_decline else dialog.opens_on
            if self.choose(dialog, clear_screen=True, selected=focus) != dialog.accept:
                return False
            self._remember("trusted")
        return True

    def run(self) -> int:
        """Serve prompts until its exit command (`/exit`; pi: `/quit`), Ctrl-C at the prompt, or end of input; return the exit status."""
        if not self.behaviour.hooks:
            self.console.log("screen only: no hook reports")
        if not self.start_up():
            self.console.say("Bye.")
            return 1
        if self.start_dialog:
            # A start-up dialog the agent reports as blocked through its hook (herdr 0.8.2's agent_not_ready path,
            # docs/simulator.md); it waits until someone presses Enter in the pane.
            self.console.say(self.start_dialog)
            self.console.say("Press Enter to continue")
            self.report("blocked", "start-up dialog")
            while True:
                event = self.console.poll(None)
                if isinstance(event, (Interrupt, EndOfInput)):
                    self.console.say("Bye.")
                    return 0
                if isinstance(event, Submit):
                    break
        self.console.say(f"{self.kind} (herdr-sim scripted agent) - paste a delegation packet; {screens.exit_commands(self.kind)[0]} to quit")
        for line in screens.ready_lines(self.kind):
            self.console.say(line)
        self.report("idle")
        while True:
            self.console.prompt(screens.prompt(self.kind))
            event = self.deferred.popleft() if self.deferred else self.console.poll(None)
            if isinstance(event, (Interrupt, EndOfInput)):
                self.console.say("Bye.")
                return 0
            if isinstance(event, Submit):
                if event.text.strip() in screens.exit_commands(self.kind):
                    self.console.say("Bye.")
                    return 0
                if event.text.strip():
                    self.handle(event.text)

    def handle(self, text: str) -> None:
        """One submitted prompt at the idle prompt."""
        sort = classify(text)
        if sort == "packet":
            self.start_task(text)
        elif sort == "envelope":
            self.on_envelope(text)
        elif sort == "probe":
            self.start_probe(text)
        else:
            self.note_turn("I only act on delegation packets and run-scoped [herdr-orchestration ...] messages.")

    def note_turn(self, line: str) -> None:
        """A turn that only says something."""
        self.report("working")
        self.console.say(f"• {line}")
        self.report("idle")

    def start_task(self, text: str) -> None:
        """A delegation packet: read it, pick the scenario for its task label, run the first turn."""
        try:
            packet = parse_packet(text)
        except PacketError as exc:
            self.note_turn(f"Cannot read this packet: {exc}")
            return
        try:
            steps = load_steps(self.env, "task", packet.task_label)
        except ScenarioError as exc:
            self.note_turn(f"Scenario error: {exc}")
            return
        if steps and isinstance(steps[0], Ignore):
            self.console.log(f"ignoring packet for task {packet.task_label} (scenario step ignore)")
            return
        if not Path(packet.working_directory).is_dir():
            steps = [Blocked(do="blocked", message=f"Working directory {packet.working_directory} does not exist.")]
        self.task = Task(packet=packet, steps=steps)
        claim = ", ".join(packet.file_claim) or "(none)"
        self.console.say(
            f"• Read packet: task {packet.task_label}, run {packet.run_id}, branch {packet.branch}, claim {claim}"
        )
        self.run_turn()

    def start_probe(self, text: str) -> None:
        """orch doctor's probe: a task in this directory whose only step is the one message it names."""
        try:
            probe = parse_probe(text)
        except PacketError as exc:
            self.note_turn(f"Cannot read this probe: {exc}")
            return
        try:
            steps = load_probe_steps(self.env, probe.task_label, probe.kind, probe.message)
        except ScenarioError as exc:
            self.note_turn(f"Scenario error: {exc}")
            return
        if steps and isinstance(steps[0], Ignore):
            self.console.log(f"ignoring probe for task {probe.task_label} (scenario step ignore)")
            return
        # The probe is a task without a branch, claim or checks: only what sending its message needs is filled in.
        packet = Packet(
            run_id=probe.run_id, task_label=probe.task_label, worker_name="", worker_target="", controller_target="",
            worker_kind=self.kind, repository=self.cwd, working_directory=self.cwd, branch="", base_ref="", base_sha="",
            execution_mode="direct", objective="", deliverable="", scope=(), exclusions=(), file_claim=(), evidence=(),
            verification=(), stop_conditions=(), context_files=(), callback=probe.callback,
        )  # fmt: skip
        self.task = Task(packet=packet, steps=steps)
        self.console.say(f"• Read probe: task {probe.task_label}, run {probe.run_id}: send one {probe.kind}")
        self.run_turn()

    def on_envelope(self, text: str) -> None:
        """A controller message: act on it only if it is for this run and task and comes from the controller."""
        try:
            envelope = parse_envelope(text)
        except PacketError as exc:
            self.note_turn(f"Ignoring message: {exc}")
            return
        task = self.task
        if task is None:
            self.note_turn(f"Ignoring {envelope.kind} for run {envelope.run} task {envelope.task}: I have no task.")
            return
        mismatch = self._mismatch(envelope, task.packet)
        if mismatch:
            self.note_turn(f"Ignoring {envelope.kind} for run {envelope.run} task {envelope.task}: {mismatch}.")
            return
        if envelope.kind == "answer":
            if task.pending is None:
                self.note_turn("Answer noted; no question was pending.")
                return
            task.answer, task.pending = envelope.body, None
            self.console.say(f"• Answer received: {envelope.body.splitlines()[0] if envelope.body else ''}")
            self.run_turn()
        elif envelope.kind == "follow-up" and REPEAT_REQUEST.search(envelope.body):
            self.repeat_last()
        elif envelope.kind == "follow-up":
            try:
                steps = load_steps(self.env, "follow-up", task.packet.task_label)
            except ScenarioError as exc:
                self.note_turn(f"Scenario error: {exc}")
                return
            task.answer, task.pending, task.steps, task.position = envelope.body, None, steps, 0
            self.console.say("• Follow-up received.")
            self.run_turn()
        elif envelope.kind == "stop":
            task.pending, task.position = None, len(task.steps)
            self.note_turn("Stopped by the controller.")
        else:
            self.note_turn(f"Ignoring message of kind {envelope.kind}: not a controller message.")

    def repeat_last(self) -> None:
        """Send the last message again, unchanged, then stand where it left the task (waiting, or turn over)."""
        task = self.task
        assert task is not None
        if task.last_sent is None:
            self.note_turn("Nothing to send again: I have sent no message yet.")
            return
        kind, message, overrides = task.last_sent
        self.report("working")
        self.console.say("• Asked to send my last message again.")
        self.send(kind, message, overrides)
        waiting = {"question": "• Waiting for an answer.", "blocked": "• Blocked; waiting for the controller."}
        self.console.say(waiting.get(task.pending or "", "• Turn complete."))
        self.report("idle")

    @staticmethod
    def _mismatch(envelope: Envelope, packet: Packet) -> str:
        if (envelope.run, envelope.task) != (packet.run_id, packet.task_label):
            return f"my task is {packet.task_label} in run {packet.run_id}"
        if envelope.sender != packet.controller_target:
            return f"sender {envelope.sender} is not my controller {packet.controller_target}"
        return ""

    # --- turns -----------------------------------------------------------------------------------------------

    def run_turn(self) -> None:
        """Run the task's remaining steps as one turn, ending idle, blocked, interrupted or crashed."""
        task = self.task
        assert task is not None
        self.report("working")
        if not self.behaviour.hooks:
            # Real turns take seconds; herdr samples screens a few times a second, so a screen-only agent's turn
            # must stay visible long enough to be seen working.
            self.sleep(SCREEN_ONLY_THINK_S)
        try:
            while task.position < len(task.steps):
                step = task.steps[task.position]
                task.position += 1
                self.check_input()
                self.do(step)
        except TurnPaused as paused:
            task.pending = paused.state
            # A real agent ends its turn after its callback (the packet says so): herdr sees it idle, not at a dialog,
            # so the controller's answer (or a request to repeat) can still be typed in on herdr 0.8.2 and later.
            self.report("idle")
            return
        except TurnInterrupted as stop:
            task.position, task.pending = len(task.steps), None
            self.console.say({"stop": "• Stopped by the controller.", "denied": "• Waiting for instructions."}.get(stop.reason, "• Interrupted."))
        self.console.say("• Turn complete.")
        self.report("idle")

    def check_input(self, timeout: float | None = 0) -> None:
        """Look at input that arrived mid-turn: Ctrl-C and `stop` end the turn, anything else waits for the prompt."""
        while True:
            event = self.console.poll(timeout)
            if event is None:
                return
            if isinstance(event, Interrupt):
                raise TurnInterrupted("interrupt")
            if isinstance(event, Submit) and self._is_stop(event.text):
                raise TurnInterrupted("stop")
            self.deferred.append(event)
            if isinstance(event, EndOfInput):
                return

    def _is_stop(self, text: str) -> bool:
        if self.task is None or classify(text) != "envelope":
            return False
        try:
            envelope = parse_envelope(text)
        except PacketError:
            return False
        return envelope.kind == "stop" and not self._mismatch(envelope, self.task.packet)

    # --- steps -----------------------------------------------------------------------------------------------

    def fill(self, text: str) -> str:
        """Substitute the scenario placeholders."""
        task = self.task
        assert task is not None
        packet = task.packet
        values = {
            "{task}": packet.task_label,
            "{run}": packet.run_id,
            "{worker}": packet.worker_name,
            "{branch}": packet.branch,
            "{answer}": task.answer,
            "{objective_line}": packet.objective.splitlines()[0] if packet.objective else "",
            "{claim_file}": claim_file(packet.file_claim, packet.task_label),
        }
        return re.sub(r"\{[a-z_]+\}", lambda m: values.get(m.group(0), m.group(0)), text)

    @property
    def workdir(self) -> Path:
        assert self.task is not None
        return Path(self.task.packet.working_directory)

    def do(self, step: Step) -> None:
        """Perform one scenario step."""
        task = self.task
        assert task is not None
        if isinstance(step, Update):
            self.send("update", self.fill(step.message))
        elif isinstance(step, Write):
            self.write(self.fill(step.path), self.fill(step.content), step.append)
        elif isinstance(step, Commit):
            self.commit(self.fill(step.message))
        elif isinstance(step, Run):
            self.run_command(self.fill(step.command))
        elif isinstance(step, Verify):
            task.checks = self.verify()
        elif isinstance(step, Question):
            message = self.fill(step.message)
            self.send("question", message)
            self.console.say("• Waiting for an answer.")
            raise TurnPaused("question", message)
        elif isinstance(step, Blocked):
            message = self.fill(step.message)
            self.send("blocked", message)
            self.console.say("• Blocked; waiting for the controller.")
            raise TurnPaused("blocked", message)
        elif isinstance(step, Stall):
            while True:  # no output, no progress: only Ctrl-C or a stop gets out
                self.check_input(timeout=None)
        elif isinstance(step, Crash):
            self.console.say(f"Error: {self.fill(step.message)}")
            raise AgentCrash(step.exit_code)
        elif isinstance(step, Send):
            overrides = {
                key: self.fill(value)
                for key, value in (("run", step.run), ("task", step.task), ("from", step.sender), ("reply-to", step.reply_to))
                if value is not None
            }
            self.send(step.kind, self.fill(step.message), overrides)
        elif isinstance(step, Approval):
            self.approval(self.fill(step.command))
        elif isinstance(step, Result):
            self.send_result(step)

    def approval(self, command: str) -> None:
        """Stop mid-turn at the kind's approval form; approve goes on, deny or Ctrl-C ends the turn."""
        form = screens.approval_form(self.kind, command)
        if form is None:
            self.console.say(f"• {self.kind} asks no approval; running `{command}`")
            return
        status = self._busy_since
        self.console.status(None)
        chosen = self.choose(form)
        self._busy_since = status
        self.show(True)
        if chosen is None:
            raise TurnInterrupted("interrupt")
        if chosen == form.cancel:
            self.console.say(f"• Denied: {command}")
            raise TurnInterrupted("denied")
        self.console.say(f"• Approved: {command}")

    def write(self, path: str, content: str, append: bool) -> None:
        """Write a file relative to the working directory."""
        target = self.workdir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a" if append else "w") as handle:
            handle.write(content)
        assert self.task is not None
        if path not in self.task.written:
            self.task.written.append(path)
        self.console.say(f"• {'Appended to' if append else 'Wrote'} {path}")

    def git(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run git in the working directory.

        Siblings share one checkout: a sibling's `git add` or `git commit` at the same moment holds the index lock,
        and git refuses at once ("Unable to create '…/index.lock': File exists"); a sibling's commit landing while
        this one is made fails it ("cannot lock ref 'HEAD': is at … but expected …"). An agent then runs the command
        again, as this one does for a few seconds; any other failure is shown as it is.
        """
        deadline = time.monotonic() + INDEX_LOCK_WAIT_S
        while True:
            done = subprocess.run(
                ["git", *args], cwd=self.workdir, capture_output=True, text=True, timeout=GIT_TIMEOUT_S, stdin=subprocess.DEVNULL
            )
            if done.returncode == 0 or not any(lock in done.stderr for lock in SIBLING_LOCKS) or time.monotonic() > deadline:
                return done
            time.sleep(0.1)

    def commit(self, message: str) -> None:
        """Stage and commit; remember the SHA.

        A packet that asks for a commit trailer is followed as a careful agent would: stage only this worker's own
        files (its claim and whatever it wrote, by path: a sibling may share the checkout) and end the message with
        the trailer. An older packet without the rule gets the old behaviour: stage everything.
        """
        assert self.task is not None
        trailer = self.task.packet.commit_trailer
        if trailer is not None:
            message = f"{message}\n\n{trailer}"
        deadline = time.monotonic() + INDEX_LOCK_WAIT_S
        while True:
            only: list[str] = []
            if trailer is None:
                self.git("add", "-A")
            else:
                # One pathspec at a time: git refuses a whole `add` when any pathspec matches nothing.
                for spec in (*self.task.packet.file_claim, *self.task.written):
                    if self.git("add", "-A", "--", spec).returncode == 0:
                        only.append(spec)
            # The index is the checkout's, shared with a sibling: a plain `git commit` would also take what the
            # sibling has just staged. A careful agent commits its own paths only (`git commit -- PATHS`).
            done = self.git("commit", "-m", message, *(["--", *only] if only else []))
            # A sibling's commit reads the index before it locks it and writes it back whole, so what this agent
            # staged in between is gone ("pathspec '…' did not match any file(s) known to git"): stage it again.
            if done.returncode == 0 or not only or UNSTAGED not in done.stderr or time.monotonic() > deadline:
                break
        if done.returncode != 0:
            self.console.say(f"• git commit failed (exit {done.returncode}):\n{(done.stdout + done.stderr).rstrip()}")
            return
        # The commit's own first line ("[branch abc1234] subject") names it: HEAD read afterwards may already be a
        # sibling's commit on the shared branch, which this worker would then claim as its own.
        head = done.stdout.split("]", 1)[0].split()
        sha = self.git("rev-parse", "--verify", "--quiet", f"{head[-1]}^{{commit}}" if head else "HEAD").stdout.strip()
        assert self.task is not None
        self.task.commits.append(sha)
        self.console.say(f"• Committed {sha[:7]} {message.splitlines()[0]}")

    def run_command(self, command: str) -> Check:
        """Run a shell command in the working directory, interruptibly; show its output tail."""
        self.console.say(f"• Running `{command}`")
        proc = subprocess.Popen(
            ["bash", "-c", command],
            cwd=self.workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        if self.behaviour.idle_while_working:
            # Some real agents report their turn over while a tool still runs; the screen keeps showing the work.
            self.report("idle")
            self.show(True)
        ticks = 0
        while True:
            try:
                output, _ = proc.communicate(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                ticks += 1
                if ticks % 10 == 0:
                    self.show(True)  # the spinner turns, the busy line counts seconds
                if time.monotonic() > deadline:
                    proc.kill()
                    output, _ = proc.communicate()
                    output += f"\n(killed after {COMMAND_TIMEOUT_S}s)"
                    break
                try:
                    self.check_input()
                except TurnInterrupted:
                    proc.kill()
                    proc.communicate()
                    raise
        if self.behaviour.idle_while_working:
            self.report("working")
        check = Check(command=command, exit_code=proc.returncode, output=output)
        self.console.say(f"  => exit {check.exit_code}")
        for line in tail(output):
            self.console.say(f"  | {line}")
        return check

    def verify(self) -> list[Check]:
        """Run each verification command of the packet for real."""
        assert self.task is not None
        return [self.run_command(command) for command in self.task.packet.verification]

    def changed_files(self) -> list[str]:
        """Files that differ from the base (committed or not), plus untracked ones; with attribution, only its own."""
        assert self.task is not None
        if self.task.packet.commit_trailer is not None:
            # A sibling may share the checkout: report what this worker's own commits changed, and what it wrote.
            own: set[str] = set(self.task.written)
            for sha in self.task.commits:
                listed = self.git("diff-tree", "--no-commit-id", "--name-only", "-r", "--root", sha)
                own |= set(listed.stdout.split("\n")) if listed.returncode == 0 else set()
            return sorted(own - {""})
        diff = self.git("diff", "--name-only", self.task.packet.base_sha)
        if diff.returncode != 0:
            return sorted(self.task.written)
        untracked = self.git("ls-files", "--others", "--exclude-standard")
        return sorted({*diff.stdout.split("\n"), *untracked.stdout.split("\n")} - {""})

    def send_result(self, step: Result) -> None:
        """Compose and send the result message."""
        task = self.task
        assert task is not None
        if step.checks == "claimed":
            checks = [Check(command=command, exit_code=0) for command in task.packet.verification]
        else:
            checks = task.checks if task.checks is not None else self.verify()
            task.checks = checks
        report = None
        if step.report or needs_report(checks):
            # Where the packet says reports go (outside the worktree, so it never dirties it); else the temp dir.
            folder = Path(task.packet.report_dir) if task.packet.report_dir else Path(tempfile.gettempdir()) / "herdr-sim-reports" / task.packet.run_id
            path = folder / f"{task.packet.task_label}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(format_report(task=task.packet.task_label, run=task.packet.run_id, checks=checks))
            report = str(path)
            self.console.say(f"• Wrote report {report}")
        body = format_result(
            status=step.status,
            commits=list(step.commits) if step.commits is not None else task.commits,
            changed_files=list(step.changed_files) if step.changed_files is not None else self.changed_files(),
            checks=checks,
            report=report,
            residual_risk=self.fill(step.residual_risk),
        )
        self.send("result", body)

    def send(self, kind: str, message: str, overrides: dict[str, str] | None = None) -> None:
        """Run the packet's callback command once; show a failure verbatim and carry on (never retry)."""
        assert self.task is not None
        self.task.last_sent = (kind, message, overrides)
        command = fill_callback(self.task.packet.callback, kind, message, overrides)
        self.console.say(f"• Sending {kind}:")
        for line in message.splitlines():
            self.console.say(f"    {line}")
        try:
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=self.workdir if self.workdir.is_dir() else None,
                capture_output=True,
                text=True,
                timeout=CALLBACK_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            self.console.say(f"• Send of {kind} timed out after {CALLBACK_TIMEOUT_S}s; not retrying.")
            return
        if done.returncode == 0:
            self.console.say(f"• Sent {kind}.")
            return
        self.console.say(f"• Send of {kind} failed with exit {done.returncode}; not retrying:")
        for stream in (done.stdout, done.stderr):
            if stream:
                self.console.say(stream.rstrip("\n"))
