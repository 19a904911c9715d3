"""The scripted model's wire protocols: request shapes each agent sends, decoded; replies encoded as each agent parses."""

from __future__ import annotations

import json
from typing import Any

from herdr_sim.model import wire
from herdr_sim.model.conversation import (
    AssistantText,
    Conversation,
    Tool,
    ToolCall,
    ToolResult,
    UserText,
    from_anthropic,
    from_chat,
    from_responses,
)
from herdr_sim.model.wire import Call, Reply

REPLY = Reply(text="Running it.", calls=(Call("call_1", "bash", {"command": "ls"}),))


def events(stream: bytes) -> list[tuple[str | None, Any]]:
    """(event name, decoded data) per server-sent event."""
    out = []
    for block in stream.decode().split("\n\n"):
        if not block:
            continue
        name = None
        data = ""
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        out.append((name, data if data == "[DONE]" else json.loads(data)))
    return out


# --- requests, as the agents send them (shapes written from the protocols, trimmed to what matters) ---


def test_anthropic_request_with_a_tool_round_trip_decodes_in_order() -> None:
    body = {
        "model": "m", "stream": True, "max_tokens": 100,
        "system": [{"type": "text", "text": "You are Claude Code."}, {"type": "text", "text": "Be brief."}],
        "tools": [{"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"}, {"type": "text", "text": "do it"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "a.txt"}]}]},
        ],
    }  # fmt: skip

    assert from_anthropic(body) == Conversation(
        protocol="anthropic", model="m", system="You are Claude Code.\nBe brief.",
        items=(UserText("<system-reminder>x</system-reminder>"), UserText("do it"), AssistantText("ok"),
               ToolCall("toolu_1", "Bash", {"command": "ls"}), ToolResult("toolu_1", "a.txt")),
        tools=(Tool("Bash", {"type": "object", "properties": {"command": {"type": "string"}}}),), stream=True,
    )  # fmt: skip


def test_chat_request_with_a_tool_round_trip_decodes_in_order() -> None:
    body = {
        "model": "m", "stream": True,
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}],
        "messages": [
            {"role": "system", "content": "You are pi."},
            {"role": "user", "content": [{"type": "text", "text": "do it"}]},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
        ],
    }  # fmt: skip

    assert from_chat(body) == Conversation(
        protocol="chat", model="m", system="You are pi.",
        items=(UserText("do it"), ToolCall("call_1", "bash", {"command": "ls"}), ToolResult("call_1", "a.txt")),
        tools=(Tool("bash", {"type": "object"}),), stream=True,
    )  # fmt: skip


def test_responses_request_with_a_tool_round_trip_decodes_in_order() -> None:
    body = {
        "model": "m", "stream": True, "instructions": "You are Codex.",
        "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}, {"type": "web_search"}],
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "do it"}]},
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "Process exited with code 0\nOutput:\na.txt"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        ],
    }  # fmt: skip

    assert from_responses(body) == Conversation(
        protocol="responses", model="m", system="You are Codex.\n<permissions>",
        items=(UserText("do it"), ToolCall("call_1", "exec_command", {"cmd": "ls"}),
               ToolResult("call_1", "Process exited with code 0\nOutput:\na.txt"), AssistantText("done")),
        tools=(Tool("exec_command", {"type": "object"}),), stream=True,
    )  # fmt: skip


# --- replies ---


def test_anthropic_stream_is_the_messages_event_sequence(monkeypatch: Any) -> None:
    monkeypatch.setattr(wire, "CHUNK", 8)

    got = events(b"".join(wire.anthropic_stream(REPLY, "m", "msg_1")))

    start = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [], "stop_reason": None,
             "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 1}}
    assert got == [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Running "}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "it."}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("content_block_start", {"type": "content_block_start", "index": 1,
                                 "content_block": {"type": "tool_use", "id": "call_1", "name": "bash", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"comman'}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": 'd": "ls"'}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "}"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 7}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip


def test_chat_stream_is_chunks_then_usage_then_done(monkeypatch: Any) -> None:
    monkeypatch.setattr(wire, "CHUNK", 8)

    got = events(b"".join(wire.chat_stream(REPLY, "m", "c1", 5)))

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, {"id": "c1", "object": "chat.completion.chunk", "created": 5, "model": "m",
                      "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    assert got == [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Running "}),
        chunk({"content": "it."}),
        chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "bash", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"comman'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'd": "ls"'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}),
        chunk({}, "tool_calls"),
        (None, {"id": "c1", "object": "chat.completion.chunk", "created": 5, "model": "m", "choices": [],
                "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107}}),
        (None, "[DONE]"),
    ]  # fmt: skip


def test_responses_stream_names_every_item_event_and_completes_with_the_whole_output(monkeypatch: Any) -> None:
    monkeypatch.setattr(wire, "CHUNK", 64)

    got = events(b"".join(wire.responses_stream(REPLY, "m", "resp_1", 5)))

    assert [name for name, _ in got] == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.output_item.done", "response.completed",
    ]  # fmt: skip
    assert [data["sequence_number"] for _, data in got] == list(range(13))
    assert all(data["type"] == name for name, data in got)
    completed = got[-1][1]["response"]
    assert (completed["id"], completed["status"], completed["usage"]["total_tokens"]) == ("resp_1", "completed", 107)
    assert completed["output"] == [
        {"type": "message", "id": "msg_resp_1", "status": "completed", "role": "assistant",
         "content": [{"type": "output_text", "text": "Running it.", "annotations": []}]},
        {"type": "function_call", "id": "fc_resp_1_0", "call_id": "call_1", "name": "bash", "arguments": '{"command": "ls"}',
         "status": "completed"},
    ]  # fmt: skip
    assert got[-2][1]["item"] == completed["output"][1]


def test_a_turn_end_without_text_still_sends_one_empty_text_block() -> None:
    # Anthropic and Responses clients expect some content in a reply; an empty end of turn is one empty text block.
    assert wire.anthropic_message(Reply(), "m", "msg_1")["content"] == [{"type": "text", "text": ""}]
    assert wire.chat_completion(Reply(), "m", "c1", 5)["choices"][0] == {
        "index": 0, "message": {"role": "assistant", "content": None}, "finish_reason": "stop"}
