"""The live lane: orch's herdr boundary against a real herdr (ORCH_HERDR=$(command -v herdr)); skipped everywhere else.

Run it from a shell inside a pane of a herdr session named `acme`: `ORCH_HERDR=$(command -v herdr) python3 -m pytest -m
live_herdr tests/e2e` (with the other e2e scenarios marked live_herdr: tests/e2e/conftest.py). It reads herdr, and
creates (then closes) workspaces of its own; it never starts an agent or touches yours.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.herdr import HerdrCli, version_support
from orchestrator.preflight import integration_problems, missing_methods

# Read at import, before tests/conftest.py's isolation drops the real HOME, HERDR_* and ORCH_HERDR for each test.
_OUTER = dict(os.environ)
_BINARY = shutil.which(_OUTER.get("ORCH_HERDR", "")) if _OUTER.get("ORCH_HERDR") else None


# A simulator named by ORCH_HERDR goes through the same path (tests/e2e/test_live_lane.py rehearses the lane so).
_REASON = "no herdr named: set ORCH_HERDR=$(command -v herdr) on a machine that has one" if _BINARY is None else None
pytestmark = [pytest.mark.e2e, pytest.mark.live_herdr, pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]


@pytest.fixture
def live() -> HerdrCli:
    """The real herdr, seen with the caller's own environment (its pane, session and HOME)."""
    assert _BINARY is not None
    return HerdrCli(_BINARY, env=_OUTER)


def test_the_release_is_one_orch_supports(live: HerdrCli) -> None:
    status = live.status()
    assert version_support(status.client.version) != "older", status.client
    assert status.server.running, f"start herdr first (socket {status.server.socket})"
    assert status.server.compatible is True
    assert version_support(status.server.version or "") in ("tested", "untested")


def test_every_command_orch_uses_is_in_the_api_schema(live: HerdrCli) -> None:
    assert missing_methods(live.api_schema_methods()) == []


def test_integration_status_parses_and_names_every_kind_orch_starts(live: HerdrCli) -> None:
    entries = live.integration_status()
    # Any state is fine here (that is the person's machine); what matters is that every line parsed.
    assert {e.target for e in entries} >= {"codex", "claude", "opencode", "pi"}
    assert all(isinstance(text, str) for _kind, text in integration_problems(["codex", "claude", "opencode", "pi"], entries))


def test_the_read_only_forms_parse(live: HerdrCli) -> None:
    """Every read-only argv form orch sends (tests/orchestrator/test_herdr_argv_contract.py) is accepted."""
    pane = _OUTER.get("HERDR_PANE_ID")
    if not pane:
        pytest.skip("run the live lane from a herdr pane (HERDR_PANE_ID is unset)")
    assert live.pane_current().pane_id == pane
    live.version()
    live.help_text()
    live.session_list()
    live.workspace_list()
    live.tab_list()
    live.pane_list()
    live.pane_get(pane)
    live.pane_layout(pane)
    live.pane_read(pane, source="recent", lines=5)
    live.agent_list()


@pytest.fixture
def scratch(live: HerdrCli, tmp_path: Path) -> Iterator[str]:
    """One workspace of our own (unfocused), closed afterwards."""
    created = live.workspace_create(cwd=tmp_path, label="orch-live-lane")
    try:
        yield created.workspace.workspace_id
    finally:
        live.workspace_close(created.workspace.workspace_id)


def test_a_workspace_tab_and_pane_lifecycle(live: HerdrCli, scratch: str, tmp_path: Path) -> None:
    tabs = live.tab_list(workspace=scratch)
    assert len(tabs) == 1
    renamed = live.tab_rename(tabs[0].tab_id, "orch live")
    assert renamed.label == "orch live"
    root = next(p for p in live.pane_list(workspace=scratch))
    split = live.pane_split(root.pane_id, direction="down", cwd=tmp_path)
    live.pane_send_text(split.pane_id, "echo orch-live-lane")
    live.pane_send_keys(split.pane_id, "Enter")
    live.pane_close(split.pane_id)
    assert [p.pane_id for p in live.pane_list(workspace=scratch)] == [root.pane_id]
