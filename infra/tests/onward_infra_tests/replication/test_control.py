"""The replicator's control API over HTTP (what a drill in another process drives), and `onward regions`,
which serves two Regions, the replicator and that API from one process.

How each would break without the code: without the control server a drill could not partition or heal the
Regions from outside their process; without `act` refusing an unknown action a typo would pass silently;
without `onward regions` printing each Region's exports and the control URL, a drill would not find them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from onward_infra.endpoint import EmbeddedEndpoint, read_exports
from onward_infra.replication.command import END_OF_REGIONS
from onward_infra.replication.control import ControlServer
from onward_infra.replication.replicator import Replicator

pytestmark = pytest.mark.integration

HOME, STANDBY = "sa-east-1", "ca-central-1"


def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def control() -> Iterator[tuple[ControlServer, Any, str]]:
    with EmbeddedEndpoint(region=HOME) as home, EmbeddedEndpoint(region=STANDBY) as standby:
        clients = {region: endpoint.client("dynamodb") for region, endpoint in ((HOME, home), (STANDBY, standby))}
        table = f"t-{uuid.uuid4().hex[:8]}"  # moto's backends outlive an endpoint in this process
        for client in clients.values():
            client.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
        with Replicator([home, standby], {"t": {HOME: table, STANDBY: table}}) as replicator, \
                ControlServer(replicator) as server:
            yield server, clients, table


def test_a_partition_and_a_heal_taken_over_http(control: tuple[ControlServer, Any, str]) -> None:
    server, clients, table = control
    assert _post(server.url, {"action": "partition", "regions": [HOME]})[0] == 200
    clients[HOME].put_item(TableName=table, Item={"pk": {"S": "x"}})
    with urllib.request.urlopen(server.url, timeout=30) as answer:
        assert json.loads(answer.read())["pending"] == 1
    assert "Item" not in clients[STANDBY].get_item(TableName=table, Key={"pk": {"S": "x"}})

    assert _post(server.url, {"action": "heal"})[0] == 200
    status, counts = _post(server.url, {"action": "wait_idle", "timeout_s": 10})
    assert status == 200 and counts["idle"] and counts["replicated"] == 1
    assert "Item" in clients[STANDBY].get_item(TableName=table, Key={"pk": {"S": "x"}})


def test_an_unknown_or_malformed_action_is_refused(control: tuple[ControlServer, Any, str]) -> None:
    server, _, _ = control
    assert _post(server.url, {"action": "partiton"}) == (400, {"error": "ValueError: unknown action 'partiton'"})
    assert _post(server.url, {"action": "loss", "fraction": 2})[0] == 400
    assert _post(server.url, {"action": "lag"})[0] == 400


def test_onward_regions_prints_each_regions_exports_and_serves_the_control_api() -> None:
    process = subprocess.Popen([sys.executable, "-m", "onward.cli", "regions", "--regions", f"{HOME},{STANDBY}"],
                               stdout=subprocess.PIPE, text=True, start_new_session=True,
                               env={**os.environ, "ONWARD_ENDPOINT_PARENT": str(os.getpid())})
    assert process.stdout is not None
    try:
        lines: list[str] = []
        for line in process.stdout:
            lines.append(line)
            if line.startswith(END_OF_REGIONS):
                break
        blocks = "".join(lines).split("# Region ")[1:]
        environments = [read_exports([*block.splitlines(), "# Ctrl-C stops it."]) for block in blocks]
        assert [environment["AWS_DEFAULT_REGION"] for environment in environments] == [HOME, STANDBY]
        assert environments[0]["JOBS_TABLE"] == environments[1]["JOBS_TABLE"]
        control_url = lines[-2].rpartition("control: ")[2].strip()
        with urllib.request.urlopen(control_url, timeout=30) as answer:
            assert {link["source"] for link in json.loads(answer.read())["links"]} == {HOME, STANDBY}
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
