"""Client capabilities the gateway can relay, and log levels: pure protocol facts, no I/O.

A backend may ask the client of a call for sampling, elicitation or its roots. The gateway
relays such a request only to a client that declared the capability at initialize, so it
keeps a small summary of what each client declared: a set of flags (below). The same flags
say what the gateway declares to a backend session serving such clients, and key that
session, so clients that declared different things never share one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from gateway.protocol import spec

SAMPLING: Final = "sampling"
SAMPLING_CONTEXT: Final = "sampling.context"
"""The client honours `includeContext` other than "none"."""
SAMPLING_TOOLS: Final = "sampling.tools"
"""The client accepts `tools` and `toolChoice` in a sampling request."""
ELICITATION_FORM: Final = "elicitation.form"
ELICITATION_URL: Final = "elicitation.url"
ROOTS: Final = "roots"
TASKS: Final = "extensions.tasks"
"""A 2026 request declared the tasks extension: never a session's flag (it has no meaning in a handshake), only
what the gateway declares to a 2026 backend for that request (`for_backend`)."""
WITH_TASKS: Final = frozenset({TASKS})
SESSION_TASKS: Final = "tasks"
"""A 2025-11-25 session's client declared `tasks`: it knows task-augmented calls, so it is listed the tools that
require them (catalogue.variants). Never declared to a backend (`for_backend` ignores it): the gateway hosts no
client-side tasks."""
AT_2026: Final = "era.2026"
"""The request comes from a 2026 client: a backend serving both eras gets it at 2026, as that client would reach
it directly. Never a session's flag, never declared to a backend (`for_backend` ignores it)."""
FROM_2026: Final = frozenset({AT_2026})
FROM_2026_WITH_TASKS: Final = frozenset({AT_2026, TASKS})
SESSIONLESS: Final = frozenset({TASKS, AT_2026})
"""Flags of a 2026 request that a backend session (handshake era) has no use for: not part of its key."""

ALL: Final = frozenset({SAMPLING, SAMPLING_CONTEXT, SAMPLING_TOOLS, ELICITATION_FORM, ELICITATION_URL, ROOTS})
"""Every flag: what the gateway declares to a backend it cannot tell clients apart on (stdio)."""

NONE: Final = frozenset[str]()
STORED: Final = ALL | {SESSION_TASKS}
"""The flags a session keeps."""

RELAYED_METHODS: Final = frozenset({spec.SAMPLING_CREATE_MESSAGE, spec.ELICITATION_CREATE, spec.ROOTS_LIST})
"""Backend requests the gateway relays to the client of the call they belong to."""

LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""`logging/setLevel` levels, least severe first (RFC 5424 severities)."""
SEVERITY: Final = {level: rank for rank, level in enumerate(LOG_LEVELS)}


def declared(capabilities: Any, version: str | None = None) -> frozenset[str]:
    """The relayable flags in a client's `initialize` capabilities (anything malformed counts as absent); with
    the session's `version`, SESSION_TASKS too where that version has tasks."""
    if not capabilities or not isinstance(capabilities, Mapping):  # none declared (often, from 2026 clients)
        return NONE  # told first: an isinstance against an ABC costs more than the rest of this call
    flags: set[str] = set()
    if version == spec.TASKS_VERSION and isinstance(capabilities.get("tasks"), Mapping):
        flags.add(SESSION_TASKS)
    sampling = capabilities.get("sampling")
    if isinstance(sampling, Mapping):
        flags.add(SAMPLING)
        flags.update(flag for key, flag in (("context", SAMPLING_CONTEXT), ("tools", SAMPLING_TOOLS))
                     if isinstance(sampling.get(key), Mapping))
    elicitation = capabilities.get("elicitation")
    if isinstance(elicitation, Mapping):
        flags.update(_elicitation_modes(elicitation))
    if isinstance(capabilities.get("roots"), Mapping):
        flags.add(ROOTS)
    return frozenset(flags)


def _elicitation_modes(elicitation: Mapping[str, Any]) -> set[str]:
    """Spec 2025-11-25: an empty `elicitation` object means form mode only (older clients)."""
    modes = {flag for key, flag in (("form", ELICITATION_FORM), ("url", ELICITATION_URL))
             if isinstance(elicitation.get(key), Mapping)}
    return modes or {ELICITATION_FORM}


def for_backend(flags: Iterable[str]) -> dict[str, Any]:
    """The `capabilities` the gateway declares at a backend initialize for clients with `flags`.

    `roots.listChanged` is not declared: the gateway does not forward the client's root changes.
    """
    flags = frozenset(flags)
    capabilities: dict[str, Any] = {}
    if SAMPLING in flags:
        capabilities["sampling"] = {key: {} for key, flag in (("context", SAMPLING_CONTEXT),
                                                              ("tools", SAMPLING_TOOLS)) if flag in flags}
    modes = {key: {} for key, flag in (("form", ELICITATION_FORM), ("url", ELICITATION_URL)) if flag in flags}
    if modes:
        capabilities["elicitation"] = modes
    if ROOTS in flags:
        capabilities["roots"] = {}
    if TASKS in flags:
        capabilities["extensions"] = {spec.TASKS_EXTENSION: {}}
    return capabilities


def serves_task_calls(capabilities: Mapping[str, Any]) -> bool:
    """Whether a handshake-era server's capabilities declare 2025-11-25 task-augmented `tools/call`."""
    tasks = capabilities.get("tasks")
    requests = tasks.get("requests") if isinstance(tasks, Mapping) else None
    tools = requests.get("tools") if isinstance(requests, Mapping) else None
    return isinstance(tools, Mapping) and isinstance(tools.get("call"), Mapping)


def declares_tasks(capabilities: Mapping[str, Any]) -> bool:
    """Whether client (or a 2026 backend's discover) capabilities declare the tasks extension."""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, Mapping) and isinstance(extensions.get(spec.TASKS_EXTENSION), Mapping)


def needed(method: str, params: Any) -> frozenset[str]:
    """The flags a client must have declared to be asked this backend request (empty: not relayable)."""
    params = params if isinstance(params, Mapping) else {}
    if method == spec.SAMPLING_CREATE_MESSAGE:
        # `includeContext` needs no flag: clients before 2025-11-25 could not declare `context`,
        # and the client may ignore it; tool use it must have declared, or it cannot answer.
        uses_tools = "tools" in params or "toolChoice" in params
        return frozenset({SAMPLING, SAMPLING_TOOLS}) if uses_tools else frozenset({SAMPLING})
    if method == spec.ELICITATION_CREATE:
        return frozenset({ELICITATION_URL if params.get("mode") == "url" else ELICITATION_FORM})
    if method == spec.ROOTS_LIST:
        return frozenset({ROOTS})
    return NONE


def encode_flags(flags: Iterable[str]) -> list[str]:
    """Flags as a sorted list (for storage); unknown ones are dropped."""
    return sorted(STORED.intersection(flags))


def log_level(value: Any) -> str | None:
    """A valid `logging/setLevel` level, or None."""
    return value if isinstance(value, str) and value in SEVERITY else None


def loud_enough(message: Mapping[str, Any], level: str) -> bool:
    """Whether a `notifications/message` reaches a client that asked for `level` and above.

    A message without a known level is passed on: filtering is for noise, not for hiding.
    """
    params = message.get("params")
    severity = SEVERITY.get(params.get("level")) if isinstance(params, Mapping) else None
    return severity is None or severity >= SEVERITY[level]
