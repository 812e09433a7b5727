"""Checking `tools/call` arguments against the tool's `inputSchema`.

Two validators per schema, for speed without new wording: jsonschema-rs answers "valid?"
many times faster than python-jsonschema (bench/FIGURES.md); python-jsonschema runs only for invalid arguments, to
pick the most relevant error (`best_match`) and word it as users already know.

A schema that is missing, not a schema, or that cannot be evaluated (an unresolvable
`$ref`) checks nothing: the backend judges those arguments itself. Remote `$ref`s are never
fetched.
"""

from __future__ import annotations

from typing import Any

import jsonschema_rs
from jsonschema import exceptions as schema_errors
from jsonschema import validators
from referencing import Registry


class SchemaCheck:
    """The compiled checks for one tool's inputSchema."""

    def __init__(self, schema: Any) -> None:
        self._slow = _python_validator(schema)
        self._fast = _rust_validator(schema) if self._slow is not None else None

    def problem(self, arguments: dict[str, Any]) -> str | None:
        """How `arguments` break the schema, or None when they conform (or cannot be judged)."""
        if self._slow is None:
            return None
        if self._fast is not None:
            try:
                if self._fast.is_valid(arguments):
                    return None
            except Exception:  # e.g. an integer too big for Rust's types: let the slow path judge
                pass
        return self._explain(arguments)

    def _explain(self, arguments: dict[str, Any]) -> str | None:
        assert self._slow is not None
        try:
            error = schema_errors.best_match(self._slow.iter_errors(arguments))
        except RecursionError:
            return "arguments are nested too deeply to validate"
        except Exception:  # an unresolvable $ref: a schema we cannot evaluate is the backend's to judge
            self._slow = self._fast = None
            return None
        if error is None:
            return None  # the two libraries disagree; the arguments get the benefit of the doubt
        where = "/".join(str(p) for p in error.absolute_path)
        return error.message + (f" (at {where})" if where else "")


def _python_validator(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return None
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except schema_errors.SchemaError:
        return None  # the backend's schema is broken; let the backend judge the arguments
    # An explicit empty registry: without one, python-jsonschema fetches remote $refs with urllib
    # (blocking the event loop, and a request to wherever a backend's schema points).
    return cls(schema, format_checker=cls.FORMAT_CHECKER, registry=Registry())


def _rust_validator(schema: dict[str, Any]) -> Any:
    try:
        return jsonschema_rs.validator_for(schema, validate_formats=True, offline=True)
    except TypeError:
        raise  # a jsonschema-rs without an argument we pass (see its bound in pyproject.toml): never hide it
    except Exception:  # a schema only python-jsonschema evaluates (or refuses later): the slow path alone
        return None
