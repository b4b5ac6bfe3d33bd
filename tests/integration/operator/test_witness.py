"""The witness record's two adapters (onward.operator.witness) on the embedded endpoint: an SSM parameter in a
Region of its own (the endpoint serves SSM, and a signed request names its Region) and the item WITNESS/HOME
of a jobs table, each read back, replaced only over the epoch it expects.

How it would break without the code: an SSM write that did not check the epoch it replaces would let a second
operator's failover overwrite the first's (two homes); a table write without its condition the same; a read
that raised on a parameter never written would stop every process of a deployment that never failed over."""

from __future__ import annotations

from typing import Any

import pytest

from onward.domain.regions import Witness
from onward.operator.witness import (
    InvalidWitness,
    WitnessRaceLost,
    WitnessRecord,
    WitnessSpec,
    WitnessUnreachable,
    client_factory,
    witness_record,
)
from onward.settings import Settings
from onward_infra.endpoint import EmbeddedEndpoint

WITNESS_REGION = "ca-central-1"  # neither the tests' Region nor the drill's


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


def _round_trip(record: WitnessRecord) -> None:
    assert record.read() is None  # never written: the configured home stands
    record.write(Witness("eu-west-1", 1), expected_epoch=0)
    assert record.read() == Witness("eu-west-1", 1)
    with pytest.raises(WitnessRaceLost):
        record.write(Witness("us-west-2", 1), expected_epoch=0)  # a second failover from the same reading
    assert record.read() == Witness("eu-west-1", 1)
    record.write(Witness("us-west-2", 2), expected_epoch=1)
    assert record.read() == Witness("us-west-2", 2)


def test_the_ssm_witness_in_a_third_region(endpoint: EmbeddedEndpoint, credentials: None,
                                           request: pytest.FixtureRequest) -> None:
    spec = WitnessSpec.parse(f"ssm:{WITNESS_REGION}:/onward/{request.node.name}/home")
    _round_trip(witness_record(spec, client_factory(endpoint.url), jobs_table=None))
    # the parameter is in that Region only: the same name in the tests' Region was never written
    other = witness_record(WitnessSpec("ssm", "us-east-1", spec.name), client_factory(endpoint.url), jobs_table=None)
    assert other.read() is None


def test_the_table_witness_is_a_conditional_item_of_the_jobs_table(settings: Settings, endpoint: EmbeddedEndpoint,
                                                                   dynamodb: Any, credentials: None) -> None:
    spec = WitnessSpec.parse(f"table:{settings.region}")
    dynamodb.delete_item(TableName=settings.jobs_table, Key={"pk": {"S": "WITNESS"}, "sk": {"S": "HOME"}})
    try:
        _round_trip(witness_record(spec, client_factory(endpoint.url), jobs_table=settings.jobs_table))
    finally:
        dynamodb.delete_item(TableName=settings.jobs_table, Key={"pk": {"S": "WITNESS"}, "sk": {"S": "HOME"}})


def test_an_unreachable_witness_says_so(credentials: None) -> None:
    record = witness_record(WitnessSpec.parse("ssm:eu-west-1:/onward/x/home"),
                            client_factory("http://127.0.0.1:9"), jobs_table=None)
    with pytest.raises(WitnessUnreachable):
        record.read()


@pytest.mark.parametrize("text", ["ssm:eu-west-1", "table:", "dynamo:eu-west-1", "ssm::/x"])
def test_a_malformed_spec_is_refused(text: str) -> None:
    with pytest.raises(InvalidWitness):
        WitnessSpec.parse(text)
