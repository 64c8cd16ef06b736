"""Example MCP server "notes": notes and a task list kept in memory (or in ``NOTES_FILE``).

Run: ``python examples/servers/notes.py [stdio|sse|streamable-http] [--port N]``.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import date
from pathlib import Path
from typing import Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).parent))
from _run import run

server = MCPServer("notes", instructions="Personal notes and tasks.", version="1.0.0")


class Note(BaseModel):
    id: int
    title: str
    body: str
    tags: list[str] = Field(default_factory=list)


class Task(BaseModel):
    id: int
    title: str
    due: date | None = None
    priority: Literal["low", "normal", "high"] = "normal"
    done: bool = False


class Store(BaseModel):
    notes: list[Note] = Field(default_factory=list)
    tasks: list[Task] = Field(default_factory=list)


_FILE = os.environ.get("NOTES_FILE")
_store = Store.model_validate_json(Path(_FILE).read_text()) if _FILE and Path(_FILE).exists() else Store()


def _save() -> None:
    if _FILE:
        Path(_FILE).write_text(_store.model_dump_json(indent=2))


def _next_id(items: list[Note] | list[Task]) -> int:
    return max((i.id for i in items), default=0) + 1


@server.tool(title="Add note")
def add_note(title: str, body: str, tags: list[str] | None = None) -> Note:
    """Create a note with a title, a body and optional tags; returns the stored note."""
    note = Note(id=_next_id(_store.notes), title=title, body=body, tags=tags or [])
    _store.notes.append(note)
    _save()
    return note


@server.tool(title="Search notes", annotations=ToolAnnotations(read_only_hint=True))
def search_notes(query: str = "", tag: str | None = None) -> list[Note]:
    """Find notes whose title or body contains the query (case-insensitive), optionally by tag."""
    q = query.lower()
    return [
        n
        for n in _store.notes
        if (q in n.title.lower() or q in n.body.lower()) and (tag is None or tag in n.tags)
    ]


@server.tool(title="Delete note", annotations=ToolAnnotations(destructive_hint=True))
def delete_note(note_id: int) -> str:
    """Delete a note by id."""
    for note in _store.notes:
        if note.id == note_id:
            _store.notes.remove(note)
            _save()
            return f"deleted note {note_id}"
    raise ToolError(f"no note with id {note_id}; search_notes lists the ids")


@server.tool(title="Add task")
def add_task(
    title: str, due: date | None = None, priority: Literal["low", "normal", "high"] = "normal"
) -> Task:
    """Add a task to the to-do list, with an optional due date (YYYY-MM-DD) and priority."""
    task = Task(id=_next_id(_store.tasks), title=title, due=due, priority=priority)
    _store.tasks.append(task)
    _save()
    return task


@server.tool(title="Complete task")
def complete_task(task_id: int) -> Task:
    """Mark a task as done."""
    for task in _store.tasks:
        if task.id == task_id:
            task.done = True
            _save()
            return task
    raise ToolError(f"no task with id {task_id}; list_tasks lists the ids")


@server.tool(title="List tasks", annotations=ToolAnnotations(read_only_hint=True))
def list_tasks(status: Literal["open", "done", "all"] = "open") -> str:
    """List tasks by status, most urgent first, as a readable text table."""
    tasks = [t for t in _store.tasks if status == "all" or t.done == (status == "done")]
    order = {"high": 0, "normal": 1, "low": 2}
    tasks.sort(key=lambda t: (order[t.priority], t.due or date.max))
    if not tasks:
        return f"no {status} tasks"
    return "\n".join(json.dumps(t.model_dump(mode="json")) for t in tasks)


if __name__ == "__main__":
    run(server)
