"""Settings come from the environment only; the shared TOML and validation edge speaks in one-line problems."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, StrictInt, ValidationError

from orchestrator.config import Settings, dotted, read_toml, validation_problems
from orchestrator.errors import ConfigError


def test_defaults_follow_xdg_and_home() -> None:
    assert Settings.from_env({"HOME": "/home/me"}) == Settings(
        home=Path("/home/me"),
        orch_home=Path("/home/me/.local/state/orch"),
        policy_dir=Path("/home/me/.config/orch/policies"),
        src_root=Path("/home/me/src"),
    )


def test_xdg_dirs_move_state_and_policies() -> None:
    settings = Settings.from_env({"HOME": "/home/me", "XDG_STATE_HOME": "/state", "XDG_CONFIG_HOME": "/cfg"})
    assert (settings.orch_home, settings.policy_dir) == (Path("/state/orch"), Path("/cfg/orch/policies"))


def test_relative_xdg_values_are_ignored_as_the_spec_says() -> None:
    settings = Settings.from_env({"HOME": "/home/me", "XDG_STATE_HOME": "state", "XDG_CONFIG_HOME": ""})
    assert (settings.orch_home, settings.policy_dir) == (Path("/home/me/.local/state/orch"), Path("/home/me/.config/orch/policies"))


def test_orch_variables_override_and_expand_tilde_against_the_given_home() -> None:
    env = {"HOME": "/home/me", "ORCH_HOME": "/var/orch", "ORCH_POLICY_DIR": "~/policies", "ORCH_SRC_ROOT": "~"}
    assert Settings.from_env(env) == Settings(
        home=Path("/home/me"), orch_home=Path("/var/orch"), policy_dir=Path("/home/me/policies"), src_root=Path("/home/me")
    )


def test_relative_override_is_one_line_error() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"HOME": "/home/me", "ORCH_SRC_ROOT": "src"})
    assert caught.value.message == 'ORCH_SRC_ROOT="src" is not an absolute path'


def test_missing_home_is_one_line_error() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({})
    assert caught.value.message == "HOME is not set to an absolute path; orch cannot tell where its state and checkouts live"


def test_process_environment_is_the_default(isolated_env: Path) -> None:
    assert Settings.from_env().orch_home == isolated_env / ".local" / "state" / "orch"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('a = 1\nb = [1,\nc = 2\n', "x.toml:3:1: invalid TOML: Invalid value"),
        ("[a]\nb = 1\n[a]\n", "x.toml:3:3: invalid TOML: a key or table is written twice"),
        ("a = 1\nb = ", "x.toml:2:5: invalid TOML: Invalid value"),
    ],
)
def test_toml_syntax_errors_carry_line_and_column(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "x.toml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        read_toml(tmp_path / "x.toml", "x.toml")
    assert caught.value.message == message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        read_toml(tmp_path / "nope.toml", "nope.toml")
    assert caught.value.message == "nope.toml: no such file"


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: StrictInt


class _Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[_Inner]


def test_validation_errors_become_one_line_each() -> None:
    with pytest.raises(ValidationError) as caught:
        _Outer.model_validate({"items": [{"n": "3"}, {}, {"n": 1, "x": 2}], "extra": True})
    assert validation_problems(caught.value, lambda loc: f"f.toml: {dotted(loc)}") == [
        'f.toml: items[0].n: must be a whole number, got "3"',
        "f.toml: items[1].n: is required",
        "f.toml: items[2].x: is not a known field",
        "f.toml: extra: is not a known field",
    ]
