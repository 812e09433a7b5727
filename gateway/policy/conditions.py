"""Rule conditions (`when`) in CEL, the Common Expression Language, compiled once at config load.

The engine is cel-expr-python, Google's CEL C++ implementation (the `cel` extra): its type
checker refuses undeclared names at load (`prinicpal.groups` is a config error, not a rule that
never matches), and it evaluates the gateway's usual inputs several times faster than the
other candidates (the closing note of issue 26 has the figures). Two variables are declared,
both dynamic: `principal` (tenant, subject, groups, scopes, claims) and `request` (method, name,
arguments).

A condition that names no `request` depends on the caller alone, so it is decided once per
caller and takes part in lists; one that reads `request` is decided per call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

PRINCIPAL, REQUEST = "principal", "request"
MAX_SOURCE = 4096
"""Longer conditions are refused at load."""

_POSITION = re.compile(r"<input>:(\d+):(\d+): ([^\n]*)")


class ConditionError(ValueError):
    """A condition that does not compile; the message says where (line and column) and why."""


@cache
def _environments() -> tuple[Any, Any]:
    """(the full environment, one that declares `principal` only)."""
    try:
        from cel_expr_python import cel
    except ImportError:
        raise ConditionError("CEL conditions need the `cel` extra: pip install 'mcp-gateway[cel]'") from None
    full = cel.NewEnv(variables={PRINCIPAL: cel.Type.DYN, REQUEST: cel.Type.DYN})
    caller_only = cel.NewEnv(variables={PRINCIPAL: cel.Type.DYN})
    return full, caller_only


@dataclass(frozen=True, slots=True)
class Condition:
    """A compiled CEL condition; equal when its source is (a reload with the same text changes nothing)."""

    source: str
    reads_request: bool
    program: Any = field(compare=False, repr=False)

    @classmethod
    def compile(cls, source: str) -> Condition:
        if len(source) > MAX_SOURCE:
            raise ConditionError(f"longer than {MAX_SOURCE} characters")
        if not source.strip():
            raise ConditionError("empty")
        full, caller_only = _environments()
        program = _compiled(full, source)
        returns = program.return_type().name().lower()
        if returns not in ("bool", "dyn"):
            raise ConditionError(f"must be a boolean expression, not {returns}")
        try:
            caller_only.compile(source)
            reads_request = False
        except Exception:  # it names `request` (the full environment compiled it)
            reads_request = True
        return cls(source, reads_request, program)

    def holds(self, principal: dict[str, Any], request: dict[str, Any] | None = None) -> bool | None:
        """The condition's value for these inputs; None when it cannot be evaluated (an error, a non-boolean)."""
        data = {PRINCIPAL: principal} if request is None else {PRINCIPAL: principal, REQUEST: request}
        try:
            value = self.program.eval(data=data).plain_value()
        except Exception:  # a value CEL cannot represent (an integer beyond 64 bits, say)
            return None
        return value if isinstance(value, bool) else None


def _compiled(env: Any, source: str) -> Any:
    try:
        return env.compile(source)
    except Exception as exc:  # the library raises RuntimeError with the checker's report
        raise ConditionError(_report(str(exc))) from None


def _report(text: str) -> str:
    """`line L, column C: what` from the engine's first error."""
    found = _POSITION.search(text)
    if found is None:
        return " ".join(text.split())[:300]
    line, column, what = found.groups()
    return f"line {line}, column {column}: {what.strip()[:300]}"
