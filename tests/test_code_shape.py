"""The code keeps the shape the team agreed on: modules under 400 lines, short functions, no wait_for.

A module that grows past the limit is doing two jobs; split it by concern. Function length is
counted from the first statement after the docstring to the last one.
"""

from __future__ import annotations

import ast
import statistics
from pathlib import Path

import gateway

MAX_MODULE_LINES = 400
MAX_MEDIAN_FUNCTION_LINES = 10
PACKAGE_DIR = Path(gateway.__file__).parent


def function_lengths(source: str) -> list[int]:
    """The body length in lines of every function and method in `source`, docstrings left out."""
    lengths = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            lengths.append(body[-1].end_lineno - body[0].lineno + 1 if body else 0)  # type: ignore[operator]
    return lengths


def test_no_module_is_over_the_line_limit() -> None:
    sizes = {str(p.relative_to(PACKAGE_DIR)): p.read_text().count("\n") for p in PACKAGE_DIR.rglob("*.py")}
    too_big = {name: lines for name, lines in sizes.items() if lines > MAX_MODULE_LINES}
    assert too_big == {}, f"split these by concern (over {MAX_MODULE_LINES} lines): {too_big}"


def test_the_median_function_is_short() -> None:
    lengths = [n for p in PACKAGE_DIR.rglob("*.py") for n in function_lengths(p.read_text())]
    assert statistics.median(lengths) <= MAX_MEDIAN_FUNCTION_LINES


def test_lengths_are_counted_without_the_docstring() -> None:
    source = 'def f():\n    """Doc\n    more."""\n    a = 1\n    return a\n\n\nasync def g():\n    pass\n'
    assert function_lengths(source) == [2, 1]


def test_no_asyncio_wait_for() -> None:
    """On Python 3.11 `asyncio.wait_for` returns the result when a cancel and the result arrive in one
    turn, swallowing the cancel: a task stopped then runs on (a worker hung at shutdown so). `asyncio.timeout`
    does not; use it."""
    calls = [f"{p.relative_to(PACKAGE_DIR)}:{node.lineno}" for p in PACKAGE_DIR.rglob("*.py")
             for node in ast.walk(ast.parse(p.read_text()))
             if isinstance(node, ast.Attribute) and node.attr == "wait_for"]
    assert calls == []
