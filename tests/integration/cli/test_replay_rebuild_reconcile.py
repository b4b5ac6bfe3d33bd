"""`onward replay`, `onward rebuild-view` and `onward reconcile`, run in-process against the embedded stack."""

from __future__ import annotations

import pytest

from onward.cli.main import main
from onward.domain.models import ErrorSummary, NewJob
from onward.pipeline.view import StatusViewReader


@pytest.fixture
def finished_jobs(store, pipeline, clock):
    """Six jobs of two tenants in various end states, all projected."""
    job_ids = [store.create("acme" if n % 2 else "globex", NewJob(type="demo.echo", params={"n": n})).job.job_id
               for n in range(6)]
    for n in range(4):
        lease = store.claim("w1", 30)
        if n == 3:
            store.fail(lease, ErrorSummary.of("E", "x"), permanent=True)
        else:
            store.complete(lease, {"n": n})
    store.cancel(job_ids[-1])
    pipeline.drain()
    return job_ids


def view_snapshot(settings, dynamodb):
    return {view.job_id: view for view in StatusViewReader(dynamodb, settings.status_table).all()}


@pytest.mark.parametrize(("since", "until"), [
    ("2027-01-15T07:30:00.000Z", "2027-01-15T09:00:00.000Z"),  # hours of the by_time index (the test clock)
    ("2000-01-01T00:00:00.000Z", "2100-01-01T00:00:00.000Z"),  # too long for hourly queries: one scan
])
def test_replay_of_a_delivered_window_changes_nothing_in_the_view(finished_jobs, pipeline, store, settings,
                                                                   dynamodb, capsys, since, until):
    """Invariant 7: a replayed window is absorbed by the version guard (duplicates and stale events)."""
    before = view_snapshot(settings, dynamodb)
    events = sum(len(store.events(job_id)) for job_id in finished_jobs)
    assert main(["replay", "--since", since, "--until", until]) == 0
    assert f"{events} events selected, {events} re-published" in capsys.readouterr().out
    assert pipeline.drain() > 0
    assert view_snapshot(settings, dynamodb) == before


@pytest.mark.parametrize("flag", ["--job", "--tenant"])
def test_replay_selects_one_job_or_one_tenant(finished_jobs, store, flag, capsys):
    value = finished_jobs[0] if flag == "--job" else "acme"
    assert main(["replay", flag, value]) == 0
    out = capsys.readouterr().out
    expected = (len(store.events(finished_jobs[0])) if flag == "--job"
                else sum(len(store.events(j)) for j in finished_jobs if store.get(j).tenant_id == "acme"))
    assert f"{expected} events selected, {expected} re-published" in out


def test_rebuild_view_reports_the_live_view_identical(finished_jobs, capsys):
    assert main(["rebuild-view"]) == 0
    assert "identical to the live view (6 jobs)" in capsys.readouterr().out


def test_rebuild_view_reports_a_view_that_fell_behind(finished_jobs, store, settings, dynamodb, capsys):
    store.create("acme", NewJob(type="demo.echo"))  # committed, never relayed
    dynamodb.delete_item(TableName=settings.status_table, Key={"job_id": {"S": finished_jobs[0]}})
    assert main(["rebuild-view"]) == 1
    out = capsys.readouterr().out
    assert "2 missing from the view" in out and finished_jobs[0] in out


def test_reconcile_finds_a_lagging_view_and_repairs_it(finished_jobs, store, pipeline, settings, dynamodb, clock,
                                                       capsys, monkeypatch):
    lagging = store.create("acme", NewJob(type="demo.echo")).job  # its event never reaches the view
    pipeline.relay_poller.poll_once()  # relayed to Kinesis but the projector does not run
    monkeypatch.setattr("onward.domain.clock.system_clock", lambda: clock.now + 120_000)
    assert main(["reconcile", "--threshold-s", "60"]) == 1
    out = capsys.readouterr().out
    assert f"{lagging.job_id}: job v1, view never" in out and "1 jobs behind" in out
    assert main(["reconcile", "--threshold-s", "60", "--repair"]) == 0
    assert "re-published 1 events" in capsys.readouterr().out
    pipeline.drain()
    assert StatusViewReader(dynamodb, settings.status_table).get(lagging.job_id).version == 1
    assert main(["reconcile", "--threshold-s", "60"]) == 0


def test_replay_windows_compare_moments_not_text(store, pipeline, clock, capsys):
    """--since/--until are parsed with their zone and compared as moments. Before, they were compared with
    the events' UTC text: `...T10:00:00+02:00` (08:00 UTC) sorted after every 09:xxZ event, so a window
    given with an offset selected the wrong events (here: none instead of the later two)."""
    from onward.domain.clock import iso

    early = store.create("acme", NewJob(type="demo.echo")).job.job_id  # at the test clock's start
    clock.advance(3600)
    late = [store.create("acme", NewJob(type="demo.echo")).job.job_id for _ in range(2)]
    cut = clock.now - 1800 * 1000  # half an hour before the late ones, in UTC
    offset = iso(cut).replace("Z", "")[:19]
    hours, minutes = int(offset[11:13]), int(offset[14:16])
    shifted = f"{offset[:11]}{(hours + 2) % 24:02d}:{minutes:02d}{offset[16:]}+02:00"
    assert (hours + 2) < 24, "the test clock's hour leaves room for +02:00 on the same day"

    before, after = iso(clock.now - 7200 * 1000), iso(clock.now + 60 * 1000)  # the test clock is not now
    assert main(["replay", "--tenant", "acme", "--since", shifted, "--until", after]) == 0
    assert "2 events selected, 2 re-published" in capsys.readouterr().out
    assert main(["replay", "--tenant", "acme", "--since", before, "--until", shifted]) == 0
    assert "1 events selected, 1 re-published" in capsys.readouterr().out
    assert early and len(late) == 2
