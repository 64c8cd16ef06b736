"""Tool result text for the LLM: casual-mcp's formats, the size cap, attachments."""

from __future__ import annotations

from toolscout.client import CallToolResult

from orchestrator_svc.messages import Attachment, ToolCall
from orchestrator_svc.results import cap_text, format_result, outcome_text


def test_result_formats_follow_casual_mcp() -> None:
    call = ToolCall("1", "add", '{"a": 1, "b": "x"}')
    assert format_result("result", call, "3") == "3"
    assert format_result("function_result", call, "3") == "add → 3"
    assert format_result("function_args_result", call, "3") == "add(a=1, b='x') → 3"
    # Arguments already parsed (the tool runner's) are used as they are, not read again.
    assert format_result("function_args_result", call, "3", {"a": 2}) == "add(a=2) → 3"


def test_cap_marks_truncation_visibly() -> None:
    assert cap_text("abc", 3) == "abc"
    assert cap_text("abcdef", 3) == "abc\n[... truncated: 3 more characters not shown]"


def test_outcome_text_keeps_images_as_attachments_and_falls_back_to_structured_content() -> None:
    image = Attachment("image", data=b"x", mime_type="image/png")
    text, attachments = outcome_text(
        CallToolResult(
            (
                Attachment("text", text="a"),
                image,
                Attachment("text", text="b"),
            )
        )
    )
    assert (text, attachments) == ("a\nb", [image])
    assert outcome_text(CallToolResult((), structured_content_json='{"x": 1}')) == ('{"x": 1}', [])
