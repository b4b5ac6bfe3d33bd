"""How `onward worker` finds its handlers' module: `--module`, else ONWARD_WORKER_MODULE (the container image
runs `onward worker` with no flags: an exec-form CMD has no shell to expand a variable into `--module`), and
what it says when the module is not there."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from onward.cli.main import build_parser, main


def test_onward_worker_module_names_the_module_when_the_flag_is_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the fallback the image's `CMD ["worker"]` would stop at once: --module is required."""
    monkeypatch.setenv("ONWARD_WORKER_MODULE", "my_jobs.handlers")
    assert build_parser().parse_args(["worker"]).module == "my_jobs.handlers"
    module = "onward.runtime.demo_jobs"
    assert build_parser().parse_args(["worker", "--module", module]).module == module


def test_without_flag_or_variable_the_worker_refuses_to_start(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """No silent default (the demo handlers would run in production and the real job types wait forever)."""
    monkeypatch.delenv("ONWARD_WORKER_MODULE", raising=False)
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["worker"])
    assert stopped.value.code == 2 and "--module" in capsys.readouterr().err


def test_a_module_that_is_not_installed_is_one_line_not_a_traceback(monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A derived image that forgot to install the handlers' package (or misspelt ONWARD_WORKER_MODULE) says so
    in its log, exit status 2; without the catch, a ModuleNotFoundError traceback from importlib."""
    monkeypatch.setenv("ONWARD_WORKER_MODULE", "no_such_handlers.jobs")
    assert main(["worker"]) == 2
    assert "no module 'no_such_handlers.jobs'" in capsys.readouterr().err


def test_a_module_whose_own_import_fails_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    """The module is there but a package it imports is not: that is the handlers' bug, and its traceback (the
    missing name, the line) must reach the log rather than the misleading "no module" line."""
    (tmp_path / "handlers_missing_a_dependency.py").write_text("import a_dependency_nobody_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as missing:
        main(["worker", "--module", "handlers_missing_a_dependency"])
    assert missing.value.name == "a_dependency_nobody_installed"
    sys.modules.pop("handlers_missing_a_dependency", None)
