"""The plan file (`plan.toml`): its model and its resolution into placed workers under the Layout Contract."""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Callable, Sequence
from graphlib import CycleError, TopologicalSorter
from itertools import combinations, pairwise
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, NamedTuple, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError, ValidationInfo, field_validator
from tabulate import tabulate

from orchestrator import claims, tables
from orchestrator.config import Settings, dotted, located_problems, read_toml
from orchestrator.errors import ConfigError
from orchestrator.layout import (
    HERDR_AGENT_KINDS,
    RepoLayout,
    WorktreeLayout,
    agent_name_for,
    agent_name_problem,
    conventional_branch_problem,
    git_branch_problem,
    path_name_problem,
    quote,
    repo_layout,
    task_label_problem,
    worktree_folder_problem,
    worktree_layout,
)
from orchestrator.policy import EffectivePolicy, PolicyLayer, PolicyOverlay, merge_policy, overlay_layers
from packets import MESSAGE_LIMIT_RANGE
from registry.kinds import CONTROLLER_HOST

Mode = Literal["direct", "plan-first"]
Placement = Literal["worktree", "sibling"]
# Where a worker's verification commands are re-run (issue 26): on the controller, or on the host the worker ran on.
VerifyOn = Literal["controller", "host"]

# The spec's stop conditions (§2): every worker gets these; a plan entry's `stop_conditions` adds to them.
DEFAULT_STOP_CONDITIONS: tuple[str, ...] = (
    "The repository structure differs from what this packet describes.",
    "The same check or command fails twice for the same reason.",
    "A step needs authentication, credentials or a permission you do not have.",
    "The work needs an edit outside your file claim.",
)

# Size limits: a plan is words for workers, sent in prompts. A long objective moves to a context file the packet
# names (orchestrator.briefing), but a megabyte of it is a mistake, not a task; an answer is sent as one prompt.
TEXT_MAX = 100_000
ANSWER_MAX = 8000
ITEM_MAX = 2000
LIST_MAX = 100
WORKERS_MAX = 100
CONCURRENCY_MAX = 32

_Item = Annotated[StrictStr, Field(max_length=ITEM_MAX)]
_Items = Annotated[tuple[_Item, ...], Field(max_length=LIST_MAX)]



def _claim_pattern(pattern: str) -> str:
    # An item validator, so every bad pattern of a list gets its own line (`claim[3]: ...`), not only the first.
    if problem := claims.pattern_problem(pattern):
        raise ValueError(problem)
    return pattern


_ClaimPatterns = Annotated[tuple[Annotated[_Item, AfterValidator(_claim_pattern)], ...], Field(max_length=LIST_MAX)]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class Answer(_Model):
    """A reply the controller may give, unprompted by a person, to a question it expects."""

    regex: StrictBool = False
    """Treat `when` as a Python regular expression (searched, case-insensitive) instead of a substring."""
    when: StrictStr = Field(min_length=1, max_length=ITEM_MAX)
    """Text to look for in the worker's question: a case-insensitive substring, or a regular expression when `regex` is true."""
    answer: StrictStr = Field(min_length=1, max_length=ANSWER_MAX)
    """The answer the controller sends back (Message Contract kind `answer`)."""

    @field_validator("when")
    @classmethod
    def _regex_compiles(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("regex"):
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"{quote(value)} is not a valid regular expression: {exc}") from None
        return value

    def matches(self, question: str) -> bool:
        """Whether this answer applies to ``question``."""
        if self.regex:
            return re.search(self.when, question, re.IGNORECASE) is not None
        return self.when.casefold() in question.casefold()


class Defaults(_Model):
    """Values every worker gets unless its own entry says otherwise."""

    kind: StrictStr | None = None
    """Worker kind for entries without `kind`; unset means the effective policy's `default_kind` (codex unless a policy says otherwise)."""
    concurrency: StrictInt = Field(default=4, ge=1, le=CONCURRENCY_MAX)
    """Most workers of the run with a live agent at once (at most 32); the rest wait `queued` and start as slots free (a slot frees when a finished worker's agent has exited: orch exits it once it is accepted, rejected, failed or superseded and a queued worker is waiting)."""
    checkin_interval_s: StrictInt = Field(default=60, ge=1)
    """Seconds between check-ins on a worker that sent no callback (spec §5: three check-ins without change mean failed)."""
    agent_start_timeout_s: StrictInt = Field(default=30, ge=4, le=300)
    """`herdr agent start --timeout`, in seconds (herdr accepts more than 3 s and at most 300 s)."""
    wait_timeout_s: StrictInt = Field(default=60, ge=1)
    """`--timeout` of each blocking herdr wait (`agent wait`, `agent prompt --wait`), in seconds; an expiry is a check-in, not a failure."""
    mode: Mode = "direct"
    """Execution mode: `direct`, or `plan-first` (only when the person asked for it)."""
    message_limit_bytes: StrictInt | None = Field(default=None, ge=MESSAGE_LIMIT_RANGE[0], le=MESSAGE_LIMIT_RANGE[1])
    """Largest inbound message, in bytes (1024 to 1048576); larger ones are kept aside as `oversize`; unset means the policy's (64 KiB unless a policy says otherwise)."""


class Integration(_Model):
    """Optional integration of accepted workers; off means orch reports accepted branches and commits and merges nothing."""

    enabled: StrictBool = False
    """Merge accepted workers, one at a time, into `branch`."""
    branch: StrictStr | None = Field(default=None, validate_default=True)
    """The dedicated integration branch (a Conventional Branch; required when `enabled`)."""

    @field_validator("branch")
    @classmethod
    def _branch_when_enabled(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and info.data.get("enabled"):
            raise ValueError("is required when enabled = true")
        return value


HOST_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")


def _remote_absolute(value: str) -> str:
    # A path on another machine: `~` would expand to the controller's home here, so only absolute paths are taken.
    if not value.startswith("/"):
        raise ValueError(f"{quote(value)} must be an absolute path on that host")
    return value


def _host_name(name: str) -> str:
    # A key validator, so every bad name gets its own line.
    if name == CONTROLLER_HOST:
        raise ValueError(f"{quote(name)} is the controller's own machine; name another host")
    if not HOST_NAME.fullmatch(name):
        raise ValueError(f"{quote(name)} is not a host name: lowercase letters, digits and hyphens, starting with a letter, at most 32")
    return name


class Host(_Model):
    """Another machine workers may run on: how orch reaches it and where the repository and orch live there."""

    machine: StrictStr = Field(min_length=1, max_length=ITEM_MAX)
    """The herdr saved machine (its label or profile ID in `herdr machine list` on the controller) that `herdr --machine` forwards this host's workspace, worktree, tab, pane and agent commands to."""
    ssh: StrictStr = Field(min_length=1, max_length=ITEM_MAX)
    """SSH target (an ssh_config alias or `user@host`) for what herdr does not forward: git, files, `herdr integration status`, the agents' and orch's executables. Must log in without a prompt (BatchMode)."""
    checkout: Annotated[StrictStr, AfterValidator(_remote_absolute)]
    """Absolute path of the repository's primary checkout on that host; its worktrees go beside it in `<repo>.worktrees/`, as on the controller."""
    orch: StrictStr = Field(default="orch", min_length=1, max_length=ITEM_MAX)
    """The `orch` executable on that host (a name on the PATH of a non-interactive SSH shell, or an absolute path)."""
    orch_home: Annotated[StrictStr, AfterValidator(_remote_absolute)] | None = None
    """ORCH_HOME for orch on that host (absolute), where a remote worker's callbacks wait in a spool until the controller collects them; unset means that orch's own default (`~/.local/state/orch`)."""
    verify_on: VerifyOn = "controller"
    """Where the verification commands of the workers on this host are re-run: `controller` (in a scratch checkout there, of the commit fetched home) or `host` (on this host, over ssh, in a fresh scratch checkout of exactly the worker's head commit, removed afterwards; never in the worker's own checkout). A worker's own `verify_on` overrides it."""

    @field_validator("machine", "ssh", "orch")
    @classmethod
    def _one_word(cls, value: str) -> str:
        if _CONTROL.search(value) or value.startswith("-") or value != value.strip():
            raise ValueError(f"{quote(value)} must be one word that does not start with -")
        return value


class Worker(_Model):
    """One delegated task: what to do, where (its branch), which files it may change, and how it is checked."""

    task: StrictStr
    """Task label: lowercase hyphen-case; also the herdr agent name, so it must start with a letter and have at most 32 characters."""
    objective: StrictStr = Field(min_length=1, max_length=TEXT_MAX)
    """What the worker must achieve (at most 100000 characters; a long one is handed over as a file)."""
    deliverable: StrictStr = Field(min_length=1, max_length=TEXT_MAX)
    """What the worker hands back (commits, a report file, ...)."""
    kind: StrictStr | None = None
    """herdr agent kind (`codex`, `claude`, `opencode`, `pi`, ...); unset means `defaults.kind`, then the policy's `default_kind`."""
    branch: StrictStr
    """Target branch (a Conventional Branch, not the base). The first worker on a branch gets its own worktree tab; later ones share it as sibling panes."""
    scope: _Items = ()
    """Files, packages or behaviour in scope, in words or paths."""
    exclusions: _Items = ()
    """What the worker must not touch or do."""
    claim: _ClaimPatterns = ()
    """File claim: patterns relative to the checkout (`*` and `?` within a path segment, `**` for any number of segments); a pattern naming a directory covers everything below it; empty means read-only work."""
    evidence: _Items = ()
    """Evidence the result must carry (file references, genuine command output)."""
    verify: _Items = ()
    """Verification commands the controller re-runs before accepting."""
    verify_on: VerifyOn | None = None
    """Where its `verify` commands are re-run: `controller`, or `host` (the host it runs on, over ssh); unset means its host's `verify_on`, then `controller`. On the controller's own machine both are the controller."""
    stop_conditions: _Items = ()
    """Extra stop conditions, added to the defaults (unexpected structure, repeated failures, authentication, out-of-claim edits)."""
    mode: Mode | None = None
    """Execution mode for this worker; unset means `defaults.mode`."""
    setup: _Items = ()
    """Shell commands run in the fresh checkout before the agent starts (first worker on a branch only)."""
    agent_args: _Items = ()
    """Native agent arguments, passed after `--` to `herdr agent start`."""
    answers: tuple[Answer, ...] = Field(default=(), max_length=LIST_MAX)
    """Answers the controller may give to expected questions."""
    host: StrictStr | None = None
    """The `[hosts.<name>]` this worker runs on; unset means the controller's machine. A sibling runs where its branch's first worker runs. Its `setup` runs there, over ssh. With `after` and integration on, the integration branch's commit it starts from is sent to that host's checkout first (`git push SSH:CHECKOUT SHA:refs/orch/RUN/base/TASK`, read back there; never to a remote or branch)."""
    after: _Items = ()
    """Tasks this worker waits for: it starts only once each is accepted (and, with integration on, integrated, its new worktree then starting from the integration branch); one that ends rejected, failed or superseded skips it, never started."""

    @field_validator("task")
    @classmethod
    def _task_label(cls, value: str) -> str:
        if problem := task_label_problem(value) or agent_name_problem(agent_name_for(value)):
            raise ValueError(problem)
        return value

    @field_validator("claim")
    @classmethod
    def _claim_patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("lists a pattern twice")
        return value

    @field_validator("agent_args")
    @classmethod
    def _no_control_characters(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for arg in value:
            if _CONTROL.search(arg):
                # herdr rejects these with invalid_agent_argument; say so before anything is provisioned.
                raise ValueError(f"{quote(arg)} contains a control character, which herdr rejects")
        return value


class Plan(_Model):
    """A whole plan: one repository, its base ref, defaults, policy, integration choice and workers."""

    organization: StrictStr
    """Organization: the herdr session name and the folder under the source root."""
    repo: StrictStr
    """Repository name: the herdr workspace and first-tab label, and the prefix of every worktree tab label."""
    path: StrictStr | None = None
    """Explicit checkout path (absolute or `~/…`); default `<src_root>/<organization>/<repo>`."""
    base: StrictStr = Field(min_length=1)
    """Base ref the worktrees start from (e.g. `origin/main`); fetched before provisioning."""
    defaults: Defaults = Defaults()
    """Defaults for every worker."""
    policy: PolicyOverlay = PolicyOverlay()
    """Plan-level policy layer, applied over the organization and repository overlays."""
    integration: Integration = Integration()
    """Integration opt-in; default off (report only)."""
    hosts: dict[Annotated[StrictStr, AfterValidator(_host_name)], Host] = Field(default_factory=dict, max_length=LIST_MAX)
    """Other machines workers may run on (`[hosts.<name>]`, names lowercase hyphen-case; `local` is the controller's own machine); none means every worker runs on the controller."""
    workers: tuple[Worker, ...] = Field(min_length=1, max_length=WORKERS_MAX)
    """The workers, in launch order (`[[workers]]` entries; at most 100)."""

    @field_validator("organization", "repo")
    @classmethod
    def _path_name(cls, value: str) -> str:
        if problem := path_name_problem(value):
            raise ValueError(problem)
        return value

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not (value.startswith("/") or value == "~" or value.startswith("~/")):
            raise ValueError(f"{quote(value)} must be an absolute path or start with ~/")
        return value


class ResolvedWorker(BaseModel):
    """A worker placed under the Layout Contract: everything the engine needs to provision and brief it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    task: str
    name: str
    kind: str
    placement: Placement
    sibling_of: str | None
    worktree: WorktreeLayout
    mode: Mode
    stop_conditions: tuple[str, ...]
    worker: Worker
    host: str = CONTROLLER_HOST
    checks_on: str = CONTROLLER_HOST  # the host its verification commands are re-run on (`verify_on` resolved)

    @property
    def after(self) -> tuple[str, ...]:
        """The tasks this worker waits for."""
        return self.worker.after


class ResolvedPlan(BaseModel):
    """A valid plan with its effective policy and placed workers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str
    plan: Plan
    repo: RepoLayout
    policy: EffectivePolicy
    workers: tuple[ResolvedWorker, ...]
    # Valid but probably not meant (a worker without verification, more concurrency than workers), one line each.
    warnings: tuple[str, ...] = ()

    @property
    def message_limit(self) -> int:
        """The inbound message size limit: `defaults.message_limit_bytes`, else the policy's."""
        return self.plan.defaults.message_limit_bytes or self.policy.policy.message_limit_bytes

    @property
    def remote_workers(self) -> dict[str, tuple[str, ...]]:
        """The workers on each host other than the controller's, by host, in plan order."""
        out: dict[str, tuple[str, ...]] = {}
        for w in self.workers:
            if w.host != CONTROLLER_HOST:
                out[w.host] = (*out.get(w.host, ()), w.task)
        return out


# --- loading and resolution ----------------------------------------------------------------------------------------


def load_plan(path: Path, settings: Settings, *, display: str | None = None) -> ResolvedPlan:
    """Read, validate and resolve a plan file; every problem is one line of a single ConfigError, nothing is changed.

    All problems come in one pass: schema problems, and the placement checks (branches, claims, labels, policy) of
    every part that passed the schema, so fixing the reported lines never uncovers a second round.
    """
    display = str(path) if display is None else display
    data = read_toml(path, display)
    try:
        plan = Plan.model_validate(data)
    except ValidationError as exc:
        problems = [Problem(text, loc) for loc, text in located_problems(exc, lambda loc: f"{display}: {_locate(data, loc)}", model=Plan)]
        partial = _valid_part(data, exc)
        if partial is not None:
            part, indexes = partial
            problems.extend(_resolution_problems(part, settings, display, indexes))
        raise ConfigError(_with_lines(list({p.text: p for p in problems}.values()), path, display)) from None
    try:
        return resolve_plan(plan, settings, source=display)
    except PlanProblems as exc:
        raise ConfigError(_with_lines(list(exc.problems), path, display)) from None


class Problem(NamedTuple):
    """One plan problem: its line for the person, and the key path it is about (``("workers", 1, "claim")``), if any."""

    text: str
    at: tuple[int | str, ...] | None = None


class PlanProblems(ConfigError):
    """Every problem resolution found, each carrying its location, so load_plan can give each its file line."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        super().__init__("\n".join(p.text for p in problems))
        self.problems = tuple(problems)


_TABLE_HEADER = re.compile(r"^\[(\[)?\s*([A-Za-z0-9_.-]+)\s*\]")
_KEY_LINE = re.compile(r"^([A-Za-z0-9_-]+)\s*=")


def _with_lines(problems: list[Problem], path: Path, display: str) -> str:
    """``problems`` joined, each given the file line of the key it is about (`plan.toml:12: ...`), in file order."""
    try:
        lines = _key_lines(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return "\n".join(p.text for p in problems)
    placed: list[tuple[int, str]] = []
    prefix = f"{display}: "
    for problem in problems:
        line = _line_of(lines, problem.at) if problem.at is not None and problem.text.startswith(prefix) else None
        placed.append((line or 0, f"{display}:{line}: {problem.text.removeprefix(prefix)}" if line else problem.text))
    # In file order, as an editor lists them; what has no line (a missing key) first.
    return "\n".join(text for _, text in sorted(placed, key=lambda item: item[0]))


def _line_of(lines: dict[tuple[str | int | None, ...], int], at: tuple[int | str, ...]) -> int | None:
    """The file line of a key path: a worker's field (else the worker's table), a table's key (else the table)."""
    if len(at) >= 2 and at[0] == "workers" and isinstance(at[1], int):
        field = at[2] if len(at) >= 3 and isinstance(at[2], str) else None
        return (lines.get(("workers", at[1], field)) if field else None) or lines.get(("workers", at[1]))
    # A key of a (named) table, else the table itself, up to a top-level key: `hosts.buildbox.checkout`, `[hosts.buildbox]`.
    names: list[str | int | None] = []
    for part in at:
        if not isinstance(part, str):
            break  # an index into a list: the list's own line
        names.append(part)
    for n in range(len(names), 0, -1):
        line = lines.get(tuple(names[:n])) or lines.get((*names[:n], None))
        if line:
            return line
    return None


def _key_lines(text: str) -> dict[tuple[str | int | None, ...], int]:
    """Where each key of a plan file is written: ("workers", 1, "claim"), ("defaults", "kind"), ("base", None) -> line."""
    where: dict[tuple[str | int | None, ...], int] = {}
    table: tuple[str | int, ...] = ()
    workers = -1
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if header := _TABLE_HEADER.match(line):
            name = header[2]
            if name == "workers":
                workers += 1
                table = ("workers", workers)
            elif name.startswith("workers."):
                table = ("workers", workers, *name.split(".")[1:])  # a worker's sub-table: lines count as the worker's
            else:
                table = tuple(name.split("."))
            where.setdefault(table if table[0] == "workers" else (*table, None), number)
        elif key := _KEY_LINE.match(line):
            place = (*table[:2], key[1]) if table[:1] == ("workers",) else (*table, key[1]) if table else (key[1], None)
            where.setdefault(place, number)
    return where


# Top-level fields without which placement cannot be worked out; an invalid optional one falls back to its default.
_NEEDED = ("organization", "repo", "base", "workers")


def _valid_part(data: Any, exc: ValidationError) -> tuple[Plan, list[int]] | None:
    """The plan without its invalid parts (and the original index of each worker kept), or None when too little is left.

    A worker with an invalid field is kept with that field left out (its default, or a stand-in for `objective` and
    `deliverable`, or its label as written for `task`), so the cross-worker and policy checks still see it: an unknown
    `after` or a disallowed kind is said in the same pass as a bad label elsewhere.
    """
    if not isinstance(data, dict) or not isinstance(data.get("workers"), list):
        return None
    bad_top: set[str] = set()
    bad_fields: dict[int, set[str]] = {}
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        if not loc:
            return None
        if error["type"] == "too_short" and error.get("input"):
            continue  # pydantic's echo of the item errors below (validation_problems skips it too)
        if loc[0] == "workers" and len(loc) >= 2 and isinstance(loc[1], int):
            bad_fields.setdefault(loc[1], set()).add(str(loc[2]) if len(loc) >= 3 else "")
        else:
            bad_top.add(str(loc[0]))
    if bad_top & set(_NEEDED):
        return None
    part = {key: value for key, value in data.items() if key not in bad_top}
    # Keep the hosts that are valid on their own; a worker naming a declared but invalid one is placed without `host`
    # rather than told its host is unknown.
    dropped: set[object] = set()
    if "hosts" in bad_top and isinstance(data.get("hosts"), dict):
        # An invalid entry under a good name stays as a stand-in (never used: the plan is invalid), so its workers
        # are still checked against their siblings; one under a bad name is dropped with the `host` naming it.
        stand_in = {"machine": "invalid", "ssh": "invalid", "checkout": "/"}
        part["hosts"] = {
            name: host if _valid_host(name, host) else stand_in
            for name, host in data["hosts"].items() if _valid_host(name, stand_in)
        }
        dropped = set(data["hosts"]) - set(part["hosts"])
    workers: list[Any] = []
    indexes: list[int] = []
    for index, entry in enumerate(data["workers"]):
        if dropped and isinstance(entry, dict) and entry.get("host") in dropped:
            entry = {key: value for key, value in entry.items() if key != "host"}
        kept = _salvaged_worker(entry, bad_fields[index]) if index in bad_fields else entry
        if kept is not None:
            workers.append(kept)
            indexes.append(index)
    if not indexes:
        return None
    part["workers"] = workers
    try:
        return Plan.model_validate(part), indexes
    except ValidationError:
        return None


def _valid_host(name: object, host: object) -> bool:
    try:
        Plan.model_validate({"organization": "o", "repo": "r", "base": "b", "hosts": {name: host}, "workers": [
            {"task": "t", "objective": "-", "deliverable": "-", "branch": "b"}]})
    except ValidationError:
        return False
    return True


def _salvaged_worker(entry: Any, bad: set[str]) -> Worker | None:
    """``entry`` without its ``bad`` fields, for the cross-worker checks only; None when it cannot be placed at all."""
    if not isinstance(entry, dict) or "" in bad or "branch" in bad:
        return None  # no branch, no placement: nothing to check it against
    kept = {key: value for key, value in entry.items() if key not in bad}
    for field in ("objective", "deliverable"):
        if field in bad:
            kept[field] = "-"  # never rendered: the plan is invalid, this only lets the worker be placed
    label = entry.get("task")
    if "task" in bad:
        if not isinstance(label, str):
            return None
        kept["task"] = "invalid-label"
    try:
        worker = Worker.model_validate(kept)
    except ValidationError:
        return None
    # The label as written, so `after` lists naming it and the lines about this worker read as the file does.
    return worker.model_copy(update={"task": label}) if "task" in bad else worker


def _resolution_problems(plan: Plan, settings: Settings, source: str, indexes: list[int]) -> list[Problem]:
    try:
        _resolve(plan, settings, source, indexes)
    except PlanProblems as exc:
        return list(exc.problems)
    return []


def _locate(data: Any, loc: tuple[int | str, ...]) -> str:
    """`workers[1] (api-docs).branch` for a pydantic location, naming the worker by its task label when it has one."""
    if len(loc) >= 2 and loc[0] == "workers" and isinstance(loc[1], int):
        workers = data.get("workers") if isinstance(data, dict) else None
        entry = workers[loc[1]] if isinstance(workers, list) and loc[1] < len(workers) else None
        task = entry.get("task") if isinstance(entry, dict) else None
        head = f"workers[{loc[1]}]" + (f" ({task})" if isinstance(task, str) and task else "")
        rest = dotted(loc[2:])
        return head + (f".{rest}" if rest and not rest.startswith("[") else rest)
    return dotted(loc) or "plan"


def _checkout(plan: Plan, settings: Settings) -> Path | None:
    if plan.path is None:
        return None
    raw = settings.home / plan.path[2:] if plan.path == "~" or plan.path.startswith("~/") else Path(plan.path)
    return Path(os.path.normpath(raw))


def resolve_plan(plan: Plan, settings: Settings, *, source: str = "plan.toml") -> ResolvedPlan:
    """Apply policy and the Layout Contract to a validated plan: kinds, branches, names, placement and claim overlaps."""
    return _resolve(plan, settings, source, list(range(len(plan.workers))))


def _resolve(plan: Plan, settings: Settings, source: str, indexes: list[int]) -> ResolvedPlan:
    """resolve_plan, naming each worker by ``indexes`` (its place in the file, when invalid entries were left out)."""
    repo = repo_layout(settings.src_root, plan.organization, plan.repo, _checkout(plan, settings))
    problems: list[Problem] = []
    layers = overlay_layers(repo.checkout, settings.policy_dir, settings.home)
    if plan.policy.model_dump(exclude_none=True):
        layers.append(PolicyLayer(source="plan [policy]", overlay=plan.policy))
    try:
        effective = merge_policy(layers)
        if plan.defaults.kind is not None:
            if plan.policy.default_kind is not None:
                problems.append(Problem(f"{source}: defaults.kind: policy.default_kind is also set; keep one of them", ("defaults", "kind")))
            if problem := _kind_problem(plan.defaults.kind, effective):
                problems.append(Problem(f"{source}: defaults.kind: {problem}", ("defaults", "kind")))
            if plan.policy.default_kind is None and problem is None:
                layers.append(PolicyLayer(source="plan [defaults]", overlay=PolicyOverlay(default_kind=plan.defaults.kind)))
                effective = merge_policy(layers)
    except ConfigError as exc:
        raise PlanProblems([*problems, Problem(f"{source}: {exc.message}")]) from None
    policy = effective.policy

    def branch_problem(branch: str) -> str | None:
        return conventional_branch_problem(
            branch, types=policy.branch_types, extra_types=policy.extra_branch_types, description_pattern=policy.description_pattern
        ) or git_branch_problem(branch)

    def is_base(branch: str) -> bool:
        # `origin/feat/x` as a base is still the branch `feat/x`.
        return branch == plan.base or plan.base.endswith(f"/{branch}")

    # Each host's checkout under the same Layout Contract: worktrees beside it, labelled as on the controller.
    host_repos = {name: repo_layout(settings.src_root, plan.organization, plan.repo, Path(h.checkout)) for name, h in plan.hosts.items()}
    resolved: list[ResolvedWorker] = []
    first_on_branch: dict[str, ResolvedWorker] = {}
    tasks: dict[str, int] = {}
    labels: dict[str, str] = {}
    for index, worker in zip(indexes, plan.workers, strict=True):
        where = f"{source}: workers[{index}] ({worker.task})"

        def add(field: str, text: str, index: int = index, where: str = where) -> None:
            problems.append(Problem(f"{where}.{field}: {text}", ("workers", index, field)))

        if worker.task in tasks:
            add("task", f"{quote(worker.task)} is already the task label of workers[{tasks[worker.task]}]; task labels and agent names must be unique")
        tasks.setdefault(worker.task, index)
        if problem := branch_problem(worker.branch):
            add("branch", problem)
        elif is_base(worker.branch):
            add("branch", f"{quote(worker.branch)} is the base {quote(plan.base)}; a worker never runs on the base or default branch")
        kind = worker.kind or policy.default_kind
        if worker.kind is not None and (problem := _kind_problem(worker.kind, effective)):
            add("kind", problem)
        host = worker.host or CONTROLLER_HOST
        if host != CONTROLLER_HOST and host not in plan.hosts:
            known = ", ".join(plan.hosts) or "none"
            add("host", f"{quote(host)} is not a host of this plan (its [hosts] are: {known}; unset means the controller's machine)")
        first = first_on_branch.get(worker.branch)
        if first is not None and first.host != host and host in (CONTROLLER_HOST, *plan.hosts) and first.host in (CONTROLLER_HOST, *plan.hosts):
            add("host", f"{quote(host)}, but it shares the checkout of workers[{first.index}] ({first.task}) on host {quote(first.host)}; "
                "a sibling runs where its branch's first worker runs")
        layout = worktree_layout(host_repos.get(host, repo), worker.branch)
        if problem := worktree_folder_problem(layout):
            add("branch", problem)
        if labels.setdefault(layout.label, worker.branch) != worker.branch:
            add("branch", f"{quote(worker.branch)} gives tab label {quote(layout.label)}, already used by branch {quote(labels[layout.label])}")
        if first is not None and worker.setup:
            add("setup", f"a sibling shares the checkout of workers[{first.index}] ({first.task}); put setup commands on that first worker")
        entry = ResolvedWorker(
            index=index,
            task=worker.task,
            name=agent_name_for(worker.task),
            kind=kind,
            placement="worktree" if first is None else "sibling",
            sibling_of=None if first is None else first.task,
            worktree=layout,
            mode=worker.mode or plan.defaults.mode,
            stop_conditions=(*DEFAULT_STOP_CONDITIONS, *(s for s in worker.stop_conditions if s not in DEFAULT_STOP_CONDITIONS)),
            worker=worker,
            host=host,
            checks_on=host if (worker.verify_on or (plan.hosts[host].verify_on if host in plan.hosts else "controller")) == "host" else CONTROLLER_HOST,
        )
        first_on_branch.setdefault(worker.branch, entry)
        resolved.append(entry)
    problems.extend(_overlap_problems(resolved, source))
    problems.extend(after_problems(resolved, source))
    problems.extend(_integration_problems(plan, source, branch_problem, is_base, indexes))
    if problems:
        raise PlanProblems(problems)
    return ResolvedPlan(source=source, plan=plan, repo=repo, policy=effective, workers=tuple(resolved), warnings=tuple(_warnings(plan, resolved, source)))


def _kind_problem(kind: str, effective: EffectivePolicy) -> str | None:
    """Why ``kind`` may not be used under ``effective`` policy, naming only the kinds it allows (not all of herdr's)."""
    allowed = effective.policy.allowed_kinds
    if kind in allowed:
        return None
    what = "is not allowed by policy" if kind in HERDR_AGENT_KINDS else "is not an agent kind herdr knows"
    return f"{quote(kind)} {what}; use one of {', '.join(allowed)} (allowed_kinds, from {effective.sources['allowed_kinds']})"


def _warnings(plan: Plan, workers: list[ResolvedWorker], source: str) -> list[str]:
    """What is valid but probably not meant: said by `orch plan check` (text and JSON), never an error."""
    warnings = [
        f"{source}: workers[{w.index}] ({w.task}).verify: no verification command; orch can check the worker's commits and "
        "claim, but re-runs no test before accepting"
        for w in workers
        if not w.worker.verify
    ]
    # Only a concurrency the plan sets: the default (4) above a small plan's size is not a choice anyone made.
    if "concurrency" in plan.defaults.model_fields_set and plan.defaults.concurrency > len(workers):
        warnings.append(
            f"{source}: defaults.concurrency: {plan.defaults.concurrency} is more than the {_count(len(workers), 'worker')} "
            f"of this plan; at most {len(workers)} run at once"
        )
    used = {w.host for w in workers}
    warnings += [f"{source}: hosts.{name}: no worker runs on it" for name in plan.hosts if name not in used]
    return warnings


def _and_list(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _overlap_problems(workers: list[ResolvedWorker], source: str) -> list[Problem]:
    problems: list[Problem] = []
    for first, second in combinations(workers, 2):
        if first.worktree.branch != second.worktree.branch:
            continue  # separate worktrees isolate overlapping edits
        pair = next(((a, b) for b in second.worker.claim for a in first.worker.claim if claims.may_overlap(a, b)), None)
        if pair is not None:
            problems.append(Problem(
                f"{source}: workers[{second.index}] ({second.task}).claim: {quote(pair[1])} may overlap {quote(pair[0])} claimed by "
                f"workers[{first.index}] ({first.task}) in the same checkout ({first.worktree.branch}); "
                "orch counts two globs as overlapping unless it can prove them disjoint",
                ("workers", second.index, "claim"),
            ))  # fmt: skip
    return problems


def after_problems(workers: Sequence[ResolvedWorker], source: str) -> list[Problem]:
    """One problem per line with `after`: unknown or repeated tasks, self-dependencies, cycles (graphlib)."""
    problems: list[Problem] = []
    known = {w.task for w in workers}
    graph: dict[str, set[str]] = {}
    for w in workers:
        where, at = f"{source}: workers[{w.index}] ({w.task}).after", ("workers", w.index, "after")
        wanted: set[str] = set()
        for task in w.after:
            if task == w.task:
                problems.append(Problem(f"{where}: a worker cannot wait for itself", at))
            elif task not in known:
                problems.append(Problem(f"{where}: {quote(task)} is not a task of this plan", at))
            elif task in wanted:
                problems.append(Problem(f"{where}: lists {quote(task)} twice", at))
            else:
                wanted.add(task)
        graph[w.task] = wanted
        if w.sibling_of is not None:
            # A sibling splits its branch owner's pane, so it can never start before the owner does.
            graph[w.task] = wanted | {w.sibling_of}
    while True:
        try:
            TopologicalSorter(graph).prepare()
            return problems
        except CycleError as exc:
            # graphlib lists each node before the one waiting for it; reversed, each task waits for the next.
            waits: list[str] = list(reversed(exc.args[1]))
            index = {w.task: w.index for w in workers}
            implicit = [f"{x} shares the checkout of {y}, which starts first" for x, y in pairwise(waits) if _sibling_edge(workers, x, y)]
            tail = f" ({'; '.join(implicit)})" if implicit else ""
            problems.append(Problem(f"{source}: workers[{index[waits[0]]}] ({waits[0]}).after: a cycle: {' after '.join(waits)}{tail}", ("workers", index[waits[0]], "after")))
            # Break this cycle and look for another, so every cycle gets its own line.
            for x, y in pairwise(waits):
                graph[x].discard(y)


def _sibling_edge(workers: Sequence[ResolvedWorker], task: str, owner: str) -> bool:
    return any(w.task == task and w.sibling_of == owner and owner not in w.after for w in workers)


def _integration_problems(
    plan: Plan, source: str, branch_problem: Callable[[str], str | None], is_base: Callable[[str], bool], indexes: list[int]
) -> list[Problem]:
    branch = plan.integration.branch
    if branch is None:
        return []
    where, at = f"{source}: integration.branch", ("integration", "branch")
    if problem := branch_problem(branch):
        return [Problem(f"{where}: {problem}", at)]
    if is_base(branch):
        return [Problem(f"{where}: {quote(branch)} is the base; integration needs a dedicated branch", at)]
    for index, worker in zip(indexes, plan.workers, strict=True):
        if worker.branch == branch:
            return [Problem(f"{where}: {quote(branch)} is the branch of workers[{index}] ({worker.task}); integration needs a dedicated branch", at)]
    return []


# --- rendering for `orch plan check` -------------------------------------------------------------------------------


def check_report(resolved: ResolvedPlan) -> dict[str, Any]:
    """The `orch plan check --json` document: what would be provisioned, and the effective policy with its sources."""
    plan, repo, effective = resolved.plan, resolved.repo, resolved.policy
    return {
        "plan": resolved.source,
        "organization": repo.organization,
        "repo": repo.repo,
        "session": repo.session,
        "workspace": repo.workspace,
        "first_tab": repo.first_tab,
        "checkout": str(repo.checkout),
        "base": plan.base,
        "defaults": plan.defaults.model_dump(mode="json", exclude={"kind"}),
        "integration": plan.integration.model_dump(mode="json"),
        **({"hosts": {name: host.model_dump(mode="json") for name, host in plan.hosts.items()}} if plan.hosts else {}),
        "policy": {field: {"value": value, "source": effective.sources[field]} for field, value in effective.policy.model_dump(mode="json").items()},
        "warnings": list(resolved.warnings),
        "workers": [
            {
                "task": w.task,
                "agent": w.name,
                "kind": w.kind,
                "placement": w.placement,
                "sibling_of": w.sibling_of,
                "branch": w.worktree.branch,
                "tab_label": w.worktree.label,
                "worktree": str(w.worktree.path),
                "claim": list(w.worker.claim),
                "checks": len(w.worker.verify),
                "mode": w.mode,
                "after": list(w.after),
                **({"host": w.host, "checks_on": w.checks_on} if plan.hosts else {}),
            }
            for w in resolved.workers
        ],
    }


def render_check(resolved: ResolvedPlan, width: int | None = None) -> str:
    """The `orch plan check` text: a summary, warnings, the policy and worker tables, ending in a newline.

    ``width`` (the terminal's columns): a table wider than that is shown as one block per row instead.
    """
    plan, repo, effective = resolved.plan, resolved.repo, resolved.policy
    d = plan.defaults
    integration = f"on: accepted workers merge into {plan.integration.branch}" if plan.integration.enabled else "off (report only)"
    summary = [
        ("organization", f"{repo.organization} (herdr session {repo.session})"),
        ("repo", f"{repo.repo} (workspace {repo.workspace}, first tab {repo.first_tab})"),
        ("checkout", str(repo.checkout)),
        ("base", plan.base),
        ("defaults", f"concurrency {d.concurrency}, check-in {d.checkin_interval_s}s, agent start {d.agent_start_timeout_s}s, wait {d.wait_timeout_s}s, mode {d.mode}"),
        ("integration", integration),
    ]
    policy_rows = [(field, _policy_value(value), effective.sources[field]) for field, value in effective.policy.model_dump().items()]
    # A plan without hosts renders exactly as before hosts existed: the host column and table come with [hosts].
    hosted = bool(plan.hosts)
    worker_rows = [
        (
            *((w.host,) if hosted else ()),
            w.task,
            w.name,
            w.kind,
            w.placement if w.sibling_of is None else f"sibling of {w.sibling_of}",
            w.worktree.branch,
            w.worktree.label,
            str(w.worktree.path),
            ", ".join(w.worker.claim) or "(read-only)",
            # Where they are re-run, in a plan with hosts: on the controller or on the worker's own host. Said as
            # `verify_on` and the README say it ("controller"), not by the controller's host key (`local`, in --json).
            _checks_where(w) if hosted and w.worker.verify else str(len(w.worker.verify)),
            w.mode,
            ", ".join(w.after) or "-",
        )
        for w in resolved.workers
    ]
    warnings = "".join(f"warning: {line}\n" for line in resolved.warnings)
    return (
        f"plan {resolved.source}: valid, {_count(len(resolved.workers), 'worker')}\n"
        + (f"{warnings}" if warnings else "")
        + "\n"
        + _summary(summary, width)
        + "\n\n"
        + tables.table(policy_rows, ("policy", "value", "source"), width)
        + "\n\n"
        + _hosts_table(resolved, width)
        + tables.table(worker_rows, (*(("host",) if hosted else ()), "task", "agent", "kind", "placement", "branch", "tab label", "worktree", "claim", "checks", "mode", "after"), width)
        + "\n"
    )


def _checks_where(w: ResolvedWorker) -> str:
    """A worker's checks column in a plan with hosts: how many, and where they are re-run."""
    return f"{len(w.worker.verify)} on {'controller' if w.checks_on == CONTROLLER_HOST else w.checks_on}"


def _hosts_table(resolved: ResolvedPlan, width: int | None) -> str:
    """The hosts of a plan that names any (the controller's first), with the blank line that follows a table."""
    plan = resolved.plan
    if not plan.hosts:
        return ""
    tasks = {name: ", ".join(w.task for w in resolved.workers if w.host == name) or "-" for name in (CONTROLLER_HOST, *plan.hosts)}
    rows = [(CONTROLLER_HOST, "(the controller's herdr)", "-", str(resolved.repo.checkout), "-", tasks[CONTROLLER_HOST])]
    rows += [(name, h.machine, h.ssh, h.checkout, h.orch, tasks[name]) for name, h in plan.hosts.items()]
    return tables.table(rows, ("host", "herdr machine", "ssh", "checkout", "orch", "workers"), width) + "\n\n"


def _summary(rows: Sequence[tuple[str, str]], width: int | None) -> str:
    """`name  value` lines; a value longer than ``width`` allows wraps under itself."""
    table = tabulate(rows, tablefmt="plain")
    if width is None or max(len(line) for line in table.splitlines()) <= width:
        return table
    pad = max(len(name) for name, _ in rows) + 2
    wrap = max(width - pad, 20)
    return "\n".join(
        textwrap.fill(value, width=wrap + pad, initial_indent=f"{name:<{pad}}", subsequent_indent=" " * pad, break_on_hyphens=False)
        for name, value in rows
    )


def _policy_value(value: object) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, tuple | list):
        return ", ".join(value) or "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"  # as a policy file spells it, not Python's True
    return str(value)


# --- the generated reference (docs/plan-reference.md) --------------------------------------------------------------

_SECTIONS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("Top level", Plan),
    ("`[defaults]`", Defaults),
    ("`[policy]`", PolicyOverlay),
    ("`[integration]`", Integration),
    ("`[hosts.<name>]`", Host),
    ("`[[workers]]`", Worker),
    ("`[[workers.answers]]`", Answer),
)


def render_reference() -> str:
    """docs/plan-reference.md, generated from the models so a field cannot be added without its documentation."""
    out = [
        "# Plan file reference",
        "",
        "<!-- Generated from orchestrator/plan.py by render_reference(); tests/orchestrator/test_plan.py fails when it is stale",
        "     (ORCH_UPDATE_GOLDEN=1 python3 -m pytest tests/orchestrator/test_plan.py rewrites it). -->",
        "",
        "A plan (`plan.toml`) is what a person writes for `orch run`. Check one with `orch plan check plan.toml`;",
        "print its JSON Schema for an editor with `orch plan schema`. A commented example is in `examples/plan.toml`.",
        "",
        "Placement is derived, never declared: each worker runs in a worktree checked out on its `branch`, at",
        "`<src_root>/<organization>/<repo>.worktrees/<repo>-<branch-folder>` in a tab labelled `<repo>-<branch-folder>`",
        "(`<branch-folder>` is the branch lowercased with `/` replaced by `-`; `src_root` is `$ORCH_SRC_ROOT`, default `~/src`).",
        "A later worker naming the same branch is a sibling: a pane split in the same tab, sharing the checkout, so its",
        "claim must not overlap any other claim in that checkout (two globs count as overlapping unless orch can prove them disjoint).",
        "",
        "Scheduling: at most `defaults.concurrency` workers of a run have a live agent at once. `orch preflight` registers every",
        "worker `queued`; the scheduler starts queued workers in plan order as slots free, each once every task in its `after`",
        "is accepted (and, with integration on, merged into the integration branch, which its new worktree then starts from).",
        "A worker holds its slot from the moment it is admitted until its agent has exited: when a queued worker could start",
        "but every slot is taken, orch exits the agent of a finished worker (accepted, rejected, failed or superseded; never one",
        "kept with `--keep`, blocked, or still working), keeping its pane and checkout for retirement. A worker whose predecessor",
        "ends rejected, failed or superseded (or is skipped itself) is `skipped`, never started, and the report names the chain.",
        "A sibling also waits for its branch's first worker, whose pane it splits.",
        "",
        "Attribution: siblings share a checkout and a branch, so every packet with a claim asks the worker to stage its own",
        "files by path and to end each commit message with the trailer `Orch-Task: <task>`. Verification judges each sibling",
        "on its own commits (their files, and its newest one as its HEAD): editing a file in another worker's claim is out of",
        "claim, with the file and its owner named, and a commit on a shared branch without a trailer naming one of the",
        "branch's workers fails verification closed for that branch.",
        f"Sizes are limited: `objective` and `deliverable` at most {TEXT_MAX} characters, an answer at most {ANSWER_MAX}; every",
        f"list at most {LIST_MAX} entries of at most {ITEM_MAX} characters each; at most {WORKERS_MAX} workers; `concurrency` at most {CONCURRENCY_MAX}.",
        "`orch plan check` reports every problem in one pass (with a \"did you mean\" for a misspelt key) and warns about a",
        "worker without `verify` commands and about a `concurrency` above the number of workers.",
        "",
    ]
    for title, model in _SECTIONS:
        out += [f"## {title}", "", f"{model.__doc__}", "", "| Field | Type | Default | Meaning |", "| --- | --- | --- | --- |"]
        for name, field in model.model_fields.items():
            out.append(f"| `{name}` | {_type_text(field.annotation)} | {_default_text(field)} | {field.description} |")
        out.append("")
    out += ["## Stop conditions every worker gets", "", "A worker's `stop_conditions` add to these:", ""]
    out += [f"- {condition}" for condition in DEFAULT_STOP_CONDITIONS]
    out += [
        "",
        "## Policy overlays",
        "",
        "An organization's rules live in overlay files: every `*.toml` in `$ORCH_POLICY_DIR` (default",
        "`$XDG_CONFIG_HOME/orch/policies/`) holds `applies_to = \"<path prefix>\"` plus any `[policy]` field above at top level.",
        "Overlays whose prefix contains the checkout apply outermost first (organization, then repository), then the plan's",
        "`[policy]` table, then `[defaults] kind`. `orch plan check` shows each effective value and the layer it came from.",
        "",
    ]
    return "\n".join(out)


def _type_text(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _type_text(args[0])
    if origin in (UnionType, Union) and type(None) in args:
        return _type_text(next(arg for arg in args if arg is not type(None)))
    if origin is Literal:
        return " or ".join(f'`"{arg}"`' for arg in args)
    if origin is dict:
        return "table of tables"
    if origin is tuple:
        item = args[0]
        return "list of tables" if isinstance(item, type) and issubclass(item, BaseModel) else f"list of {_type_text(item)}s"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    return {str: "string", int: "integer", bool: "boolean"}[annotation]


def _default_text(field: Any) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        return "none"
    default = field.default
    if default is None:
        return "unset"
    if isinstance(default, BaseModel):
        return "see below"
    if isinstance(default, tuple):
        return "`[]`" if not default else f"`{list(default)}`"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, str):
        return f'`"{default}"`'
    return f"`{default}`"
