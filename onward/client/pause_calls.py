"""Pause, resume and the drain switch as calls (docs/flow-control.md): a tenant's own (/pause, /resume, /pauses)
and an operator's (/ops/pause, /ops/resume, /ops/pauses, /ops/drain). Each is safe to send again: a second pause
or resume changes nothing (its answer says `changed` false)."""

from __future__ import annotations

from typing import Any

import httpx

from onward.client.models import DrainState, PauseChange, Pauses
from onward.client.transport import Call


def _named(**sides: str | None) -> dict[str, Any]:
    return {name: value for name, value in sides.items() if value is not None}


def pause(job_type: str | None) -> Call:
    return Call("POST", "/pause", body=_named(type=job_type), idempotent=True)


def resume(job_type: str | None) -> Call:
    return Call("POST", "/resume", body=_named(type=job_type), idempotent=True)


def list_pauses() -> Call:
    return Call("GET", "/pauses", idempotent=True)


def ops_pause(tenant: str | None, job_type: str | None) -> Call:
    return Call("POST", "/ops/pause", body=_named(tenant=tenant, type=job_type), idempotent=True)


def ops_resume(tenant: str | None, job_type: str | None) -> Call:
    return Call("POST", "/ops/resume", body=_named(tenant=tenant, type=job_type), idempotent=True)


def ops_list_pauses() -> Call:
    return Call("GET", "/ops/pauses", idempotent=True)


def drain(on: bool) -> Call:
    return Call("POST", "/ops/drain", body={"on": on}, idempotent=True)


def change(response: httpx.Response) -> PauseChange:
    return PauseChange.model_validate(response.json())


def pauses(response: httpx.Response) -> Pauses:
    return Pauses.model_validate(response.json())


def drain_state(response: httpx.Response) -> DrainState:
    return DrainState.model_validate(response.json())
