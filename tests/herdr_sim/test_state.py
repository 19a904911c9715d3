"""The simulator's state models: strict checks on load and save, round trips, and the on-disk store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from herdr_sim.paths import Paths
from herdr_sim.state import Fault, Pane, StateError, Store, Tab, World, Workspace, dump, validate


def sample() -> World:
    pane = Pane(pane_id="w1:p1", terminal_id="term_1", workspace_id="w1", tab_id="w1:t1", tmux="%1", shell_pid=42,
                cwd="/tmp", launch_deadline=12.5, hook_seqs={"codex": 3})
    tab = Tab(tab_id="w1:t1", number=1, layout={"pane": "w1:p1"}, focused_pane_id="w1:p1")
    ws = Workspace(workspace_id="w1", cwd="/tmp", tabs=[tab], worktree={"path": "/tmp/x", "branch": None})
    return World(workspaces=[ws], panes={"w1:p1": pane}, faults=[Fault(command="agent start", code="pane_busy")])


def data() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(dump(sample()))
    return loaded


def test_round_trip_is_equal() -> None:
    assert validate(World, json.loads(dump(sample()))) == sample()


def test_unknown_keys_are_ignored_and_defaults_filled() -> None:
    raw = data()
    raw["from_a_newer_sim"] = 1
    del raw["panes"]["w1:p1"]["aliases"]
    assert validate(World, raw) == sample()


def test_an_integral_number_is_accepted_for_a_float() -> None:
    raw = data()
    raw["panes"]["w1:p1"]["launch_typed_at"] = 3
    assert validate(World, raw).panes["w1:p1"].launch_typed_at == 3.0


@pytest.mark.parametrize(("path", "value", "message"), [
    (("panes", "w1:p1", "state"), "busy", "state.panes.w1:p1.state: 'busy' is not one of 'idle', 'working', 'blocked', 'unknown'"),
    (("panes", "w1:p1", "shell_pid"), True, "state.panes.w1:p1.shell_pid: expected int, got bool True"),
    (("panes", "w1:p1", "shell_pid"), "42", "state.panes.w1:p1.shell_pid: expected int, got str '42'"),
    (("panes", "w1:p1", "launch_deadline"), "soon", "state.panes.w1:p1.launch_deadline: expected float, got str 'soon'"),
    (("panes", "w1:p1", "aliases"), "w1:p9", "state.panes.w1:p1.aliases: expected a list, got str"),
    (("panes", "w1:p1", "hook_seqs"), {"codex": "3"}, "state.panes.w1:p1.hook_seqs.codex: expected int, got str '3'"),
    (("workspaces",), {"w1": {}}, "state.workspaces: expected a list, got dict"),
    (("faults",), [{"code": "x"}], "state.faults[0].command: field required"),
    (("settle_ms",), None, "state.settle_ms: expected int, got NoneType None"),
])
def test_a_bad_field_is_named(path: tuple[str, ...], value: Any, message: str) -> None:
    raw = data()
    target = raw
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(StateError) as caught:
        validate(World, raw)
    assert str(caught.value) == message


def test_a_missing_required_field_is_named() -> None:
    raw = data()
    del raw["workspaces"][0]["tabs"][0]["number"]
    with pytest.raises(StateError) as caught:
        validate(World, raw)
    assert str(caught.value) == "state.workspaces[0].tabs[0].number: field required"


def test_save_refuses_a_state_that_would_not_load(tmp_path: Path) -> None:
    store = Store(Paths(tmp_path))
    store.save(sample())
    broken = sample()
    broken.panes["w1:p1"].shell_pid = "42"  # type: ignore[assignment]
    with pytest.raises(StateError):
        store.save(broken)
    assert store.load() == sample()


def test_store_transaction_persists(tmp_path: Path) -> None:
    store = Store(Paths(tmp_path))
    assert store.load() == World()
    with store.transaction() as world:
        world.workspaces = sample().workspaces
    assert store.load().workspaces == sample().workspaces


def test_a_transaction_that_changes_nothing_leaves_the_file_alone(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    store = Store(paths)
    with store.transaction() as world:
        world.workspaces = sample().workspaces
    written = paths.state.stat()
    with store.transaction() as world:
        world.settle_ms = 3000  # the value it has: the same state
    assert paths.state.stat().st_ino == written.st_ino
    with store.transaction() as world:
        world.settle_ms = 100
    assert paths.state.stat().st_ino != written.st_ino and store.load().settle_ms == 100
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json", "state.lock"]


def test_a_transaction_still_refuses_a_state_that_would_not_load(tmp_path: Path) -> None:
    store = Store(Paths(tmp_path))
    store.save(sample())
    with pytest.raises(StateError), store.transaction() as world:
        world.panes["w1:p1"].shell_pid = "42"  # type: ignore[assignment]
    assert store.load() == sample()


def test_a_corrupt_file_is_one_clear_error(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    paths.state.write_text("{not json")
    with pytest.raises(StateError) as caught:
        Store(paths).load()
    assert str(caught.value).startswith(f"{paths.state}: not JSON: ")


def test_fault_dump_leaves_out_unset_fields() -> None:
    assert Fault(command="pane move", delay_ms=50).dump() == {"command": "pane move", "drop_root_pane": False, "delay_ms": 50, "times": 1}


def test_every_transaction_records_a_change_of_ui_focus_once(tmp_path: Path) -> None:
    store = Store(Paths(tmp_path))
    with store.transaction() as world:
        world.workspaces, world.panes = sample().workspaces, sample().panes
    with store.transaction() as world:
        world.active_workspace_id = "w1"
        world.workspaces[0].active_tab_id = "w1:t1"
    with store.transaction() as world:
        pass  # nothing moved: no new entry
    with store.transaction() as world:
        world.workspaces[0].tabs[0].focused_pane_id = "w1:p2"

    assert store.load().focus_history == ["w1:p1", "w1:p2"]


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _leaves(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _leaves(value, (*path, i))
    return found


@pytest.mark.parametrize("value", [None, True, 0, 3, 2.5, "idle", "x", [], ["a"], [{}], {}, {"k": 1}, {"k": "v"}, {1: 2}])
def test_the_compiled_checker_accepts_and_builds_exactly_what_the_reference_does(value: Any) -> None:
    from herdr_sim import state

    for path in _leaves(data()):
        raw = data()
        target = raw
        for key in path[:-1]:
            target = target[key]
        if path:
            target[path[-1]] = value
        else:
            raw = value
        try:
            want: Any = state._validate(World, raw, "state")
        except StateError as exc:
            want = exc
        try:
            got: Any = state._checker(World)(raw)
        except state._Invalid:
            assert isinstance(want, StateError), (path, value)
        else:
            assert not isinstance(want, StateError) and dump(got) == dump(want), (path, value)  # 3 == 3.0: compare JSON


def test_dump_is_what_asdict_gives() -> None:
    import dataclasses

    world = sample()
    world.panes["w1:p1"].agent_session = {"kind": "id", "value": "s"}
    world.workspaces[0].tabs[0].layout = {"dir": "right", "ratio": 0.5, "a": {"pane": "w1:p1"}, "b": {"pane": "w1:p2"}}
    assert dump(world) == json.dumps(dataclasses.asdict(world), separators=(",", ":"), ensure_ascii=False)
