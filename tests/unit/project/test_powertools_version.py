"""One Powertools version everywhere: the Lambda layer (template.yaml's PowertoolsLayerArn, the public SSM
parameter AWS publishes per version, architecture and Python), the pin in pyproject.toml that development, CI
and the worker containers install, and the version this environment runs the tests with."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from onward_infra.template import load_template

TEMPLATE = load_template()
PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
LAYER_PARAMETER = re.compile(r"^/aws/service/powertools/python/(?P<arch>arm64|x86_64)/python(?P<python>3\.\d+)/"
                             r"(?P<version>\d+\.\d+\.\d+)$")


def pinned() -> tuple[str, str]:
    """(extras, version) of the one aws-lambda-powertools requirement of the project."""
    (requirement,) = [r for r in PYPROJECT["project"]["dependencies"] if r.startswith("aws-lambda-powertools")]
    match = re.fullmatch(r"aws-lambda-powertools\[(?P<extras>[a-z,]+)\]==(?P<version>\d+\.\d+\.\d+)", requirement)
    assert match, f"{requirement!r}: pin one version, with the [tracer] extra"
    return match["extras"], match["version"]


def layer_parameter() -> re.Match[str]:
    parameter = TEMPLATE["Parameters"]["PowertoolsLayerArn"]
    assert parameter["Type"] == "AWS::SSM::Parameter::Value<String>"
    match = LAYER_PARAMETER.fullmatch(parameter["Default"])
    assert match, parameter["Default"]
    return match


def test_the_layer_is_the_version_pyproject_pins() -> None:
    """The functions ran the layer's Powertools (a layer number picked by hand) while tests ran whatever pip
    resolved from ">=3.0,<4": a behaviour the tests relied on could be missing on Lambda, or the reverse."""
    extras, version = pinned()
    assert layer_parameter()["version"] == version
    assert "tracer" in extras.split(",")  # the layer ships aws-xray-sdk; Tracer needs it installed too


def test_the_layer_matches_the_functions_architecture_and_python() -> None:
    """The layer holds compiled dependencies (pydantic-core): another architecture's or Python's fails to import."""
    functions = TEMPLATE["Globals"]["Function"]
    match = layer_parameter()
    assert functions["Architectures"] == [match["arch"]]
    assert functions["Runtime"] == f"python{match['python']}"
    assert functions["Layers"] == [{"Ref": "PowertoolsLayerArn"}]


def test_this_environment_runs_the_pinned_version() -> None:
    """A venv left on another version tests code Lambda will not run: reinstall with `pip install -e '.[dev]'`."""
    assert importlib.metadata.version("aws-lambda-powertools") == pinned()[1]
    assert importlib.metadata.version("aws-xray-sdk")  # the [tracer] extra is installed
