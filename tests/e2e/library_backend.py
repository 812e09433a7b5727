"""A test backend (official SDK, stdio) with resources, templates and a prompt that change while it runs.

Resources `books://all`, `books://secret`, `notes://today`; templates `books://{id}` and `notes://{day}`;
a prompt `review(book, tone)` answering `Review <book>, <tone>.`. `drop()` takes `books://all` away and
redefines `review` without `tone`; `restore()` brings both back; each sends the list_changed
notifications for resources and prompts. Completion: a template's `id` completes to `1`, `2`.
"""

from __future__ import annotations

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.server.mcpserver.resources import FunctionResource

server = MCPServer("library", version="1.0.0", log_level="WARNING")


def all_books() -> str:
    return "Dune, Emma"


def review(book: str, tone: str) -> str:
    return f"Review {book}, {tone}."


def review_plainly(book: str) -> str:
    return f"Review {book}, plainly."


ALL_BOOKS = FunctionResource.from_function(all_books, uri="books://all", name="all_books", description="Every book.")
server.add_resource(ALL_BOOKS)
server.add_prompt(Prompt.from_function(review, name="review", description="Review a book."))


@server.resource("books://secret")
def secret() -> str:
    """A book the server leaves out."""
    return "The secret book"


@server.resource("notes://today")
def today() -> str:
    """Today's notes."""
    return "nothing yet"


@server.resource("books://{id}")
def book(id: str) -> str:
    """One book."""
    return f"book {id}"


@server.resource("notes://{day}")
def notes(day: str) -> str:
    """One day's notes."""
    return f"notes of {day}"


@server.completion()
async def complete(ref: object, argument: object, context: object) -> object:
    from mcp.types import Completion

    return Completion(values=["1", "2"], total=2, has_more=False)


async def _changed(ctx: Context) -> str:
    await ctx.session.send_resource_list_changed()
    await ctx.session.send_prompt_list_changed()
    return "done"


@server.tool()
async def drop(ctx: Context) -> str:
    """Take books://all away, and redefine review without `tone`."""
    server._resource_manager._resources.pop("books://all", None)
    server.remove_prompt("review")
    server.add_prompt(Prompt.from_function(review_plainly, name="review", description="Review a book."))
    return await _changed(ctx)


@server.tool()
async def restore(ctx: Context) -> str:
    """Bring books://all and the first review back."""
    server._resource_manager._resources["books://all"] = ALL_BOOKS
    server.remove_prompt("review")
    server.add_prompt(Prompt.from_function(review, name="review", description="Review a book."))
    return await _changed(ctx)


if __name__ == "__main__":
    anyio.run(server.run_stdio_async)
