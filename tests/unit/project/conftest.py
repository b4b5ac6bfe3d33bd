"""Fixtures of the project tests: `package`, a small package the code reading (tests/codescan.py) is pointed at."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

import tests.codescan as codescan


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Write modules of a package `pkg` under tmp_path and point the reading at it."""
    monkeypatch.setattr(codescan, "ROOT", tmp_path)
    monkeypatch.setattr(codescan, "PROJECT_PACKAGES", ("pkg",))
    monkeypatch.setattr(codescan, "NOT_SHIPPED", ("pkg.cli",))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")

    def write(**modules: str) -> None:
        for name, text in modules.items():
            path = tmp_path.joinpath(*name.split(".")).with_suffix(".py")
            path.parent.mkdir(parents=True, exist_ok=True)
            if not (path.parent / "__init__.py").exists():
                (path.parent / "__init__.py").write_text("")
            path.write_text(textwrap.dedent(text))

    return write
