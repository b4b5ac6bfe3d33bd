"""The documentation in the repository (README.md, CONTRIBUTING.md, docs/*.md) points only at things that
exist: every relative link resolves to a file (and its #anchor to a heading there), every repository path it
names in backticks exists, every test it names by `file.py::test_name` is defined, and every alarm and
parameter of template.yaml is documented (docs/operations.md, docs/deploy.md). Without these checks a file
moved, a test renamed or an alarm added would leave the docs sending readers to nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from onward_infra.template import load_template

ROOT = Path(__file__).resolve().parents[3]
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
REPOSITORY_PATH = re.compile(r"(?:onward|tests|bench|tools|docs|infra)/[\w./*-]*[\w*]")
TOKEN_BREAK = re.compile(r"[\s(),;'\"=]+")
NAMED_TEST = re.compile(r"((?:infra/)?tests/[\w/]+\.py)::(test_\w+)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)


def _prose(page: Path) -> str:
    """The page without its fenced code blocks (commands and their output are not links)."""
    return FENCE.sub("", page.read_text())


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, markup and punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in HEADING.findall(_prose(page)):
        anchor, suffix = _anchor(heading), 0
        while (anchor if suffix == 0 else f"{anchor}-{suffix}") in found:
            suffix += 1
        found.add(anchor if suffix == 0 else f"{anchor}-{suffix}")
    return found


def _ids(pages: list[Path]) -> list[str]:
    return [str(page.relative_to(ROOT)) for page in pages]


def test_the_pages_exist_and_the_readme_is_a_page():
    names = set(_ids(PAGES))
    assert {"README.md", "CONTRIBUTING.md", "docs/architecture.md", "docs/api.md"} <= names
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(_prose(page)):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto: are not the repository's
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading with that anchor")
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_every_repository_path_named_exists(page):
    missing = []
    for code in CODE.findall(page.read_text()):
        for token in TOKEN_BREAK.split(code):
            named = token.split("::")[0]
            path = named.rstrip("/")
            # a file (it has an extension, or is a glob) or a folder (written with its slash); not a scope
            # such as onward/onward-operator
            looks_like_a_path = named.endswith("/") or re.search(r"\.\w+$|\*", path)
            if REPOSITORY_PATH.fullmatch(path) and looks_like_a_path and not any(ROOT.glob(path)):
                missing.append(path)
    assert missing == []


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_every_test_named_is_defined(page):
    missing = []
    for file, test in NAMED_TEST.findall(page.read_text()):
        source = ROOT / file
        if not source.exists() or not re.search(rf"^\s*(async\s+)?def {test}\(", source.read_text(), re.MULTILINE):
            missing.append(f"{file}::{test}")
    assert missing == []


def test_every_alarm_of_the_template_is_in_operations():
    alarms = [name for name, resource in load_template(role=None)["Resources"].items()
              if resource["Type"] == "AWS::CloudWatch::Alarm"]
    assert len(alarms) > 20
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert [alarm for alarm in alarms if f"`{alarm}`" not in operations] == []


def test_every_parameter_of_the_template_is_in_deploy():
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    assert [name for name in load_template(role=None)["Parameters"] if f"`{name}`" not in deploy] == []
