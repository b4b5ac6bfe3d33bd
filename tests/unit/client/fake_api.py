"""A stand-in for Onward's HTTP API inside an httpx.MockTransport: jobs by Idempotency-Key, statuses that move
through a given script, and failures to inject (a lost answer, 503, 429) before the real handling. Every request
it sees is kept, so a test can say what the client sent."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

PROBLEM = {"content-type": "application/problem+json"}


def problem(status: int, title: str, detail: str = "", headers: dict[str, str] | None = None,
            **extra: Any) -> httpx.Response:
    body = {"type": f"https://onward.dev/problems/{title.lower()}", "title": title, "status": status,
            "detail": detail, **extra}
    return httpx.Response(status, json=body, headers={**PROBLEM, **(headers or {})})


def status_body(job_id: str, status: str | None, version: int = 1) -> dict[str, Any]:
    if status is None:
        return {"visible": False, "job_id": job_id, "detail": "not yet",
                "view": {"measured_at": "2026-12-04T10:00:00.000Z", "view_lag_s": None, "watermark": None,
                         "stale": True, "stale_after_s": 30.0, "shards": 0}}
    return {"visible": True, "job_id": job_id, "type": "demo.echo", "status": status,
            "terminal": status in ("succeeded", "dead", "cancelled", "quarantined"), "version": version,
            "attempt": 1, "cancel_requested": False, "updated_at": "2026-12-04T10:00:00.000Z",
            "progress": {"fraction": 0.5}, "trace_id": "0af7651916cd43dd8448eb211c80319c",  # fields added later
            "freshness": {"as_of": "2026-12-04T10:00:00.000Z", "age_s": 1.5, "view_lag_s": 0.8,
                          "watermark": "2026-12-04T10:00:01.000Z", "stale": False}}


@dataclass
class FakeApi:
    """`faults`: answers (or exceptions to raise) used up one per request before the API proper answers."""

    faults: list[httpx.Response | Exception | Callable[[httpx.Request], None]] = field(default_factory=list)
    jobs_by_key: dict[str, str] = field(default_factory=dict)
    script: list[str | None] = field(default_factory=list)  # GET /jobs/{id}'s statuses, one per read (the last stays)
    requests: list[httpx.Request] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = self._answer(request)
        self.answers.append(response.status_code)
        return response

    def _answer(self, request: httpx.Request) -> httpx.Response:
        if self.faults:
            fault = self.faults.pop(0)
            if isinstance(fault, Exception):
                raise fault
            if isinstance(fault, httpx.Response):
                return fault
            fault(request)  # acts like the API (e.g. creates the job), then the answer is lost
            raise httpx.ReadError("connection reset after the request was sent", request=request)
        return self.route(request)

    def create(self, request: httpx.Request) -> tuple[int, str]:
        key = request.headers["Idempotency-Key"]
        if key in self.jobs_by_key:
            return 200, self.jobs_by_key[key]
        self.jobs_by_key[key] = uuid.uuid4().hex
        return 202, self.jobs_by_key[key]

    def route(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if (request.method, path) == ("POST", "/jobs"):
            status, job_id = self.create(request)
            return httpx.Response(status, json={"job_id": job_id, "status": "queued", "version": 1})
        if (request.method, path) == ("POST", "/jobs/batch"):
            jobs = json.loads(request.content)["jobs"]
            results = [{"status": 202, "job_id": uuid.uuid4().hex} for _ in jobs]
            return httpx.Response(200, json={"results": results, "created": len(jobs)})
        if request.method == "GET" and path.startswith("/jobs/"):
            job_id = path.rsplit("/", 1)[1]
            shown = self.script.pop(0) if len(self.script) > 1 else self.script[0]
            version = {None: 0, "queued": 1, "running": 2}.get(shown, 3)
            tag = f'W/"v{version}"' if shown else 'W/"pending"'
            if request.headers.get("If-None-Match") == tag:
                return httpx.Response(304, headers={"ETag": tag})
            return httpx.Response(200, json=status_body(job_id, shown, version), headers={"ETag": tag})
        return problem(404, "Not found", "no such route")


class Sleeps:
    """time.sleep / asyncio.sleep stand-in that records each wait and moves a fake monotonic clock."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self.clock = 1000.0

    def monotonic(self) -> float:
        return self.clock

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)
