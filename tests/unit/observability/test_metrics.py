"""The OpenTelemetry twins of the CloudWatch figures (onward.observability.metrics), read with the SDK's
InMemoryMetricReader."""

from __future__ import annotations

from onward.maintenance.backlog_types import OTHER, TypeDepth
from onward.observability.metrics import SHARD_ID, record_backlog, record_created, record_projection_lag
from onward.observability.tracing import JOB_TYPE, TENANT_ID


def test_queue_depth_is_by_tenant_and_a_drained_tenant_goes_to_zero(recorded):
    """A gauge keeps its last value: without setting a tenant that has nothing due any more to 0, its queue
    would read as full forever after it drained."""
    record_backlog({"acme": 3, "globex": 1}, running=2, oldest_due_age_s=4.5)
    record_backlog({"globex": 2}, running=1, oldest_due_age_s=0.0)
    depth = {point[0][TENANT_ID]: point[1] for point in recorded.points("onward.queue.depth")}
    assert depth == {"acme": 0, "globex": 2}
    assert [point[1] for point in recorded.points("onward.jobs.running")] == [1]
    assert [point[1] for point in recorded.points("onward.queue.oldest_due_age")] == [0.0]


def test_queue_depth_and_age_are_by_tenant_and_type_and_a_drained_type_goes_to_zero(recorded):
    """Catches the type dimension lost (depth by tenant only, as the issue's "per tenant and type" is not),
    an age recorded for a type whose age is unknown, and a type that drained left at its last depth."""
    record_backlog({"acme": 5}, running=0, oldest_due_age_s=9.0, due_by_type={
        "acme": {"demo.echo": TypeDepth(3, 9.0), "demo.flaky": TypeDepth(1, 2.0), OTHER: TypeDepth(1, None)}})
    record_backlog({"acme": 2}, running=0, oldest_due_age_s=1.0,
                   due_by_type={"acme": {"demo.echo": TypeDepth(2, 1.0)}})
    depth = {(attributes[TENANT_ID], attributes[JOB_TYPE]): value
             for attributes, value in recorded.points("onward.queue.depth")}
    assert depth == {("acme", "demo.echo"): 2, ("acme", "demo.flaky"): 0, ("acme", OTHER): 0}
    age = {attributes[JOB_TYPE]: value for attributes, value in recorded.points("onward.queue.age")}
    assert age == {"demo.echo": 1.0, "demo.flaky": 0.0, OTHER: 0.0}


def test_projection_lag_is_per_shard_and_creates_are_counted(recorded):
    record_projection_lag("shardId-000000000000", 120.0)
    record_projection_lag("shardId-000000000001", 40.0)
    record_created("acme", "demo.echo")
    record_created("acme", "demo.echo", 0)  # an Idempotency-Key repeat creates nothing
    lag = {point[0][SHARD_ID]: point[1] for point in recorded.points("onward.projection.lag")}
    assert lag == {"shardId-000000000000": 120.0, "shardId-000000000001": 40.0}
    assert [point[1] for point in recorded.points("onward.jobs.created")] == [1]


def test_nothing_is_recorded_when_otlp_is_off():
    """No providers: each helper returns before touching OpenTelemetry (it may not even be installed)."""
    record_backlog({"acme": 1}, running=0, oldest_due_age_s=0.0)
    record_projection_lag("shardId-000000000000", 1.0)
    record_created("acme", "demo.echo")
