"""``toolscout chat``: one message or an interactive conversation, streamed as it happens.

Discovered tools are carried across turns (each turn sends the previous turn's ``loaded_tools``
and the whole history), and the token savings are summed over the conversation.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

from toolscout.client import (
    ChatEvent,
    ChatFinished,
    ChatMessage,
    ChatResult,
    ChatTotals,
    ReasoningDelta,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolscoutClient,
    ToolsDiscovered,
    ToolsetRef,
    principal_metadata,
)

from toolscout_cli.connection import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CliError, Targets, toolset_arg
from toolscout_cli.output import Output, to_jsonable, truncate

__all__ = ["Conversation", "run_chat"]

_EXIT_WORDS = {"exit", "quit", "/exit", "/quit"}


@dataclass
class Conversation:
    """The history and discovered tools carried from turn to turn, and the running token totals."""

    model: str
    toolset: ToolsetRef = field(default_factory=ToolsetRef)
    system: str = ""
    # The request metadata naming the user the chat runs for (``--as``; empty: nobody named).
    metadata: tuple[tuple[str, str], ...] = ()
    history: list[ChatMessage] = field(default_factory=list)
    discovered: tuple[str, ...] = ()
    totals: ChatTotals = field(default_factory=ChatTotals)

    def record(self, user: ChatMessage, result: ChatResult) -> None:
        self.history.extend([user, *result.messages])
        self.discovered = result.loaded_tools
        self.totals.add(result.stats)

    @property
    def tokens_saved(self) -> int:
        # Negative when search_tools and its manifest cost more than the definitions they held back.
        return self.totals.definition_tokens_all - self.totals.definition_tokens_sent

    def savings_line(self) -> str:
        t = self.totals
        sent, everything = t.definition_tokens_sent, t.definition_tokens_all
        pct = 100.0 * self.tokens_saved / everything if everything else 0.0
        turns = f"{t.chats} turn{'s' if t.chats != 1 else ''}"
        return (
            f"[{turns} · tool definitions sent {sent} of {everything} tokens, "
            f"saved {self.tokens_saved} ({pct:.0f}%) · provider usage {t.input_tokens} in / "
            f"{t.output_tokens} out · {len(self.discovered)} discovered tools kept{self._results()}]"
        )

    def _results(self) -> str:
        t = self.totals
        if not t.result_tokens_returned:
            return ""
        return (
            f" · tool results {t.result_tokens_returned} tokens, "
            f"{t.result_tokens_delivered} reached the model (read_result included)"
        )


class _Renderer:
    """Shows stream events to a person: answer text on stdout, tool activity on stderr."""

    def __init__(self, out: Output, *, show_reasoning: bool) -> None:
        self.out = out
        self.show_reasoning = show_reasoning
        self.at_line_start = True

    def _break_line(self) -> None:
        if not self.at_line_start:
            self.out.line()
            self.at_line_start = True

    def show(self, event: ChatEvent) -> None:
        if isinstance(event, TextDelta):
            self.out.write(event.text)
            self.at_line_start = event.text.endswith("\n")
        elif isinstance(event, ReasoningDelta):
            if self.show_reasoning:
                self.out.note(f"  (thinking) {truncate(event.text, 200)}")
        elif isinstance(event, ToolCallStarted):
            self._break_line()
            where = f" on {event.server}" if event.server else ""
            self.out.note(f"  → {event.call.name}({truncate(event.call.arguments_json, 160)}){where}")
        elif isinstance(event, ToolCallFinished):
            mark = "✗" if event.is_error else "✓"
            preview = truncate(event.result_preview, 160)
            self.out.note(f"  {mark} {event.call.name} {event.duration_seconds:.2f}s: {preview}")
        elif isinstance(event, ToolsDiscovered):
            self.out.note(f"  + discovered {len(event.tools)} tools: {', '.join(event.tools)}")
        # AssistantMessage repeats the deltas; usage is summed from the final result.

    def finish(self) -> None:
        self._break_line()


def _turn(
    ts: ToolscoutClient, conv: Conversation, text: str, out: Output, *, show_reasoning: bool
) -> ChatResult:
    user = ChatMessage.user(text)
    stream = ts.orchestrator.stream_chat(
        [*conv.history, user],
        model=conv.model,
        toolset=conv.toolset,
        system=conv.system,
        discovered_tools=conv.discovered,
        metadata=conv.metadata,
    )
    renderer = _Renderer(out, show_reasoning=show_reasoning)
    result: ChatResult | None = None
    for event in stream:
        if isinstance(event, ChatFinished):
            result = event.result
        elif not out.json_mode:
            renderer.show(event)
    if result is None:
        raise CliError("the chat stream ended without a final result", EXIT_ERROR)
    conv.record(user, result)
    if out.json_mode:
        out.json({**to_jsonable(result), "conversation_tokens_saved": conv.tokens_saved})
        return result
    renderer.finish()
    if result.stop_reason != "completed":
        out.note(f"toolscout: stopped early ({result.stop_reason}): {result.error}")
    if result.tools_disabled_fallback:
        out.note("toolscout: the provider rejected tool calling; answered without tools")
    out.note(conv.savings_line())
    return result


def run_chat(args: argparse.Namespace, ts: ToolscoutClient, targets: Targets, out: Output) -> int:
    """One-shot with MESSAGE; otherwise a REPL reading lines (``exit`` or EOF ends it)."""
    model = args.model or _default_model(targets)
    try:
        metadata = principal_metadata(args.principal) if args.principal is not None else ()
    except ValueError as err:
        raise CliError(f"--as: {err}", EXIT_USAGE) from None
    conv = Conversation(
        model=model,
        toolset=toolset_arg(args),
        system=args.system or "",
        metadata=metadata,
    )
    if args.message:
        result = _turn(ts, conv, args.message, out, show_reasoning=args.show_reasoning)
        return EXIT_OK if result.stop_reason == "completed" else EXIT_ERROR
    interactive = sys.stdin.isatty()
    if interactive and not out.json_mode:
        out.note(
            f"Chatting with {model}{f' (toolset {conv.toolset.name})' if conv.toolset.name else ''}. 'exit' or Ctrl-D ends."
        )
    while True:
        try:
            text = input("you> " if interactive else "")
        except EOFError:
            break
        text = text.strip()
        if not text:
            continue
        if text.lower() in _EXIT_WORDS:
            break
        _turn(ts, conv, text, out, show_reasoning=args.show_reasoning)
    return EXIT_OK


def _default_model(targets: Targets) -> str:
    config = targets.config
    if config is not None and len(config.models) == 1:
        return next(iter(config.models))
    raise CliError("chat needs --model NAME (see `toolscout models`)", EXIT_USAGE)
