"""Observation (spec §5): check-in rounds that act on callbacks, read lifecycle state, and fail only on the spec's evidence."""

from __future__ import annotations

import hashlib
import posixpath
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from orchestrator import git, messages, remote
from orchestrator import held as holds
from orchestrator.dialogs import approval_form, flat
from orchestrator.dispatch import completion_baseline
from orchestrator.engine import Engine, InFlightEffect
from orchestrator.layout import quote
from orchestrator.provision import Renamed
from orchestrator.quirks import excerpt
from orchestrator.transcripts import save_transcript
from orchestrator.errors import HerdrError, HerdrMissing, HerdrNotFound, HerdrUnavailable, HostUnreachable, OrchError
from orchestrator.fleet import advance, lost_workers
from orchestrator.herdr_models import AT_REST, AgentInfo
from orchestrator.plan import Answer
from orchestrator.reportfiles import MAX_REPORTS, REPORT_LIMIT_BYTES, TOTAL_LIMIT_BYTES
from orchestrator.resume import report_resume
from orchestrator.repeats import REPEAT_REQUEST, PossibleMerge, pending, possible_merges, repeat_key, replied
from packets import EnvelopeError, inert_line, parse_message
from packets.result import parse_result
from registry.facts import LOST, FactKind, Lost, PlannedAnswerUnsent, Report, TabRenamed, read_fact, read_facts
from registry import Effect, EffectStatus, InboxMessage, InboxVerdict, Run, StaleState, Worker, WorkerState
from registry.machine import MOVING, AT_WORK, OPEN, WAITING_ON_PERSON
from registry.kinds import CONTROLLER_HOST

S = WorkerState
STALL_LIMIT = 3  # spec §5: no state or output change across 3 consecutive check-ins
READ_LINES = 60
# The Layout Contract is read back at the first check-in and every LAYOUT_EVERY-th after it (a rename is noticed within
# that many rounds; a person's rename is rare, a read per round would be a herdr call per round).
LAYOUT_EVERY = 5
DEFAULT_INTERVAL_S = 30.0
# A planned answer whose send failed (a herdr timeout, a refused prompt) is tried at this many check-ins in all,
# then left to the person: a herdr that keeps refusing must not keep a run waiting for ever.
ANSWER_ATTEMPTS = 3
# ... each at least this long after the last: a herdr slow under load gets time to recover (the handover's check-in
# polls every 0.5 s for 15 s, so all three tries would otherwise fall within one passing hiccup).
ANSWER_RETRY_S = 5.0
ASK_FOR_RESULT = (
    "Your turn ended without a `result` message. Send it now with the callback command from your packet, "
    "in the exact result format of the packet (Status, Commits, Changed files, Checks, Report, Residual risk), then end your turn."
)

What = Literal[
    "update", "answered", "needs_answer", "blocked", "blocked_ui", "approval", "result", "report", "asked_for_result",
    "settled_without_result", "working", "failed", "kept_aside", "send_failed", "herdr_unavailable", "gone",
    # The Layout Contract read back at a check-in: a worker tab renamed outside orch, renamed back (or why not).
    "layout",
    # herdr 0.9.2+: idle or done without a finished turn (completion_seq unmoved since the last prompt).
    "turn_not_finished",
    # A kept-aside prompt holding several workers' headers, and the requests to repeat that it leads to (orchestrator.repeats).
    "possible_merge", "asked_to_repeat",
    # The scheduler, from the check-in (orchestrator.fleet): queued workers started as slots free, or skipped.
    "started", "skipped", "queued", "slot_freed", "slot_kept", "integrated", "start_failed",
    # A result verified in the check-in that received it (the agent controller's door, orchestrator.door).
    "verified",
    # A remote host's spool of callbacks could not be collected this round (orchestrator.spool): they wait there.
    "host_unreachable",
    # The agent controller going on after a stop (orchestrator.door.take_up): a worker herdr lost started again.
    "restarted",
]  # fmt: skip
_STEP_WHAT: dict[str, What] = {
    "started": "started", "skipped": "skipped", "queued": "queued", "freed": "slot_freed", "kept": "slot_kept",
    "integrated": "integrated", "provision_failed": "start_failed", "dispatch": "start_failed",
    "held": "host_unreachable", "host_back": "started", "given_up": "failed",
}  # fmt: skip


class Observation(BaseModel):
    """One thing a check-in round saw or did."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    round: int
    task: str | None
    what: What
    text: str
    inbox_id: int | None = None


class WorkerStatus(BaseModel):
    """A worker after the last round: ledger state, herdr state, consecutive unchanged check-ins."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    name: str
    state: WorkerState
    herdr_state: str | None
    unchanged_check_ins: int
    pending_question: str | None


class ObserveResult(BaseModel):
    """What `orch observe` did: every observation in order, the workers, and whether any still needs watching."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    rounds: int
    observations: tuple[Observation, ...]
    workers: tuple[WorkerStatus, ...]
    active: bool


def match_answer(answers: tuple[Answer, ...], question: str) -> Answer | None:
    """The first planned answer whose `when` (substring or regex, case-insensitive) occurs in the question."""
    return next((answer for answer in answers if answer.matches(question)), None)


def plan_answers(engine: Engine, run: Run) -> dict[str, tuple[Answer, ...]]:
    """Each task's planned answers, from the run's plan snapshot."""
    try:
        plan = engine.plan_for(run)
    except OrchError:
        return {}  # no plan snapshot: every question goes to the person
    return {w.task: w.worker.answers for w in plan.workers}


def planned_answer(engine: Engine, run: Run, worker: Worker, answers: tuple[Answer, ...] | None = None) -> tuple[Answer, int] | None:
    """The plan's answer (and the question's inbox id) orch still owes a worker in `question`, if it owes one.

    Owed until sent, unless ANSWER_ATTEMPTS sends failed or read-back could not tell whether one landed: then the
    person decides (`orch answer`, or `orch resume --settle`), and a run may stop for them.
    """
    if worker.state is not S.QUESTION or not worker.pending_question:
        return None
    planned = match_answer(plan_answers(engine, run).get(worker.task_label, ()) if answers is None else answers, worker.pending_question)
    asked = [m for m in engine.ledger.list_inbox(run.run_id, task_label=worker.task_label) if m.kind == "question" and m.verdict is InboxVerdict.ACCEPTED]
    if planned is None or not asked:
        return None
    question_id = asked[-1].id
    failed = [f for f in read_facts(engine.ledger.events(run.run_id, task_label=worker.task_label), PlannedAnswerUnsent) if f.get("inbox_id") == question_id]
    if len(failed) >= ANSWER_ATTEMPTS or any(f.get("person") for f in failed):
        return None
    return planned, question_id


def liveness_token(state_change_seq: int | None, output: str) -> int:
    """One number for "state or output": herdr's state_change_seq plus a digest of the recent screen.

    The ledger counts consecutive check-ins whose number did not move (``record_check_in``); folding the output
    digest in makes a worker that prints without changing state count as alive. 60 bits fit SQLite's INTEGER.
    """
    digest = hashlib.sha256(f"{state_change_seq}\n{output}".encode("utf-8", errors="replace")).hexdigest()
    return int(digest[:15], 16)


class _Round:
    """One check-in round over a run (state shared by its steps)."""

    def __init__(self, engine: Engine, run: Run, number: int) -> None:
        self.engine, self.run, self.number = engine, run, number
        self.ledger = engine.ledger
        self.notes: list[Observation] = []
        # By (host, pane id or agent name): each host's herdr numbers its own panes, so an id alone means nothing.
        self.agents: dict[tuple[str, str], AgentInfo] = {}
        self.unreachable: set[str] = set()  # hosts whose herdr could not be reached this round
        self.herdr_states: dict[str, str] = {}
        self.waiting: set[str] = set()
        self.prompted: set[str] = set()  # the round's agent snapshot predates these prompts
        self.repeat_waiting: set[str] = set()  # named by a possible merge, not asked yet: waiting on us, not stalled
        self.repeat_asked: set[str] = set()  # asked to repeat, its reply not seen yet: not asked for a result meanwhile
        self._answers: dict[str, tuple[Answer, ...]] | None = None
        self.tried: set[str] = set()  # a planned answer was tried this round: the next try waits for the next check-in

    def note(self, task: str | None, what: What, text: str, inbox_id: int | None = None) -> None:
        self.notes.append(Observation(round=self.number, task=task, what=what, text=text, inbox_id=inbox_id))

    def answers(self, task: str) -> tuple[Answer, ...]:
        if self._answers is None:
            self._answers = plan_answers(self.engine, self.run)
        return self._answers.get(task, ())

    def launch_args(self, task: str) -> tuple[str, ...]:
        """The agent args the plan started the worker with (its resume command carries them)."""
        try:
            return tuple(self.engine.planned(self.engine.plan_for(self.run), task).worker.agent_args)
        except OrchError:
            return ()

    def agent(self, worker: Worker) -> AgentInfo | None:
        return self.agents.get((worker.host, worker.pane_id or "")) or self.agents.get((worker.host, worker.name))

    # --- the round ---

    def run_round(self, lifecycle: bool = True) -> bool:
        # Remote workers' spooled callbacks first: recording them needs no herdr, so a herdr that does not answer this
        # round delays only acting on them, never taking them into the ledger.
        self.collect_spools()
        try:
            hosts = dict.fromkeys([CONTROLLER_HOST, *(w.host for w in self.ledger.list_workers(self.run.run_id, states=OPEN))])
            for host in hosts:
                try:
                    listed = self.engine.herdr_at(self.run.run_id, host).agent_list()
                except HostUnreachable as exc:
                    if host == CONTROLLER_HOST:
                        raise
                    # Another host gone (asleep, off the network): its workers are not looked at this round (no
                    # stall is counted against them); the controller's and other hosts' go on.
                    self.unreachable.add(host)
                    self.note(None, "host_unreachable", f"host {host}: {exc.message}; its workers are checked again next round")
                    # A worker at work there is lost from now: the bound of orchestrator.held ends it once nothing else moves.
                    for worker in self.ledger.list_workers(self.run.run_id, states=tuple(AT_WORK)):
                        if worker.host == host:
                            holds.lose(self.ledger, self.run, worker.task_label, host, exc.message)
                    continue
                if host != CONTROLLER_HOST:
                    holds.found(self.ledger, self.run, host)
                for info in listed:
                    self.agents[(host, info.pane_id)] = info
                    if info.name:
                        self.agents[(host, info.name)] = info
        except HerdrMissing:
            # No herdr binary at all is no passing outage: checking in again cannot help, so say so (exit 3).
            raise
        except HerdrError as exc:
            # herdr refused the list (garbage, an error of its own): a check-in without news, never a verdict on any
            # worker. An unreachable or hung server is no HerdrError: it stops the run until herdr is back
            # (orchestrator.run), instead of being checked in on forever.
            self.note(None, "herdr_unavailable", exc.message)
            return False
        for message in self.ledger.list_inbox(self.run.run_id, unhandled=True):
            self.inbound(message)
        self.repeats()
        self.owed_answers()
        if not lifecycle:
            return True
        self.layout()
        for worker in self.ledger.list_workers(self.run.run_id, states=OPEN):
            if worker.task_label not in self.prompted and worker.host not in self.unreachable:
                self.check(worker)
        return True

    def collect_spools(self) -> None:
        """Bring home the callbacks remote workers spooled on their hosts (orchestrator.spool): recorded through the one
        intake, then acted on with the rest of the inbox this round. A host not reached keeps them for the next round."""
        if not any(w.host != CONTROLLER_HOST for w in self.ledger.list_workers(self.run.run_id)):
            return
        from orchestrator.spool import collect

        for found in collect(self.engine, self.run):
            if found.problem is not None:
                self.note(None, "host_unreachable", f"host {found.host}: {found.problem}")

    def layout(self) -> None:
        """The Layout Contract read back at every check-in: a live worker's tab renamed outside orch is renamed back.

        The label is derived once (spec: never retyped), so a person's rename is mended with `tab rename`, through
        ``engine.once`` like every side effect; a rename herdr refuses is said, and the work goes on.
        """
        if self.number % LAYOUT_EVERY != 1 % LAYOUT_EVERY:
            return  # one `tab list` every few rounds: each herdr call of a run is a case of the crash matrix
        # The run's workspace is the controller's: a worker on another host has its tab in its own workspace there.
        live = [w for w in self.ledger.list_workers(self.run.run_id, states=OPEN) if w.tab_id and w.tab_label and w.host == CONTROLLER_HOST]
        if not live or self.run.workspace_id is None:
            return
        try:
            tabs = {t.tab_id: t for t in self.engine.herdr.tab_list(workspace=self.run.workspace_id)}
        except HerdrError:
            return  # no news this round: the next check-in reads it again
        mended: set[str] = set()
        for worker in live:
            tab_id, label = worker.tab_id or "", worker.tab_label or ""
            tab = tabs.get(tab_id)
            if tab is None or tab.label == label or tab_id in mended:
                continue  # a tab that is gone is its pane's story (check); siblings share their owner's tab
            mended.add(tab_id)
            task, found = worker.task_label, tab.label
            done = sum(1 for e in self.ledger.events(self.run.run_id, task_label=task) if e.kind == FactKind.TAB_RENAMED)

            def rename(tab_id: str = tab_id, label: str = label) -> Renamed:
                renamed = self.engine.herdr.tab_rename(tab_id, label)
                return Renamed(tab_id=renamed.tab_id, label=renamed.label)

            try:
                self.engine.once(self.run.run_id, task, "tab_rename", f"{task}:layout:tab_rename:{done + 1}", {"tab": tab_id, "label": label}, rename, model=Renamed)
            except (HerdrError, InFlightEffect) as exc:
                text = f"tab {tab_id} was renamed outside orch to {quote(found)}; renaming it back to {quote(label)} failed: {exc.message}"
                self.ledger.record_fact(self.run.run_id, FactKind.TAB_RENAMED, task_label=task, detail=TabRenamed(tab=tab_id, found=found, label=label, repaired=False, error=exc.message))
                self.note(task, "layout", text)
                continue
            self.ledger.record_fact(self.run.run_id, FactKind.TAB_RENAMED, task_label=task, detail=TabRenamed(tab=tab_id, found=found, label=label, repaired=True))
            self.note(task, "layout", f"tab {tab_id} was renamed outside orch to {quote(found)}; renamed back to {quote(label)} (Layout Contract)")

    def inbound(self, message: InboxMessage) -> None:
        if message.verdict is InboxVerdict.KEPT_ASIDE:
            self.note(message.task_label, "kept_aside", f"{message.reason_code}: {message.reason}", message.id)
            merge = next((m for m in possible_merges(self.ledger, self.run) if m.inbox_id == message.id), None)
            if merge is not None:
                self.note(None, "possible_merge", self.merge_text(merge), message.id)
            self.ledger.mark_handled(message.id)
            return
        try:
            body = parse_message(message.raw).body
        except EnvelopeError as exc:  # accepted rows were parsed before; only a corrupted ledger gets here
            self.note(message.task_label, "kept_aside", f"unreadable accepted message: {exc}", message.id)
            self.ledger.mark_handled(message.id)
            return
        task = message.task_label
        assert task is not None
        worker = self.ledger.get_worker(self.run.run_id, task)
        if message.kind == "update":
            self.note(task, "update", body, message.id)
        elif message.kind == "question":
            if not self.question(worker, body, message):
                return  # answered later, once the worker has settled
        elif message.kind == "blocked":
            # The commands that decide it are in the door's next[] (orchestrator.door), one exact form each.
            self.note(task, "blocked", body, message.id)
        elif message.kind == "result":
            self.result(worker, body, message)
        self.ledger.mark_handled(message.id)

    def merge_text(self, merge: PossibleMerge) -> str:
        names = ", ".join(merge.tasks)
        if merge.again_of is not None:
            return f"the same text as possible merge #{merge.again_of} again: the sender's own message, so nobody is asked again ({names})"
        live = [t for t in merge.tasks if self.ledger.get_worker(self.run.run_id, t).state in AT_WORK]
        told = f"holds the headers of {names}: possibly callbacks typed into one prompt before its Enter; nothing in it is acted on"
        if not live:
            return f"{told}; none of them is still working, so nobody is asked"
        return f"{told}; {', '.join(live)} asked to send their last message again, one at a time"

    def repeats(self) -> None:
        """Ask the live workers that possible merges name to send their last message again, one request at a time.

        The next request goes out only once the previous one was answered (a message naming that worker arrived), or
        herdr shows its turn over and the boundary's late-Enter window has passed: then two repeats cannot merge again.
        """
        last, due = pending(self.ledger, self.run)
        for _merge, worker in due:
            info = self.agent(worker)
            if info is None or info.agent_status != "blocked":  # at a dialog nothing may be typed: check() shows its screen
                self.repeat_waiting.add(worker.task_label)
        pause = 0.0
        if last is not None:
            gate = self._repeat_gate(last)
            if gate is None:
                assert last.task_label is not None
                self.repeat_asked.add(last.task_label)
                return
            pause = gate
        for merge, worker in due:
            task = worker.task_label
            info = self.agent(worker)
            status = info.agent_status if info else None
            if status not in AT_REST:
                continue  # still ending its turn (or at a dialog): asked at a later check-in
            if pause:
                self.engine.clock.sleep(pause)
            high_water = max((m.id for m in self.ledger.list_inbox(self.run.run_id)), default=0)
            try:
                messages.send_message(self.engine, self.run, task, "follow-up", REPEAT_REQUEST, key=repeat_key(task, merge.inbox_id, high_water), agent_status=status)
            except HerdrUnavailable:
                raise  # herdr is down: the run stops for it (orchestrator.run), nothing is decided about this worker
            except OrchError as exc:
                self.note(task, "send_failed", f"request to repeat its last message not sent: {exc.message}", merge.inbox_id)
                continue
            self.repeat_waiting.discard(task)
            self.prompted.add(task)
            self.note(task, "asked_to_repeat", f"named in possible merge #{merge.inbox_id}: asked to send its last message again", merge.inbox_id)
            return

    def _repeat_gate(self, request: Effect) -> float | None:
        """None while a repeat request may still be answered, else how long to wait before the next one."""
        assert request.task_label is not None
        if request.status in (EffectStatus.FAILED, EffectStatus.ABANDONED):
            return 0.0
        worker = self.ledger.get_worker(self.run.run_id, request.task_label)
        if worker.state not in AT_WORK or replied(self.ledger, self.run, request):
            return 0.0
        info = self.agent(worker)
        baseline = request.request.get("baseline_seq")
        if info is not None and isinstance(baseline, int) and info.state_change_seq > baseline and info.agent_status in AT_REST:
            # Its turn is over without a reply recorded yet: a repeat it sent may still wait for its Enter.
            return self.engine.herdr_of(worker).features().prompt_enter_delay_s
        return None

    def question(self, worker: Worker, body: str, message: InboxMessage) -> bool:
        task = worker.task_label
        planned = match_answer(self.answers(task), body)
        if planned is not None and worker.state is not S.QUESTION and (worker.last_callback_id or 0) < message.id:
            # `orch inbox add` records the message, then moves its worker, in two steps: a check-in between the two
            # sees the question before its worker does. The plan answers it once the worker is in `question`.
            return True
        if planned is None or worker.state is not S.QUESTION:
            self.note(task, "needs_answer", body, message.id)
            return True
        return self.answer(worker, body, message.id, planned)

    def owed_answers(self) -> None:
        """Send the planned answers still owed: a send that failed, or a question seen before its worker was moved."""
        now = self.engine.clock.now()
        for worker in self.ledger.list_workers(self.run.run_id, states=(S.QUESTION,)):
            task = worker.task_label
            owed = planned_answer(self.engine, self.run, worker, self.answers(task))
            if owed is None or task in self.tried or task in self.prompted:
                continue
            failed = [e.at for e in self.ledger.events(self.run.run_id, task_label=task)
                      if e.kind == FactKind.PLANNED_ANSWER_UNSENT and read_fact(e, PlannedAnswerUnsent).get("inbox_id") == owed[1]]  # fmt: skip
            if failed and (now - failed[-1]).total_seconds() < ANSWER_RETRY_S:
                continue  # tried again at a later check-in
            self.answer(worker, worker.pending_question or "", owed[1], owed[0])

    def answer(self, worker: Worker, body: str, question_id: int, planned: Answer) -> bool:
        """Send the plan's answer to a settled worker (False: not settled yet); a failed send is tried again later."""
        task = worker.task_label
        self.tried.add(task)
        info = self.agent(worker)
        if info is None and (gone := self._gone(worker)) is not None:
            self._answer_ends(worker, body, question_id, gone)
            return True
        status = info.agent_status if info else None
        if status not in AT_REST:
            return False  # the worker is still ending its turn; messages go to settled workers only
        try:
            # One key per question: a later attempt replays a confirmed send, and settles an unknown one by read-back
            # (engine.once), so the answer is never sent twice.
            messages.send_message(self.engine, self.run, task, "answer", planned.answer, key=f"{task}:answer:{question_id}", agent_status=status)
        except HerdrUnavailable:
            raise  # herdr is down: the answer is still owed once it is back
        except (OrchError, StaleState) as exc:
            text = exc.message if isinstance(exc, OrchError) else str(exc)
            # read back could not tell whether it landed: only the person can say (`orch resume --settle`)
            person = isinstance(exc, InFlightEffect)
            self.ledger.record_fact(self.run.run_id, FactKind.PLANNED_ANSWER_UNSENT, task_label=task, detail=PlannedAnswerUnsent(inbox_id=question_id, error=text, person=person))
            current = self.ledger.get_worker(self.run.run_id, task)
            if planned_answer(self.engine, self.run, current, self.answers(task)) is not None:
                self.note(task, "send_failed", f"answer to {body!r} not sent: {text}; tried again at a later check-in", question_id)
            else:
                self.note(task, "send_failed", f"answer to {body!r} not sent: {text}", question_id)
                if current.state is S.QUESTION and person and isinstance(exc, OrchError) and exc.hint:
                    # Another answer could be a second one: first the person says whether the planned one arrived.
                    self.note(task, "needs_answer", f"{body} (the plan's answer may have reached it: {exc.hint})", question_id)
                elif current.state is S.QUESTION:
                    self.note(task, "needs_answer", body, question_id)
            return True
        self.prompted.add(task)
        self.note(task, "answered", f"{body} -> {planned.answer}", question_id)
        return True

    def _gone(self, worker: Worker) -> str | None:
        """Why the worker's agent no longer exists (herdr says so), or None while it may still."""
        target = worker.reply_target or worker.pane_id or worker.name
        try:
            self.engine.herdr_of(worker).agent_get(target)
        except HerdrNotFound as exc:
            return f"no agent at {target}: {exc.message}"
        except HerdrError:
            return None
        return None

    def _answer_ends(self, worker: Worker, body: str, question_id: int, gone: str) -> None:
        """An answer owed to an agent that no longer exists (its pane closed, herdr restarted) can never be sent:
        it ends, and so does the worker, with the reason; what it saved stays in its checkout."""
        task = worker.task_label
        kept = f"; its checkout {worker.worktree_path} is kept" if worker.worktree_path else ""
        reason = f"its agent is gone ({gone}), so the plan's answer to {body!r} cannot reach it{kept}"
        self.ledger.record_fact(self.run.run_id, FactKind.PLANNED_ANSWER_UNSENT, task_label=task, detail=PlannedAnswerUnsent(inbox_id=question_id, error=reason, person=False, gone=True))
        try:
            self.ledger.transition(self.run.run_id, task, S.QUESTION, S.FAILED, cause={"phase": "observe", "error": reason})
        except StaleState:
            return
        self.note(task, "gone", reason, question_id)

    def result(self, worker: Worker, body: str, message: InboxMessage) -> None:
        task = worker.task_label
        report = parse_result(body)
        summary = (
            f"status {report.status or '?'}, {len(report.commits)} commit(s), {len(report.changed_files)} changed file(s), "
            f"{len(report.checks)} check(s)"
        )
        if report.problems:
            summary += "; unreadable: " + "; ".join(report.problems)
        self.note(task, "result", summary, message.id)
        seen: set[str] = set()
        total = 0
        for path in report.reports:
            # What one result may make orch read is bounded: each file once, MAX_REPORTS of them, TOTAL_LIMIT_BYTES in all.
            if posixpath.normpath(path) in seen:
                continue
            seen.add(posixpath.normpath(path))
            if len(seen) > MAX_REPORTS:
                read = messages.ReportRead(path=path, reason=f"not read: a result may name at most {MAX_REPORTS} reports")
            elif total >= TOTAL_LIMIT_BYTES:
                read = messages.ReportRead(path=path, reason=f"not read: this result's reports already hold {TOTAL_LIMIT_BYTES} bytes")
            else:
                read = messages.read_report(self.engine, self.run, worker, path, limit=min(REPORT_LIMIT_BYTES, TOTAL_LIMIT_BYTES - total))
                total += len((read.text or "").encode())
            detail = Report(inbox_id=message.id, path=path, text=read.text, reason=read.reason)
            self.ledger.record_fact(self.run.run_id, FactKind.REPORT, task_label=task, detail=detail)
            if read.reason:
                self.note(task, "report", f"{path} not read: {read.reason}", message.id)
            else:
                self.note(task, "report", f"{path} recorded ({len(read.text or '')} characters)", message.id)

    def check(self, worker: Worker) -> None:
        task = worker.task_label
        target = worker.reply_target or worker.pane_id or worker.name
        info = self.agent(worker)
        if info is None:
            try:
                info = self.engine.herdr_of(worker).agent_get(target)
            except HerdrNotFound as exc:
                lost = self.lost(worker)
                if lost is not None:
                    self._fail(worker, *lost)
                    return
                self.note(task, "gone", f"no agent at {target}: {exc.message}")
            except HerdrError as exc:
                self.note(task, "gone", f"no agent at {target}: {exc.message}")
        moved = self.checkout_moved(worker)
        if moved is not None:
            self._fail(worker, *moved)
            return
        status: str | None = info.agent_status if info else None
        if status is not None:
            self.herdr_states[task] = status
        if info is not None and info.agent_session is not None:
            refused = report_resume(self.engine, self.run, worker, info, self.launch_args(task))
            if refused is not None:
                self.note(task, "send_failed", refused)
        if worker.state in WAITING_ON_PERSON or task in self.repeat_waiting:
            self.waiting.add(task)
            return  # the worker waits for an answer, a decision or its turn to repeat: not a stall, nothing to ask
        if status == "unknown":
            status = self.explain(worker, target)
            if status is None:
                return
        if status == "working" and worker.state is S.DISPATCHED:
            worker = self._move(worker, S.WORKING, {"observed": "working"})
        elif status == "blocked":
            if self.approval_form(worker):
                return
            screen = self._read(worker, target)
            tail = " / ".join([line.strip() for line in screen.splitlines() if line.strip()][-3:])
            self.note(task, "blocked_ui", f"herdr shows the agent blocked without a callback: {tail}")
            self.waiting.add(task)
            return
        output = self._read(worker, target) if info is not None else ""
        if status in AT_REST and worker.state in AT_WORK and self.approval_form(worker):
            # herdr's manifests miss some forms a turn waits on (Claude Code's "Enter to continue" notices read idle):
            # the quirk table reads the screen, so the worker is blocked on the form, never asked for a result.
            return
        if status in AT_REST and worker.state is S.WORKING:
            shown = self.work_on_screen(worker, target)
            if shown is not None:
                # Some agents report their turn over while a tool still runs: the screen (a spinner, a busy line)
                # wins over herdr's idle, so the worker is neither asked for a result yet nor idle for the stall count.
                self.note(task, "working", f"herdr says {status}, but the screen still shows work ({flat(shown)}); not asking for the result yet")
                status, output = "working", output + "\n" + shown
                self.herdr_states[task] = status
        finished = True
        if status in AT_REST and worker.state is S.WORKING:
            baseline = completion_baseline(self.engine, self.run.run_id, task)
            if baseline is not None and info is not None and info.completion_seq is not None and info.completion_seq <= baseline:
                # herdr 0.9.2+ counts finished turns: an idle or done that did not move it is no finished turn
                # (a leftover done, an idle<->done flip), so the worker is not asked for its result on it.
                finished = False
                self.note(task, "turn_not_finished", f"herdr says {status}, but its completion_seq is still {info.completion_seq} (no turn finished since the last prompt); not asking for the result yet")
        seen = self.ledger.record_check_in(self.run.run_id, task, liveness_token(info.state_change_seq if info else None, output))
        asked_before = False
        # Ask only once the worker has stayed settled, unchanged, across two check-ins: a worker that just sent its
        # result (or question) and went idle may be seen before that callback has reached the inbox.
        if status in AT_REST and finished and self._settled_after_dispatch(worker, info) and seen.unchanged_check_ins >= 1 and task not in self.repeat_asked:
            asked_before = self.missing_result(worker, status)
        if seen.unchanged_check_ins >= STALL_LIMIT:
            reason = f"no change of state or output across {STALL_LIMIT} consecutive check-ins"
            # A settled worker that ignored the request for its result is not a stalled one: say what it failed to do.
            self._fail(seen, f"{status} without a result after being asked for it once; {reason}" if asked_before else reason)

    def lost(self, worker: Worker) -> tuple[str, str] | None:
        """Why herdr has no agent for a live worker, when a person's hands explain it; None when they do not.

        Its pane closed (by hand, `herdr pane close`, tmux) or its agent exited outside orch (the pane is back at a
        shell) are facts, not a stall: the worker fails at once with what it leaves behind, instead of after three
        silent check-ins. Only while the controller's own pane is there: a herdr that lost every pane (a restart)
        is no person's doing.
        """
        herdr, pane = self.engine.herdr_of(worker), worker.pane_id
        if pane is None:
            return None
        try:
            self.engine.herdr.pane_get(self.run.controller_target)
        except HerdrError:
            return None
        try:
            herdr.pane_get(pane)
        except HerdrNotFound:
            what = f"its pane {pane} was closed outside orch (by hand or by another tool) while it was {worker.state.value}"
            kept, how = "no terminal history (the pane is gone)", Lost.PANE_CLOSED
        except HerdrError:
            return None
        else:
            what = f"its agent exited outside orch while it was {worker.state.value}; pane {pane} is back at a shell"
            saved = save_transcript(self.engine, self.run, worker, pane)
            kept = f"its terminal history in {saved}" if saved else "no terminal history (the pane could not be read)"
            how = Lost.AGENT_EXITED
        return f"{what}; saved: {saved_work(self.engine, self.run, worker)}, {kept}", how

    def checkout_moved(self, worker: Worker) -> tuple[str, str] | None:
        """Its worktree removed or switched to another branch outside orch: why the work cannot go on there, or None."""
        path, branch = worker.worktree_path, worker.branch
        if path is None or branch is None:
            return None
        ssh = _ssh_of(self.engine, worker)
        if not (remote.exists(ssh, path) if ssh else Path(path).is_dir()):
            commits = saved_commits(self.engine, self.run, worker)
            return f"its worktree {path} was removed outside orch while it was {worker.state.value}; saved: {commits} (git keeps the branch)", Lost.WORKTREE_REMOVED
        try:
            now = git.current_branch(path, on=ssh)
        except git.GitError:
            return None  # unreadable for a moment (a git lock): the next check-in looks again
        if now == branch:
            return None
        where = "a detached HEAD" if now == "HEAD" else f"branch {now}"
        return (
            f"its worktree {path} was switched to {where} outside orch while it was {worker.state.value}; saved: "
            f"{saved_work(self.engine, self.run, worker)}; commits made after the switch are on {where}, not on {branch}"
        ), Lost.WORKTREE_SWITCHED

    def approval_form(self, worker: Worker) -> bool:
        """A blocked agent at its kind's approval form: the worker is `blocked` with the form's text, for the person."""
        task = worker.task_label
        if worker.pane_id is None:
            return False
        try:
            screen = self.engine.herdr_of(worker).pane_read(worker.pane_id, source="visible")
        except HerdrError:
            return False
        form = approval_form(worker, screen)
        if form is None:
            return False
        text = excerpt(screen)
        # orch never approves on its own: the form waits for `orch approve` (the person or the agent controller).
        cause: dict[str, object] = {"observed": "blocked", "approval": form.name, "screen": text, "reason": f"{worker.kind} {form.name}: {flat(text)}"}
        self._move(worker, S.BLOCKED, cause, pending_question=f"{worker.kind} {form.name}: {flat(text)}")
        self.note(task, "approval", f"{worker.kind} {form.name}: {flat(text)}")
        self.waiting.add(task)
        return True

    def work_on_screen(self, worker: Worker, target: str) -> str | None:
        """The evidence (`agent explain`'s matched rule) that the screen still shows work, or None."""
        try:
            explained = self.engine.herdr_of(worker).agent_explain(target)
        except HerdrError:
            return None
        rule = explained.matched_rule
        if explained.state != "working" or not explained.visible_working or rule is None:
            return None
        for evaluated in explained.evaluated_rules:
            if evaluated.get("id") == rule.id:
                preview = (evaluated.get("evidence") or {}).get("region_preview")
                if isinstance(preview, str) and preview:
                    return f"{rule.id}: {preview}"
        return rule.id

    def explain(self, worker: Worker, target: str) -> str | None:
        try:
            explained = self.engine.herdr_of(worker).agent_explain(target)
        except HerdrError as exc:
            self._fail(worker, f"state unknown and `agent explain` failed: {exc.message}")
            return None
        if explained.state in ("idle", "working", "blocked", "done"):
            return explained.state
        why = explained.fallback_reason or explained.warning or explained.skipped_update_reason or "no rule matched"
        self._fail(worker, f"state unknown and `agent explain` cannot repair it: {why}")
        return None

    @staticmethod
    def _settled_after_dispatch(worker: Worker, info: AgentInfo | None) -> bool:
        # "idle: accept only after the dispatched work produced an observed state change": a worker still
        # `dispatched` was never seen working (dispatch confirms that), so its idleness proves nothing yet.
        return worker.state is S.WORKING

    def missing_result(self, worker: Worker, status: str) -> bool:
        """Ask a settled worker once for its missing result; True when it had already been asked."""
        task = worker.task_label
        generation = sum(1 for e in self.ledger.events(self.run.run_id, task_label=task) if e.kind == "transition" and e.to_state is S.DISPATCHED)
        key = f"{task}:ask-result:{generation}"
        if self.ledger.find_effect(self.run.run_id, key) is not None:
            self.note(task, "settled_without_result", f"{status} without a result after being asked for it")
            return True
        try:
            messages.send_message(self.engine, self.run, task, "follow-up", ASK_FOR_RESULT, key=key, agent_status=status)
        except HerdrUnavailable:
            raise
        except OrchError as exc:
            self.note(task, "send_failed", f"request for the missing result not sent: {exc.message}")
            return False
        self.note(task, "asked_for_result", f"{status} without a result; asked once for it")
        return False

    def _read(self, worker: Worker, target: str) -> str:
        try:
            return self.engine.herdr_of(worker).agent_read(target, source="recent-unwrapped", lines=READ_LINES)
        except HerdrError:
            return ""

    def _move(self, worker: Worker, new: WorkerState, cause: dict[str, object], **changes: object) -> Worker:
        try:
            return self.ledger.transition(self.run.run_id, worker.task_label, worker.state, new, cause=cause, **changes)
        except StaleState:
            return self.ledger.get_worker(self.run.run_id, worker.task_label)

    def _fail(self, worker: Worker, reason: str, lost: str | None = None) -> None:
        current = self.ledger.get_worker(self.run.run_id, worker.task_label)
        cause: dict[str, object] = {"reason": reason, **({LOST: lost, "pane": worker.pane_id} if lost else {})}
        try:
            self.ledger.transition(self.run.run_id, worker.task_label, current.state, S.FAILED, cause=cause)
        except StaleState:
            return
        self.note(worker.task_label, "failed", reason)


def saved_commits(engine: Engine, run: Run, worker: Worker) -> str:
    """A worker's commits on its branch since its base, in words (newest first, at most three named)."""
    repo, base, branch = run.repo_path, worker.base_sha or run.base_sha, worker.branch
    if not repo or not base or not branch:
        return "no branch recorded"
    ssh = _ssh_of(engine, worker)
    if ssh is not None:
        repo = str(engine.host_config(worker.run_id, worker.host).checkout)  # its branch lives in that host's checkout
    try:
        found = git.commits_between(repo, base, f"refs/heads/{branch}", on=ssh)
    except git.GitError:
        return f"branch {branch} cannot be read"
    shown = ", ".join(sha[:7] for sha in found[-3:][::-1]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return f"{len(found)} commit{'' if len(found) == 1 else 's'} on {branch} ({shown})" if found else f"no commits on {branch}"


def saved_work(engine: Engine, run: Run, worker: Worker) -> str:
    """What a worker lost outside orch leaves behind, in words: its commits since the base, and its worktree."""
    commits = saved_commits(engine, run, worker)
    path = worker.worktree_path
    if path is None:
        return commits
    ssh = _ssh_of(engine, worker)
    there = remote.exists(ssh, path) if ssh else Path(path).is_dir()
    return f"{commits}, the worktree {path} (kept)" if there else f"{commits}; its worktree {path} is gone"


def _ssh_of(engine: Engine, worker: Worker) -> str | None:
    """The ssh target of the host a worker runs on (its checkout is there), or None for the controller's."""
    return None if worker.host == CONTROLLER_HOST else str(engine.host_config(worker.run_id, worker.host).ssh)


def check_in(engine: Engine, run: Run, number: int = 1, *, lifecycle: bool = True) -> tuple[list[Observation], set[str], dict[str, str]]:
    """One check-in round: inbox first, then (unless ``lifecycle`` is False) every observed worker's lifecycle state.

    Only a lifecycle round counts toward a stall (three unchanged ones fail a worker): a round made only to act on
    callbacks or to send an owed answer must not, or a busy fleet's callbacks would fail its quiet workers early.
    """
    round_ = _Round(engine, run, number)
    round_.run_round(lifecycle)
    return round_.notes, round_.waiting, round_.herdr_states


def _active(engine: Engine, run: Run, waiting: set[str]) -> bool:
    if engine.ledger.list_inbox(run.run_id, unhandled=True) or answers_owed(engine, run):
        return True
    return any(w.task_label not in waiting for w in engine.ledger.list_workers(run.run_id, states=AT_WORK))


def others_move(engine: Engine, run: Run) -> bool:
    """Whether anything in the run still moves without the person: a worker moving on its own (one at work on a host
    that does not answer is not: nothing comes of it meanwhile), a message not yet handled, an answer orch owes. Both
    doors ask it before a held or lost worker's host gets its bound, and before `orch run` ends."""
    gone = lost_workers(engine, run)
    ledger = engine.ledger
    return (any(w.state in MOVING and w.task_label not in gone for w in ledger.list_workers(run.run_id))
            or bool(ledger.list_inbox(run.run_id, unhandled=True)) or bool(answers_owed(engine, run)))  # fmt: skip


def answers_owed(engine: Engine, run: Run) -> list[str]:
    """The workers in `question` the plan answers and orch has not answered yet: they wait on orch, not the person."""
    answers = plan_answers(engine, run)
    return [w.task_label for w in engine.ledger.list_workers(run.run_id, states=(S.QUESTION,)) if planned_answer(engine, run, w, answers.get(w.task_label, ())) is not None]


def observe(engine: Engine, run: Run, *, once: bool = False, interval: float = DEFAULT_INTERVAL_S, max_rounds: int | None = None) -> ObserveResult:
    """Check in until no worker is still working on its own (or once): callbacks first, then lifecycle state."""
    notes: list[Observation] = []
    states: dict[str, str] = {}
    rounds = 0
    while True:
        rounds += 1
        found, waiting, seen = check_in(engine, run, rounds)
        notes += found
        if engine.ledger.list_workers(run.run_id, states=(S.QUEUED,)):
            # The agent controller's door to the scheduler: queued workers start here as slots free.
            for step in advance(engine, run):
                notes.append(Observation(round=rounds, task=step.task, what=_STEP_WHAT.get(step.what, "queued"), text=step.text))
        states.update(seen)
        active = _active(engine, run, waiting)
        if once or not active or (max_rounds is not None and rounds >= max_rounds):
            break
        engine.clock.sleep(interval)
    workers = tuple(
        WorkerStatus(
            task=w.task_label, name=w.name, state=w.state, herdr_state=states.get(w.task_label),
            unchanged_check_ins=w.unchanged_check_ins, pending_question=w.pending_question,
        )
        for w in engine.ledger.list_workers(run.run_id)
    )  # fmt: skip
    return ObserveResult(run_id=run.run_id, rounds=rounds, observations=tuple(notes), workers=workers, active=active)


def render_observe(result: ObserveResult) -> str:
    """The compact human rendering: one line per observation, then one per worker."""
    lines = [f"Run {result.run_id}: {result.rounds} check-in round{'s' if result.rounds != 1 else ''}"]
    for o in result.observations:
        ref = f" #{o.inbox_id}" if o.inbox_id is not None else ""
        # A note quotes worker text: one line, so a body can never fake a note or a worker line of its own.
        lines.append(f"  [{o.round}] {o.task or '-'} {o.what.replace('_', ' ')}{ref}: {inert_line(o.text)}")
    lines.append("Workers:")
    for w in result.workers:
        herdr = f", herdr {w.herdr_state}" if w.herdr_state else ""
        lines.append(f"  {w.task} ({w.name}): {w.state}{herdr}, unchanged check-ins {w.unchanged_check_ins}")
    lines.append("Still active: yes" if result.active else "Still active: no")
    return "\n".join(lines) + "\n"
