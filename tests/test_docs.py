"""The docs keep up with the code: every error message template orch can print is explained in docs/troubleshooting.md."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("orchestrator", "packets", "registry")
GUIDE = ROOT / "docs" / "troubleshooting.md"

# The roots of every error a person or agent sees: the CLI's handler prints OrchError (and its subclasses),
# RegistryError and PacketError as `orch: <message>`; click's UsageError as `Error: <message>`.
ERROR_ROOTS = {"OrchError", "RegistryError", "PacketError", "UsageError", "BadParameter"}
# Internal carriers whose message argument ends up in an OrchError (argument index of the message):
# provision's `_Fail(step, message)` becomes the worker's failure reason, preflight's
# `_Stop(evidence, reason, hint)` the preflight failure (evidence is only the checklist line, not an error),
# herdr's `_protocol(call, detail)` a HerdrProtocolError, the packet reader's `fail(reason)` a PacketSyntaxError.
CARRIERS = {"_Fail": 1, "_Stop": 1, "_protocol": 1, "fail": 0, "PacketSyntaxError": 1}
# Helpers whose returned strings are error messages (joined into ConfigError, _Fail or a plan problem).
MESSAGE_FUNCTION = re.compile(r"(_problems?|_fetch_error|^_describe)$")


@dataclass(frozen=True)
class Template:
    """One message template: where it is raised and the literal text around its placeholders."""

    where: str
    source: str
    fragments: tuple[str, ...]

    @property
    def key(self) -> str:
        """The longest literal fragment (for messages about the template)."""
        return max(self.fragments, key=len)

    @property
    def pattern(self) -> re.Pattern[str]:
        """Every literal fragment, in order, on one line of the guide; placeholders (`<task>`) may stand between them."""
        return re.compile(".*?".join(re.escape(fragment) for fragment in self.fragments))


def _normalise(text: str) -> str:
    return " ".join(text.split())


def _fragments(node: ast.expr) -> tuple[str, ...] | None:
    """The literal parts of a string expression (constant, f-string, implicit concatenation); None if not a string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        parts = [node.value]
    elif isinstance(node, ast.JoinedStr):
        parts = [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    else:
        return None
    return tuple(p for p in (_normalise(part) for part in parts) if p)


def _branches(node: ast.expr, assigned: dict[str, list[ast.expr]]) -> list[ast.expr]:
    """The message expressions ``node`` may evaluate to: both arms of `a if c else b`, the operands of `x or "fallback"`,
    and the values a local variable was assigned in the same function (`reason = ...; raise X(f"{cmd}: {reason}")`)."""
    if isinstance(node, ast.IfExp):
        return [*_branches(node.body, assigned), *_branches(node.orelse, assigned)]
    if isinstance(node, ast.BoolOp):
        return [branch for value in node.values for branch in _branches(value, assigned)]
    if isinstance(node, ast.Name) and node.id in assigned:
        return [branch for value in assigned.pop(node.id) for branch in _branches(value, assigned)]
    if isinstance(node, ast.JoinedStr):
        # A placeholder that is a local string variable carries message text of its own.
        inner = [v.value for v in node.values if isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name)]
        return [node, *(branch for name in inner if name.id in assigned for branch in _branches(name, assigned))]
    return [node]


def _assignments(tree: ast.Module) -> dict[int, dict[str, list[ast.expr]]]:
    """For each line inside a function: the string-ish values each local name is assigned in that function."""
    scopes: dict[int, dict[str, list[ast.expr]]] = {}
    for func in ast.walk(tree):
        if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            names: dict[str, list[ast.expr]] = {}
            for node in ast.walk(func):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    names.setdefault(node.targets[0].id, []).append(node.value)
            for line in range(func.lineno, (func.end_lineno or func.lineno) + 1):
                scopes[line] = names  # inner functions come later in the walk and win for their own lines
    return scopes


def _error_classes(trees: dict[str, ast.Module]) -> set[str]:
    """Every class name that derives (by name, transitively) from one of the error roots."""
    names = set(ERROR_ROOTS)
    bases: dict[str, set[str]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {ast.unparse(b).split(".")[-1] for b in node.bases}
    changed = True
    while changed:
        changed = False
        for name, parents in bases.items():
            if name not in names and parents & names:
                names.add(name)
                changed = True
    return names


def _called(node: ast.Call) -> str:
    return ast.unparse(node.func).split(".")[-1]


def _messages_in(tree: ast.Module, errors: set[str]) -> Iterator[tuple[int, ast.expr]]:
    """(line, message expression) for every place this module builds a user-facing error message."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _called(node)
            if name in errors and node.args:
                yield node.lineno, node.args[0]
            elif name in CARRIERS and len(node.args) > CARRIERS[name]:
                yield node.lineno, node.args[CARRIERS[name]]
            elif name == "ValueError" and node.args:
                # Raised in pydantic validators (plan, policy, packets) they reach the person inside a ConfigError
                # or PacketError line; raised elsewhere they are orch bugs, which the guide lists too.
                yield node.lineno, node.args[0]
            elif name == "append" and ast.unparse(node.func).endswith("problems.append") and node.args:
                arg = node.args[0]
                for element in arg.elts if isinstance(arg, ast.Tuple) else [arg]:
                    yield node.lineno, element
            elif (name == "__init__" and isinstance(node.func, ast.Attribute) and ast.unparse(node.func.value) == "super()" and node.args) or (
                name == "echo" and node.args and (_fragments(node.args[0]) or ("",))[0].startswith("orch: ")
            ):
                yield node.lineno, node.args[0]
        elif isinstance(node, ast.FunctionDef) and MESSAGE_FUNCTION.search(node.name):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Return) and inner.value is not None:
                    values = inner.value.elts if isinstance(inner.value, ast.List) else [inner.value]
                    for value in values:
                        yield inner.lineno, value


def extract_templates() -> list[Template]:
    """Every error message template in orch's packages, in file and line order."""
    trees = {
        str(path.relative_to(ROOT)): ast.parse(path.read_text(), filename=str(path))
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }
    errors = _error_classes(trees)
    found: list[Template] = []
    for file, tree in trees.items():
        scopes = _assignments(tree)
        sites = [(line, branch) for line, expr in _messages_in(tree, errors) for branch in _branches(expr, dict(scopes.get(line, {})))]
        for line, expr in sorted(sites, key=lambda item: item[0]):
            fragments = _fragments(expr)
            # A variable or a call (e.g. `exc.message`, `"\n".join(problems)`) passes on a message built elsewhere,
            # where it is extracted itself; a template whose literal text has no letter (`f"{where}: {problem}"`)
            # only glues such messages together.
            if fragments is None or not any(re.search(r"[A-Za-z]", f) for f in fragments):
                continue
            found.append(Template(where=f"{file}:{line}", source=ast.unparse(expr), fragments=fragments))
    return found


TEMPLATES = extract_templates()


def test_the_extraction_finds_the_messages_we_know_of() -> None:
    # Guards the extractor itself: one message of each kind of site must be found.
    keys = {t.key for t in TEMPLATES}
    for expected in (
        "has no base SHA for",  # OrchError in briefing
        "HOME is not set to an absolute path; orch cannot tell where its state and checkouts live",  # ConfigError
        "refusing to start",  # provision _Fail (the longest fragment differs per site; one of them)
        "no unfinished run in the ledger",  # engine
        "this herdr lacks commands the run needs:",  # preflight _Stop
        "unexpected version line",  # herdr _protocol
        "malformed header: missing the closing \"]\"",  # EnvelopeError
        "is newer than this orch understands (",  # SchemaTooNew
        "in the ledger",  # RunNotFound via super().__init__
        "unexpected end of packet",  # packet reader fail()
        "--json and --markdown are exclusive",  # click.UsageError
        "is already the task label of workers[",  # plan problems.append
        "is not a Conventional Branch",  # layout *_problem helper
        "orch: interrupted",  # the CLI handler's own line
    ):
        assert any(expected in key or key in expected for key in keys), expected
    assert len(TEMPLATES) > 150


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.where)
def test_every_error_message_is_in_the_troubleshooting_guide(template: Template) -> None:
    lines = [_normalise(line) for line in GUIDE.read_text().splitlines()]
    assert any(template.pattern.search(line) for line in lines), (
        f"{template.where}: {template.source}\nis not in docs/troubleshooting.md: write it on one line, with <placeholders>"
    )


def test_docs_index_lists_every_doc() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    listed = set(re.findall(r"\]\(([^)#]+\.md)\)", index))
    present = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert present <= listed, f"docs/README.md does not list {sorted(present - listed)}"
    for link in listed:
        assert (ROOT / "docs" / link).resolve().exists(), f"docs/README.md links to missing {link}"


def _links(path: Path) -> Iterator[str]:
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
        if not re.match(r"[a-z]+:", target):
            yield target.split("#", 1)[0]


@pytest.mark.parametrize("doc", ["ARCHITECTURE.md", "troubleshooting.md", "README.md"])
def test_relative_links_resolve(doc: str) -> None:
    path = ROOT / "docs" / doc
    missing = [t for t in _links(path) if t and not (path.parent / t).exists()]
    assert missing == []


def test_architecture_names_only_modules_that_exist() -> None:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    named = set(re.findall(r"`((?:orchestrator|packets|registry|herdr_sim|tests)/[\w/]+\.py)`", text))
    assert named, "ARCHITECTURE.md names no module"
    assert sorted(m for m in named if not (ROOT / m).exists()) == []


def test_architecture_phase_table_names_every_command() -> None:
    from click import Context, Group

    from orchestrator.cli import cli

    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    ctx = Context(cli)
    loaded = {name: cli.get_command(ctx, name) for name in cli.list_commands(ctx)}
    groups = {f"{name} {sub}" for name, cmd in loaded.items() if isinstance(cmd, Group) for sub in cmd.commands}
    leaves = {name for name, cmd in loaded.items() if not isinstance(cmd, Group)} | groups
    assert sorted(c for c in leaves if f"`orch {c}" not in text) == []


def test_every_herdr_error_code_is_explained() -> None:
    from orchestrator.errors import HERDR_ERROR_BY_CODE

    guide = GUIDE.read_text()
    assert sorted(code for code in HERDR_ERROR_BY_CODE if f"`{code}`" not in guide) == []


def test_the_ledger_doc_shows_the_effect_table_of_the_code() -> None:
    from orchestrator.effects import effect_table

    assert effect_table() in (ROOT / "docs" / "ledger.md").read_text(), "regenerate the table in docs/ledger.md from orchestrator.effects.effect_table()"


# --- docs/simulator.md's DELTA inventory ------------------------------------------------------------------------------

SIMULATOR_DOC = ROOT / "docs" / "simulator.md"
SHARED = ROOT.parent / "shared"
DELTAS = {"0.8.2": SHARED / "herdr-0.8.2" / "DELTA.md", "0.9": SHARED / "herdr-0.9.1" / "DELTA.md", "0.9.5": SHARED / "herdr-0.9.5" / "DELTA.md"}


def _inventory() -> dict[str, tuple[list[str], list[str]]]:
    """docs/simulator.md "DELTA rows and their tests": row key (`0.8.2 #3`, `0.9 machines`) -> (simulator tests, orch tests)."""
    text = SIMULATOR_DOC.read_text()
    section = text.split("## DELTA rows and their tests", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[list[str], list[str]]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        assert cells[0].strip("`") not in rows, f"row {cells[0]} listed twice"
        rows[cells[0].strip("`")] = (re.findall(r"`([^`]+::[^`]+)`", cells[2]), re.findall(r"`([^`]+::[^`]+)`", cells[3]))
    return rows


def _delta_rows(release: str, path: Path) -> list[str]:
    """Every numbered row of every table in one DELTA file, and its multi-machine section when it has one."""
    text = path.read_text()
    keys = [f"{release} #{m[1]}" for m in re.finditer(r"^\| (\d+) \|", text, re.MULTILINE)]
    if re.search(r"^## Multi-machine", text, re.MULTILINE):
        keys.append(f"{release} machines")
    return keys


def test_every_delta_row_has_its_tests() -> None:
    """One simulator test and one orch test per DELTA row (issue 13), each naming a test that exists."""
    rows = _inventory()
    assert rows, "docs/simulator.md has no DELTA inventory"
    for key, (sim_tests, orch_tests) in rows.items():
        assert sim_tests and orch_tests, f"docs/simulator.md: DELTA row {key} needs a simulator test and an orch test"
        for ref in sim_tests + orch_tests:
            path, name = ref.split("::")
            source = ROOT / "tests" / path
            assert source.is_file() and re.search(rf"^def {re.escape(name)}\(", source.read_text(), re.MULTILINE), (
                f"docs/simulator.md: DELTA row {key} names {ref}, which does not exist")
    if not all(p.is_file() for p in DELTAS.values()):
        pytest.skip(f"shared DELTA files not found under {SHARED}")
    expected = [key for release, path in DELTAS.items() for key in _delta_rows(release, path)]
    assert ([k for k in expected if k not in rows], [k for k in rows if k not in expected]) == ([], [])


# --- the person's door, as the docs tell it (issue 23) --------------------------------------------------------------


def test_the_readme_names_the_run_folder_as_orch_makes_it() -> None:
    """README's `runs/<run>/` row: its rule and its example are what `orchestrator.locations.run_dir` makes."""
    from orchestrator.locations import run_dir

    readme = (ROOT / "README.md").read_text()
    (row,) = [line for line in readme.splitlines() if line.startswith("| `$ORCH_HOME/runs/<run>/`")]
    example = re.search(r"run `([^`]+)` is `runs/([^`/]+)/`", row)
    assert example is not None, row
    assert run_dir(Path("/h"), example.group(1)).name == example.group(2)
    assert "any other character but A-Z a-z 0-9 . _ -, written `_`" in row
    assert run_dir(Path("/h"), "w1:p1 x/y-1").name == "w1_p1_x_y-1"  # the rule as the row states it
    # Every doc names the folder the same way: `runs/<run>/`, never a spelling of its own.
    for doc in [ROOT / "README.md", ROOT / "SKILL.md", *sorted((ROOT / "docs").glob("*.md"))]:
        assert re.findall(r"runs/<(?!run>|run folder>)[^>]*>", doc.read_text()) == [], doc.name


def test_troubleshooting_says_what_to_do_when_a_worker_is_stuck() -> None:
    """docs/troubleshooting.md's "A worker is stuck": what orch does on its own, which command when, how to give it up;
    every state it names is a worker state, every command parses as printed, the stall reason is the code's."""
    from orchestrator.observe import STALL_LIMIT
    from registry import WorkerState

    text = GUIDE.read_text()
    section = text[text.index("## A worker is stuck\n") :]
    section = section[: section.index("\n## ", 1)]
    assert [p for p in ("What orch does on its own", "What you do, by what `orch status` shows for it:", "To give one worker up") if p not in section] == []
    assert f'"no change of state or output across {STALL_LIMIT} consecutive check-ins"' in section
    rows = [line.split(" | ")[0].lstrip("| ") for line in section.splitlines() if line.startswith("| `")]
    states = {s.value for s in WorkerState}
    assert rows and [r for r in rows if not set(re.findall(r"`([a-z_]+)`", r)) <= states] == [], rows
    commands = [c for c in re.findall(r"`(orch [^`]+)`", section) if len(c.split()) > 2]  # (`orch run` alone is prose)
    assert len(commands) >= 8
    for command in commands:
        _assert_parses(command.replace("TASK", "api").replace("RUN", "w1:p1-20261202T060000Z"))


def test_the_callback_walk_names_at_most_eight_files_each_there() -> None:
    """ARCHITECTURE's "Following one callback, file by file": a newcomer follows `orch inbox add` to the ledger in at most
    eight files (issue 25), and every file it names exists."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("### Following one callback, file by file\n", 1)[1].split("\n### ", 1)[0]
    steps = [line for line in section.splitlines() if re.match(r"\d+\. ", line)]
    named = list(dict.fromkeys(re.findall(r"`((?:orchestrator|packets|registry)/[\w/]+\.py)`", "\n".join(steps))))
    assert [int(line.split(".", 1)[0]) for line in steps] == list(range(1, len(steps) + 1))
    assert len(named) <= 8, named
    assert [path for path in named if not (ROOT / path).is_file()] == []


def _assert_parses(command: str) -> None:
    """``orch …`` as a doc prints it: its command exists and takes every option and argument given."""
    import shlex

    from orchestrator.cli import cli

    argv = shlex.split(command)[1:]
    ctx = cli.make_context("orch", argv[:1])
    name, sub, _ = cli.resolve_command(ctx, argv[:1])
    assert sub is not None and name is not None, command
    sub.make_context(name, argv[1:], parent=ctx)  # raises on an option or argument the command does not take


def test_the_readme_fleet_guide_plan_and_commands_are_what_orch_takes(tmp_path: Path) -> None:
    """README "Fleets across machines": its plan is valid with a worker on each host, every orch command in it parses."""
    from orchestrator.config import Settings
    from orchestrator.plan import load_plan

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Fleets across machines\n") :]
    section = section[: section.index("\n## ", 1)]
    plan = tmp_path / "plan.toml"
    plan.write_text(section[section.index("```toml\n") + 8 : section.index("```\n", section.index("```toml\n"))])
    resolved = load_plan(plan, Settings.from_env({"HOME": str(tmp_path)}))
    assert [(w.task, w.host) for w in resolved.plan.workers] == [("api-docs", None), ("build-speed", "buildbox")]
    commands = [c for c in re.findall(r"`(orch [^`]+)`", section) if len(c.split()) > 2]
    assert len(commands) >= 3
    for command in commands:
        _assert_parses(command)
