"""The generated reference pages (CLI, metrics) are what docs/generate.py makes from the code now."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    assert spec and spec.loader
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up there
    spec.loader.exec_module(module)
    return module


GENERATE = generator()


@pytest.mark.parametrize("page", list(GENERATE.PAGES), ids=lambda p: p.name)
def test_the_generated_page_is_current(page: Path) -> None:
    made = GENERATE.PAGES[page]()
    assert page.exists() and page.read_text(encoding="utf-8") == made, (
        f"{page.relative_to(ROOT)} is stale: regenerate it with `{GENERATE.COMMAND}` and commit the result")


def test_every_command_and_option_is_on_the_cli_page() -> None:
    page = GENERATE.cli_page()
    parser = GENERATE.cli.parser()
    for name, sub in GENERATE._subcommands(parser).items():
        assert f"## `mcp-gateway {name}`" in page
        for action in sub._actions:
            for option in action.option_strings:
                assert option in page or option in ("-h", "--help"), f"{name} {option}"
    assert "*required*" in page  # token --tenant


def test_every_metric_a_scrape_shows_is_on_the_metrics_page() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from gateway.metrics import Metrics

    registry = CollectorRegistry()
    Metrics(registry=registry, tenants=["acme"], backends=["calc"])
    scraped = {line.split()[2] for line in generate_latest(registry).decode().splitlines()
               if line.startswith("# TYPE")}
    page = GENERATE.metrics_page()
    assert scraped and all(f"`{name}`" in page or f"`{name}_total`" in page for name in scraped), scraped
    assert "| `mcpgw_tool_calls_total` | counter | `tenant`, `backend`, `tool`, `outcome` |" in page


def test_check_mode_names_a_stale_page_and_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "reference" / "cli.md"
    stale.parent.mkdir()
    stale.write_text("# CLI\n", encoding="utf-8")
    monkeypatch.setattr(GENERATE, "DOCS", tmp_path)
    monkeypatch.setattr(GENERATE, "PAGES", {stale: GENERATE.cli_page})
    assert GENERATE.main(["--check"]) == 1
    assert GENERATE.COMMAND in capsys.readouterr().err
    assert GENERATE.main([]) == 0
    assert GENERATE.main(["--check"]) == 0
    assert stale.read_text(encoding="utf-8") == GENERATE.cli_page()
