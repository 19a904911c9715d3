"""Fixtures for simulator tests: a running SimServer with the stand-in agent, and the upstream schema validator."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from herdr_sim.testing import SimServer

HERE = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def herdr_075(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests pin herdr 0.7.5's contract line by line (CONTRACT.md); test_versions.py plays the other releases."""
    if request.node.get_closest_marker("any_version") is None:
        monkeypatch.setenv("HERDR_SIM_VERSION", "0.7.5")


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[SimServer]:
    """A fresh simulated herdr with a short settle delay and the stand-in agent on PATH."""
    with SimServer(tmp_path / "sim", {"HERDR_SIM_SETTLE_MS": "300", "HERDR_SIM_AGENT_MODULE": "standin_agent",
                                      "PYTHONPATH": str(HERE)}) as server:
        yield server


@pytest.fixture
def check_success(shared_dir: Path) -> Any:
    """Validate one success line against upstream `schemas.success_response`; returns the parsed JSON."""
    doc = json.loads((shared_dir / "herdr-0.7.5" / "upstream" / "herdr-api.schema.json").read_text())
    validator = jsonschema.Draft202012Validator({**doc, "$ref": "#/schemas/success_response"})

    def check(stdout: str) -> dict[str, Any]:
        assert stdout.endswith("\n") and stdout.count("\n") == 1, stdout
        value = json.loads(stdout)
        validator.validate(value)
        return value
    return check
