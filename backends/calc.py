"""Calculator backend: arithmetic, a safe expression evaluator, unit conversion, and ``slow``.

``evaluate`` walks the ``ast`` of the expression and allows only numbers, the operators
``+ - * / ** %`` and parentheses; nothing is ever passed to ``eval``. ``slow`` sleeps in
steps and reports progress after each, to exercise progress relaying and timeouts.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ToolError

from . import runner

MAX_EXPRESSION_CHARS = 200
MAX_EXPRESSION_NODES = 100
MAX_EXPONENT = 100
MAX_INT_BITS = 4096  # keeps big-int results small enough to compute and print
MAX_SLOW_SECONDS = 30.0
MAX_SLOW_STEPS = 100

Number = int | float

server = MCPServer("calc", version="1.0.0", log_level="WARNING")

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def _bounded(value: Number) -> Number:
    """Reject results too large to be useful (and too costly to keep computing with)."""
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ToolError("Result too large")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("Result is not finite")
    return value


def _power(base: Number, exponent: Number) -> Number:
    """``base ** exponent`` with a bounded exponent and result size."""
    if abs(exponent) > MAX_EXPONENT:
        raise ToolError(f"Exponent larger than {MAX_EXPONENT}")
    if abs(base) > 1 and exponent > 0 and exponent * math.log2(abs(base)) > MAX_INT_BITS:
        raise ToolError("Result too large")
    result = base**exponent
    if isinstance(result, complex):  # e.g. (-8) ** 0.5
        raise ToolError("Result is not a real number")
    return result


def _eval_node(node: ast.AST) -> Number:
    """Evaluate one node of an already size-checked expression tree."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval_node(node.operand))
    if isinstance(node, ast.BinOp):
        left, right = _eval_node(node.left), _eval_node(node.right)
        if isinstance(node.op, ast.Pow):
            return _bounded(_power(left, right))
        if type(node.op) in _BINARY:
            return _bounded(_BINARY[type(node.op)](left, right))
    raise ToolError(f"Unsupported syntax: {type(node).__name__}")


def safe_eval(expression: str) -> float:
    """Evaluate an arithmetic expression without ``eval``; raise ``ToolError`` if not allowed."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolError(f"Expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"Invalid expression: {exc.msg}") from exc
    if sum(1 for _ in ast.walk(tree)) > MAX_EXPRESSION_NODES:
        raise ToolError("Expression too complex")
    try:
        return float(_eval_node(tree.body))
    except ZeroDivisionError as exc:
        raise ToolError("Division by zero") from exc
    except OverflowError as exc:
        raise ToolError("Result too large") from exc


# Factors to the base unit of each dimension (metre, kilogram).
_LENGTH = {"m": 1.0, "km": 1000.0, "cm": 0.01, "mm": 0.001, "mi": 1609.344,
           "yd": 0.9144, "ft": 0.3048, "in": 0.0254}  # fmt: skip
_MASS = {"kg": 1.0, "g": 0.001, "mg": 1e-6, "t": 1000.0, "lb": 0.45359237, "oz": 0.028349523125}
_TO_KELVIN: dict[str, Callable[[float], float]] = {
    "c": lambda v: v + 273.15,
    "f": lambda v: (v - 32.0) * 5.0 / 9.0 + 273.15,
    "k": lambda v: v,
}
_FROM_KELVIN: dict[str, Callable[[float], float]] = {
    "c": lambda v: v - 273.15,
    "f": lambda v: (v - 273.15) * 9.0 / 5.0 + 32.0,
    "k": lambda v: v,
}


def _convert(value: float, src: str, dst: str) -> float:
    for table in (_LENGTH, _MASS):
        if src in table and dst in table:
            return value * table[src] / table[dst]
    if src in _TO_KELVIN and dst in _FROM_KELVIN:
        return _FROM_KELVIN[dst](_TO_KELVIN[src](value))
    raise ToolError(f"Cannot convert {src!r} to {dst!r}")


@server.tool()
def add(a: float, b: float) -> float:
    """Return a + b."""
    return a + b


@server.tool()
def multiply(a: float, b: float) -> float:
    """Return a * b."""
    return a * b


@server.tool()
def evaluate(expression: str) -> float:
    """Evaluate arithmetic with numbers, + - * / ** % and parentheses, e.g. "(2 + 3) * 4"."""
    return safe_eval(expression)


@server.tool()
def convert_units(value: float, from_unit: str, to_unit: str) -> float:
    """Convert length (m km cm mm mi yd ft in), mass (kg g mg t lb oz) or temperature (C F K)."""
    return _convert(value, from_unit.strip().lower(), to_unit.strip().lower())


@server.tool()
async def slow(seconds: float, ctx: Context, steps: int = 3) -> str:
    """Sleep for ``seconds`` (at most 30) in ``steps`` steps, reporting progress after each."""
    seconds = min(max(seconds, 0.0), MAX_SLOW_SECONDS)
    steps = min(max(steps, 1), MAX_SLOW_STEPS)
    for step in range(1, steps + 1):
        await anyio.sleep(seconds / steps)
        await ctx.report_progress(step, steps, f"step {step}/{steps}")
    return f"slept {seconds:g}s in {steps} steps"


@server.prompt()
def explain(expression: str) -> str:
    """Explain, step by step, how an arithmetic expression is evaluated."""
    return f"Explain step by step how to evaluate {expression}, then check the result with calc's evaluate tool."


@server.resource("calc://squares/{count}", name="squares", mime_type="application/octet-stream")
def squares(count: str) -> bytes:
    """The squares of 0 .. count-1 modulo 256, one byte each (a binary resource; count at most 256)."""
    if not count.isdigit() or not 0 < int(count) <= 256:
        raise ResourceError("count must be a whole number from 1 to 256")
    return bytes(i * i % 256 for i in range(int(count)))


def main() -> None:
    """Command-line entry point."""
    runner.main(server, description="Calculator MCP backend")


if __name__ == "__main__":
    main()
