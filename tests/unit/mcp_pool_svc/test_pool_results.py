from __future__ import annotations

import base64
import json

import mcp_types
import pytest
from toolscout.client import ContentBlock

from mcp_pool_svc.errors import ResultTooLargeError
from mcp_pool_svc.results import _from_dump, apply_size_cap, content_from_mcp, payload_size


def test_every_content_block_type_is_converted_with_its_payload() -> None:
    png = b"\x89PNG fake"
    blocks = [
        mcp_types.TextContent(type="text", text="hi", annotations=mcp_types.Annotations(priority=0.5)),
        mcp_types.ImageContent(type="image", data=base64.b64encode(png).decode(), mime_type="image/png"),
        mcp_types.AudioContent(type="audio", data=base64.b64encode(b"RIFF").decode(), mime_type="audio/wav"),
        mcp_types.ResourceLink(
            type="resource_link", uri="file:///a.txt", name="a.txt", mime_type="text/plain"
        ),
        mcp_types.EmbeddedResource(
            type="resource",
            resource=mcp_types.BlobResourceContents(uri="mem://b", mime_type="application/zip", blob="AAEC"),
        ),
    ]
    items = [content_from_mcp(b) for b in blocks]
    assert [i.type for i in items] == ["text", "image", "audio", "resource_link", "resource"]
    assert items[0].text == "hi"
    assert json.loads(items[0].raw_json)["annotations"] == {"priority": 0.5}
    assert items[1].data == png
    assert items[1].mime_type == "image/png"
    assert items[2].data == b"RIFF"
    assert (items[3].uri, items[3].name) == ("file:///a.txt", "a.txt")
    assert items[4].data == b"\x00\x01\x02"
    assert items[4].uri == "mem://b"


def test_results_within_the_cap_are_returned_unchanged() -> None:
    content = (ContentBlock("text", text="small"),)
    assert apply_size_cap(content, '{"a":1}', max_bytes=1024, mode="reject", what="s/t") == (
        content,
        '{"a":1}',
        False,
    )


def test_oversized_results_are_rejected_in_reject_mode() -> None:
    with pytest.raises(ResultTooLargeError, match="2000 bytes"):
        apply_size_cap(
            (ContentBlock("text", text="x" * 2000),), "", max_bytes=1024, mode="reject", what="s/t"
        )


def test_oversized_results_are_truncated_with_a_visible_marker() -> None:
    content = (
        ContentBlock("text", text="a" * 500),
        ContentBlock("image", data=b"\x00" * 5000),
        ContentBlock("text", text="tail"),
    )
    kept, structured, truncated = apply_size_cap(
        content, '{"big":"' + "y" * 3000 + '"}', max_bytes=1024, mode="truncate", what="s/t"
    )
    assert truncated
    assert structured == ""
    assert sum(payload_size(i) for i in kept) <= 1024
    assert kept[0].text.startswith("a" * 500)
    assert "[toolscout: result truncated" in kept[-1].text
    assert "2 content block(s) omitted" in kept[-1].text
    assert "structured content omitted" in kept[-1].text


def test_a_single_huge_text_block_is_cut_and_marked() -> None:
    kept, _, truncated = apply_size_cap(
        (ContentBlock("text", text="é" * 5000),), "", max_bytes=2048, mode="truncate", what="s/t"
    )
    assert truncated
    assert len(kept) == 1
    assert kept[0].text.endswith("]")
    assert len(kept[0].text.encode()) <= 2048


@pytest.mark.parametrize(
    "block",
    [
        {"type": "text", "text": "plain"},
        {"type": "text", "text": ""},
        {"type": "text", "text": 'ünïcode \u2028 "quoted"'},
        {"type": "text", "text": "with annotations", "annotations": {"audience": ["user"], "priority": 0.5}},
        {"type": "text", "text": "with meta", "_meta": {"k": "v"}},
        {"type": "text", "text": "extra is dropped", "zz": 1},
    ],
)
def test_a_text_block_converts_as_its_dump_does(block: dict[str, object]) -> None:
    model = mcp_types.TextContent.model_validate(block)
    assert content_from_mcp(model) == _from_dump(model)
