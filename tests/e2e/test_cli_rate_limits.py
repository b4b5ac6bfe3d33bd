"""`onward rate-limits set|list|delete` as an operator runs them: a child process against the embedded endpoint's
stack (the `environment` fixture), the claims made through JobStores on the same stack (each a worker process of
its own, reading the limits it finds)."""

from __future__ import annotations

import json

from onward.domain.models import NewJob
from onward.store.service import JobStore
from tests.e2e.test_cli_tenants import onward

ECHO = NewJob(type="demo.echo", params={})


def test_set_list_and_delete_a_limit_as_the_claims_see_it(environment, settings, dynamodb):
    """Catches a command that writes nothing the claims read (the second job would start at once), a listing
    that does not show the limit as GET /rate-limits would, or a delete that leaves it in force."""
    result = onward(environment, "rate-limits", "set", "--tenant", "acme", "type:demo.echo", "--limit", "1",
                    "--period", "3600")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("tenant acme: type:demo.echo at most 1 starts per 3600 s")
    listed = json.loads(onward(environment, "rate-limits", "list", "--tenant", "acme", "--json").stdout)
    [entry] = listed["rate_limits"]
    assert (entry["key"], entry["limit"], entry["period_s"], entry["tenant_id"]) == ("type:demo.echo", 1, 3600.0,
                                                                                     "acme")
    assert "type:demo.echo" in onward(environment, "rate-limits", "list", "--tenant", "acme").stdout
    store = JobStore(settings, client=dynamodb)
    store.create("acme", ECHO)
    store.create("acme", ECHO)
    assert store.claim("w", 30) is not None
    assert store.claim("w", 30) is None  # the second waits for its token an hour away
    assert onward(environment, "rate-limits", "delete", "--tenant", "acme", "type:demo.echo").returncode == 0
    assert onward(environment, "rate-limits", "delete", "--tenant", "acme", "type:demo.echo").returncode == 1
    assert "no rate limits" in onward(environment, "rate-limits", "list", "--tenant", "acme").stdout


def test_a_bad_key_limit_or_period_is_refused_and_writes_nothing(environment):
    """Catches a bad definition written (a claim would read a limit it cannot apply) or refused without a reason."""
    for arguments in (("Bad Key!", "--limit", "5", "--period", "1"), ("tenant", "--limit", "0", "--period", "1"),
                      ("tenant", "--limit", "5", "--period", "-1")):
        refused = onward(environment, "rate-limits", "set", "--tenant", "acme", *arguments)
        assert refused.returncode == 2 and refused.stderr.startswith("onward rate-limits set: "), refused.stderr
    assert json.loads(onward(environment, "rate-limits", "list", "--tenant", "acme", "--json").stdout) == {
        "rate_limits": []}
