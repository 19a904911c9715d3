"""What each command imports: `orch --version` loads click and nothing of orch's weight; only `orch demo` loads the simulator."""

from __future__ import annotations

import json
import subprocess
import sys

# Run in a fresh interpreter: this test process has imported everything already.
PROBE = """
import json, sys
sys.argv = ["orch", *json.loads(sys.argv[1])]
from orchestrator.cli import main
try:
    main()
except SystemExit:
    pass
ours = sorted(m for m in sys.modules if m.split(".")[0] in ("orchestrator", "packets", "registry", "herdr_sim"))
heavy = sorted(m for m in ("pydantic", "tenacity", "tabulate", "pexpect", "sqlite3", "subprocess") if m in sys.modules)
print(json.dumps({"ours": ours, "heavy": heavy}), file=sys.stderr)
"""


def _imports(*argv: str, env: dict[str, str] | None = None) -> dict[str, list[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True, text=True, timeout=60, env=env)
    loaded: dict[str, list[str]] = json.loads(done.stderr.strip().splitlines()[-1])
    return loaded


def test_version_imports_only_the_cli_and_its_errors() -> None:
    assert _imports("--version") == {"ours": ["orchestrator", "orchestrator.cli", "orchestrator.errors"], "heavy": []}


def test_help_loads_every_command_but_not_the_simulator() -> None:
    loaded = _imports("--help")
    assert [m for m in loaded["ours"] if m.startswith(("herdr_sim", "orchestrator.demo"))] == []
    assert "orchestrator.commands.demo" in loaded["ours"]


def test_inbox_add_loads_neither_herdr_nor_plans_nor_the_simulator(tmp_path: object) -> None:
    import os

    env = {**os.environ, "ORCH_HOME": str(tmp_path)}
    loaded = _imports("inbox", "add", "--run", "nope", "[herdr-orchestration run=nope task=a from=a kind=update reply-to=w1:p2]\nhi", env=env)
    unwanted = ("herdr_sim", "orchestrator.herdr", "orchestrator.plan", "orchestrator.policy", "orchestrator.demo", "orchestrator.evidence")
    assert [m for m in loaded["ours"] if m.startswith(unwanted)] == []
    assert "orchestrator.intake" in loaded["ours"]
    assert [m for m in loaded["heavy"] if m in ("tenacity", "tabulate", "pexpect")] == []
