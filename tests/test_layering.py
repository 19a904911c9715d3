"""The import rules of the architecture, checked by walking every module's imports."""

from __future__ import annotations

import ast
from collections.abc import Collection
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package -> top-level packages it must never import
FORBIDDEN = {
    "packets": {"orchestrator", "registry", "herdr_sim"},
    "registry": {"orchestrator", "packets", "herdr_sim"},
    "herdr_sim": {"orchestrator", "packets", "registry"},
}
# The one exception: the Message Contract's kinds are written once, in the shared vocabulary (`registry.kinds`, standard
# library only), and the packets import them from there; nothing else of the ledger.
ALLOWED: dict[str, set[str]] = {"packets": {"registry.kinds"}}


def _imports(path: Path, allowed: Collection[str] = ()) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names if alias.name not in allowed)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module not in allowed:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_what_the_architecture_allows(package: str) -> None:
    allowed = ALLOWED.get(package, set())
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imports(path, allowed) & FORBIDDEN[package])
        for path in sorted((ROOT / package).rglob("*.py"))
        if _imports(path, allowed) & FORBIDDEN[package]
    }
    assert offenders == {}


def test_the_shared_vocabulary_packets_may_import_is_standard_library_only() -> None:
    """`registry.kinds` is what `packets` may import of `registry`: it must stay a leaf (no orch package, no pydantic)."""
    assert _imports(ROOT / "registry" / "kinds.py") <= {"__future__", "enum", "typing"}


def test_every_module_opens_with_a_docstring() -> None:
    missing = [
        str(path.relative_to(ROOT))
        for package in ("orchestrator", "packets", "registry", "herdr_sim", "tests", "bench")
        for path in sorted((ROOT / package).rglob("*.py"))
        if ast.get_docstring(ast.parse(path.read_text())) is None
    ]
    assert missing == []


# --- house rules beyond package imports ---------------------------------------------------------------------------

ORCH_PACKAGES = ("orchestrator", "packets", "registry")
# Modules that may start processes, and why: git runs git, herdr runs herdr, children is how those two start theirs
# (a session of its own, outliving an interrupt), checks runs a plan's check commands, demo runs its own private
# simulated herdr and tmux (it is its own world, like herdr_sim), remote runs ssh to a plan's other hosts.
PROCESS_RUNNERS = {"orchestrator/git.py", "orchestrator/herdr.py", "orchestrator/children.py", "orchestrator/checks.py", "orchestrator/demo.py", "orchestrator/remote.py"}
PROCESS_MODULES = {"subprocess", "pexpect", "asyncio.subprocess"}
PROCESS_CALLS = {"os.system", "os.popen", "os.spawnl", "os.spawnlp", "os.spawnv", "os.spawnvp", "os.execv", "os.execvp", "os.execl", "os.execlp", "os.fork", "os.posix_spawn", "os.posix_spawnp", "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell"}  # fmt: skip
# tests that drive real processes may poll, but only in a loop bounded by a deadline; unit tests inject a clock.
POLLING_TEST_DIRS = ("tests/e2e/", "tests/herdr_sim/", "tests/real_agents/")  # real processes: they poll, with a deadline
# Sleeps that wait for something no command can be asked about, each with its reason (none left).
SLEEP_EXCEPTIONS: dict[str, int] = {}


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _modules(*packages: str) -> list[Path]:
    return [path for package in packages for path in sorted((ROOT / package).rglob("*.py"))]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` for a name or attribute chain, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _full_imports(path: Path) -> set[str]:
    """Every imported module and every `from m import x` as m and m.x, so submodules and names both match."""
    names: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _importers(modules: set[str], *packages: str) -> set[str]:
    return {_rel(path) for path in _modules(*packages) if any(n == m or n.startswith(f"{m}.") for n in _full_imports(path) for m in modules)}  # fmt: skip


def test_only_the_named_runners_start_processes() -> None:
    spawning = {
        _rel(path)
        for path in _modules(*ORCH_PACKAGES)
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Call) and _dotted(node.func) in PROCESS_CALLS
    }
    assert (_importers(PROCESS_MODULES, *ORCH_PACKAGES) | spawning) - PROCESS_RUNNERS == set()


def test_the_crash_seam_is_its_own_module_and_only_the_boundaries_that_leave_this_process_call_it() -> None:
    """The crash matrix's environment seam lives in orchestrator/crash_seam.py; the boundary runs herdr through it, and
    the two modules that reach another host without herdr (ssh in remote.py, git's ssh, fetch and push in git.py)."""
    reading = {_rel(path) for path in _modules(*ORCH_PACKAGES) if "ORCH_TEST_" in path.read_text()}
    assert reading == {"orchestrator/crash_seam.py"}
    assert _importers({"orchestrator.crash_seam"}, *ORCH_PACKAGES) == {"orchestrator/herdr.py", "orchestrator/remote.py", "orchestrator/git.py"}


def test_the_simulators_cli_keeps_a_module_per_herdr_noun() -> None:
    """herdr keeps a file per noun (src/cli/<noun>.rs): each noun's commands live in herdr_sim/commands/<noun>.py, and
    herdr_sim/cli.py only parses the global flags and dispatches."""
    from herdr_sim.cli import Cli

    nouns = ("workspace", "tab", "pane", "agent", "worktree", "session", "integration", "api", "fault")
    assert {noun: getattr(Cli, noun).__module__ for noun in nouns} == {noun: f"herdr_sim.commands.{noun}" for noun in nouns}
    assert [n.name for n in _tree(ROOT / "herdr_sim" / "cli.py").body if isinstance(n, ast.FunctionDef)] == ["split_global_flags", "main"]


def test_only_registry_touches_sqlite() -> None:
    assert {m for m in _importers({"sqlite3"}, *ORCH_PACKAGES, "herdr_sim") if not m.startswith("registry/")} == set()


def test_tenacity_only_in_the_herdr_boundary() -> None:
    # And the engine: a lost call's read-back (Engine.settle_lost), a read repeated with a pause, never the call.
    assert _importers({"tenacity"}, *ORCH_PACKAGES, "herdr_sim") == {"orchestrator/herdr.py", "orchestrator/engine.py"}


def test_only_the_demo_and_doctor_offline_import_the_simulator() -> None:
    # The demo's stage is the simulator; `orch doctor --offline`'s model is the real-agents lane's scripted model.
    assert _importers({"herdr_sim"}, *ORCH_PACKAGES) <= {"orchestrator/demo.py", "orchestrator/offline.py"}


def test_no_shell_anywhere() -> None:
    offenders = [
        f"{_rel(path)}:{node.lineno}"
        for path in _modules(*ORCH_PACKAGES, "herdr_sim", "tests")
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Call)
        and (
            _dotted(node.func) in {"os.system", "os.popen", "asyncio.create_subprocess_shell"}
            or any(kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False) for kw in node.keywords)
        )
    ]
    assert offenders == []


def _sleeps(tree: ast.AST) -> list[tuple[ast.Call, list[ast.AST]]]:
    """Each `time.sleep(...)`/`sleep(...)` call with its enclosing nodes, innermost last."""
    found: list[tuple[ast.Call, list[ast.AST]]] = []

    def visit(node: ast.AST, parents: list[ast.AST]) -> None:
        if isinstance(node, ast.Call) and _dotted(node.func) in {"time.sleep", "sleep"}:
            found.append((node, parents))
        for child in ast.iter_child_nodes(node):
            visit(child, [*parents, node])

    visit(tree, [])
    return found


def _bounded_by_deadline(parents: list[ast.AST]) -> bool:
    return any(
        isinstance(p, ast.While) and any(isinstance(n, ast.Name) and n.id == "deadline" for n in ast.walk(p)) for p in parents
    )


def test_tests_sleep_only_to_poll_with_a_deadline() -> None:
    unbounded: dict[str, int] = {}
    for path in _modules("tests"):
        rel = _rel(path)
        for call, parents in _sleeps(_tree(path)):
            if rel.startswith(POLLING_TEST_DIRS) and _bounded_by_deadline(parents):
                continue
            unbounded[f"{rel}"] = unbounded.get(rel, 0) + 1
            assert rel.startswith(POLLING_TEST_DIRS), f"{rel}:{call.lineno}: unit tests never sleep (inject a clock)"
    assert unbounded == SLEEP_EXCEPTIONS


def test_public_functions_and_classes_say_what_they_are() -> None:
    missing = [
        f"{_rel(path)}:{node.lineno} {node.name}"
        for path in _modules(*ORCH_PACKAGES)
        for node in _tree(path).body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_") and ast.get_docstring(node) is None
    ]
    assert missing == []


def test_one_callback_path_records_and_judges_every_inbound_message() -> None:
    # Issue 25: a second callback path (a pydantic copy beside a fast one) must not grow back. Inside orch's engine,
    # only orchestrator/intake.py records an inbound message or applies the Message Contract's acceptance rule.
    def uses(path: Path) -> list[str]:
        tree = ast.parse(path.read_text(), filename=str(path))
        found = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "record_inbound"}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in ("packets", "packets.validate"):
                found |= {alias.name for alias in node.names if alias.name in ("validate", "LedgerView", "oversize")}
        return sorted(found)

    offenders = {str(p.relative_to(ROOT)): uses(p) for p in sorted((ROOT / "orchestrator").rglob("*.py")) if uses(p) and p.name != "intake.py"}
    assert offenders == {}


# Where pydantic may be imported, and why (docs/ARCHITECTURE.md, "pydantic at the edges"). What orch reads from outside
# and what its commands print with `--json` are pydantic; the ledger (`registry/`) and `packets/` (the Message Contract,
# the delegation packet) are plain, and so is everything inside the engine: its records and effects' results are frozen
# dataclasses (registry/records.py checks them; orchestrator.effects.to_json/from_json stores an effect's result).
PYDANTIC_EDGES: dict[str, str] = {
    **dict.fromkeys(("orchestrator/plan.py", "orchestrator/policy.py", "orchestrator/config.py"), "plan TOML, policy overlays, settings"),
    "orchestrator/quirks.py": "the quirk table, a data file",
    **dict.fromkeys(("orchestrator/herdr_models.py", "orchestrator/herdr.py"), "herdr's JSON"),
    **dict.fromkeys(
        ("orchestrator/cancel.py", "orchestrator/demo.py", "orchestrator/dispatch.py", "orchestrator/doctor.py",
         "orchestrator/door.py", "orchestrator/inbox.py", "orchestrator/integrate.py", "orchestrator/observe.py", "orchestrator/preflight.py",
         "orchestrator/provision.py", "orchestrator/report.py", "orchestrator/retire.py", "orchestrator/run.py", "orchestrator/status.py",
         "orchestrator/verify.py"),
        "a command's --json result",
    ),
}  # fmt: skip


def test_pydantic_is_imported_only_at_the_edges() -> None:
    """A module that starts importing pydantic is an edge (outside input, --json output) named above, or a mistake."""
    importing = _importers({"pydantic"}, *ORCH_PACKAGES)
    assert sorted(importing - PYDANTIC_EDGES.keys()) == []
    assert sorted(PYDANTIC_EDGES.keys() - importing) == []  # an entry that no longer imports it goes from the list
    assert not any(path.startswith(("registry/", "packets/")) for path in importing)
