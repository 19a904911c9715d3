"""The Layout Contract: herdr session/workspace/tab names, worktree paths, Conventional Branches, task labels, agent names.

Pure rules plus one git call (`git check-ref-format --branch`, through orchestrator.git); no herdr here.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Collection
from pathlib import Path

from orchestrator.git import run_git
from registry.records import build

STANDARD_BRANCH_TYPES: tuple[str, ...] = ("build", "chore", "ci", "docs", "feat", "fix", "perf", "refactor", "revert", "style", "test")
# The spec allows these only "when they match an established repository workflow", i.e. when a policy enables them.
EXTRA_BRANCH_TYPES: tuple[str, ...] = ("feature", "bugfix", "hotfix", "release", "ai", "copilot", "cursor", "claude", "codex")

# herdr 0.7.5 `agent start` (CONTRACT.md §8.5): the canonical built-in kinds; aliases are deliberately not accepted here.
HERDR_AGENT_KINDS: tuple[str, ...] = (
    "pi", "claude", "codex", "gemini", "cursor", "devin", "agy", "cline", "omp", "mastracode", "opencode",
    "copilot", "kimi", "kiro", "droid", "amp", "grok", "hermes", "kilo", "qodercli", "maki",
)  # fmt: skip

KEBAB = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
AGENT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")  # herdr's invalid_agent_name rule (CONTRACT.md §8.5)
AGENT_NAME_MAX = 32
NAME_MAX_BYTES = 255
# herdr session names (CONTRACT.md §2); a repo name is also a path component and a label prefix, so the same set.
PATH_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")


# Plain records (pydantic only at the edges): each is built in one function below, checked by `registry.records.build`;
# the plan's resolved workers carry them (orchestrator.plan.ResolvedWorker).


@dataclasses.dataclass(frozen=True, kw_only=True)
class RepoLayout:
    """Where a repository lives and what its herdr objects are called."""

    organization: str
    repo: str
    session: str
    workspace: str
    first_tab: str
    checkout: Path
    worktrees_dir: Path


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorktreeLayout:
    """One target branch's worktree: the label is derived once here and carried everywhere as this value."""

    branch: str
    branch_folder: str
    label: str
    path: Path


def repo_layout(src_root: Path, organization: str, repo: str, checkout: Path | None = None) -> RepoLayout:
    """The Layout Contract for one repo: session=organization, workspace=first tab=repo, checkout under src_root."""
    checkout = checkout if checkout is not None else src_root / organization / repo
    return build(
        RepoLayout,
        {
            "organization": organization,
            "repo": repo,
            "session": organization,
            "workspace": repo,
            "first_tab": repo,
            "checkout": checkout,
            # `<repo>.worktrees` beside the checkout; equal to `<src_root>/<org>/<repo>.worktrees` for the default checkout.
            "worktrees_dir": checkout.parent / f"{checkout.name}.worktrees",
        },
    )


def branch_folder(branch: str) -> str:
    """`<branch-folder>`: the branch lowercased, with `/` replaced by `-`."""
    return branch.lower().replace("/", "-")


def worktree_layout(repo: RepoLayout, branch: str) -> WorktreeLayout:
    """The one place a worktree tab label and path are computed: `<repo>-<branch-folder>` under `<repo>.worktrees/`."""
    folder = branch_folder(branch)
    label = f"{repo.repo}-{folder}"
    return build(WorktreeLayout, {"branch": branch, "branch_folder": folder, "label": label, "path": repo.worktrees_dir / label})


def worktree_folder_problem(layout: WorktreeLayout) -> str | None:
    """Why ``layout.label`` cannot be a folder name (most filesystems allow 255 bytes per path component), or None."""
    size = len(layout.label.encode())
    if size > NAME_MAX_BYTES:
        return f"gives a worktree folder name of {size} bytes ({quote(layout.label[:40] + '…')}); a folder name has at most {NAME_MAX_BYTES}"
    return None


def path_name_problem(value: str) -> str | None:
    """Why ``value`` cannot be an organization or repo name (a herdr session name and a path component), or None."""
    if value in (".", ".."):
        return f"{quote(value)} is not a usable name"
    if not PATH_NAME.fullmatch(value):
        return f"{quote(value)} must be 1-64 characters from A-Z a-z 0-9 . _ -"
    return None


def task_label_problem(label: str) -> str | None:
    """Why ``label`` is not a lowercase hyphen-case task label, or None."""
    if not KEBAB.fullmatch(label):
        return f"{quote(label)} is not a lowercase hyphen-case task label (a-z, 0-9, single hyphens between words)"
    return None


def agent_name_for(label: str) -> str:
    """The herdr agent name of a task: the task label itself, so callbacks, ledger and herdr all use one word."""
    return label


def agent_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a herdr agent name (`[a-z][a-z0-9_-]{0,31}`), or None."""
    if AGENT_NAME.fullmatch(name):
        return None
    if len(name) > AGENT_NAME_MAX:
        return f"{quote(name)} cannot be a herdr agent name: it is {len(name)} characters, herdr allows at most {AGENT_NAME_MAX}"
    if not name[:1].isascii() or not name[:1].islower() or not name[:1].isalpha():
        return f"{quote(name)} cannot be a herdr agent name: it must start with a letter a-z"
    return f"{quote(name)} cannot be a herdr agent name: only a-z, 0-9, _ and - are allowed"


def conventional_branch_problem(
    branch: str,
    *,
    types: Collection[str] = STANDARD_BRANCH_TYPES,
    extra_types: Collection[str] = (),
    description_pattern: str | None = None,
) -> str | None:
    """Why ``branch`` is not `<type>/<lowercase-kebab-description>` under the given types, or None."""
    head = f"{quote(branch)} is not a Conventional Branch"
    if "/" not in branch:
        return f"{head}: expected <type>/<description>"
    type_, description = branch.split("/", 1)
    if type_ not in types and type_ not in extra_types:
        if type_ in EXTRA_BRANCH_TYPES:
            return f"{head}: type {quote(type_)} is allowed only when policy enables it in extra_branch_types"
        return f"{head}: type {quote(type_)} is not one of {', '.join([*types, *extra_types])}"
    if not description:
        return f"{head}: the description after {quote(type_ + '/')} is empty"
    if not KEBAB.fullmatch(description):
        return f"{head}: description {quote(description)} is not lowercase kebab-case"
    if description_pattern is not None and not re.fullmatch(description_pattern, description):
        return f"{head}: description {quote(description)} does not match the policy's description_pattern {quote(description_pattern)}"
    return None


def git_branch_problem(branch: str) -> str | None:
    """Why git rejects ``branch`` (`git check-ref-format --branch`), or None."""
    if "@{" in branch:
        # `--branch` expands `@{-N}` to a previously checked-out branch instead of checking the text as a name.
        return f"{quote(branch)} is not a valid branch name: git does not allow \"@{{\" in one"
    result = run_git(["check-ref-format", "--branch", branch], check=False)
    if result.returncode != 0:
        return f"{quote(branch)} is rejected by git check-ref-format --branch"
    return None


def quote(value: str) -> str:
    """Quote a value for a message the way the plan file would (JSON-style double quotes, escapes visible)."""
    return json.dumps(value, ensure_ascii=False)
