"""The embedded AWS endpoint: moto's server on 127.0.0.1, fixed to be fit for our tests.

- Transactions cost O(items in the transaction) (infra/moto_fixes/).
- Requests are serialized: moto takes no lock per request, so without this a condition check and its write
  could interleave with another request's; DynamoDB is linearizable per item, and race tests must test us,
  not the emulator.
- Tables and streams are created from template.yaml through the endpoint's CloudFormation.
"""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Self

import boto3
from botocore.config import Config
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, make_server

from infra import moto_fixes
from infra.metering import Meter
from infra.moto_fixes import streams
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

    def exclusive(self) -> threading.Lock:
        """The lock every request runs under: hold it to change the emulator's state between requests."""
        return self._lock

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self._lock:
            if self._meter is None:
                return self._run(environ, start_response)
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
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


class _QuietRequestHandler(MotoRequestHandler):
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
                 stream_shards: int = 1, split_every_s: float | None = None) -> None:
        """`stream_shards`: the open shards of each DynamoDB stream of a table created through this
        endpoint (records routed by partition key, as on AWS); `split_every_s`: one open shard of each such
        stream splits in two every that many seconds while the stream is in use (None: only
        `split_stream_shards` splits).
        infra/moto_fixes/streams.py says what is modelled."""
        moto_fixes.install()
        self.stream_topology = streams.StreamTopology(stream_shards, split_every_s)
        app = SerializedApp(streams.topology_app(DomainDispatcherApplication(create_backend_app),
                                                 self.stream_topology), meter)
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
        return self

    def split_stream_shards(self, table: str,
                            shard_ids: Iterable[str] | None = None) -> dict[str, tuple[str, str]]:
        """Split open shards of a table's DynamoDB stream (`table`: its name, or its table or stream ARN),
        the named ones or every open one: each closes and two children open, each with half its key range.
        Returns parent shard id -> the children's ids. Runs between requests, as a partition split would."""
        with self._app.exclusive():
            return streams.split_shards(table, shard_ids)

    def stop(self) -> None:
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
