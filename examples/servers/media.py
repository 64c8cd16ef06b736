"""Example MCP server "media": tools that return images, audio and structured content.

Images are PNGs drawn in pure Python (no imaging library); audio is a short WAV tone.
Run: ``python examples/servers/media.py [stdio|sse|streamable-http] [--port N]``.
"""

from __future__ import annotations

import io
import math
import struct
import sys
import wave
import zlib
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Audio, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import EmbeddedResource, ResourceLink, TextContent, TextResourceContents, ToolAnnotations
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).parent))
from _run import run

server = MCPServer("media", instructions="Charts, swatches and tones.", version="1.0.0")
READ_ONLY = ToolAnnotations(read_only_hint=True)


def _png(width: int, height: int, pixel: Any) -> bytes:
    rows = b"".join(b"\x00" + b"".join(bytes(pixel(x, y)) for x in range(width)) for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _rgb(hex_color: str) -> tuple[int, int, int]:
    value = hex_color.lstrip("#")
    if len(value) != 6 or any(c not in "0123456789abcdefABCDEF" for c in value):
        raise ToolError(f"not a #rrggbb colour: {hex_color!r}")
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)


class Swatch(BaseModel):
    hex: str
    rgb: tuple[int, int, int]
    luminance: float
    text_color: str


@server.tool(title="Bar chart", annotations=READ_ONLY, structured_output=False)
def bar_chart(values: list[float], color: str = "#3366cc") -> list[Any]:
    """Draw a bar chart of the values as a PNG image (plus a one-line text summary)."""
    if not values or len(values) > 50:
        raise ToolError("give between 1 and 50 values")
    rgb, top = _rgb(color), max(*values, 1e-9)
    width, height, bar = len(values) * 12, 100, 10

    def pixel(x: int, y: int) -> tuple[int, int, int]:
        i = x // 12
        filled = x % 12 < bar and (height - y) <= values[i] / top * height
        return rgb if filled else (255, 255, 255)

    image = Image(data=_png(width, height, pixel), format="png")
    summary = TextContent(type="text", text=f"{len(values)} bars, max {max(values):g}, min {min(values):g}")
    return [summary, image.to_image_content()]


@server.tool(title="Colour swatch", annotations=READ_ONLY, structured_output=True)
def color_swatch(color: str) -> Swatch:
    """Describe a colour (RGB, luminance, readable text colour) as structured content."""
    r, g, b = _rgb(color)
    luminance = round((0.2126 * r + 0.7152 * g + 0.0722 * b) / 255, 3)
    return Swatch(
        hex=color.lower(),
        rgb=(r, g, b),
        luminance=luminance,
        text_color="#000000" if luminance > 0.5 else "#ffffff",
    )


@server.tool(title="Swatch image", annotations=READ_ONLY)
def swatch_image(color: str, size: int = 16) -> Image:
    """A square PNG filled with the colour."""
    rgb = _rgb(color)
    return Image(data=_png(size, size, lambda _x, _y: rgb), format="png")


@server.tool(title="Tone", annotations=READ_ONLY)
def tone(frequency_hz: float = 440.0, milliseconds: int = 200) -> Audio:
    """A sine tone as a WAV clip."""
    rate = 8000
    frames = b"".join(
        struct.pack("<h", int(12000 * math.sin(2 * math.pi * frequency_hz * i / rate)))
        for i in range(rate * milliseconds // 1000)
    )
    buf = io.BytesIO()
    with wave.open(buf, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(frames)
    return Audio(data=buf.getvalue(), format="wav")


@server.tool(title="Palette document", annotations=READ_ONLY, structured_output=False)
def palette(name: str = "default") -> list[Any]:
    """A palette as an embedded CSS resource plus a link to its canonical URI."""
    css = ":root { --primary: #3366cc; --accent: #ff9900; --text: #222222; }"
    uri = f"palette://{name}.css"
    return [
        EmbeddedResource(
            type="resource", resource=TextResourceContents(uri=uri, mime_type="text/css", text=css)
        ),
        ResourceLink(type="resource_link", uri=uri, name=f"{name}.css", mime_type="text/css"),
    ]


if __name__ == "__main__":
    run(server)
