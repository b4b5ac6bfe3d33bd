"""What the status page's browser tests share (their fixtures are in tests/e2e/conftest.py): the credentials
the platform is started with, signing in, submitting, and screenshots a reviewer can look at.

Screenshots go to build/screenshots/ (gitignored), made by the test run: one PNG per named moment.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

CHROMIUM = Path(os.environ.get("ONWARD_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
TOKENS = {"acme": "acme-page-secret", "globex": "globex-page-secret"}
OPERATOR = "operator-page-secret"
STALE_AFTER_S = 3.0
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"


def sign_in(page: Any, tenant: str = "acme") -> None:
    page.get_by_label("Bearer token").fill(OPERATOR if tenant == "operator" else TOKENS[tenant])
    page.get_by_role("button", name="Use token").click()


def submit(page: Any, job_type: str, params: str = "{}") -> None:
    page.get_by_label("Type", exact=True).fill(job_type)
    page.get_by_label("Params (JSON object)").fill(params)
    page.get_by_role("button", name="Submit", exact=True).click()


def submitted_job_id(page: Any) -> str:
    from playwright.sync_api import expect

    status = page.locator("#submit-status")
    expect(status).to_have_text(re.compile(r"Job [0-9a-f]{32} "))
    found = re.search(r"[0-9a-f]{32}", status.inner_text())
    assert found is not None
    return found.group(0)


def screenshot(page: Any, name: str) -> Path:
    """A full-page PNG under build/screenshots/ (made here if missing) for a reviewer."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
