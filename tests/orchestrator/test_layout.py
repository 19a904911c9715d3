"""The Layout Contract: names, paths, Conventional Branches (with git's own verdict), task labels and agent names."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.layout import (
    EXTRA_BRANCH_TYPES,
    RepoLayout,
    WorktreeLayout,
    agent_name_problem,
    branch_folder,
    conventional_branch_problem,
    git_branch_problem,
    path_name_problem,
    repo_layout,
    task_label_problem,
    worktree_folder_problem,
    worktree_layout,
)

TYPES = "build, chore, ci, docs, feat, fix, perf, refactor, revert, style, test"


def test_repo_layout_follows_the_contract() -> None:
    assert repo_layout(Path("/home/me/src"), "Feverup", "api") == RepoLayout(
        organization="Feverup",
        repo="api",
        session="Feverup",
        workspace="api",
        first_tab="api",
        checkout=Path("/home/me/src/Feverup/api"),
        worktrees_dir=Path("/home/me/src/Feverup/api.worktrees"),
    )


def test_explicit_checkout_keeps_worktrees_beside_it() -> None:
    layout = repo_layout(Path("/home/me/src"), "acme", "widgets", Path("/work/widgets-main"))
    assert (layout.checkout, layout.worktrees_dir) == (Path("/work/widgets-main"), Path("/work/widgets-main.worktrees"))


def test_worktree_layout_derives_label_and_path_once() -> None:
    repo = repo_layout(Path("/src"), "acme", "widgets")
    assert worktree_layout(repo, "feat/api-pagination") == WorktreeLayout(
        branch="feat/api-pagination",
        branch_folder="feat-api-pagination",
        label="widgets-feat-api-pagination",
        path=Path("/src/acme/widgets.worktrees/widgets-feat-api-pagination"),
    )


@pytest.mark.parametrize(
    ("branch", "folder"),
    [("feat/x", "feat-x"), ("Feat/X", "feat-x"), ("a/b/c", "a-b-c"), ("fix/ü-case", "fix-ü-case")],
)
def test_branch_folder_lowercases_and_replaces_slashes(branch: str, folder: str) -> None:
    assert branch_folder(branch) == folder


# (branch, Conventional Branch verdict under the default policy, does git check-ref-format --branch accept it?)
BRANCHES = [
    ("feat/add-login", None, True),
    ("fix/issue-42", None, True),
    ("test/x", None, True),
    ("Feat/x", f'"Feat/x" is not a Conventional Branch: type "Feat" is not one of {TYPES}', True),
    ("feat/Add-Login", '"feat/Add-Login" is not a Conventional Branch: description "Add-Login" is not lowercase kebab-case', True),
    ("feat//x", '"feat//x" is not a Conventional Branch: description "/x" is not lowercase kebab-case', False),
    ("feat/a/b", '"feat/a/b" is not a Conventional Branch: description "a/b" is not lowercase kebab-case', True),
    ("feat/a..b", '"feat/a..b" is not a Conventional Branch: description "a..b" is not lowercase kebab-case', False),
    ("feat/x@{1}", '"feat/x@{1}" is not a Conventional Branch: description "x@{1}" is not lowercase kebab-case', False),
    ("feat/x.lock", '"feat/x.lock" is not a Conventional Branch: description "x.lock" is not lowercase kebab-case', False),
    ("feat/x/", '"feat/x/" is not a Conventional Branch: description "x/" is not lowercase kebab-case', False),
    ("feat/", '"feat/" is not a Conventional Branch: the description after "feat/" is empty', False),
    ("feat/add login", '"feat/add login" is not a Conventional Branch: description "add login" is not lowercase kebab-case', False),
    ("feat/ünïcode", '"feat/ünïcode" is not a Conventional Branch: description "ünïcode" is not lowercase kebab-case', True),
    ("feat/-x", '"feat/-x" is not a Conventional Branch: description "-x" is not lowercase kebab-case', True),
    ("feat/x--y", '"feat/x--y" is not a Conventional Branch: description "x--y" is not lowercase kebab-case', True),
    ("feat/x_y", '"feat/x_y" is not a Conventional Branch: description "x_y" is not lowercase kebab-case', True),
    ("main", '"main" is not a Conventional Branch: expected <type>/<description>', True),
    ("", '"" is not a Conventional Branch: expected <type>/<description>', False),
    ("@{-1}", '"@{-1}" is not a Conventional Branch: expected <type>/<description>', None),
    ("feature/x", '"feature/x" is not a Conventional Branch: type "feature" is allowed only when policy enables it in extra_branch_types', True),
    ("wip/x", f'"wip/x" is not a Conventional Branch: type "wip" is not one of {TYPES}', True),
    ("feat/" + "a" * 300, None, True),
]


@pytest.mark.parametrize(("branch", "problem", "git_accepts"), BRANCHES, ids=[b[0][:40] or "<empty>" for b in BRANCHES])
def test_conventional_branch_and_git_verdicts(branch: str, problem: str | None, git_accepts: bool | None) -> None:
    assert conventional_branch_problem(branch) == problem
    if git_accepts is not None:
        assert (git_branch_problem(branch) is None) is git_accepts


def test_git_verdict_message_names_the_command() -> None:
    assert git_branch_problem("feat/x.lock") == '"feat/x.lock" is rejected by git check-ref-format --branch'


def test_at_brace_is_refused_before_git_could_expand_it() -> None:
    assert git_branch_problem("@{-1}") == '"@{-1}" is not a valid branch name: git does not allow "@{" in one'


@pytest.mark.parametrize("extra", EXTRA_BRANCH_TYPES)
def test_extra_types_only_when_enabled(extra: str) -> None:
    assert conventional_branch_problem(f"{extra}/x", extra_types=(extra,)) is None


def test_restricted_types_list_only_the_allowed_ones() -> None:
    assert conventional_branch_problem("docs/x", types=("feat", "fix"), extra_types=("hotfix",)) == (
        '"docs/x" is not a Conventional Branch: type "docs" is not one of feat, fix, hotfix'
    )


def test_policy_description_pattern_is_an_extra_requirement() -> None:
    pattern = r"fev-[0-9]+-[a-z0-9-]+"
    assert conventional_branch_problem("feat/fev-12-login", description_pattern=pattern) is None
    assert conventional_branch_problem("feat/login", description_pattern=pattern) == (
        '"feat/login" is not a Conventional Branch: description "login" does not match the policy\'s description_pattern "fev-[0-9]+-[a-z0-9-]+"'
    )


@pytest.mark.parametrize(
    ("label", "problem"),
    [
        ("api-docs", None),
        ("a", None),
        ("fix-42", None),
        ("42-fix", None),
        ("Api-Docs", '"Api-Docs" is not a lowercase hyphen-case task label (a-z, 0-9, single hyphens between words)'),
        ("api docs", '"api docs" is not a lowercase hyphen-case task label (a-z, 0-9, single hyphens between words)'),
        ("api_docs", '"api_docs" is not a lowercase hyphen-case task label (a-z, 0-9, single hyphens between words)'),
        ("api--docs", '"api--docs" is not a lowercase hyphen-case task label (a-z, 0-9, single hyphens between words)'),
        ("-api", '"-api" is not a lowercase hyphen-case task label (a-z, 0-9, single hyphens between words)'),
        ("api-", '"api-" is not a lowercase hyphen-case task label (a-z, 0-9, single hyphens between words)'),
        ("", '"" is not a lowercase hyphen-case task label (a-z, 0-9, single hyphens between words)'),
        ("dócs", '"dócs" is not a lowercase hyphen-case task label (a-z, 0-9, single hyphens between words)'),
    ],
)
def test_task_labels(label: str, problem: str | None) -> None:
    assert task_label_problem(label) == problem


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("reviewer", None),
        ("a" * 32, None),
        ("w_1-x", None),
        ("a" * 33, f'"{"a" * 33}" cannot be a herdr agent name: it is 33 characters, herdr allows at most 32'),
        ("42-fix", '"42-fix" cannot be a herdr agent name: it must start with a letter a-z'),
        ("-x", '"-x" cannot be a herdr agent name: it must start with a letter a-z'),
        ("éa", '"éa" cannot be a herdr agent name: it must start with a letter a-z'),
        ("", '"" cannot be a herdr agent name: it must start with a letter a-z'),
        ("a.b", '"a.b" cannot be a herdr agent name: only a-z, 0-9, _ and - are allowed'),
    ],
)
def test_agent_names(name: str, problem: str | None) -> None:
    assert agent_name_problem(name) == problem


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("Feverup", None),
        ("my.repo_2-x", None),
        (".", '"." is not a usable name'),
        ("..", '".." is not a usable name'),
        ("a/b", '"a/b" must be 1-64 characters from A-Z a-z 0-9 . _ -'),
        ("", '"" must be 1-64 characters from A-Z a-z 0-9 . _ -'),
        ("x" * 65, f'"{"x" * 65}" must be 1-64 characters from A-Z a-z 0-9 . _ -'),
    ],
)
def test_organization_and_repo_names(name: str, problem: str | None) -> None:
    assert path_name_problem(name) == problem


def test_a_very_long_branch_cannot_become_a_worktree_folder() -> None:
    repo = repo_layout(Path("/src"), "acme", "widgets")
    assert worktree_folder_problem(worktree_layout(repo, "feat/" + "a" * 242)) is None
    assert worktree_folder_problem(worktree_layout(repo, "feat/" + "a" * 243)) == (
        'gives a worktree folder name of 256 bytes ("widgets-feat-aaaaaaaaaaaaaaaaaaaaaaaaaaa…"); a folder name has at most 255'
    )
