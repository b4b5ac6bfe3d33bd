"""`onward pause`, `onward resume`, `onward pauses`, `onward drain` as an operator runs them: a child process against
the embedded endpoint's stack (the `environment` fixture), the jobs made and claimed through JobStores on the same
stack (each a worker process of its own, reading the switches it finds)."""

from __future__ import annotations

import json

from onward.domain.models import NewJob
from onward.store.service import JobStore
from tests.e2e.test_cli_tenants import onward

ECHO = NewJob(type="demo.echo", params={})


def test_pause_list_and_resume_a_tenant_as_the_claims_see_it(environment, settings, dynamodb):
    """Catches a command that writes nothing the claims read (a paused tenant's job would start), a listing that
    does not show it, or a resume that is not lifted."""
    result = onward(environment, "pause", "--tenant", "acme")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("tenant acme is paused;")
    assert "already" in onward(environment, "pause", "--tenant", "acme").stdout
    assert onward(environment, "pause", "--type", "demo.echo", "--tenant", "globex").returncode == 0
    assert json.loads(onward(environment, "pauses", "--json").stdout) == {
        "pauses": [{"tenant": "acme", "type": None}, {"tenant": "globex", "type": "demo.echo"}], "draining": False}
    store = JobStore(settings, client=dynamodb)
    store.create("acme", ECHO)
    assert store.claim("w", 30) is None
    assert onward(environment, "resume", "--tenant", "acme").returncode == 0
    assert onward(environment, "resume", "--tenant", "acme").returncode == 1  # no such pause any more
    lease = JobStore(settings, client=dynamodb).claim("w", 30)
    assert lease is not None and lease.job.tenant_id == "acme"


def test_drain_on_holds_every_start_and_off_lets_them_run(environment, settings, dynamodb):
    """Catches a drain switch the claims do not read, or a status that does not say it."""
    JobStore(settings, client=dynamodb).create("acme", ECHO)
    assert onward(environment, "drain", "on").returncode == 0
    assert onward(environment, "drain", "status").stdout.strip() == "drain switch on"
    assert "ON" in onward(environment, "pauses").stdout
    assert JobStore(settings, client=dynamodb).claim("w", 30) is None
    assert onward(environment, "drain", "off").returncode == 0
    assert JobStore(settings, client=dynamodb).claim("w", 30) is not None


def test_a_pause_of_nothing_or_of_a_bad_name_is_refused_with_the_reason(environment):
    """Catches a pause of nothing accepted (it would write an item no claim can match) or a bad name written."""
    empty = onward(environment, "pause")
    assert empty.returncode == 2 and "names a tenant" in empty.stderr
    bad = onward(environment, "pause", "--type", "Not A Type")
    assert bad.returncode == 2 and "job type" in bad.stderr
    assert json.loads(onward(environment, "pauses", "--json").stdout)["pauses"] == []


def test_resume_of_a_type_puts_its_held_jobs_back_with_progress(environment, settings, dynamodb):
    """Catches `onward resume` lifting a type's pause without putting its held jobs back (they would never run)."""
    assert onward(environment, "pause", "--type", "demo.echo").returncode == 0
    store = JobStore(settings, client=dynamodb)
    for _ in range(3):
        store.create("acme", ECHO)
    assert store.claim("w", 30) is None  # each one met is held aside
    result = onward(environment, "resume", "--type", "demo.echo")
    assert result.returncode == 0, result.stderr
    assert "  3 held jobs put back in their queues" in result.stdout
    assert "3 held jobs of type demo.echo for every tenant put back with their due times" in result.stdout
    worker = JobStore(settings, client=dynamodb)
    assert [worker.claim("w", 30) is not None for _ in range(3)] == [True] * 3
