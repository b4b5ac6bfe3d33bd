"""The embedded AWS endpoint: moto's server on 127.0.0.1, fixed to be fit for our tests.

- Transactions cost O(items in the transaction) (infra/onward_infra/moto_fixes/).
- Requests are serialized: moto takes no lock per request, so without this a condition check and its write
  could interleave with another request's; DynamoDB is linearizable per item, and race tests must test us,
  not the emulator.
- Tables and streams are created from template.yaml through the endpoint's CloudFormation.
- With a retention scale (`onward endpoint` and `onward up` have 1), retention as AWS applies it: TTL
  deletions, DynamoDB stream and Kinesis records trimmed (infra/onward_infra/moto_fixes/retention.py).
- With a data directory, its state survives a restart (infra/onward_infra/snapshots.py says how durable it is).
"""

from __future__ import annotations

import ctypes
import gc
import io
import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import boto3
from botocore.config import Config
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, ThreadedWSGIServer

from onward.settings import unsigned_config
from onward_infra import moto_fixes, snapshots
from onward_infra.lean_client import WRAPPER as LEAN_CLIENT_WRAPPER
from onward_infra.metering import METER_PATH, Meter
from onward_infra.moto_fixes import queries, retention, selector_server, server, stream_topology, streams
from onward_infra.replication import tap
from onward_infra.stack import LOCAL_PARAMETERS, STACK_NAME, deploy_data_resources, stack_environment

REGION = "us-east-1"
DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

# Operations that only read (by the name's start): any other request may have changed the state.
_READING_OPERATIONS = ("Get", "Describe", "List", "Query", "Scan", "BatchGet", "TransactGet")


def _may_write(environ: dict[str, Any]) -> bool:
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if target:
        return not target.rpartition(".")[2].startswith(_READING_OPERATIONS)
    return environ.get("REQUEST_METHOD") != "GET"  # a query-protocol request (SQS, CloudFormation): may write


class SerializedApp:
    """Runs one request at a time, response body included, so every request is atomic. An optional
    `meter` (onward_infra.metering.Meter) sees each request just before and just after it runs."""

    def __init__(self, app: WsgiApp, meter: Meter | None = None) -> None:
        self._app = app
        self._lock = threading.Lock()
        self._meter = meter
        self._watches: dict[bytes, Counter[str]] = {}
        self.writes = 0  # requests that may have changed the state (every one but a read)

    def exclusive(self) -> threading.Lock:
        """The lock every request runs under: hold it to change the emulator's state between requests."""
        return self._lock

    def watch(self, text: str) -> Counter[str]:
        """A count, by X-Amz-Target ("DynamoDB_20120810.PutItem"; "" for a request without one), of every
        request from now on whose body contains `text`, kept up to date for as long as the endpoint runs."""
        with self._lock:
            return self._watches.setdefault(text.encode(), Counter())

    def unwatch(self, text: str) -> None:
        """Stop counting requests naming `text`."""
        with self._lock:
            self._watches.pop(text.encode(), None)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self._lock:
            if _may_write(environ):
                self.writes += 1
            if self._meter is None and not self._watches:
                return self._run(environ, start_response)
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
            for text, seen in self._watches.items():
                if text in body:
                    seen[environ.get("HTTP_X_AMZ_TARGET", "")] += 1
            if self._meter is None:
                return self._run(environ, start_response)
            headers = {name[5:].replace("_", "-").lower(): value for name, value in environ.items()
                       if name.startswith("HTTP_")}
            pending = self._meter.before(headers, body)
            status: list[int] = []

            def recording_start_response(code: str, *args: Any) -> Any:
                status.append(int(code.split(maxsplit=1)[0]))
                return start_response(code, *args)

            answer = self._run(environ, recording_start_response)
            self._meter.after(pending, status[0] if status else 500)
            return answer

    def _run(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        response = self._app(environ, start_response)
        try:
            return [b"".join(response)]
        finally:
            close = getattr(response, "close", None)
            if close is not None:
                close()


def client_for(url: str, service: str, config: Config | None = None) -> Any:
    """A boto3 client of an embedded endpoint at `url` (its region, dummy credentials, standard retries),
    unsigned where the platform's clients are (onward.settings.unsigned_config)."""
    own = Config(retries={"mode": "standard"}).merge(unsigned_config(service))
    return boto3.client(service, endpoint_url=url, region_name=REGION,
                        aws_access_key_id=DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                        config=own.merge(config or Config()))


REQUEST_THREAD_NAME = "embedded-aws-request"
STATE_PATH = "/_onward/state"  # GET: whether the state was restored from a data directory, and its snapshots


class _QuietRequestHandler(selector_server.HandedOffRequestHandler, MotoRequestHandler):
    """moto's request handler, keeping connections open between requests
    (infra/onward_infra/moto_fixes/connections.py)."""

    lean = server.LEAN  # plain requests' environ built at once (off with ONWARD_LEAN_REQUESTS=false)

    def setup(self) -> None:
        """Name the thread serving this connection, so that a caller can tell it from threads of its own."""
        threading.current_thread().name = REQUEST_THREAD_NAME
        super().setup()

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        """Per-request access lines would drown the platform's structured logs."""


@dataclass(frozen=True)
class DeployedStack:
    """What `deploy` created: the environment that names every resource (onward/bootstrap.py's Deployment
    builds the components over them)."""

    environment: dict[str, str]


class EmbeddedEndpoint:
    """moto's server on 127.0.0.1 in this process. Use as a context manager or start()/stop()."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", meter: Meter | None = None, *,
                 stream_shards: int = 1, split_every_s: float | None = None,
                 retention_scale: float | None = None, data_dir: Path | None = None,
                 snapshot_every_s: float = 1.0, one_thread: bool = server.LEAN, region: str = REGION) -> None:
        """`stream_shards`: the open shards of each DynamoDB stream of a table created through this
        endpoint (records routed by partition key, as on AWS); `split_every_s`: one open shard of each such
        stream splits in two every that many seconds while the stream is in use (None: only
        `split_stream_shards` splits).
        infra/onward_infra/moto_fixes/streams.py says what is modelled.
        `retention_scale`: the tables and streams created through this endpoint keep AWS's retention (TTL
        deletions, DynamoDB stream records 24 h, Kinesis records the stream's RetentionPeriodHours) times
        this, swept by a thread of the endpoint (infra/onward_infra/moto_fixes/retention.py); None: nothing is ever
        deleted or trimmed, as in moto (the tests' endpoint). `onward endpoint` / `onward up` pass 1.
        `data_dir`: the state is restored from it when it holds one, and kept in it: a snapshot every
        `snapshot_every_s` seconds while anything is written, and one at `stop` (infra/onward_infra/snapshots.py says
        what a crash may lose). The directory is held by this endpoint until it stops. None: in memory only.
        Restoring replaces moto's state in this process: one endpoint with a data directory per process.
        `one_thread`: the SDKs' requests are served by the server's own thread
        (infra/onward_infra/moto_fixes/selector_server.py), not by a thread per connection (werkzeug's).
        `region`: the AWS Region this endpoint is; endpoints of different regions share moto's process but
        not its backends (infra/onward_infra/replication/ runs two as two regions with a replicator)."""
        moto_fixes.install()
        self.region = region
        self.writes = tap.WriteTap(region)  # observers of its committed DynamoDB writes (the replicator)
        self.stream_topology = stream_topology.StreamTopology(stream_shards, split_every_s)
        self.retention = None if retention_scale is None else retention.Retention(
            retention.RetentionPolicy(retention_scale))
        moto_app: WsgiApp = stream_topology.topology_app(
            server.direct_app(DomainDispatcherApplication(create_backend_app)), self.stream_topology)
        if self.retention is not None:
            moto_app = self.retention.app(moto_app)
        app = SerializedApp(tap.in_region(self.writes.app(moto_app), region), meter)
        self._app = app
        self._meter = meter
        self.restored = False  # whether the state came from data_dir
        self.snapshots: snapshots.Snapshotter | None = None
        if data_dir is not None:
            self._restore(snapshots.DataDirectory(data_dir), snapshot_every_s)
        server_class = selector_server.SelectorServer if one_thread else ThreadedWSGIServer
        self._server: BaseWSGIServer = moto_fixes.connections.closing_idle_connections(
            server_class(host, port, self._state_answering(app), _QuietRequestHandler))
        self._thread = threading.Thread(target=self._server.serve_forever, name="embedded-aws", daemon=True)

    def _restore(self, directory: snapshots.DataDirectory, every_s: float) -> None:
        try:
            saved = directory.load()
        except BaseException:
            directory.close()
            raise
        if saved is not None:
            snapshots.restore(saved)
            for table in snapshots.tables(saved):
                if isinstance(table.stream_shard, streams.TableStream):
                    table.stream_shard.resumed()
                if self.retention is not None:
                    self.retention.adopt_table(table)
            if self.retention is not None:
                for account, regions in saved.get("kinesis", {}).items():
                    for region, backend in regions.items():
                        for stream in backend.streams.values():
                            self.retention.adopt_stream(stream, account, region)
            self.restored = True
        self.snapshots = snapshots.Snapshotter(directory, self._app.exclusive, self._changes, every_s)

    def _state_answering(self, app: WsgiApp) -> WsgiApp:
        """`app`, and GET STATE_PATH answered without the request lock: whether the state was restored, and
        its snapshots (null without a data directory); with a meter, POST METER_PATH: its reading, reset."""

        def answering(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            path = environ.get("PATH_INFO")
            if path == METER_PATH and self._meter is not None and environ.get("REQUEST_METHOD") == "POST":
                start_response("200 OK", [("Content-Type", "application/json")])
                return [json.dumps(self._meter.reset().to_json()).encode()]
            if path != STATE_PATH:
                return app(environ, start_response)
            start_response("200 OK", [("Content-Type", "application/json")])
            snapshots_ = None if self.snapshots is None else self.snapshots.stats()
            return [json.dumps({"restored": self.restored, "snapshots": snapshots_}).encode()]

        return answering

    def exclusive(self) -> threading.Lock:
        """The lock every request runs under: hold it to change this endpoint's state between requests."""
        return self._app.exclusive()

    def _changes(self) -> int:
        """A count that moves whenever the state may have changed: writing requests, retention's deletions."""
        swept = 0 if self.retention is None else sum(
            count for name, count in self.retention.counts.items() if name != "sweeps")
        return self._app.writes + swept

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        if isinstance(host, bytes | bytearray):  # typeshed allows bytes; an AF_INET socket's host is a str
            host = host.decode()
        return f"http://{host}:{port}"

    def start(self) -> Self:
        self._thread.start()
        if self.retention is not None:
            self.retention.start(self._app.exclusive)
        if self.snapshots is not None:
            self.snapshots.start()
        return self

    def sweep_retention(self, at: float | None = None) -> Counter[str]:
        """One retention sweep between requests, as if the time were `at` (epoch seconds; default now): what
        it deleted and trimmed. Needs a retention."""
        assert self.retention is not None, "this endpoint has no retention (retention_scale=None)"
        with self._app.exclusive():
            return self.retention.sweep(at)

    def split_stream_shards(self, table: str,
                            shard_ids: Iterable[str] | None = None) -> dict[str, tuple[str, str]]:
        """Split open shards of a table's DynamoDB stream (`table`: its name, or its table or stream ARN),
        the named ones or every open one: each closes and two children open, each with half its key range.
        Returns parent shard id -> the children's ids. Runs between requests, as a partition split would."""
        with self._app.exclusive():
            return streams.split_shards(table, shard_ids)

    def stop(self) -> None:
        if self.retention is not None:
            self.retention.stop()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        if self.snapshots is not None:
            try:
                self.snapshots.final()
            finally:
                self.snapshots.directory.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, service: str) -> Any:
        return client_for(self.url, service)

    def deploy(self, stack_name: str = STACK_NAME, parameters: Mapping[str, str] = LOCAL_PARAMETERS, *,
               jobs_stream: bool = False) -> DeployedStack:
        """Create template.yaml's data resources through CloudFormation (unless the restored state holds
        the stack already), with `parameters` (sized for one machine unless told: {} deploys the template's
        defaults, the AWS topology) and, with `jobs_stream`, the jobs table's stream for the fence reconciler;
        return the environment for them."""
        cloudformation = self.client("cloudformation")
        stacks = cloudformation.describe_stacks()["Stacks"] if self.restored else []
        if stack_name not in {stack["StackName"] for stack in stacks}:
            deploy_data_resources(cloudformation, stack_name, parameters, jobs_stream=jobs_stream)
        environment = {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_DEFAULT_REGION": self.region,
            **DUMMY_CREDENTIALS,
            "ONWARD_UNSIGNED_REQUESTS": "true",
            "ONWARD_CLIENT_WRAPPER": LEAN_CLIENT_WRAPPER,
            "ONWARD_BEAT_SLACK_MS": "0",  # commits stamped in ms of this host's clock; listings of the live topology
            **stack_environment(cloudformation, stack_name),
        }
        return DeployedStack(environment=environment)

    def watch(self, text: str) -> Counter[str]:
        """Requests naming `text` from now on (a deployed stack's name followed by "-" names each of its
        resources), counted by X-Amz-Target: see SerializedApp.watch."""
        return self._app.watch(text)

    def unwatch(self, text: str) -> None:
        self._app.unwatch(text)

    def empty_tables(self, stack: DeployedStack) -> list[str]:
        """Delete every item of the stack's tables at once, between requests, leaving the tables as if just
        created; returns their names. Their streams keep every record they had: read a stream only on a
        stack of its own."""
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID][self.region]
        with self._app.exclusive():
            tables = [backend.tables[name] for name in stack.environment.values() if name in backend.tables]
            for table in tables:
                table.items.clear()
                queries.forget_items(table)
        return [table.name for table in tables]


END_OF_EXPORTS = "# Ctrl-C stops it."


def read_exports(lines: Iterable[str]) -> dict[str, str]:
    """The environment `onward endpoint` printed, read from its output up to the line that ends the exports;
    RuntimeError when the output ended first (the process died: its stderr says why)."""
    environment: dict[str, str] = {}
    for line in lines:
        if line.startswith("export "):
            name, _, value = line.removeprefix("export ").strip().partition("=")
            environment[name] = value
        elif line.startswith(END_OF_EXPORTS):
            return environment
    raise RuntimeError(f"`onward endpoint` ended before it printed its exports (got {sorted(environment)})")


PARENT_VARIABLE = "ONWARD_ENDPOINT_PARENT"  # set by EndpointProcess for its child: the parent's pid
_PR_SET_PDEATHSIG = 1


def end_with_parent() -> None:
    """In `onward endpoint` started by EndpointProcess: SIGTERM when the thread that started it ends (the
    parent killed), so that no endpoint outlives its platform holding the port and the data directory
    (Linux's PDEATHSIG); SIGTERM at once when the parent is already gone."""
    parent = os.environ.get(PARENT_VARIABLE)
    if not parent:
        return
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(parent):
        os.kill(os.getpid(), signal.SIGTERM)


# The cyclic collector's thresholds in an endpoint process: a young collection every this many allocations
# (Python's default: 700), an older one every 20 of those, a full one every 100 of those.
ENDPOINT_COLLECTOR_THRESHOLDS = (50_000, 20, 100)


def collect_for_a_large_heap() -> None:
    """In `onward endpoint`'s process, once the stack is deployed: what exists then (moto's and botocore's
    modules and models, the deployed stack) is frozen out of the cyclic collector's reach, and the collector
    runs less often. moto's items and stream records, most of the heap, are acyclic and freed by reference
    counting, yet with Python's defaults a full collection walked all of them again and again: 8-11% of
    the endpoint's CPU in bench/e2e.py's burst (1.4-1.7 s of 13-16, of it 1.1-1.3 s full collections),
    against 0.4-0.9 s with this (no full collection in the run)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*ENDPOINT_COLLECTOR_THRESHOLDS)


class EndpointProcess:
    """`onward endpoint` in a child process on 127.0.0.1: the same embedded endpoint, stack "onward"
    deployed, with an interpreter (and a GIL) of its own. `onward up` and long runs use it so that the
    emulator and the many client threads driving it do not share one core.

    The child runs in a session of its own, so a Ctrl-C at the terminal reaches only the parent, which
    stops its own components first and then this endpoint (`stop`: as Ctrl-C would, its last snapshot
    with a data directory). If the thread that started it dies, the child gets SIGTERM: start it from a
    thread that lives as long as it should (the main thread)."""

    def __init__(self, *arguments: str) -> None:
        """`arguments`: more flags of `onward endpoint` (e.g. "--stream-shards", "4")."""
        self._arguments = arguments
        self._port = 0  # any free port at first; the same one after a restart
        self._process: subprocess.Popen[str] | None = None
        self.environment: dict[str, str] = {}

    @property
    def url(self) -> str:
        return self.environment["AWS_ENDPOINT_URL"]

    def client(self, service: str) -> Any:
        return client_for(self.url, service)

    @property
    def pid(self) -> int:
        """The child's process id (its memory is measured by bench/memory.py)."""
        assert self._process is not None, "not started"
        return self._process.pid

    def start(self) -> Self:
        self._process = subprocess.Popen([sys.executable, "-m", "onward.cli", "endpoint", "--port", str(self._port),
                                          *self._arguments], stdout=subprocess.PIPE, text=True,
                                         start_new_session=True, env={**os.environ, PARENT_VARIABLE: str(os.getpid())})
        assert self._process.stdout is not None
        try:
            self.environment = read_exports(self._process.stdout)
        except RuntimeError:
            self.stop()
            raise
        self._port = int(self.url.rpartition(":")[2])
        return self

    def restart(self) -> Self:
        """Stop the child as Ctrl-C would and start it again on the same port (with "--data-dir" among the
        arguments, it resumes from the state it kept); RuntimeError when it did not stop by itself."""
        if not self.stop():
            raise RuntimeError("the endpoint process had to be killed: its last snapshot may be missing")
        return self.start()

    def stop(self, timeout_s: float = 60.0) -> bool:
        """Stop the child as Ctrl-C would (with a data directory: its last snapshot), killing it after
        `timeout_s`; whether it stopped by itself (or had stopped before)."""
        if self._process is None or self._process.poll() is not None:
            return True
        self._process.send_signal(signal.SIGINT)
        try:
            return self._process.wait(timeout=timeout_s) == 0
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
            print(f"embedded endpoint process {self._process.pid} did not stop within {timeout_s} s: killed",
                  file=sys.stderr)
            return False

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
