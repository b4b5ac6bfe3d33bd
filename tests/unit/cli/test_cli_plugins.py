"""The command line's plug-ins: the local stack (onward-infra) adds `onward up` and `onward endpoint` through
the `onward.commands` entry point, and the product's own commands load no plug-in at all."""

from __future__ import annotations

import argparse
import sys

import pytest

from onward.cli import main as cli


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [subparsers] = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(subparsers.choices)


def test_the_product_s_own_commands_are_the_ones_that_load_no_plug_in() -> None:
    """Breaks when a command is added to build_parser without PRODUCT_COMMANDS knowing it (it would load
    every plug-in, the local stack and moto among them, on a production host), or when a name there is no
    command any more."""
    own = set(_commands(cli.build_parser(plugged_in=False))) - cli.LOCAL_STACK_COMMANDS.keys()
    assert own == cli.PRODUCT_COMMANDS


def test_the_local_stack_s_commands_come_from_its_plug_in() -> None:
    """With onward-infra installed (`make up`, `make test`), `up` and `endpoint` are its commands."""
    commands = _commands(cli.build_parser())
    for name in ("up", "endpoint"):
        assert commands[name].get_default("run").__module__ == "onward_infra.commands", name


def test_a_product_command_imports_no_plug_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """`onward worker --help` parses without looking for a plug-in: breaks if main() loaded the entry points
    for the production runtime's own command."""
    looked: list[bool] = []
    monkeypatch.setattr(cli, "_plugged_in_commands", lambda: looked.append(True) or iter(()))
    with pytest.raises(SystemExit) as ended:
        cli.main(["worker", "--help"])
    assert ended.value.code == 0 and looked == []


@pytest.mark.parametrize("name", ["up", "endpoint"])
def test_without_the_local_stack_its_commands_say_how_to_get_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str) -> None:
    """A production install has no onward-infra: `onward up` ends with status 2 and how to install it, not
    argparse's "invalid choice"."""
    monkeypatch.setattr(cli, "_plugged_in_commands", lambda: iter(()))
    monkeypatch.setattr(sys, "argv", ["onward", name, "--demo"])
    assert cli.main() == 2
    assert "the local stack is not installed" in capsys.readouterr().err
