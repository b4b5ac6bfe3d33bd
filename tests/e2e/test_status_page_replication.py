"""The status page after a failover (issue 39, docs/regional-recovery.md "The status page in the new Region"):
the epoch item raised in the platform's Region, the page says which home was lost and after when updates may
be missing, every status stays stale while the lost home's writes are not reconciled (without the delay
notice: the view itself is current), and once declared reconciled the banner says what may have been lost.

How it would break without the code: the page would show the new Region's statuses as fresh as its watermark,
silent about what the lost home decided and never sent."""

from __future__ import annotations

import re

import httpx
import pytest

from onward.bootstrap import ApiDeployment, Deployment
from onward.operator.replication import declare_reconciled, record_home_seen
from tests.e2e.page_support import TOKENS, screenshot, sign_in, submit, submitted_job_id

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]


def test_the_page_says_what_the_lost_home_may_not_have_sent(page, platform) -> None:
    from playwright.sync_api import expect

    sign_in(page)
    submit(page, "demo.echo", '{"before": "failover"}')
    job_id = submitted_job_id(page)
    expect(page.locator(f'tr[data-job-id="{job_id}"] .status')).to_have_text("succeeded")
    expect(page.locator("#replication-notice")).to_be_hidden()

    deployment = Deployment.from_environment()  # the one the platform and its API handler share
    raised = deployment.job_store.raise_region_epoch(1, home="us-west-2", previous_home="us-east-1",
                                                     reason="drill", decided_by="test")
    # the failover's operator records the newest heartbeat of the old home this Region holds
    assert record_home_seen(deployment.client("dynamodb"), deployment.settings.require("jobs_table"),
                            deployment.settings.require("outbox_table"), 1, raised.fenced_at) is not None
    ApiDeployment.from_environment().replication_status.forget()  # the API's own components (30 s cache)
    status = httpx.get(f"{platform.url}/jobs/{job_id}", headers={"Authorization": f"Bearer {TOKENS['acme']}"},
                       timeout=30).json()
    assert status["freshness"]["stale"] is True
    assert status["freshness"]["replication"]["home_lost"] == "us-east-1"
    assert status["freshness"]["replication"]["reconciled"] is False
    notice = page.locator("#replication-notice")
    expect(notice).to_contain_text(re.compile(
        r"Failed over from us-east-1 at \d\d:\d\d:\d\d \(epoch 1\)\. Updates from us-east-1 after "
        r"\d\d:\d\d:\d\d may be missing; reconciling\."))
    expect(page.locator("#delay-notice")).to_be_hidden()  # the view is current: not "delayed"
    screenshot(page, "replication-unreconciled")

    declare_reconciled(deployment.client("dynamodb"), deployment.settings.require("jobs_table"), 1,
                       by="test", reason="old home's backlog reconciled", at=raised.fenced_at or 0)
    ApiDeployment.from_environment().replication_status.forget()  # the API's own components (30 s cache)
    expect(notice).to_contain_text("may have been lost: they did not reach this Region.")
