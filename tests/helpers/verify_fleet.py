"""A verify-phase fixture world: a run in the ledger with its plan snapshot and real worktrees (shared by the verify and integrate tests)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from orchestrator.clock import FakeClock
from orchestrator.config import Settings
from orchestrator.engine import Engine
from orchestrator.herdr import HerdrCli
from orchestrator.plan import load_plan
from registry import InboxVerdict, Run, WorkerState

S = WorkerState
RUN_ID = "w1:p1-20261130T080000Z"

PLAN = """\
organization = "acme"
repo = "widgets"
base = "main"
{integration}
[[workers]]
task = "api-docs"
objective = "Document the API."
deliverable = "docs/api.md"
branch = "docs/api"
claim = ["docs/"]
verify = ["test -f docs/api.md"]

[[workers]]
task = "greeting"
objective = "Add a greeting."
deliverable = "src/greet.py"
branch = "feat/greeting"
claim = ["src/"]
verify = ["grep -q hello src/greet.py"]

[[workers]]
task = "survey"
objective = "Survey the code; change nothing."
deliverable = "a report"
branch = "chore/survey"
"""


class Fleet:
    """A run in the ledger with its plan snapshot and real worktrees, as provisioning and dispatch leave it."""

    def __init__(self, tmp_path: Path, repo: Any, integration: str = "") -> None:
        self.repo = repo
        self.base = repo.head()
        env = {"HOME": str(tmp_path / "home"), "ORCH_HOME": str(tmp_path / "orch-home"), "ORCH_SRC_ROOT": str(tmp_path / "src")}
        settings = Settings.from_env(env)
        self.engine = Engine(settings=settings, herdr=HerdrCli("herdr-unused", env=env), clock=FakeClock(), env=env)
        plan_file = tmp_path / "plan.toml"
        plan_file.write_text(PLAN.format(integration=integration))
        self.plan = load_plan(plan_file, settings)
        ledger = self.engine.ledger
        self.run: Run = ledger.create_run(
            RUN_ID, controller_target="w1:p1", repo_path=repo.path, base_ref="main", base_sha=self.base, plan_path=plan_file
        )
        run_dir = self.engine.run_dir(RUN_ID)
        run_dir.mkdir(parents=True)
        shutil.copy(plan_file, run_dir / "plan.toml")
        self.worktrees: dict[str, Path] = {}
        for planned in self.plan.workers:
            path = planned.worktree.path
            repo.git("worktree", "add", "--quiet", "-b", planned.worktree.branch, str(path), self.base)
            self.worktrees[planned.task] = path
            ledger.add_worker(
                RUN_ID, planned.task, name=planned.name, kind=planned.kind, objective=planned.worker.objective,
                claimed_files=planned.worker.claim, branch=planned.worktree.branch, worktree_path=str(path), base_sha=self.base,
            )  # fmt: skip
            for state in (S.READY, S.DISPATCHED, S.WORKING):
                ledger.transition(RUN_ID, planned.task, ledger.get_worker(RUN_ID, planned.task).state, state, cause={"test": "setup"})

    def commit(self, task: str, files: dict[str, str], message: str = "work") -> str:
        """Commit in the worker's own worktree, as the worker would."""
        return str(self.repo.commit(message, files, cwd=self.worktrees[task]))

    def result(self, task: str, body: str) -> None:
        """Record the worker's accepted `result` message and move it to `result`, as the observe phase does."""
        raw = f"[herdr-orchestration run={RUN_ID} task={task} from={task} kind=result reply-to=w1:p1]\n{body}"
        ledger = self.engine.ledger
        message = ledger.record_inbound(
            RUN_ID, raw, source="test", verdict=InboxVerdict.ACCEPTED, fingerprint=f"fp-{task}-{len(body)}", task_label=task, kind="result", sender=task
        )
        ledger.transition(RUN_ID, task, S.WORKING, S.RESULT, cause={"inbox": message.id}, last_callback_id=message.id)

    def state(self, task: str) -> tuple[str, str | None]:
        worker = self.engine.ledger.get_worker(RUN_ID, task)
        return str(worker.state), worker.final_disposition and str(worker.final_disposition)


def body(commits: list[str], files: list[str], checks: list[tuple[str, int]], status: str = "done") -> str:
    """A result body in the scripted agents' format (docs/scenarios.md)."""
    lines = [f"Status: {status}", f"Commits: {' '.join(commits) or 'none'}", f"Changed files: {', '.join(files) or 'none'}"]
    lines.append("Checks:" if checks else "Checks: none")
    lines.extend(f"- {command} => exit {code}" for command, code in checks)
    lines.append("Residual risk: none")
    return "\n".join(lines)
