"""Notes backend: a small in-memory notes store (lost on restart).

The store is per process, so over HTTP every session sees the same notes. Sizes are
bounded so a client can't grow the process without limit. Unknown ids raise
``ToolError``, which the SDK turns into an ``isError`` result.

Besides tools it serves resources (``notes://index`` lists the notes, the template
``notes://note/{id}`` reads one), a prompt that embeds a note as a resource, a tool that
answers with a ``resource_link``, and completions of note ids.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import mcp_types as types
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.mcpserver.prompts.base import UserMessage
from pydantic import BaseModel

from . import runner

MAX_NOTES = 1000
MAX_TITLE_CHARS = 200
MAX_BODY_CHARS = 10_000
MAX_SEARCH_RESULTS = 50

server = MCPServer("notes", version="1.0.0", log_level="WARNING")


# Pydantic models rather than TypedDicts: on Python < 3.12 pydantic cannot build a schema
# for a ``typing.TypedDict`` nested in another, and the tool would lose its outputSchema.
class Note(BaseModel):
    """A stored note."""

    id: str
    title: str
    body: str
    created_at: str


class NoteList(BaseModel):
    """Notes matching a listing or a search, oldest first."""

    notes: list[Note]


class Deleted(BaseModel):
    """Acknowledgement of a deletion."""

    id: str
    deleted: bool


_notes: dict[str, Note] = {}
_ids = itertools.count(1)


def _get(note_id: str) -> Note:
    try:
        return _notes[note_id]
    except KeyError:
        raise ToolError(f"Unknown note id: {note_id!r}") from None


@server.tool()
def create_note(title: str, body: str) -> Note:
    """Store a note and return it with its new id."""
    if not title.strip():
        raise ToolError("Title must not be empty")
    if len(title) > MAX_TITLE_CHARS or len(body) > MAX_BODY_CHARS:
        raise ToolError(f"Title is limited to {MAX_TITLE_CHARS} and body to {MAX_BODY_CHARS} chars")
    if len(_notes) >= MAX_NOTES:
        raise ToolError(f"Store is full ({MAX_NOTES} notes); delete some first")
    note = Note(
        id=f"note-{next(_ids)}",
        title=title,
        body=body,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    _notes[note.id] = note
    return note


@server.tool()
def list_notes() -> NoteList:
    """All notes, oldest first."""
    return NoteList(notes=list(_notes.values()))


@server.tool()
def get_note(id: str) -> Note:
    """One note by id."""
    return _get(id)


@server.tool()
def delete_note(id: str) -> Deleted:
    """Delete a note by id."""
    _get(id)
    del _notes[id]
    return Deleted(id=id, deleted=True)


@server.tool()
def search_notes(query: str) -> NoteList:
    """Notes whose title or body contains ``query`` (case-insensitive), at most 50."""
    needle = query.casefold()
    hits = [n for n in _notes.values() if needle in f"{n.title}\n{n.body}".casefold()]
    return NoteList(notes=hits[:MAX_SEARCH_RESULTS])


@server.tool()
def link_note(id: str) -> types.ResourceLink:
    """A link to one note's resource, to read with resources/read."""
    note = _get(id)
    return types.ResourceLink(type="resource_link", uri=f"notes://note/{note.id}", name=note.title,
                              mime_type="text/plain")


@server.resource("notes://index", name="index", mime_type="application/json")
def index() -> str:
    """Every note's id and title, as JSON."""
    return NoteList(notes=list(_notes.values())).model_dump_json(include={"notes": {"__all__": {"id", "title"}}})


@server.resource("notes://note/{id}", name="note", mime_type="text/plain")
def note_body(id: str) -> str:
    """The body of one note."""
    note = _notes.get(id)
    if note is None:
        raise ResourceError(f"Unknown note id: {id!r}")
    return note.body


@server.prompt()
def summarize_note(id: str) -> list[UserMessage]:
    """Ask for a summary of one note, which comes embedded in the prompt."""
    note = _notes.get(id)
    body = note.body if note else ""
    resource = types.TextResourceContents(uri=f"notes://note/{id}", mime_type="text/plain", text=body)
    return [UserMessage("Summarize this note in one sentence."),
            UserMessage(types.EmbeddedResource(type="resource", resource=resource))]


@server.completion()
async def complete(ref: types.PromptReference | types.ResourceTemplateReference, argument: types.CompletionArgument,
                   context: types.CompletionContext | None) -> types.Completion | None:
    """Note ids starting with what was typed, for the prompt and the template alike."""
    if argument.name != "id":
        return None
    ids = [note_id for note_id in _notes if note_id.startswith(argument.value)]
    return types.Completion(values=ids[:100], total=len(ids), has_more=len(ids) > 100)


def main() -> None:
    """Command-line entry point."""
    runner.main(server, description="Notes MCP backend")


if __name__ == "__main__":
    main()
