"""Resource names and endpoint, read from the environment (`onward endpoint` prints them; SAM sets them).

Each resource of template.yaml named `<Thing>Table` / `<Thing>Stream` reaches the code as the variable
`<THING>_TABLE` / `<THING>_STREAM`. A component asks only for the names it uses (`settings.require`).
"""

from __future__ import annotations

import functools
import importlib
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
from botocore import UNSIGNED
from botocore.config import Config

from onward.domain.freshness import STALE_AFTER_S
from onward.domain.retention import InvalidRetentionPolicy, RetentionPolicy
from onward.pipeline.heartbeats import AWS_BEAT_SLACK_MS
from onward.store.ports.index_shards import DEFAULT_ACTIVE_SHARDS, MAX_ACTIVE_SHARDS

# Workers, stream consumers, the reaper, operators: patient, since a call given up is work redone later.
WORKER_CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 8},
    connect_timeout=5,
    read_timeout=30,
    max_pool_connections=64,
)
# The HTTP API's function runs inside API Gateway's 29 s: a call that hangs must fail fast enough for the
# handler to answer (a problem the client can retry) before the gateway answers 503/504 in its place. At worst
# one call takes 3 attempts x (1 s connect + 3 s read) plus standard mode's backoff (under 1 + 2 s): about 15 s.
# DynamoDB answers the API's reads and transactions in milliseconds, so 3 s is only ever reached by a stall.
# (botocore's `max_attempts` counts retries, `total_max_attempts` the first call too: 3 calls in all.)
API_CLIENT_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 3},
    connect_timeout=1,
    read_timeout=3,
    max_pool_connections=64,
)

# The services an embedded endpoint may be sent unsigned requests for (ONWARD_UNSIGNED_REQUESTS): their JSON
# protocol names the operation in X-Amz-Target, so the endpoint routes them without the signature's scope.
UNSIGNED_SERVICES = frozenset({"dynamodb", "dynamodbstreams", "kinesis"})


def unsigned_config(service: str) -> Config:
    """What a client of an embedded endpoint adds for `service`: no signature for UNSIGNED_SERVICES, nothing
    for the others."""
    return Config(signature_version=UNSIGNED) if service in UNSIGNED_SERVICES else Config()


DEFAULT_OUTBOX_RETENTION_DAYS = 7
DEFAULT_JOB_RETENTION_DAYS = 30
DAY_S = 86_400
_RESOURCES = ("jobs_table", "outbox_table", "status_table", "checkpoint_table", "conflicts_table",
              "parked_table", "events_stream", "relay_failures_queue", "projector_failures_queue",
              "webhook_deliveries_queue")  # the last: completion webhooks (issue 38)


class MissingSetting(RuntimeError):
    """A variable the code needs is not set."""


class InvalidSetting(ValueError):
    """A variable is set to a value the code cannot use."""


def environment_variable(resource: str) -> str:
    """`jobs_table` -> `JOBS_TABLE`."""
    return resource.upper()


@dataclass(frozen=True)
class Settings:
    jobs_table: str | None = None
    outbox_table: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    status_table: str | None = None
    checkpoint_table: str | None = None
    conflicts_table: str | None = None
    parked_table: str | None = None
    events_stream: str | None = None
    # the stream mappings' on-failure queues (their URLs): what `onward redrive` drains
    relay_failures_queue: str | None = None
    projector_failures_queue: str | None = None
    outbox_retention_days: int = DEFAULT_OUTBOX_RETENTION_DAYS  # the TTL writers stamp on outbox events
    # ONWARD_JOB_RETENTION_DAYS: how long a job's items, view row, conflicts and parked records are kept once
    # done (onward.store.dynamo.keys says from when)
    job_retention_days: int = DEFAULT_JOB_RETENTION_DAYS
    # ONWARD_RETENTION_POLICY: retention per tenant, job type and outcome (onward.domain.retention), JSON; empty:
    # every outcome kept job_retention_days. Validated here, so a bad document stops the deployment's start.
    retention_policy_document: str | None = None
    freshness_objective_s: float = STALE_AFTER_S  # ONWARD_STALE_AFTER_S
    heartbeat_interval_s: float = 0.0  # ONWARD_HEARTBEAT_INTERVAL_S: how often idle shards are confirmed
    # ONWARD_BEAT_SLACK_MS: how long before its listing of the outbox stream's shards a beat vouches
    # (onward.pipeline.heartbeats.plan_beat). AWS's by default; the embedded endpoint exports 0: it stamps commits in
    # milliseconds of this host's clock, and DescribeStream answers its live topology.
    beat_slack_ms: int = AWS_BEAT_SLACK_MS
    active_shards: int = DEFAULT_ACTIVE_SHARDS  # ONWARD_ACTIVE_SHARDS: partitions of the `active` index
    # ONWARD_UNSIGNED_REQUESTS: skip SigV4 for UNSIGNED_SERVICES. Only with an endpoint_url: the embedded
    # endpoint checks no signature, and signing is about a sixth of a local request's client CPU (0.83 ->
    # 0.70 ms for a GetItem, medians of 5 alternating runs); AWS would refuse every request.
    unsigned_requests: bool = False
    # ONWARD_PARAMETER_VALIDATION=false: botocore does not check each request against the service model
    # before sending it (its `parameter_validation`, which botocore offers off "for performance"): the service
    # validates anyway. About a fifth of a local transaction's client CPU (1.33 -> 1.04 ms for a 4-item
    # TransactWriteItems, medians of 6 alternating runs of 200). On by default; `onward up` and the benches
    # turn it off for their own embedded endpoint, the tests keep it on (it names a malformed request early).
    parameter_validation: bool = True
    # ONWARD_CLIENT_WRAPPER="package.module:function": a function given each boto3 client of UNSIGNED_SERVICES
    # (and these settings) that answers the client to use instead. The local stack plugs its lean client in
    # this way (onward_infra exports it for the embedded endpoint); the product names no such module itself.
    client_wrapper: str | None = None
    # completion webhooks (issue 38): the delivery queue's URL (WebhookDeliveriesQueue), what matcher and deliverer use
    webhook_deliveries_queue: str | None = None
    # trace context (issue 38): ONWARD_TRACE_URL, a tracing UI URL with {trace_id} (onward.observability.trace_links)
    trace_url: str | None = None

    def __post_init__(self) -> None:
        if self.unsigned_requests and not self.endpoint_url:
            raise InvalidSetting("ONWARD_UNSIGNED_REQUESTS needs AWS_ENDPOINT_URL: AWS refuses unsigned requests")
        if self.client_wrapper is not None and not _WRAPPER_NAME.fullmatch(self.client_wrapper):
            raise InvalidSetting(f"ONWARD_CLIENT_WRAPPER must be package.module:function, not {self.client_wrapper!r}")
        try:
            self.retention_policy  # noqa: B018 - parsed once here for its errors
        except InvalidRetentionPolicy as error:
            raise InvalidSetting(f"ONWARD_RETENTION_POLICY: {error}") from error

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Settings:
        source = os.environ if environ is None else environ
        names = {resource: source.get(environment_variable(resource)) or None for resource in _RESOURCES}
        return cls(
            endpoint_url=source.get("AWS_ENDPOINT_URL") or None,
            region=source.get("AWS_DEFAULT_REGION") or source.get("AWS_REGION") or None,
            outbox_retention_days=int(number_setting(source, "ONWARD_OUTBOX_RETENTION_DAYS",
                                                     DEFAULT_OUTBOX_RETENTION_DAYS)),
            job_retention_days=whole_days_setting(source, "ONWARD_JOB_RETENTION_DAYS", DEFAULT_JOB_RETENTION_DAYS),
            retention_policy_document=source.get("ONWARD_RETENTION_POLICY", "").strip() or None,
            freshness_objective_s=number_setting(source, "ONWARD_STALE_AFTER_S", STALE_AFTER_S),
            heartbeat_interval_s=number_setting(source, "ONWARD_HEARTBEAT_INTERVAL_S", 0.0),
            beat_slack_ms=int(number_setting(source, "ONWARD_BEAT_SLACK_MS", AWS_BEAT_SLACK_MS)),
            active_shards=active_shards_setting(source),
            unsigned_requests=flag_setting(source, "ONWARD_UNSIGNED_REQUESTS"),
            parameter_validation=flag_setting(source, "ONWARD_PARAMETER_VALIDATION", default=True),
            client_wrapper=source.get("ONWARD_CLIENT_WRAPPER") or None,
            trace_url=trace_url_setting(source),  # trace context (issue 38)
            **names,
        )

    @property
    def job_retention_s(self) -> int:
        """The job retention in seconds, as the TTL writers add it (onward.store.dynamo.keys.ttl_after)."""
        return self.job_retention_days * DAY_S

    @property
    def retention_policy(self) -> RetentionPolicy:
        """How long finished jobs are kept, by tenant, type and outcome: ONWARD_RETENTION_POLICY's document, or
        job_retention_days for every outcome without one."""
        if self.retention_policy_document is None:
            return RetentionPolicy.uniform(self.job_retention_s)
        return RetentionPolicy.from_document(self.retention_policy_document, self.job_retention_s)

    @property
    def stale_after_s(self) -> float:
        """When the view counts as delayed: the freshness objective plus the heartbeat interval and a beat's
        slack, since an idle view is confirmed only once per heartbeat, through the beat's listing less the
        slack (a smaller threshold would cry "delayed" when idle)."""
        return self.freshness_objective_s + self.heartbeat_interval_s + self.beat_slack_ms / 1000

    def require(self, resource: str) -> str:
        """The name of a resource this component needs; MissingSetting names the variable to set."""
        if resource not in _RESOURCES:
            raise ValueError(f"unknown resource {resource!r}")
        value: str | None = getattr(self, resource)
        if not value:
            raise MissingSetting(
                f"{environment_variable(resource)} is not set (run `onward endpoint` and paste its export lines)"
            )
        return value

    def client(self, service: str, config: Config = WORKER_CLIENT_CONFIG) -> Any:
        """A boto3 client with botocore's standard retry mode (throttling and transient errors); `config`: the
        timeouts and attempts (API_CLIENT_CONFIG for the HTTP API's function), else the patient default."""
        if self.unsigned_requests:
            config = config.merge(unsigned_config(service))
        if not self.parameter_validation:
            config = config.merge(Config(parameter_validation=False))
        client = boto3.client(service, endpoint_url=self.endpoint_url, region_name=self.region, config=config)
        if self.client_wrapper is not None and service in UNSIGNED_SERVICES:
            return _client_wrapper(self.client_wrapper)(client, self)
        return client


_WRAPPER_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
ClientWrapper = Callable[[Any, Settings], Any]


@functools.cache
def _client_wrapper(name: str) -> ClientWrapper:
    """The function ONWARD_CLIENT_WRAPPER names, imported once per process."""
    module, _, function = name.partition(":")
    try:
        wrapper: ClientWrapper = getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as error:
        raise InvalidSetting(f"ONWARD_CLIENT_WRAPPER names {name!r}, which cannot be imported: {error}") from None
    return wrapper


def number_setting(source: Mapping[str, str], variable: str, default: float, *, positive: bool = False) -> float:
    """A number read from the environment (`default` when unset): finite and >= 0, or > 0 if `positive`;
    InvalidSetting names the variable otherwise."""
    raw = source.get(variable)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InvalidSetting(f"{variable} must be a number, not {raw!r}") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise InvalidSetting(f"{variable} must be a finite number {'> 0' if positive else '>= 0'}, not {raw!r}")
    return value


def flag_setting(source: Mapping[str, str], variable: str, *, default: bool = False) -> bool:
    """A yes/no read from the environment: "true"/"1" or "false"/"0", `default` when unset; InvalidSetting
    otherwise."""
    raw = (source.get(variable) or str(default)).strip().lower()
    if raw not in {"true", "1", "false", "0"}:
        raise InvalidSetting(f"{variable} must be true or false, not {source.get(variable)!r}")
    return raw in {"true", "1"}


def active_shards_setting(source: Mapping[str, str]) -> int:
    """ONWARD_ACTIVE_SHARDS: a whole number from 1 to MAX_ACTIVE_SHARDS (DEFAULT_ACTIVE_SHARDS when unset)."""
    text = source.get("ONWARD_ACTIVE_SHARDS") or ""
    if not text:
        return DEFAULT_ACTIVE_SHARDS
    if not text.isdigit() or not 1 <= int(text) <= MAX_ACTIVE_SHARDS:
        raise InvalidSetting(f"ONWARD_ACTIVE_SHARDS must be a whole number from 1 to {MAX_ACTIVE_SHARDS}, not {text!r}")
    return int(text)


def whole_days_setting(source: Mapping[str, str], variable: str, default: int) -> int:
    """A number of days read from the environment (`default` when unset): a whole number >= 1, since a TTL of
    a fraction of a day cut to 0 would delete items as they are written; InvalidSetting names the variable."""
    value = number_setting(source, variable, default, positive=True)
    if value < 1 or value != int(value):
        raise InvalidSetting(f"{variable} must be a whole number of days >= 1, not {source.get(variable)!r}")
    return int(value)


# --- The run-history archive (issue 36): where the archiver writes it and where readers query it ---------------
@dataclass(frozen=True)
class ArchiveSettings:
    """Where the archive is read: through Athena when ARCHIVE_DATABASE and ARCHIVE_TABLE (the Glue table) are
    set, in the work group ARCHIVE_WORK_GROUP (else the account's primary), else from the Parquet directory
    ONWARD_ARCHIVE_DIR (the local stack's), else nowhere (no archive: nothing asked). The archiver's side,
    where it is written, is Deployment.archive_sink."""

    directory: str | None = None
    database: str | None = None
    table: str | None = None
    workgroup: str | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> ArchiveSettings:
        source = os.environ if environ is None else environ
        return cls(directory=source.get("ONWARD_ARCHIVE_DIR") or None,
                   database=source.get("ARCHIVE_DATABASE") or None,
                   table=source.get("ARCHIVE_TABLE") or None,
                   workgroup=source.get("ARCHIVE_WORK_GROUP") or None)


# --- trace context (issue 38) -----------------------------------------------------------------------------------

def trace_url_setting(source: Mapping[str, str]) -> str | None:
    """ONWARD_TRACE_URL (onward.observability.trace_links), InvalidSetting with the reason when unusable."""
    from onward.observability.trace_links import trace_url_template

    try:
        return trace_url_template(source)
    except ValueError as error:
        raise InvalidSetting(str(error)) from error


# --- the regional authority (issue 39: the authority lease and `onward failover`) --------------------------------
DEFAULT_AUTHORITY_LEASE_S = 30.0
DEFAULT_AUTHORITY_CHECK_S = 10.0


@dataclass(frozen=True)
class AuthoritySettings:
    """Whether this process's Region is home (onward.runtime.authority): the witness record ONWARD_WITNESS
    (`ssm:<region>:<name>` or `table:<region>`; unset: one Region, always home), read every
    ONWARD_AUTHORITY_CHECK_S, a confirmation trusted ONWARD_AUTHORITY_LEASE_S; ONWARD_HOME_REGION: the home while
    the witness was never written; ONWARD_WITNESS_ENDPOINT_URL: the witness's endpoint (local drills only)."""

    witness: str | None = None
    witness_endpoint_url: str | None = None
    home_region: str | None = None
    lease_s: float = DEFAULT_AUTHORITY_LEASE_S
    check_s: float = DEFAULT_AUTHORITY_CHECK_S

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> AuthoritySettings:
        source = os.environ if environ is None else environ
        lease_s = number_setting(source, "ONWARD_AUTHORITY_LEASE_S", DEFAULT_AUTHORITY_LEASE_S, positive=True)
        check_s = number_setting(source, "ONWARD_AUTHORITY_CHECK_S", DEFAULT_AUTHORITY_CHECK_S, positive=True)
        if check_s >= lease_s:  # the lease would lapse between two checks of a healthy witness
            raise InvalidSetting(f"ONWARD_AUTHORITY_CHECK_S ({check_s:g}) must be below ONWARD_AUTHORITY_LEASE_S "
                                 f"({lease_s:g})")
        return cls(witness=source.get("ONWARD_WITNESS", "").strip() or None,
                   witness_endpoint_url=source.get("ONWARD_WITNESS_ENDPOINT_URL") or None,
                   home_region=source.get("ONWARD_HOME_REGION") or None, lease_s=lease_s, check_s=check_s)

    @property
    def fence_window_s(self) -> float:
        """W of the design: how long after the epoch is raised every old-home process has stopped."""
        return self.lease_s + self.check_s + 5.0


def several_regions(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this deployment spans Regions (a witness names the home: ONWARD_WITNESS; issue 39)."""
    return bool((os.environ if environ is None else environ).get("ONWARD_WITNESS", "").strip())
