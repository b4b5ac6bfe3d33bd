"""Capacity arithmetic (onward/domain/capacity.py), checked with the brief's own numbers."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onward.domain.capacity import Workload, assess, ceiling, drain_time

BRIEF = Workload(arrival_rate=400, slots=20, write_ms=200, recovered_write_ms=20, observed_after_s=60, outage_s=90)


def test_the_briefs_backlog_and_recovery():
    report = assess(BRIEF)
    assert report.ceiling_per_s == pytest.approx(100)  # 20 slots at 200 ms/write
    assert report.growth_per_s == pytest.approx(300)  # 400/s arriving
    assert report.backlog_at_observation == pytest.approx(18_000)  # after 60 s
    assert report.recovered_ceiling_per_s == pytest.approx(1_000)  # at 20 ms/write
    assert report.spare_per_s == pytest.approx(600)
    assert report.drain_s == pytest.approx(30)


def test_the_briefs_failover_and_retention_envelope():
    report = assess(BRIEF)
    assert report.outage_arrivals == pytest.approx(36_000)  # 90 s of arrivals, no completions
    assert report.backlog_after_outage == pytest.approx(54_000)
    assert report.drain_after_outage_s == pytest.approx(90)
    assert report.retention_envelope_s == pytest.approx(240)  # 60 + 90 + 90


def test_a_consumer_that_keeps_up_has_no_backlog():
    report = assess(Workload(arrival_rate=50, slots=20, write_ms=200, recovered_write_ms=20, observed_after_s=60))
    assert (report.growth_per_s, report.backlog_at_observation, report.drain_s) == (0, 0, 0)


def test_a_backlog_that_never_drains_has_no_envelope():
    report = assess(Workload(arrival_rate=2_000, slots=20, write_ms=200, recovered_write_ms=20, observed_after_s=60))
    assert report.drain_s is None and report.retention_envelope_s is None


@given(slots=st.integers(1, 1000), write_ms=st.floats(0.1, 10_000))
def test_ceiling_is_slots_over_write_time(slots, write_ms):
    assert ceiling(slots, write_ms) * write_ms / 1000 == pytest.approx(slots)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="slots must be >= 1"):
        Workload(arrival_rate=1, slots=0, write_ms=1, recovered_write_ms=1, observed_after_s=0)
    with pytest.raises(ValueError, match="cannot be negative"):
        Workload(arrival_rate=-1, slots=1, write_ms=1, recovered_write_ms=1, observed_after_s=0)
    assert drain_time(0, 0) == 0


def test_the_capacity_command_prints_each_figure_with_its_unit_and_as_json(capsys):
    import json

    from onward.cli.main import main

    argv = ["capacity", "--arrival-rate", "400", "--slots", "20", "--write-ms", "200", "--recovered-write-ms", "20",
            "--observed-after", "60", "--outage", "90"]
    assert main(argv) == 0
    lines = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert lines["ceiling_per_s"] == "100.0 events/s" and lines["backlog_at_observation"] == "18,000.0 events"
    assert lines["drain_s"] == "30.0 s" and lines["retention_envelope_s"] == "240.0 s"
    assert main([*argv, "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["spare_per_s"] == 600 and figures["drain_after_outage_s"] == 90


def test_the_capacity_command_refuses_impossible_input(capsys):
    from onward.cli.main import main

    command = ["capacity", "--arrival-rate", "1", "--slots", "0", "--write-ms", "1", "--recovered-write-ms", "1"]
    assert main(command) == 2
    assert "slots" in capsys.readouterr().err
