"""The documentation site builds with `mkdocs build --strict`, the README stays a landing page, and
every section of the README as it was before the site (one 991-line file) has a home in it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

OLD_README_SECTIONS = {
    "Install from a wheel": "getting-started.md#install-from-a-wheel",
    "Calling the demo": "getting-started.md#the-demo",
    "How a request flows": "concepts/request-flow.md",
    "Backends asking the client: sampling, elicitation, roots, logs": "concepts/client-requests.md",
    "Protocol eras": "concepts/eras.md",
    "Backends of either era": "concepts/eras.md#backends-of-either-era",
    "Tasks (2026-07-28 extension)": "concepts/tasks.md",
    "Multi-round trips: backends asking a 2026 client": "concepts/multi-round-trips.md",
    "Configuration": "reference/config.md#the-file-and-the-environment",
    "Config reference": "reference/config.md#every-key-and-its-default",
    "Prompts, resources and completions": "concepts/namespacing.md#prompts-resources-and-completions",
    "Protocol coverage": "reference/protocol-coverage.md",
    "Local clients over stdio": "how-to/stdio-clients.md#local-clients-over-stdio",
    "Running in production": "how-to/production.md#running-in-production",
    "Reloading the configuration": "how-to/reload.md#reloading-the-configuration",
    "Shared state (Redis): many replicas, one gateway":
        "how-to/replicas.md#shared-state-redis-many-replicas-one-gateway",
    "Limits and hardening": "reference/limits.md#limits-and-hardening",
    "Monitoring": "how-to/monitoring.md",
    "Performance": "performance.md#method-and-latest-figures",
    "A yardstick that does not swing: instructions per call":
        "performance.md#a-yardstick-that-does-not-swing-instructions-per-call",
    "Tests": "development/tests.md#tests",
    "The official MCP conformance suite": "development/tests.md#the-official-mcp-conformance-suite",
}
"""Each heading of the old README, and the page (and section) that now holds what it said."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def built(site: Path, page: str) -> str:
    """The HTML mkdocs made of a page (`a/b.md` -> `a/b/index.html`)."""
    path = page.removesuffix(".md")
    path = path.removesuffix("index").rstrip("/")
    return (site / path / "index.html").read_text(encoding="utf-8")


def test_the_site_builds_strict_with_every_page(site: Path) -> None:
    for page in (ROOT / "docs").rglob("*.md"):
        assert built(site, str(page.relative_to(ROOT / "docs"))), page


@pytest.mark.parametrize("heading", list(OLD_README_SECTIONS))
def test_every_old_readme_section_has_a_home(site: Path, heading: str) -> None:
    page, _, anchor = OLD_README_SECTIONS[heading].partition("#")
    html = built(site, page)
    if anchor:
        assert f'id="{anchor}"' in html, f"{page} has no section #{anchor} for the old README's {heading!r}"


def test_the_readme_is_a_landing_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 150
    text = "\n".join(lines)
    assert "make run" in text
    assert "make test" in text  # CI (.ci/run) runs it; the README names it


def test_the_readme_links_resolve() -> None:
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8")):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target
