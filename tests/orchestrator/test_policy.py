"""Policy overlays: found by path prefix, layered outermost first, validated on load, every value with its source."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.policy import Policy, PolicyLayer, PolicyOverlay, merge_policy, overlay_layers

HOME = Path("/home/me")


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


def test_no_overlay_gives_the_spec_defaults(tmp_path: Path) -> None:
    effective = merge_policy(overlay_layers(HOME / "src/acme/widgets", tmp_path / "missing", HOME))
    assert effective.policy == Policy(
        default_kind="codex",
        allowed_kinds=("claude", "codex", "opencode", "pi"),
        branch_types=("build", "chore", "ci", "docs", "feat", "fix", "perf", "refactor", "revert", "style", "test"),
        extra_branch_types=(),
        description_pattern=None,
    )
    assert set(effective.sources.values()) == {"default"}


def test_organization_then_repository_then_plan(tmp_path: Path) -> None:
    write(tmp_path, "feverup.toml", 'applies_to = "~/src/Feverup"\ndefault_kind = "claude"\nextra_branch_types = ["feature", "hotfix"]\n')
    write(tmp_path, "feverup-api.toml", 'applies_to = "~/src/Feverup/api"\ndefault_kind = "pi"\ndescription_pattern = "fev-[0-9]+-.+"\n')
    write(tmp_path, "other.toml", 'applies_to = "/elsewhere"\ndefault_kind = "opencode"\n')
    layers = overlay_layers(HOME / "src/Feverup/api", tmp_path, HOME)
    assert [layer.source for layer in layers] == ["feverup.toml", "feverup-api.toml"]
    layers.append(PolicyLayer(source="plan [policy]", overlay=PolicyOverlay(allowed_kinds=("pi", "claude"))))
    effective = merge_policy(layers)
    assert effective.policy == Policy(
        default_kind="pi",
        allowed_kinds=("pi", "claude"),
        extra_branch_types=("feature", "hotfix"),
        description_pattern="fev-[0-9]+-.+",
    )
    assert effective.sources == {
        "default_kind": "feverup-api.toml",
        "allowed_kinds": "plan [policy]",
        "branch_types": "default",
        "extra_branch_types": "feverup.toml",
        "description_pattern": "feverup-api.toml",
        "trust_run_worktrees": "default",
        "trust_repository": "default",
        "message_limit_bytes": "default",
    }


def test_prefix_matches_whole_path_components_only(tmp_path: Path) -> None:
    write(tmp_path, "fever.toml", 'applies_to = "/src/Fever"\ndefault_kind = "claude"\n')
    assert overlay_layers(Path("/src/Feverup/api"), tmp_path, HOME) == []
    assert [layer.source for layer in overlay_layers(Path("/src/Fever"), tmp_path, HOME)] == ["fever.toml"]


def test_every_bad_overlay_is_one_line_naming_its_file(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", 'applies_to = "src/x"\n')
    write(tmp_path, "b.toml", 'applies_to = "/x"\ndefault_kind = "gpt"\ncolour = "red"\n')
    write(tmp_path, "c.toml", "applies_to = \n")
    write(tmp_path, "d.toml", 'default_kind = "codex"\nbranch_types = ["feat", "wip"]\nextra_branch_types = ["feature", "feature"]\ndescription_pattern = "("\n')
    with pytest.raises(ConfigError) as caught:
        overlay_layers(HOME, tmp_path, HOME)
    d = tmp_path
    assert caught.value.message.splitlines() == [
        f'{d}/a.toml: applies_to: "src/x" must be an absolute path or start with ~/',
        f'{d}/b.toml: default_kind: "gpt" is not a herdr agent kind (pi, claude, codex, gemini, cursor, devin, agy, cline, omp, mastracode, opencode, copilot, kimi, kiro, droid, amp, grok, hermes, kilo, qodercli, maki)',
        f"{d}/b.toml: colour: is not a known field",
        f"{d}/c.toml:1:14: invalid TOML: Invalid value",
        f'{d}/d.toml: branch_types: "wip" is not a standard branch type (build, chore, ci, docs, feat, fix, perf, refactor, revert, style, test)',
        f"{d}/d.toml: extra_branch_types: lists a value twice",
        f'{d}/d.toml: description_pattern: "(" is not a valid regular expression: missing ), unterminated subpattern at position 0',
        f"{d}/d.toml: applies_to: is required",
    ]


def test_two_overlays_for_the_same_prefix_are_ambiguous(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", 'applies_to = "/src/acme"\n')
    write(tmp_path, "b.toml", 'applies_to = "/src/acme/"\n')
    with pytest.raises(ConfigError) as caught:
        overlay_layers(Path("/src/acme/widgets"), tmp_path, HOME)
    assert caught.value.message == f"{tmp_path}/a.toml and {tmp_path}/b.toml both apply to /src/acme; orch cannot tell which one overrides the other"


def test_default_kind_must_stay_allowed() -> None:
    layer = PolicyLayer(source="acme.toml", overlay=PolicyOverlay(allowed_kinds=("claude",)))
    with pytest.raises(ConfigError) as caught:
        merge_policy([layer])
    assert caught.value.message == 'policy: default_kind "codex" (from default) is not in allowed_kinds claude (from acme.toml)'


def test_empty_allowed_kinds_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        PolicyOverlay(allowed_kinds=())


def test_shipped_example_overlay_is_valid() -> None:
    examples = Path(__file__).resolve().parents[2] / "examples" / "policies"
    layers = overlay_layers(HOME / "src/acme/widgets", examples, HOME)
    assert merge_policy(layers).policy == Policy(
        default_kind="claude", allowed_kinds=("claude", "codex"), extra_branch_types=("hotfix", "release"), description_pattern="[a-z0-9-]+"
    )
