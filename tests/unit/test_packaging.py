"""pyproject.toml's package list: every gateway folder, and the demo backends inside the gateway's namespace."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def test_every_gateway_package_folder_is_listed() -> None:
    folders = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "gateway").rglob("__init__.py")}
    assert set(SETUPTOOLS["packages"]) - {"gateway.demo"} == folders


def test_the_demo_backends_install_as_gateway_demo_from_the_backends_folder() -> None:
    assert SETUPTOOLS["package-dir"] == {"gateway.demo": "backends"}
    assert (ROOT / "backends" / "__init__.py").is_file()
    assert not any(name.split(".")[0] != "gateway" for name in SETUPTOOLS["packages"])


def test_the_default_config_is_package_data() -> None:
    assert SETUPTOOLS["package-data"]["gateway"] == ["default_config.yaml"]
    assert (ROOT / "gateway" / "default_config.yaml").is_file()
