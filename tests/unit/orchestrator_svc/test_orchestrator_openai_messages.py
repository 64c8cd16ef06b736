"""How provider-neutral messages become Chat Completions messages, images included."""

from __future__ import annotations

from orchestrator_svc.messages import Attachment, Message, ToolCall
from orchestrator_svc.providers.openai_provider import openai_messages

PNG = Attachment("image", data=b"\x89PNG\r\n", mime_type="image/png")


def _conversation() -> list[Message]:
    return [
        Message("user", "draw two"),
        Message(
            "assistant",
            tool_calls=[ToolCall("c1", "media__a", "{}"), ToolCall("c2", "media__b", "{}")],
        ),
        Message("tool", "first", tool_call_id="c1", name="media__a", attachments=[PNG]),
        Message("tool", "second", tool_call_id="c2", name="media__b", attachments=[PNG, PNG]),
        Message("assistant", "done"),
    ]


def test_vision_models_get_the_images_of_a_run_of_tool_results_in_one_user_message_after_it() -> None:
    out = openai_messages("sys", _conversation(), vision=True)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "tool", "tool", "user", "assistant"]
    images = out[5]["content"]
    assert [p["type"] for p in images] == ["text", "image_url", "text", "image_url", "image_url"]
    assert images[0]["text"] == "Images returned by media__a (c1):"
    assert images[1]["image_url"]["url"] == "data:image/png;base64,iVBORw0K"
    assert out[3]["content"].endswith("[image attachment (image/png) follows in the next message]")


def test_models_without_vision_get_a_visible_note_and_no_image() -> None:
    out = openai_messages("", _conversation())
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool", "assistant"]
    assert "not shown: this model takes text tool results only" in out[3]["content"]
    assert out[3]["content"].startswith("second\n")


def test_tool_results_without_images_add_no_message_even_for_vision_models() -> None:
    messages = [
        Message("assistant", tool_calls=[ToolCall("c1", "text__reverse", "{}")]),
        Message("tool", "cba", tool_call_id="c1", name="text__reverse"),
    ]
    out = openai_messages("", messages, vision=True)
    assert out[-1] == {"role": "tool", "tool_call_id": "c1", "content": "cba"}
