"""Unique jobs (issue 37) through the client (onward/client/), against a stand-in API in an httpx.MockTransport:
`unique` goes into the body as given, a duplicate's answer is read as one, and a held key's 409 names the holder."""

from __future__ import annotations

import json

import httpx
import pytest

from onward.client import AsyncClient, Client
from onward.client.errors import Conflict

URL = "http://127.0.0.1:9"
HOLDER = "b" * 32
RULE = {"key": "invoice:7", "window_s": 3600, "on_conflict": "keep"}


def unique_api(sent: list[dict[str, object]]) -> httpx.MockTransport:
    """POST /jobs: the first create of a key is 202, later ones answer its holder (keep) or 409 (reject)."""

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        if len(sent) == 1:
            return httpx.Response(202, json={"job_id": HOLDER, "status": "queued", "version": 1})
        if body["unique"]["on_conflict"] == "reject":
            return httpx.Response(409, headers={"Content-Type": "application/problem+json"}, json={
                "type": "https://onward.dev/problems/unique-key-held", "title": "Unique key held", "status": 409,
                "detail": f"unique.key 'invoice:7' is held: job {HOLDER} holds it", "existing_job_id": HOLDER})
        return httpx.Response(200, json={"job_id": HOLDER, "status": "queued", "version": 1,
                                         "duplicate_of_unique": True})

    return httpx.MockTransport(answer)


def test_submit_sends_unique_as_given_and_reads_a_duplicate_and_a_held_key() -> None:
    """Without the pass-through, `unique` would not reach the API (one job per call); without the answer's
    field, a caller could not tell the holder from a job of its own."""
    sent: list[dict[str, object]] = []
    with Client(URL, "tok", transport=unique_api(sent)) as onward:
        first = onward.submit("demo.echo", {"n": 1}, unique=RULE)
        duplicate = onward.submit("demo.echo", {"n": 2}, unique=RULE)
        with pytest.raises(Conflict) as refused:
            onward.submit("demo.echo", {"n": 3}, unique={**RULE, "on_conflict": "reject"})
    assert [body["unique"] for body in sent] == [RULE, RULE, {**RULE, "on_conflict": "reject"}]
    assert first.created and not first.duplicate_of_unique
    assert not duplicate.created and duplicate.duplicate_of_unique and duplicate.job_id == HOLDER
    assert refused.value.problem.existing_job_id == HOLDER


def test_the_async_client_passes_unique_through_too() -> None:
    import asyncio

    sent: list[dict[str, object]] = []

    async def submit_twice() -> bool:
        async with AsyncClient(URL, "tok", transport=unique_api(sent)) as onward:
            await onward.submit("demo.echo", unique=RULE)
            return (await onward.submit("demo.echo", unique=RULE)).duplicate_of_unique

    assert asyncio.run(submit_twice()) and sent[1]["unique"] == RULE
