"""Tags over real HTTP (local gateway -> onward.api.app -> embedded stack, the projector writing the tag index),
every answer held to the OpenAPI document: tags given at create (one and batch) are shown on the status, a
tenant's jobs are listed and counted by one tag across the index's 16 shards with cursors, combined with the
other filters; bad tags are refused with a 422 naming the field and nothing stored; a bad filter is a 400.

What breaks without which code:
- the projector's tag entries (onward.pipeline.tag_index.put_tag_entries): no job is found by its tag;
- the entry's key mapped back to the job in the index's pages (tag_index._as_job): a page's position names a
  tag entry, not a job, and the next page's cursor is refused or skips jobs;
- the tenant in the entry's partition key: another tenant's job with the same tag is listed;
- NewJob.tags' rules (onward.domain.tags): a 12th tag or a `#` in a key is stored, and a key's entries collide.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from onward.bootstrap import Deployment
from onward.pipeline.listing import LISTING_SHARDS, listing_shard
from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-tags-secret", "globex": "globex-tags-secret"}
OPERATOR = "operator-tags-secret"


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


def _ids(reply) -> list[str]:
    assert reply.status == 200, reply.body
    return [job["job_id"] for job in reply.body["jobs"]]


def _create(client: Client, token: str, **body) -> str:
    reply = client.call("POST", "/jobs", token, body={"type": "demo.echo", **body})
    assert reply.status == 202, reply.body
    return str(reply.body["job_id"])


def _every_page(client: Client, query: str, token: str) -> tuple[list[str], int]:
    shown, pages, cursor = [], 0, None
    while True:
        reply = client.get(f"/jobs?{query}" + (f"&cursor={cursor}" if cursor else ""), token)
        shown += _ids(reply)
        pages += 1
        cursor = reply.body["cursor"]
        if cursor is None:
            return shown, pages


def test_jobs_are_listed_and_counted_by_tag_across_shards_with_cursors(client, pipeline) -> None:
    """A tag every job carries (env=prod) and a rarer one, listed 4 to a page across the shards: each job once,
    newest first as the unfiltered listing orders them, and only the tenant's own."""
    acme = TOKENS["acme"]
    prod = [_create(client, acme, tags={"env": "prod", "team": "red" if n % 3 else "blue"}) for n in range(30)]
    staging = [_create(client, acme, tags={"env": "staging"}) for _ in range(3)]
    untagged = [_create(client, acme) for _ in range(2)]
    theirs = _create(client, TOKENS["globex"], tags={"env": "prod"})
    assert len({listing_shard(job_id) for job_id in prod}) >= LISTING_SHARDS // 2  # spread over the shards
    cancelled = prod[4]
    assert client.call("POST", f"/jobs/{cancelled}/cancel", acme).status == 202
    pipeline.drain()

    everything = _ids(client.get("/jobs?limit=100", acme))
    assert sorted(everything) == sorted(prod + staging + untagged)
    shown, pages = _every_page(client, "tag=env:prod&limit=4", acme)
    assert shown == [job_id for job_id in everything if job_id in prod]  # each once, newest first
    assert pages >= 30 // 4
    blue = [job_id for number, job_id in enumerate(prod) if number % 3 == 0]
    assert sorted(_every_page(client, "tag=team:blue&limit=3", acme)[0]) == sorted(blue)
    assert sorted(_ids(client.get("/jobs?tag=env:staging", acme))) == sorted(staging)
    assert _ids(client.get("/jobs?tag=env:prod&status=cancelled", acme)) == [cancelled]
    assert _ids(client.get("/jobs?tag=env:staging&type=demo.sleep", acme)) == []
    assert _ids(client.get(f"/jobs?tag=env:prod&id_prefix={prod[7]}", acme)) == [prod[7]]
    assert _ids(client.get("/jobs?tag=env:nowhere", acme)) == []
    assert _ids(client.get("/jobs?tag=env:prod", TOKENS["globex"])) == [theirs]
    assert _ids(client.get("/jobs?tag=env:prod&tenant=globex", OPERATOR)) == [theirs]

    counts = client.get("/jobs/counts?tag=env:prod", acme).body
    assert (counts["counts"]["queued"], counts["counts"]["cancelled"], counts["complete"]) == (29, 1, True)
    assert counts["examined"] == 30
    assert client.get("/jobs/counts?tag=team:blue&type=demo.echo", acme).body["counts"]["queued"] == len(blue)
    # a bounded count goes on in each shard from where its last page ended (the index's keys mapped back)
    bounded = Deployment.from_environment().status_view.count_by_status("acme", tag=("env", "prod"), max_examined=20)
    assert (bounded.examined, bounded.complete, sum(bounded.counts.values())) == (20, False, 20)

    status = client.get(f"/jobs/{prod[0]}", acme).body
    assert status["tags"] == {"env": "prod", "team": "blue"}
    assert client.get(f"/jobs/{untagged[0]}", acme).body["tags"] == {}
    assert client.get(f"/jobs/{prod[0]}/params", acme).body["tags"] == {"env": "prod", "team": "blue"}


def test_a_batch_tags_each_entry_and_a_bad_entry_refuses_only_itself(client, pipeline) -> None:
    acme = TOKENS["acme"]
    reply = client.call("POST", "/jobs/batch", acme, body={"jobs": [
        {"type": "demo.echo", "tags": {"batch": "b1"}},
        {"type": "demo.echo", "tags": {"Batch": "b1"}},
        {"type": "demo.echo", "tags": {"batch": "b1", "n": "2"}}]})
    assert [result["status"] for result in reply.body["results"]] == [202, 422, 202]
    refused = reply.body["results"][1]["problem"]
    assert refused["errors"][0]["loc"][:3] == ["jobs", 1, "tags"]
    pipeline.drain()
    listed = _ids(client.get("/jobs?tag=batch:b1", acme))
    assert sorted(listed) == sorted(result["job_id"] for result in reply.body["results"] if result["status"] == 202)


BAD_TAGS = [
    {f"k{n}": "v" for n in range(11)},  # 11: at most 10
    {"Env": "prod"},  # upper case key
    {"1env": "prod"},  # a key starts with a letter
    {"en#v": "prod"},  # `#` is the index key's separator
    {"e:nv": "prod"},  # `:` splits a filter
    {"k" * 33: "v"},
    {"env": ""},
    {"env": "pr od"},
    {"env": "a=b"},
    {"env": "v" * 65},
    {"env": 1},
    ["env", "prod"],
]


def test_bad_tags_are_422_naming_the_field_and_nothing_is_stored(client, pipeline) -> None:
    acme = TOKENS["acme"]
    for tags in BAD_TAGS:
        reply = client.call("POST", "/jobs", acme, body={"type": "demo.echo", "tags": tags})
        assert reply.status == 422, (tags, reply.body)
        assert all(error["loc"][0] == "tags" for error in reply.body["errors"]), (tags, reply.body)
        assert "tags" in reply.body["detail"]
    ten = {f"k{n}": "v" for n in range(10)}
    assert client.call("POST", "/jobs", acme, body={"type": "demo.echo", "tags": ten}).status == 202  # 10 is the limit
    pipeline.drain()
    assert len(_ids(client.get("/jobs", acme))) == 1  # only the good one was stored


BAD_FILTERS = ["tag=env", "tag=Env:prod", "tag=env:", "tag=:prod", "tag=env:prod&tag=team:red", "tag=env:a%20b",
               "tag=env%23x:prod"]


def test_bad_tag_filters_are_400s_that_say_why(client) -> None:
    for query in BAD_FILTERS:
        for path in ("/jobs", "/jobs/counts"):
            reply = client.get(f"{path}?{query}", TOKENS["acme"])
            assert reply.status == 400, (path, query, reply.body)
            assert "key:value" in reply.body["detail"], (query, reply.body)
