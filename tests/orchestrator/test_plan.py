"""Plan files: the model, claim overlap proofs, resolution into placed workers, and the generated reference."""

from __future__ import annotations

import os
from pathlib import Path

import jsonschema
import pytest

from orchestrator.config import Settings, read_toml
from orchestrator.errors import ConfigError
from orchestrator.plan import DEFAULT_STOP_CONDITIONS, Answer, Plan, load_plan, render_reference

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "plan.toml"

HEAD = """\
organization = "acme"
repo = "widgets"
base = "origin/main"
"""


def worker(task: str, branch: str, *extra: str) -> str:
    return "\n".join(["", "[[workers]]", f'task = "{task}"', 'objective = "o"', 'deliverable = "d"', f'branch = "{branch}"', *extra, ""])


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=Path("/home/me"), orch_home=tmp_path / "state", policy_dir=tmp_path / "policies", src_root=Path("/src"))


def problems(tmp_path: Path, settings: Settings, text: str) -> list[str]:
    (tmp_path / "plan.toml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_plan(tmp_path / "plan.toml", settings, display="plan.toml")
    return caught.value.message.splitlines()


# --- whole plans ---------------------------------------------------------------------------------------------------


def test_example_plan_resolves_to_two_worktrees_and_a_sibling(settings: Settings) -> None:
    resolved = load_plan(EXAMPLE, settings)
    assert [(w.task, w.name, w.kind, w.placement, w.sibling_of, w.worktree.label, str(w.worktree.path), w.mode) for w in resolved.workers] == [
        ("api-pagination", "api-pagination", "codex", "worktree", None, "widgets-feat-api-pagination", "/src/acme/widgets.worktrees/widgets-feat-api-pagination", "direct"),
        ("api-tests", "api-tests", "codex", "sibling", "api-pagination", "widgets-feat-api-pagination", "/src/acme/widgets.worktrees/widgets-feat-api-pagination", "direct"),
        ("pagination-docs", "pagination-docs", "claude", "worktree", None, "widgets-docs-pagination-guide", "/src/acme/widgets.worktrees/widgets-docs-pagination-guide", "direct"),
    ]
    assert resolved.workers[1].stop_conditions == (*DEFAULT_STOP_CONDITIONS, "The pagination API shape is still changing.")
    assert resolved.workers[0].worktree is not resolved.workers[1].worktree
    assert resolved.workers[0].worktree == resolved.workers[1].worktree


def test_explicit_path_and_tilde(tmp_path: Path, settings: Settings) -> None:
    (tmp_path / "plan.toml").write_text(HEAD + 'path = "~/code/widgets"\n' + worker("a", "feat/a"))
    resolved = load_plan(tmp_path / "plan.toml", settings)
    assert (resolved.repo.checkout, resolved.workers[0].worktree.path) == (
        Path("/home/me/code/widgets"),
        Path("/home/me/code/widgets.worktrees/widgets-feat-a"),
    )


def test_structural_problems_one_line_each(tmp_path: Path, settings: Settings) -> None:
    text = HEAD + 'colour = "red"\n[defaults]\nconcurrency = 0\nagent_start_timeout_s = 301\nmode = "fast"\n'
    text += worker("Api Docs", "feat/x", 'kind = "gpt"', 'claim = ["../x", "a/**b", "./a"]', "verify = [1]")
    text += worker("a" * 33, "feat/y", 'agent_args = ["-m\\n"]', "[[workers.answers]]", 'when = "(("', 'answer = "x"', "regex = true")
    text += "[integration]\nenabled = true\n"
    # Every problem in one pass and in file order, each with its line: the invalid label does not hide the worker's
    # kind, every bad claim pattern has its own line, and the kinds named are the ones policy allows.
    assert problems(tmp_path, settings, text) == [
        "plan.toml:4: colour: is not a known field",
        "plan.toml:6: defaults.concurrency: must be greater than or equal to 1, got 0",
        "plan.toml:7: defaults.agent_start_timeout_s: must be less than or equal to 300, got 301",
        'plan.toml:8: defaults.mode: must be "direct" or "plan-first", got "fast"',
        'plan.toml:11: workers[0] (Api Docs).task: "Api Docs" is not a lowercase hyphen-case task label (a-z, 0-9, single hyphens between words)',
        'plan.toml:15: workers[0] (Api Docs).kind: "gpt" is not an agent kind herdr knows; use one of claude, codex, opencode, pi (allowed_kinds, from default)',
        'plan.toml:16: workers[0] (Api Docs).claim[0]: "../x" has an empty, . or .. path segment',
        'plan.toml:16: workers[0] (Api Docs).claim[1]: "a/**b": ** must be a whole path segment',
        'plan.toml:16: workers[0] (Api Docs).claim[2]: "./a" has an empty, . or .. path segment',
        'plan.toml:17: workers[0] (Api Docs).verify[0]: must be text in quotes, like "text", got 1',
        f'plan.toml:20: workers[1] ({"a" * 33}).task: "{"a" * 33}" cannot be a herdr agent name: it is 33 characters, herdr allows at most 32',
        'plan.toml:24: workers[1] (aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa).agent_args: "-m\\n" contains a control character, which herdr rejects',
        'plan.toml:25: workers[1] (aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa).answers[0].when: "((" is not a valid regular expression: missing ), unterminated subpattern at position 1',
        "plan.toml:29: integration.branch: is required when enabled = true",
    ]


def test_missing_fields_and_no_workers(tmp_path: Path, settings: Settings) -> None:
    assert problems(tmp_path, settings, 'organization = "a/b"\nworkers = []\n') == [
        "plan.toml: repo: is required",
        "plan.toml: base: is required",
        'plan.toml:1: organization: "a/b" must be 1-64 characters from A-Z a-z 0-9 . _ -',
        "plan.toml:2: workers: must not be empty",
    ]


def test_policy_and_layout_problems_one_line_each(tmp_path: Path, settings: Settings) -> None:
    text = HEAD.replace("origin/main", "origin/feat/main-line")
    text += worker("api-docs", "Feat/x")
    text += worker("api-docs", "feature/x", 'kind = "gemini"')
    text += worker("one", "feat/main-line")
    text += worker("two", "fix/a", 'claim = ["src/**/*.py"]')
    text += worker("three", "fix/a", 'claim = ["docs/", "src/x/y.py"]', 'setup = ["make"]')
    text += worker("four", "fix/a", 'claim = ["docs/index.md"]')
    text += worker("five", "fix/b", 'claim = ["src/**/*.py"]')
    text += '[integration]\nenabled = true\nbranch = "fix/b"\n'
    assert problems(tmp_path, settings, text) == [
        'plan.toml:9: workers[0] (api-docs).branch: "Feat/x" is not a Conventional Branch: type "Feat" is not one of build, chore, ci, docs, feat, fix, perf, refactor, revert, style, test',
        'plan.toml:12: workers[1] (api-docs).task: "api-docs" is already the task label of workers[0]; task labels and agent names must be unique',
        'plan.toml:15: workers[1] (api-docs).branch: "feature/x" is not a Conventional Branch: type "feature" is allowed only when policy enables it in extra_branch_types',
        'plan.toml:16: workers[1] (api-docs).kind: "gemini" is not allowed by policy; use one of claude, codex, opencode, pi (allowed_kinds, from default)',
        'plan.toml:22: workers[2] (one).branch: "feat/main-line" is the base "origin/feat/main-line"; a worker never runs on the base or default branch',
        'plan.toml:36: workers[4] (three).claim: "src/x/y.py" may overlap "src/**/*.py" claimed by workers[3] (two) in the same checkout (fix/a); orch counts two globs as overlapping unless it can prove them disjoint',
        "plan.toml:37: workers[4] (three).setup: a sibling shares the checkout of workers[3] (two); put setup commands on that first worker",
        'plan.toml:44: workers[5] (four).claim: "docs/index.md" may overlap "docs/" claimed by workers[4] (three) in the same checkout (fix/a); orch counts two globs as overlapping unless it can prove them disjoint',
        'plan.toml:54: integration.branch: "fix/b" is the branch of workers[6] (five); integration needs a dedicated branch',
    ]


def test_overlay_for_the_checkout_changes_the_rules(tmp_path: Path, settings: Settings) -> None:
    settings.policy_dir.mkdir()
    (settings.policy_dir / "acme.toml").write_text('applies_to = "/src/acme"\ndefault_kind = "claude"\nallowed_kinds = ["claude"]\nextra_branch_types = ["hotfix"]\n')
    (tmp_path / "plan.toml").write_text(HEAD + worker("a", "hotfix/login") + worker("b", "fix/x", 'kind = "codex"'))
    with pytest.raises(ConfigError) as caught:
        load_plan(tmp_path / "plan.toml", settings, display="plan.toml")
    assert caught.value.message == 'plan.toml:16: workers[1] (b).kind: "codex" is not allowed by policy; use one of claude (allowed_kinds, from acme.toml)'
    # A kind herdr does not know names the kinds this policy allows too, never herdr's whole list (issue 23).
    assert problems(tmp_path, settings, HEAD + worker("a", "hotfix/login") + worker("b", "fix/x", 'kind = "gpt"')) == [
        'plan.toml:16: workers[1] (b).kind: "gpt" is not an agent kind herdr knows; use one of claude (allowed_kinds, from acme.toml)']
    (tmp_path / "plan.toml").write_text(HEAD + worker("a", "hotfix/login"))
    assert load_plan(tmp_path / "plan.toml", settings).workers[0].kind == "claude"


def test_plan_defaults_kind_is_the_last_layer(tmp_path: Path, settings: Settings) -> None:
    (tmp_path / "plan.toml").write_text(HEAD + '[defaults]\nkind = "pi"\n' + worker("a", "fix/a"))
    resolved = load_plan(tmp_path / "plan.toml", settings)
    assert (resolved.workers[0].kind, resolved.policy.sources["default_kind"]) == ("pi", "plan [defaults]")
    text = HEAD + '[defaults]\nkind = "gemini"\n[policy]\ndefault_kind = "pi"\n' + worker("a", "fix/a")
    assert problems(tmp_path, settings, text) == [
        "plan.toml:5: defaults.kind: policy.default_kind is also set; keep one of them",
        'plan.toml:5: defaults.kind: "gemini" is not allowed by policy; use one of claude, codex, opencode, pi (allowed_kinds, from default)',
    ]


def test_plan_policy_narrows_branch_types(tmp_path: Path, settings: Settings) -> None:
    text = HEAD + '[policy]\nbranch_types = ["feat"]\ndescription_pattern = "wid-[0-9]+-.+"\n' + worker("a", "fix/a") + worker("b", "feat/login")
    assert problems(tmp_path, settings, text) == [
        'plan.toml:12: workers[0] (a).branch: "fix/a" is not a Conventional Branch: type "fix" is not one of feat',
        'plan.toml:18: workers[1] (b).branch: "feat/login" is not a Conventional Branch: description "login" does not match the policy\'s description_pattern "wid-[0-9]+-.+"',
    ]


@pytest.mark.parametrize(
    ("answer", "question", "expected"),
    [
        (Answer(when="Page Size", answer="50"), "Which page size should I use?", True),
        (Answer(when="page size", answer="50"), "Which limit?", False),
        (Answer(when=r"page\s+size|limit", answer="50", regex=True), "Which LIMIT?", True),
        (Answer(when=r"^page", answer="50", regex=True), "Which page?", False),
    ],
)
def test_answers_match_questions(answer: Answer, question: str, expected: bool) -> None:
    assert answer.matches(question) is expected


# --- schema and reference ------------------------------------------------------------------------------------------


def test_schema_accepts_the_example_and_rejects_unknown_fields() -> None:
    schema = Plan.model_json_schema()
    data = read_toml(EXAMPLE, "plan.toml")
    jsonschema.validate(data, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**data, "colour": "red"}, schema)


def test_every_field_is_documented() -> None:
    from orchestrator.plan import _SECTIONS

    undocumented = [f"{model.__name__}.{name}" for _, model in _SECTIONS for name, field in model.model_fields.items() if not field.description]
    assert undocumented == []


def test_plan_reference_is_generated_from_the_model() -> None:
    path = ROOT / "docs" / "plan-reference.md"
    if os.environ.get("ORCH_UPDATE_GOLDEN") == "1":
        path.write_text(render_reference())
    assert path.read_text() == render_reference()


# --- one pass, limits, warnings, unreadable files ------------------------------------------------------------------


def test_schema_and_placement_problems_come_in_one_pass(tmp_path: Path, settings: Settings) -> None:
    # Before, the branch and overlap problems of the valid workers appeared only after the schema problems were fixed.
    text = HEAD + "[defaults]\nconcurrency = 10000\n"
    text += worker("one", "feat/a", 'claim = ["src/"]', 'verfy = ["pytest"]')
    text += worker("two", "Feat/b")
    text += worker("three", "feat/c", 'claim = ["src/"]')
    text += worker("four", "feat/c", 'claim = ["src/x.py"]')
    assert problems(tmp_path, settings, text) == [
        "plan.toml:5: defaults.concurrency: must be less than or equal to 32, got 10000",
        "plan.toml:13: workers[0] (one).verfy: is not a known field; did you mean `verify`?",
        'plan.toml:19: workers[1] (two).branch: "Feat/b" is not a Conventional Branch: type "Feat" is not one of build, chore, ci, docs, feat, fix, perf, refactor, revert, style, test',
        'plan.toml:33: workers[3] (four).claim: "src/x.py" may overlap "src/" claimed by workers[2] (three) in the same checkout (feat/c); orch counts two globs as overlapping unless it can prove them disjoint',
    ]


def test_did_you_mean_covers_every_table(tmp_path: Path, settings: Settings) -> None:
    text = HEAD.replace("repo =", "rpeo = \"x\"\nrepo =") + "[defualts]\n[integration]\nenabeld = true\n"
    text += worker("one", "feat/a", "[[workers.answers]]", 'wen = "x"', 'answer = "y"')
    assert problems(tmp_path, settings, text) == [
        "plan.toml:2: rpeo: is not a known field; did you mean `repo`?",
        "plan.toml:5: defualts: is not a known field; did you mean `defaults`?",
        "plan.toml:7: integration.enabeld: is not a known field; did you mean `enabled`?",
        "plan.toml:14: workers[0] (one).answers[0].when: is required",
        "plan.toml:14: workers[0] (one).answers[0].wen: is not a known field; did you mean `when`?",
    ]


def test_field_sizes_are_limited_and_never_echoed_whole(tmp_path: Path, settings: Settings) -> None:
    text = HEAD + worker("one", "feat/a").replace('objective = "o"', f'objective = "{"x" * 1_000_000}"')
    text += worker("two", "feat/b", f"scope = {['s'] * 101}".replace("'", '"'), f'verify = ["{"v" * 2001}"]')
    assert problems(tmp_path, settings, text) == [
        "plan.toml:7: workers[0] (one).objective: is 1000000 characters long; at most 100000 are allowed",
        "plan.toml:16: workers[1] (two).scope: has 101 items; at most 100 are allowed",
        "plan.toml:17: workers[1] (two).verify[0]: is 2001 characters long; at most 2000 are allowed",
    ]


def test_warnings_for_no_verify_and_idle_concurrency(tmp_path: Path, settings: Settings) -> None:
    (tmp_path / "plan.toml").write_text(HEAD + "[defaults]\nconcurrency = 3\n" + worker("one", "feat/a", 'verify = ["pytest"]') + worker("two", "feat/b"))
    resolved = load_plan(tmp_path / "plan.toml", settings, display="plan.toml")
    assert resolved.warnings == (
        "plan.toml: workers[1] (two).verify: no verification command; orch can check the worker's commits and claim, but re-runs no test before accepting",
        "plan.toml: defaults.concurrency: 3 is more than the 2 workers of this plan; at most 2 run at once",
    )


def test_a_bom_is_accepted_and_a_bad_byte_is_named_by_line(tmp_path: Path, settings: Settings) -> None:
    text = HEAD + worker("one", "feat/a", 'verify = ["pytest"]')
    (tmp_path / "bom.toml").write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert [w.task for w in load_plan(tmp_path / "bom.toml", settings).workers] == ["one"]
    (tmp_path / "latin1.toml").write_bytes(text.replace('"o"', '"caf\xe9"').encode("latin-1"))
    with pytest.raises(ConfigError) as caught:
        load_plan(tmp_path / "latin1.toml", settings, display="latin1.toml")
    assert caught.value.message == "latin1.toml:7:17: not UTF-8 (byte 0xe9); save the file as UTF-8"


def test_every_unreadable_plan_is_one_line_and_exit_1(tmp_path: Path, settings: Settings) -> None:
    from click.testing import CliRunner

    from orchestrator.cli import cli

    locked = tmp_path / "locked.toml"
    locked.write_text(HEAD)
    locked.chmod(0)
    expected = {
        str(tmp_path / "missing.toml"): "no such file",
        str(tmp_path): "is a directory, not a file",
        str(locked): "cannot read: permission denied",
    }
    if os.access(locked, os.R_OK):
        expected.pop(str(locked))  # root reads anything
    try:
        for path, reason in expected.items():
            done = CliRunner().invoke(cli, ["plan", "check", path])
            assert (done.exit_code, done.stdout, done.stderr) == (1, "", f"orch: {path}: {reason}\n")
    finally:
        locked.chmod(0o644)


def test_check_tables_fit_the_terminal(settings: Settings) -> None:
    from orchestrator.plan import render_check

    resolved = load_plan(EXAMPLE, settings, display="examples/plan.toml")
    wide = render_check(resolved)
    assert max(len(line) for line in wide.splitlines()) > 200  # one line per worker when nothing limits the width
    narrow = render_check(resolved, width=100)
    assert max(len(line) for line in narrow.splitlines()) <= 100
    assert narrow.split("\n\n")[-3:] == [
        "task api-pagination\n  agent      api-pagination\n  kind       codex\n  placement  worktree\n  branch     feat/api-pagination\n"
        "  tab label  widgets-feat-api-pagination\n  worktree   /src/acme/widgets.worktrees/widgets-feat-api-pagination\n"
        "  claim      src/widgets/api/**\n  checks     1\n  mode       direct\n  after      -",
        "task api-tests\n  agent      api-tests\n  kind       codex\n  placement  sibling of api-pagination\n  branch     feat/api-pagination\n"
        "  tab label  widgets-feat-api-pagination\n  worktree   /src/acme/widgets.worktrees/widgets-feat-api-pagination\n"
        "  claim      tests/api/test_pagination.py\n  checks     1\n  mode       direct\n  after      -",
        "task pagination-docs\n  agent      pagination-docs\n  kind       claude\n  placement  worktree\n  branch     docs/pagination-guide\n"
        "  tab label  widgets-docs-pagination-guide\n  worktree   /src/acme/widgets.worktrees/widgets-docs-pagination-guide\n"
        "  claim      docs/pagination.md, docs/index.md\n  checks     1\n  mode       direct\n  after      -\n",
    ]


def test_message_limit_comes_from_the_plan_defaults_else_the_policy(tmp_path: Path, settings: Settings) -> None:
    (tmp_path / "plan.toml").write_text(HEAD + worker("a", "fix/a"))
    assert load_plan(tmp_path / "plan.toml", settings).message_limit == 65536
    settings.policy_dir.mkdir()
    (settings.policy_dir / "acme.toml").write_text('applies_to = "/src/acme"\nmessage_limit_bytes = 16384\n')
    resolved = load_plan(tmp_path / "plan.toml", settings)
    assert (resolved.message_limit, resolved.policy.sources["message_limit_bytes"]) == (16384, "acme.toml")
    (tmp_path / "plan.toml").write_text(HEAD + "[defaults]\nmessage_limit_bytes = 8192\n" + worker("a", "fix/a"))
    assert load_plan(tmp_path / "plan.toml", settings).message_limit == 8192
    assert problems(tmp_path, settings, HEAD + "[defaults]\nmessage_limit_bytes = 100\n" + worker("a", "fix/a")) == [
        "plan.toml:5: defaults.message_limit_bytes: must be greater than or equal to 1024, got 100",
    ]


def test_each_problem_carries_its_location_so_its_file_line_does_not_depend_on_the_wording(tmp_path: Path, settings: Settings) -> None:
    """The line comes from the problem's key path, not from parsing its text: a label with `):` in it used to send the
    task problem to the worker's `[[workers]]` line, and a message of another shape simply got no line."""
    text = HEAD + worker("a):", "feat/a") + worker("b", "feat/b", 'after = ["nope"]')
    assert problems(tmp_path, settings, text) == [
        'plan.toml:6: workers[0] (a):).task: "a):" is not a lowercase hyphen-case task label (a-z, 0-9, single hyphens between words)',
        'plan.toml:16: workers[1] (b).after: "nope" is not a task of this plan',
    ]
    from orchestrator.plan import Problem, _with_lines

    assert _with_lines([Problem("plan.toml: the after list of b names nope", ("workers", 1, "after")), Problem("plan.toml: no place")],
                       tmp_path / "plan.toml", "plan.toml") == "plan.toml: no place\nplan.toml:16: the after list of b names nope"  # fmt: skip


def test_a_worker_on_another_host_may_wait_for_one_on_the_controller_and_the_other_way_round(tmp_path: Path, settings: Settings) -> None:
    # A dependant on another host starts from the integration commit provisioning sends to that host's checkout
    # (orchestrator.provision._send_base); one on the controller starts from it at home, where the remote work was fetched.
    host = '\n[hosts.buildbox]\nmachine = "buildbox"\nssh = "me@buildbox"\ncheckout = "/srv/acme/widgets"\n'
    text = HEAD + host + worker("a", "feat/a", 'claim = ["a/**"]') + worker(
        "b", "feat/b", 'claim = ["b/**"]', 'host = "buildbox"', 'setup = ["make deps"]', 'after = ["a"]'
    ) + worker("c", "feat/c", 'claim = ["c/**"]', 'after = ["b"]')
    (tmp_path / "plan.toml").write_text(text)

    plan = load_plan(tmp_path / "plan.toml", settings, display="plan.toml")

    assert [(w.task, w.host, w.after) for w in plan.workers] == [("a", "local", ()), ("b", "buildbox", ("a",)), ("c", "local", ("b",))]