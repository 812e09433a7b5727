"""The Dockerfile's key properties, checked by reading it (no Docker engine needed)."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    stage: int  # index of the FROM it belongs to


def _instructions(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n(\s*#[^\n]*\n)*", " ", text)
    found: list[Instruction] = []
    stage = -1
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        stage += keyword == "FROM"
        found.append(Instruction(keyword, args.strip(), stage))
    return found


INSTRUCTIONS = _instructions(DOCKERFILE.read_text(encoding="utf-8"))
FINAL_STAGE = max(i.stage for i in INSTRUCTIONS)


def _all(keyword: str, *, final: bool = False) -> list[str]:
    return [i.args for i in INSTRUCTIONS if i.keyword == keyword and (not final or i.stage == FINAL_STAGE)]


def _base_images() -> list[str]:
    args = dict(re.match(r"(\w+)=(\S+)", a).groups() for a in _all("ARG") if "=" in a)  # type: ignore[union-attr]
    images = []
    for line in _all("FROM"):
        image = line.split()[0]
        images.append(re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image))
    return images


def _exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list), f"use the exec (JSON) form: {args}"
    return value


def test_it_is_multi_stage_on_a_pinned_slim_python() -> None:
    images = _base_images()
    assert len(images) >= 2, "a build stage and a runtime stage"
    for image in images:
        assert re.fullmatch(r"python:3\.\d+(\.\d+)?-slim-[a-z]+(@sha256:[0-9a-f]{64})?", image), image
    assert "--from=build" in " ".join(_all("COPY", final=True))


def test_the_runtime_runs_as_a_non_root_user() -> None:
    users = _all("USER", final=True)
    assert users, "the runtime stage must set USER"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}
    assert user.isdigit(), "a numeric uid lets Kubernetes check runAsNonRoot"
    assert int(user) >= 10000, "outside the range of host system users"


def test_pip_leaves_no_cache() -> None:
    runs = " ".join(_all("RUN"))
    installs = re.findall(r"pip install[^&;]*", runs)
    assert installs
    assert all("--no-cache-dir" in command for command in installs)
    assert "PIP_NO_CACHE_DIR=1" in " ".join(_all("ENV"))
    assert "apt-get" not in runs or "rm -rf /var/lib/apt/lists" in runs


def test_the_healthcheck_asks_healthz_with_python_only() -> None:
    (check,) = _all("HEALTHCHECK", final=True)
    options, _, command = check.partition("CMD")
    assert "--timeout=" in options and "--interval=" in options
    argv = _exec_form(command.strip())
    assert argv[0] == "python" and "urllib.request" in argv[-1]
    exposed = {int(port.split("/")[0]) for line in _all("EXPOSE", final=True) for port in line.split()}
    assert f"http://127.0.0.1:{next(iter(exposed))}/healthz" in argv[-1]
    assert "curl" not in check and "wget" not in check


def test_the_entrypoint_serves_a_mounted_config() -> None:
    assert _exec_form(_all("ENTRYPOINT", final=True)[-1]) == ["mcp-gateway", "serve"]
    assert _exec_form(_all("CMD", final=True)[-1]) == ["--config", "/etc/mcp-gateway/gateway.yaml"]
    assert "SIGTERM" in _all("STOPSIGNAL", final=True)


def test_nothing_needs_writing_outside_tmp() -> None:
    env = " ".join(_all("ENV", final=True))
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "HOME=/tmp" in env and "TMPDIR=/tmp" in env
    assert not any(volume for volume in _all("VOLUME", final=True))
    assert "MCPGW_SERVER__HOST=0.0.0.0" in env  # loopback would be unreachable from outside the container


def _copied_sources() -> list[str]:
    sources = []
    for args in _all("COPY"):
        parts = [p for p in shlex.split(args) if not p.startswith("--")]
        if "--from=" not in args:
            sources += parts[:-1]
    return sources


def _ignored(path: str, patterns: list[str]) -> bool:
    """.dockerignore semantics for the patterns used here: the last matching line wins."""
    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        bare = pattern.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, bare) or path.startswith(bare + "/"):
            ignored = not negated
    return ignored


def test_every_copied_path_exists_and_is_in_the_build_context() -> None:
    patterns = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for source in _copied_sources():
        assert (ROOT / source).exists(), source
        assert not _ignored(source, patterns), f"{source} is excluded by .dockerignore"
    for secret_or_junk in (".venv", ".git", "tests", ".env", "bench"):
        assert _ignored(secret_or_junk, patterns), f"{secret_or_junk} should stay out of the build context"


@pytest.mark.parametrize("required", ["gateway", "backends", "gateway/default_config.yaml", "pyproject.toml",
                                      "setup.py", "README.md"])
def test_the_image_gets_what_the_package_build_needs(required: str) -> None:
    assert required in _copied_sources()
