"""The Deployment (onward/bootstrap.py): each component built once, on first use, over one client per
service; one deployment per environment per process; a missing or unusable variable named when it matters.
Nothing here calls AWS (building a boto3 client does not)."""

from __future__ import annotations

import threading

import pytest

from onward.api.auth import JwtClaimsAuthenticator, TokenAuthenticator
from onward.bootstrap import DEFAULT_JOB_TYPES, Deployment
from onward.settings import InvalidSetting, MissingSetting, Settings

ENVIRONMENT = {"JOBS_TABLE": "jobs", "OUTBOX_TABLE": "outbox", "STATUS_TABLE": "status",
               "CHECKPOINT_TABLE": "checkpoints", "CONFLICTS_TABLE": "conflicts", "PARKED_TABLE": "parked",
               "EVENTS_STREAM": "events", "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}


class FakeClient:
    def __init__(self, service: str) -> None:
        self.service = service


def test_the_same_environment_gets_the_same_deployment_and_another_one_its_own() -> None:
    first = Deployment.from_environment(ENVIRONMENT)
    assert Deployment.from_environment(dict(ENVIRONMENT)) is first
    assert Deployment.from_environment({**ENVIRONMENT, "HOME": "/elsewhere"}) is first  # a variable it skips
    other = Deployment.from_environment({**ENVIRONMENT, "JOBS_TABLE": "other-jobs"})
    assert other is not first and other.settings.jobs_table == "other-jobs"
    tokens = Deployment.from_environment({**ENVIRONMENT, "ONWARD_TOKENS": "acme=s3cret-acme"})
    assert tokens is not first and isinstance(tokens.authenticator, TokenAuthenticator)


def test_each_component_is_built_once_over_one_client_per_service() -> None:
    deployment = Deployment(Settings.from_environment(ENVIRONMENT))
    assert deployment.job_store is deployment.job_store
    assert deployment.relay is deployment.relay
    assert deployment.client("dynamodb") is deployment.client("dynamodb")
    assert deployment.client("dynamodb") is not deployment.client("kinesis")


def test_the_clients_given_are_the_deployments_and_the_others_are_built() -> None:
    clients = {"dynamodb": FakeClient("dynamodb"), "kinesis": FakeClient("kinesis")}
    deployment = Deployment(Settings.from_environment(ENVIRONMENT), clients=clients)
    assert deployment.client("dynamodb") is clients["dynamodb"]
    assert deployment.client("kinesis") is clients["kinesis"]
    assert deployment.client("dynamodbstreams").meta.service_model.service_name == "dynamodbstreams"


def test_components_are_built_lazily_and_a_missing_variable_is_named_when_one_needs_it() -> None:
    deployment = Deployment.from_environment({"JOBS_TABLE": "jobs", "OUTBOX_TABLE": "outbox",
                                              "AWS_DEFAULT_REGION": "us-east-1"})
    assert deployment.job_store is not None  # needs only the two tables it has
    with pytest.raises(MissingSetting, match="EVENTS_STREAM"):
        _ = deployment.relay
    with pytest.raises(MissingSetting, match="EVENTS_STREAM"):
        _ = deployment.relay  # not kept: asked again, refused again


def test_a_value_settings_cannot_use_is_refused_at_once() -> None:
    with pytest.raises(InvalidSetting, match="ONWARD_STALE_AFTER_S"):
        Deployment.from_environment({**ENVIRONMENT, "ONWARD_STALE_AFTER_S": "soon"})


def test_the_entry_points_configuration_comes_from_the_environment_with_defaults() -> None:
    plain = Deployment(Settings.from_environment(ENVIRONMENT))
    assert plain.job_types == frozenset(DEFAULT_JOB_TYPES)
    assert isinstance(plain.authenticator, JwtClaimsAuthenticator)
    assert plain.worker_lease_s == 60.0
    configured = Deployment(Settings.from_environment(ENVIRONMENT),
                            environ={"ONWARD_JOB_TYPES": " a.b , c ", "ONWARD_WORKER_LEASE_S": "5"})
    assert configured.job_types == {"a.b", "c"}
    assert configured.worker_lease_s == 5.0
    settings = Settings.from_environment(ENVIRONMENT)
    with pytest.raises(InvalidSetting, match="ONWARD_WORKER_LEASE_S"):
        _ = Deployment(settings, environ={"ONWARD_WORKER_LEASE_S": "-1"}).worker_lease_s
    with pytest.raises(TypeError, match="ONWARD_WORKER_MODULE=json"):
        _ = Deployment(settings, environ={"ONWARD_WORKER_MODULE": "json"}).worker_registry


def test_a_component_can_be_replaced_on_its_deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    deployment = Deployment(Settings.from_environment(ENVIRONMENT))
    mine = object()
    monkeypatch.setattr(deployment, "status_projector", mine)
    assert deployment.status_projector is mine


def test_threads_asking_at_once_get_one_component() -> None:
    deployment = Deployment(Settings.from_environment(ENVIRONMENT))
    seen: list[object] = []
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        seen.append(deployment.relay)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(relay) for relay in seen}) == 1


def test_the_archive_is_written_through_firehose_on_aws_to_a_directory_locally_or_not_at_all(tmp_path) -> None:
    """Breaks if the sink ignored ARCHIVE_DELIVERY_STREAM (the archiver on AWS would archive nothing) or
    preferred the local directory over it."""
    from onward.pipeline.archive.firehose import FirehoseArchive
    from onward.pipeline.archive.parquet import ParquetDirectory

    settings = Settings.from_environment(ENVIRONMENT)
    clients = {"firehose": object()}
    on_aws = Deployment(settings, clients=clients,
                        environ={"ARCHIVE_DELIVERY_STREAM": "s-archive", "ONWARD_ARCHIVE_DIR": str(tmp_path)})
    assert isinstance(on_aws.archive_sink, FirehoseArchive)
    local = Deployment(settings, environ={"ONWARD_ARCHIVE_DIR": str(tmp_path)})
    assert isinstance(local.archive_sink, ParquetDirectory) and local.archive_sink.root == tmp_path
    assert Deployment(settings, environ={}).archive_sink is None
    assert Deployment(settings, environ={}).archive_reader(max_wait_s=1.0) is None
