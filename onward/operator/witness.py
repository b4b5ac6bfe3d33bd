"""The witness record (issue 39, docs/regional-recovery.md "What is authoritative"): `{"home": region, "epoch": e}`
kept in a third AWS Region, neither home nor standby. `onward failover` writes it first; every process of the
platform reads it (onward.runtime.authority) and acts only while it names the process's Region.

`ONWARD_WITNESS` says where it is:

- `ssm:<region>:<name>`: an SSM Parameter Store parameter (a String holding the JSON) in that Region; the
  deployed form (`/onward/<stack>/home`). Parameter Store has no conditional write, so `write` reads, checks
  the epoch it expects, writes with Overwrite, and checks that the version PutParameter answers is the one
  after the version it read: a write that came between is detected after the fact (WitnessRaceLost), not
  prevented (https://docs.aws.amazon.com/systems-manager/latest/APIReference/API_PutParameter.html: Overwrite,
  Version; GetParameter's Version).
- `table:<region>`: the item `WITNESS` / `HOME` in the jobs table (JOBS_TABLE) of that Region, written with a
  condition on the epoch it replaces (a real compare-and-set).

The embedded endpoint serves SSM, and an endpoint of moto's default Region serves any Region a signed request
names: locally `ssm:` works as on AWS. Endpoints that are one Region each (the two-Region drill) need the
witness's own endpoint: `ONWARD_WITNESS_ENDPOINT_URL` (unset on AWS, where the Region's endpoint is used).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from onward.domain.regions import Witness

# A witness read sits in the claim path of every worker once per check: it must give up fast, the lease
# covers a failed read.
WITNESS_CLIENT_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 2}, connect_timeout=2,
                               read_timeout=3)
WITNESS_KEY = {"pk": {"S": "WITNESS"}, "sk": {"S": "HOME"}}


class WitnessError(RuntimeError):
    """Base of the witness's failures."""


class WitnessUnreachable(WitnessError):
    """The witness could not be read or written (its Region, the network, permissions)."""


class WitnessRaceLost(WitnessError):
    """The witness no longer holds the epoch the write expected: someone else failed over first."""


class InvalidWitness(ValueError):
    """ONWARD_WITNESS is not `ssm:<region>:<name>` nor `table:<region>`, or the record is malformed."""


class WitnessRecord(Protocol):
    """Where the witness is kept."""

    @property
    def where(self) -> str:
        """The record's location, for messages."""
        ...

    def read(self) -> Witness | None:
        """The record; None when it was never written. WitnessUnreachable when it cannot be read."""
        ...

    def write(self, witness: Witness, *, expected_epoch: int) -> None:
        """Replace the record whose epoch is `expected_epoch` (an absent record counts as 0). WitnessRaceLost
        when it holds another; WitnessUnreachable when it cannot be written."""
        ...


@dataclass(frozen=True)
class WitnessSpec:
    kind: str  # "ssm" | "table"
    region: str
    name: str | None  # the parameter's name (ssm)

    @classmethod
    def parse(cls, text: str) -> WitnessSpec:
        kind, _, rest = text.strip().partition(":")
        if kind == "ssm":
            region, _, name = rest.partition(":")
            if region and name:
                return cls("ssm", region, name)
        elif kind == "table" and rest and ":" not in rest:
            return cls("table", rest, None)
        raise InvalidWitness(f"ONWARD_WITNESS must be ssm:<region>:<parameter name> or table:<region>, not {text!r}")

    def __str__(self) -> str:
        return f"ssm:{self.region}:{self.name}" if self.kind == "ssm" else f"table:{self.region}"


ClientFactory = Callable[[str, str], Any]  # (service, region) -> a boto3 client


def client_factory(endpoint_url: str | None) -> ClientFactory:
    """Signed clients of `endpoint_url` (None: AWS's Regional endpoints), with WITNESS_CLIENT_CONFIG. Signed
    even where the platform's own are not: the embedded endpoint tells a request's Region by its signature."""

    def build(service: str, region: str) -> Any:
        return boto3.client(service, endpoint_url=endpoint_url, region_name=region, config=WITNESS_CLIENT_CONFIG)

    return build


def witness_record(spec: WitnessSpec, clients: ClientFactory, *, jobs_table: str | None) -> WitnessRecord:
    """The record `spec` names, over `clients`; `jobs_table` for `table:`."""
    if spec.kind == "ssm":
        assert spec.name is not None
        return SsmWitness(clients("ssm", spec.region), spec.name, spec.region)
    if not jobs_table:
        raise InvalidWitness("ONWARD_WITNESS=table:<region> needs JOBS_TABLE (the witness item's table)")
    return TableWitness(clients("dynamodb", spec.region), jobs_table, spec.region)


def parse_record(text: str, where: str) -> Witness:
    try:
        document = json.loads(text)
        home, epoch = document["home"], document["epoch"]
    except (ValueError, KeyError, TypeError):
        raise InvalidWitness(f"the witness {where} holds {text!r}, not {{\"home\": ..., \"epoch\": ...}}") from None
    if not isinstance(home, str) or not home or isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise InvalidWitness(f"the witness {where} holds {text!r}: home must be a Region, epoch a whole number")
    return Witness(home=home, epoch=epoch)


class SsmWitness:
    """The witness as an SSM parameter (see the module's docstring: read-check-write, no condition)."""

    def __init__(self, client: Any, name: str, region: str) -> None:
        self._client = client
        self._name = name
        self.where = f"ssm:{region}:{name}"

    def read(self) -> Witness | None:
        found = self._read()
        return None if found is None else found[0]

    def _read(self) -> tuple[Witness, int] | None:
        try:
            parameter = self._client.get_parameter(Name=self._name)["Parameter"]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ParameterNotFound":
                return None
            raise WitnessUnreachable(f"the witness {self.where} cannot be read: {error}") from error
        except BotoCoreError as error:
            raise WitnessUnreachable(f"the witness {self.where} cannot be read: {error}") from error
        return parse_record(parameter["Value"], self.where), int(parameter["Version"])

    def write(self, witness: Witness, *, expected_epoch: int) -> None:
        found = self._read()
        held = 0 if found is None else found[0].epoch
        if held != expected_epoch:
            raise WitnessRaceLost(f"the witness {self.where} holds epoch {held}, not {expected_epoch}")
        try:
            written = self._client.put_parameter(
                Name=self._name, Value=json.dumps({"home": witness.home, "epoch": witness.epoch}),
                Type="String", Overwrite=True)
        except (ClientError, BotoCoreError) as error:
            raise WitnessUnreachable(f"the witness {self.where} cannot be written: {error}") from error
        previous_version = 0 if found is None else found[1]
        if int(written["Version"]) != previous_version + 1:  # another write came between the read and ours
            raise WitnessRaceLost(f"the witness {self.where} was written by someone else at the same time "
                                  f"(version {written['Version']}, expected {previous_version + 1}): read it again")


class TableWitness:
    """The witness as the item WITNESS / HOME of a Region's jobs table, written with a condition."""

    def __init__(self, client: Any, table: str, region: str) -> None:
        self._client = client
        self._table = table
        self.where = f"table:{region} ({table})"

    def read(self) -> Witness | None:
        try:
            item = self._client.get_item(TableName=self._table, Key=WITNESS_KEY, ConsistentRead=True).get("Item")
        except (ClientError, BotoCoreError) as error:
            raise WitnessUnreachable(f"the witness {self.where} cannot be read: {error}") from error
        if item is None:
            return None
        try:
            return Witness(home=item["home"]["S"], epoch=int(item["epoch"]["N"]))
        except (KeyError, ValueError):
            raise InvalidWitness(f"the witness {self.where} is malformed: {item!r}") from None

    def write(self, witness: Witness, *, expected_epoch: int) -> None:
        condition = "epoch = :expected" if expected_epoch else "attribute_not_exists(pk) OR epoch = :expected"
        try:
            self._client.put_item(
                TableName=self._table,
                Item={**WITNESS_KEY, "home": {"S": witness.home}, "epoch": {"N": str(witness.epoch)}},
                ConditionExpression=condition, ExpressionAttributeValues={":expected": {"N": str(expected_epoch)}})
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                held = self.read()
                raise WitnessRaceLost(f"the witness {self.where} holds epoch {held.epoch if held else 0}, "
                                      f"not {expected_epoch}") from None
            raise WitnessUnreachable(f"the witness {self.where} cannot be written: {error}") from error
        except BotoCoreError as error:
            raise WitnessUnreachable(f"the witness {self.where} cannot be written: {error}") from error


class FakeWitness:
    """A witness in memory (tests and drills): `unreachable` makes every call fail as an outage would."""

    where = "memory"

    def __init__(self, witness: Witness | None = None) -> None:
        self.record = witness
        self.unreachable = False
        self.reads = 0

    def read(self) -> Witness | None:
        self.reads += 1
        if self.unreachable:
            raise WitnessUnreachable("the witness is unreachable (fake)")
        return self.record

    def write(self, witness: Witness, *, expected_epoch: int) -> None:
        if self.unreachable:
            raise WitnessUnreachable("the witness is unreachable (fake)")
        held = 0 if self.record is None else self.record.epoch
        if held != expected_epoch:
            raise WitnessRaceLost(f"the witness holds epoch {held}, not {expected_epoch}")
        self.record = witness
