"""Tool-result text for APIs whose tool messages carry text only (OpenAI Chat Completions, and
the Responses API for models without vision)."""

from __future__ import annotations

from orchestrator_svc.messages import Attachment, Message

__all__ = ["shown_as_image", "tool_result_text"]


def shown_as_image(attachment: Attachment, vision: bool) -> bool:
    """Whether the attachment reaches a ``vision`` model as an image."""
    return vision and attachment.type == "image" and bool(attachment.data)


def tool_result_text(
    message: Message, vision: bool, *, images_follow: str = "follows in the next message"
) -> str:
    """The result text plus one note per image/audio attachment: where it went (``images_follow``)
    or that the model cannot see it, rather than dropping it silently."""
    notes = [
        f"[image attachment ({a.mime_type or 'unknown type'}) {images_follow}]"
        if shown_as_image(a, vision)
        else f"[{a.type} attachment ({a.mime_type or 'unknown type'}, {len(a.data)} bytes) not shown: "
        "this model takes text tool results only]"
        for a in message.attachments
        if a.type in ("image", "audio")
    ]
    return "\n".join([message.content, *notes]) if notes else message.content
