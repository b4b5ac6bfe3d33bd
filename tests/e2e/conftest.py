"""Fixtures of the browser tests: Debian's Chromium (/usr/bin/chromium) driven by Playwright (no browser
download), one per module; the whole platform on the embedded endpoint (workers, reaper, heartbeats, relay and
projector pollers, HTTP API) per test, with the credentials of tests/e2e/page_support.py; a page on it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from onward.bootstrap import Deployment
from onward.runtime.demo_jobs import registry
from onward_infra.platform import LocalPlatform, PlatformOptions
from tests.e2e.page_support import CHROMIUM, CHROMIUM_ARGS, OPERATOR, STALE_AFTER_S, TOKENS


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(f"no browser at {CHROMIUM}: install Debian's chromium (`apt-get install -y chromium`); "
                    ".ci/run does it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def platform_options(request: pytest.FixtureRequest) -> PlatformOptions:
    """The platform a test runs on: 2 workers, unless it asks for others with
    @pytest.mark.parametrize("platform", [{"workers": 0}], indirect=True)."""
    options = {"workers": 2, "lease_s": 3.0, "heartbeat_interval_s": 0.4, "poll_idle_s": 0.1, "http_port": 0}
    options.update(getattr(request, "param", {}) or {})
    return PlatformOptions(**options)


@pytest.fixture
def platform(request: pytest.FixtureRequest, stack_environment,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalPlatform]:
    monkeypatch.setenv("ONWARD_TOKENS", ",".join(f"{tenant}={secret}" for tenant, secret in TOKENS.items()))
    monkeypatch.setenv("ONWARD_OPERATOR_TOKEN", OPERATOR)
    monkeypatch.setenv("ONWARD_STALE_AFTER_S", str(STALE_AFTER_S))
    monkeypatch.setenv("ONWARD_JOB_TYPES", ",".join(sorted(registry.types)))
    with LocalPlatform(Deployment.from_environment(), registry, platform_options(request)) as running:
        yield running


@pytest.fixture
def page(browser, platform: LocalPlatform) -> Iterator[Any]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(platform.url + "/")
    yield page
    context.close()
