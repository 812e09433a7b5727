"""What would fail at start or at the first call, found before starting.

A config can parse and still not run: a stdio command that is not on PATH, a `python -m`
module that is not installed (the demo backends without the `demo` extra), a header whose
`${VAR:-}` came out empty (unusable URLs are refused while the config loads). `check-config`
lists every such problem; `serve`, `stdio` and `catalogue` refuse to start on one, rather
than run a gateway whose backends can only crash-loop.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib.machinery import PathFinder
from importlib.util import find_spec
from pathlib import Path

from gateway.catalogue.lockfile import LockfileError, read_lockfile
from gateway.config import Backend, Config, StdioBackend
from gateway.upstream.pool import stdio_command

DEMO_PACKAGE = "gateway.demo"
DEMO_REQUIRES = ("mcp",)
"""What the demo backends import beyond the gateway's own dependencies: the `demo` extra."""
AUTH_SCHEMES = ("bearer", "basic", "token")
"""An Authorization value that is only one of these words lost its credential."""
DEMO_HINT = "the demo backends need the `demo` extra: pip install 'mcp-gateway[demo]'"


@dataclass(frozen=True, slots=True)
class Problem:
    where: str
    """The key path, as in config errors: `backends[0].command`."""
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


def problems(config: Config) -> list[Problem]:
    """Every problem, in config order; the demo hint only once, however many demo backends."""
    found: list[Problem] = []
    for i, backend in enumerate(config.backends):
        for problem in _backend_problems(backend, f"backends[{i}]"):
            if problem.message != DEMO_HINT or all(p.message != DEMO_HINT for p in found):
                found.append(problem)
    try:
        read_lockfile(config.integrity.lockfile)  # a broken one would stop the start with less to go on
    except LockfileError as exc:
        found.append(Problem("integrity.lockfile", str(exc)))
    return found


def _backend_problems(backend: Backend, where: str) -> Iterator[Problem]:
    if isinstance(backend, StdioBackend):
        yield from _command_problems(backend, f"{where}.command")
    else:
        yield from _header_problems(backend.headers, f"{where}.headers")


def _command_problems(backend: StdioBackend, where: str) -> Iterator[Problem]:
    program, *args = stdio_command(backend.command)
    if not _runnable(program, backend):
        yield Problem(where, f"{program!r} not found (not on PATH, or not an executable file)")
        return
    module = _python_module(program, args)
    if module is None:
        return
    if module.startswith(DEMO_PACKAGE + ".") and not all(find_spec(name) for name in DEMO_REQUIRES):
        yield Problem(where, DEMO_HINT)
    elif not _module_found(module, backend):
        yield Problem(where, f"no module named {module.split('.')[0]!r} for {program} -m {module}")


def _runnable(program: str, backend: StdioBackend) -> bool:
    if os.sep in program:
        path = Path(backend.cwd or ".") / program
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(program, path=_child_env(backend).get("PATH", os.defpath)) is not None


def _python_module(program: str, args: list[str]) -> str | None:
    """The module of `<the gateway's python> -m module`; other interpreters are not ours to inspect."""
    if program != sys.executable or len(args) < 2 or args[0] != "-m":
        return None
    return args[1]


def _module_found(module: str, backend: StdioBackend) -> bool:
    """Look for the top-level package as we see it (editable installs too), then in the child's cwd and PYTHONPATH.

    Only the top level: finding `a.b` would import `a`, running code the check has no business running.
    """
    top = module.split(".")[0]
    if find_spec(top) is not None:
        return True
    extra = _child_env(backend).get("PYTHONPATH", "").split(os.pathsep)
    return PathFinder.find_spec(top, [backend.cwd or os.getcwd(), *filter(None, extra)]) is not None


def _child_env(backend: StdioBackend) -> Mapping[str, str]:
    return {**os.environ, **backend.env}


def _header_problems(headers: Mapping[str, str], where: str) -> Iterator[Problem]:
    """An empty credential (e.g. `Bearer ${TOKEN:-}` with TOKEN unset) fails every call: say so now."""
    for name, value in headers.items():
        if not value.strip() or value.strip().lower() in AUTH_SCHEMES:
            yield Problem(f"{where}.{name}", "empty (an environment variable expanded to nothing?)")
