"""The embedded AWS endpoint: moto's server on 127.0.0.1, fixed to be fit for our tests.

- Transactions cost O(items in the transaction) (infra/moto_fixes/).
- Requests are serialized: moto takes no lock per request, so without this a condition check and its write
  could interleave with another request's; DynamoDB is linearizable per item, and race tests must test us,
  not the emulator.
- Tables and streams are created from template.yaml through the endpoint's CloudFormation.
- With a retention scale (`onward endpoint` and `onward up` have 1), retention as AWS applies it: TTL
  deletions, DynamoDB stream and Kinesis records trimmed (infra/moto_fixes/retention.py).
"""

from __future__ import annotations

import io
import itertools
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
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
from werkzeug.serving import BaseWSGIServer, make_server

from infra import moto_fixes
from infra.metering import Meter
from infra.moto_fixes import queries, retention, server, streams
from infra.stack import STACK_NAME, deploy_data_resources, stack_environment

REGION = "us-east-1"
DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class SerializedApp:
    """Runs one request at a time, response body included, so every request is atomic. An optional
    `meter` (infra.metering.Meter) sees each request just before and just after it runs."""

    def __init__(self, app: WsgiApp, meter: Meter | None = None) -> None:
        self._app = app
        self._lock = threading.Lock()
        self._meter = meter
        self._watches: dict[bytes, Counter[str]] = {}

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


REQUEST_THREAD_NAME = "embedded-aws-request"


class _QuietRequestHandler(MotoRequestHandler):
    def setup(self) -> None:
        """Name the thread serving this connection, so that a caller can tell it from threads of its own."""
        threading.current_thread().name = REQUEST_THREAD_NAME
        super().setup()

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        """Per-request access lines would drown the platform's structured logs."""


@dataclass(frozen=True)
class DeployedStack:
    """What `deploy` created: the environment that names every resource (handlers/bootstrap.py's Deployment
    builds the components over them)."""

    environment: dict[str, str]


class EmbeddedEndpoint:
    """moto's server on 127.0.0.1 in this process. Use as a context manager or start()/stop()."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", meter: Meter | None = None, *,
                 stream_shards: int = 1, split_every_s: float | None = None,
                 retention_scale: float | None = None) -> None:
        """`stream_shards`: the open shards of each DynamoDB stream of a table created through this
        endpoint (records routed by partition key, as on AWS); `split_every_s`: one open shard of each such
        stream splits in two every that many seconds while the stream is in use (None: only
        `split_stream_shards` splits).
        infra/moto_fixes/streams.py says what is modelled.
        `retention_scale`: the tables and streams created through this endpoint keep AWS's retention (TTL
        deletions, DynamoDB stream records 24 h, Kinesis records the stream's RetentionPeriodHours) times
        this, swept by a thread of the endpoint (infra/moto_fixes/retention.py); None: nothing is ever
        deleted or trimmed, as in moto (the tests' endpoint). `onward endpoint` / `onward up` pass 1."""
        moto_fixes.install()
        self.stream_topology = streams.StreamTopology(stream_shards, split_every_s)
        self.retention = None if retention_scale is None else retention.Retention(
            retention.RetentionPolicy(retention_scale))
        moto_app: WsgiApp = streams.topology_app(DomainDispatcherApplication(create_backend_app),
                                                 self.stream_topology)
        if self.retention is not None:
            moto_app = self.retention.app(moto_app)
        app = SerializedApp(moto_app, meter)
        self._app = app
        self._server: BaseWSGIServer = make_server(
            host, port, app, threaded=True, request_handler=_QuietRequestHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="embedded-aws", daemon=True)

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

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=self.url,
            region_name=REGION,
            aws_access_key_id=DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            config=Config(retries={"mode": "standard"}),
        )

    def deploy(self, stack_name: str = STACK_NAME) -> DeployedStack:
        """Create template.yaml's data resources through CloudFormation; return the environment for them."""
        cloudformation = self.client("cloudformation")
        deploy_data_resources(cloudformation, stack_name)
        environment = {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_DEFAULT_REGION": REGION,
            **DUMMY_CREDENTIALS,
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
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION]
        with self._app.exclusive():
            tables = [backend.tables[name] for name in stack.environment.values() if name in backend.tables]
            for table in tables:
                table.items.clear()
                queries.forget_items(table)
        return [table.name for table in tables]


def harmless_to_share(target: str) -> bool:
    """Whether a request (by X-Amz-Target) leaves a stack fit for its next user once the tables are emptied:
    DynamoDB's item reads and writes, and any Describe or List. Not reading or writing stream records (old
    ones stay), changing a table, a stream or a queue."""
    service, _, operation = target.partition(".")
    return (service.startswith("DynamoDB_") and operation in server.PLAIN_JSON_OPERATIONS) or operation.startswith(
        ("Describe", "List"))


# In every environment SharedStack lends, a value of its own: whatever a process keeps per environment (as a
# warm Lambda would: handlers/bootstrap.py's Deployment.from_environment, its job store's tenant cache) is
# built afresh for each user, as for a freshly deployed stack, not carried over from a user whose items
# are gone.
LEASE_VARIABLE = "ONWARD_STACK_LEASE"


class SharedStack:
    """One deployment of template.yaml lent to one user after another (tests, one at a time), each finding
    every table empty as if the stack were just deployed, for users that only read and write items
    (`harmless_to_share`). A fresh deployment replaces it for the next user when the last one did anything
    else, left a thread of its own running (it could still write), or anything named the stack between two
    users (`retired` counts why)."""

    _numbers = itertools.count()  # of the deployments, across instances: stack names are unique per endpoint

    def __init__(self, endpoint: EmbeddedEndpoint, prefix: str = "shared") -> None:
        self._endpoint, self._prefix = endpoint, prefix
        self._leases = itertools.count()
        self._client = endpoint.client("dynamodb")
        self._stack: DeployedStack | None = None
        self._name = ""  # the stack's; "<name>-" begins the name of each of its resources
        self._requests: Counter[str] = Counter()  # every request naming the stack, kept by the endpoint
        self._returned: Counter[str] = Counter()  # _requests when last given back
        self._lent: Counter[str] | None = None  # _requests when lent, while lent
        self._threads: set[threading.Thread] = set()
        self.retired: Counter[str] = Counter()

    def lend(self) -> DeployedStack:
        """The stack, every table of it checked empty (through the API), its environment with LEASE_VARIABLE
        set to a value never lent before. Give it back before lending again."""
        assert self._lent is None, "the shared stack is lent already"
        if self._stack is not None and self._requests != self._returned:
            self._retire("touched between users")
        if self._stack is None:
            self._name = f"{self._prefix}-{next(self._numbers)}"
            self._stack = self._endpoint.deploy(self._name)
            self._requests = self._endpoint.watch(f"{self._name}-")  # shared-0-JobsTable-3F1X... and the like
        for table in self._endpoint.empty_tables(self._stack):
            found = self._client.scan(TableName=table, Limit=1, ConsistentRead=True)["Items"]
            assert not found, f"{table} still holds {found} after being emptied"
        self._lent, self._threads = Counter(self._requests), set(threading.enumerate())
        return DeployedStack({**self._stack.environment, LEASE_VARIABLE: f"{self._name}#{next(self._leases)}"})

    def give_back(self) -> list[str]:
        """Take the stack back; returns the requests its user made that a shared stack cannot take (sorted
        X-Amz-Targets), to be reported: that user needs a stack of its own."""
        assert self._lent is not None, "the shared stack is not lent"
        misuse = sorted(target for target in self._requests - self._lent if not harmless_to_share(target))
        left_running = [thread for thread in threading.enumerate()
                        if thread not in self._threads and thread.name != REQUEST_THREAD_NAME]
        self._returned, self._lent = Counter(self._requests), None
        if misuse:
            self._retire("misused")
        elif left_running:
            self._retire("threads left running")
        return misuse

    def _retire(self, reason: str) -> None:
        self.retired[reason] += 1
        self._stack = None
        self._endpoint.unwatch(f"{self._name}-")


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


class EndpointProcess:
    """`onward endpoint` in a child process on 127.0.0.1: the same embedded endpoint, stack "onward"
    deployed, with an interpreter (and a GIL) of its own. Long runs use it so that the emulator and the
    many client threads driving it do not share one core."""

    def __init__(self, *arguments: str) -> None:
        """`arguments`: more flags of `onward endpoint` (e.g. "--stream-shards", "4")."""
        self._arguments = arguments
        self._process: subprocess.Popen[str] | None = None
        self.environment: dict[str, str] = {}

    @property
    def url(self) -> str:
        return self.environment["AWS_ENDPOINT_URL"]

    @property
    def pid(self) -> int:
        """The child's process id (its memory is measured by bench/memory.py)."""
        assert self._process is not None, "not started"
        return self._process.pid

    def start(self) -> Self:
        self._process = subprocess.Popen([sys.executable, "-m", "cli", "endpoint", "--port", "0", *self._arguments],
                                         stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        try:
            self.environment = read_exports(self._process.stdout)
        except RuntimeError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._process is None or self._process.poll() is not None:
            return
        self._process.send_signal(signal.SIGINT)
        try:
            self._process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
