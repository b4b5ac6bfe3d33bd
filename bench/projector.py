"""Projector cost and throughput: the real projector vs a naive read-then-write one, same events, one run.

    .venv/bin/python -m bench.projector [--json] [--jobs N]

Over real HTTP to an EmbeddedEndpoint with template.yaml's data resources deployed. The events are the
histories of N jobs (default 1,000): queued v1, running v2, succeeded v3 (with an inline result). Three
phases, each run by both projectors into their own status table:
- fresh: every event once, all v1s, then all v2s, then all v3s: each one is applied;
- duplicate: every v3 again (a redelivery): a no-op;
- stale: every v2 again (a replay behind the view): a no-op.

- onward: onward.pipeline.projector.projector.StatusProjector.project: ONE conditional PutItem (`attribute_not_exists
  OR version < :v`, ReturnValuesOnConditionCheckFailure=ALL_OLD), so a refusal is classified from the
  returned item with no extra read;
- naive: GetItem (consistent), compare versions in Python, then PutItem when newer.

Within each phase the two run side by side, alternating in slices of 50 events (who goes first alternates
too), so a noisy neighbour slows both alike. DynamoDB requests are counted with a botocore
`before-call.dynamodb.*` hook on each projector's own client.

Targets: 1.0 request per event in every phase, and onward >= 1.8x the naive throughput on fresh events,
the path every event takes once (the naive projector needs two requests there; on duplicates and stale
events both need one, so those ratios are shown, not targeted). The exit status is 1 when one is missed.
Throughputs are from a shared machine: compare ratios, not values.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

from onward.bootstrap import Deployment
from onward.domain.clock import iso, system_clock
from onward.domain.models import OutboxEvent
from onward.domain.projection import ProjectionOutcome, classify, view_fields
from onward.domain.states import JobState
from onward.settings import Settings
from onward.store.dynamo.attributes import from_item, to_item
from onward_infra.endpoint import EmbeddedEndpoint

JOBS = 1_000
SLICE = 50
TARGET_REQUESTS_PER_EVENT = 1.0
TARGET_SPEEDUP = 1.8
PHASES = ("fresh", "duplicate", "stale")
EXPECTED = {"fresh": ProjectionOutcome.APPLIED, "duplicate": ProjectionOutcome.DUPLICATE,
            "stale": ProjectionOutcome.STALE}


class RequestCounter:
    """Counts the API calls a client makes to one service (botocore's before-call event)."""

    def __init__(self, client: Any, service: str) -> None:
        self.total = 0
        client.meta.events.register(f"before-call.{service}.*", self._count)

    def _count(self, **_: Any) -> None:
        self.total += 1


class NaiveProjector:
    """Read, compare in Python, write: two requests for every applied event, and a race between the read
    and the write that only the version guard of the real projector closes."""

    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def project(self, event: OutboxEvent) -> ProjectionOutcome:
        item = self._db.get_item(TableName=self._table, Key={"job_id": {"S": event.job_id}},
                                 ConsistentRead=True).get("Item")
        held = from_item(item) if item else {}
        outcome = classify(held.get("version"), held.get("digest"), event)
        if outcome is ProjectionOutcome.APPLIED:
            self._db.put_item(TableName=self._table,
                              Item=to_item({**view_fields(event), "projected_at": iso(system_clock())}))
        return outcome


@dataclass
class Tally:
    seconds: float = 0.0
    requests: int = 0
    events: int = 0
    unexpected: dict[str, int] = field(default_factory=dict)
    best_events_per_s: float = 0.0  # the fastest slice: what a moment of load on a shared machine cannot slow

    def add_slice(self, events: int, seconds: float) -> None:
        self.seconds += seconds
        self.events += events
        self.best_events_per_s = max(self.best_events_per_s, events / seconds if seconds > 0 else 0.0)

    def figures(self) -> dict[str, Any]:
        return {"events": self.events, "requests": self.requests, "seconds": round(self.seconds, 4),
                "requests_per_event": round(self.requests / self.events, 3),
                "events_per_s": round(self.events / self.seconds, 1),
                "best_slice_events_per_s": round(self.best_events_per_s, 1), "unexpected_outcomes": self.unexpected}


def histories(jobs: int) -> dict[str, list[OutboxEvent]]:
    """The events of each phase: the histories of `jobs` jobs (queued, running, succeeded)."""
    base = system_clock() - 3_600_000
    by_version: dict[int, list[OutboxEvent]] = {1: [], 2: [], 3: []}
    for n in range(jobs):
        job_id = uuid.uuid4().hex
        for version, status in ((1, JobState.QUEUED), (2, JobState.RUNNING), (3, JobState.SUCCEEDED)):
            result = {"rows": n, "note": "r" * 80} if status is JobState.SUCCEEDED else None
            by_version[version].append(OutboxEvent(
                event_id=f"{job_id}:{version}", job_id=job_id, tenant_id=f"tenant-{n % 7}", type="bench.job",
                version=version, status=status, attempt=0 if version == 1 else 1,
                occurred_at=iso(base + n * 10 + version), result_inline=result,
                result_size_bytes=len(json.dumps(result)) if result else None,
            ))
    return {"fresh": by_version[1] + by_version[2] + by_version[3], "duplicate": by_version[3],
            "stale": by_version[2]}


def run_phase(phase: str, events: list[OutboxEvent], projectors: dict[str, Any],
              counters: dict[str, RequestCounter], tallies: dict[str, dict[str, Tally]]) -> None:
    names = list(projectors)
    for number, start in enumerate(range(0, len(events), SLICE)):
        chunk = events[start:start + SLICE]
        for name in names if number % 2 == 0 else reversed(names):
            tally = tallies[name][phase]
            project = projectors[name].project
            before = counters[name].total
            began = time.perf_counter()
            outcomes = [project(event) for event in chunk]
            tally.add_slice(len(chunk), time.perf_counter() - began)
            tally.requests += counters[name].total - before
            for outcome in outcomes:
                if outcome is not EXPECTED[phase]:
                    tally.unexpected[outcome.value] = tally.unexpected.get(outcome.value, 0) + 1


def run(endpoint: EmbeddedEndpoint | None = None, *, jobs: int = JOBS) -> dict[str, Any]:
    own = endpoint is None
    running = EmbeddedEndpoint().start() if endpoint is None else endpoint
    try:
        environment = running.deploy(f"bench-projector-{uuid.uuid4().hex[:8]}").environment
        os.environ.update(environment)  # as Lambda gives the handlers their resources
        os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
        settings = Settings.from_environment(environment)
        onward_db, naive_db = running.client("dynamodb"), running.client("dynamodb")
        naive_table = f"naive-status-{uuid.uuid4().hex[:8]}"
        naive_db.create_table(TableName=naive_table, BillingMode="PAY_PER_REQUEST",
                              AttributeDefinitions=[{"AttributeName": "job_id", "AttributeType": "S"}],
                              KeySchema=[{"AttributeName": "job_id", "KeyType": "HASH"}])
        projectors = {
            "onward": Deployment(settings, clients={"dynamodb": onward_db}).status_projector,
            "naive": NaiveProjector(naive_db, naive_table),
        }
        counters = {"onward": RequestCounter(onward_db, "dynamodb"),
                    "naive": RequestCounter(naive_db, "dynamodb")}
        tallies = {name: {phase: Tally() for phase in PHASES} for name in projectors}
        for phase, events in histories(jobs).items():
            run_phase(phase, events, projectors, counters, tallies)
    finally:
        if own:
            running.stop()

    results: dict[str, Any] = {"jobs": jobs, "slice": SLICE,
                               "targets": {"requests_per_event": TARGET_REQUESTS_PER_EVENT,
                                           "speedup_fresh": TARGET_SPEEDUP}}
    for name in projectors:
        results[name] = {phase: tallies[name][phase].figures() for phase in PHASES}
        phases = tallies[name].values()
        total = Tally(sum(t.seconds for t in phases), sum(t.requests for t in phases),
                      sum(t.events for t in phases))
        results[name]["all"] = total.figures()
    results["speedup"] = {
        phase: round(results["onward"][phase]["events_per_s"] / results["naive"][phase]["events_per_s"], 2)
        for phase in (*PHASES, "all")}
    # The same ratio from each side's fastest slice: slices alternate, so a burst of load from elsewhere on a
    # shared machine slows one side's slice, not its best one.
    results["speedup_best_slice"] = {
        phase: round(results["onward"][phase]["best_slice_events_per_s"]
                     / results["naive"][phase]["best_slice_events_per_s"], 2) for phase in PHASES}
    results["correct"] = not any(results[name][phase]["unexpected_outcomes"] for name in projectors
                                 for phase in PHASES)
    results["ok"] = (results["correct"]
                     and all(results["onward"][phase]["requests_per_event"] <= TARGET_REQUESTS_PER_EVENT
                             for phase in PHASES)
                     and results["speedup"]["fresh"] >= TARGET_SPEEDUP)
    return results


def report(results: dict[str, Any]) -> str:
    def verdict(ok: bool) -> str:
        return "OK" if ok else "MISSED"

    lines = [
        f"Projector: events -> status view, histories of {results['jobs']:,} jobs (v1 queued, v2 running, "
        f"v3 succeeded), both projectors alternating in slices of {results['slice']}, one run:",
        "",
        f"{'phase':<11}{'events':>8}{'onward req/event':>18}{'naive req/event':>17}{'onward ev/s':>13}"
        f"{'naive ev/s':>12}{'onward/naive':>14}",
    ]
    for phase in (*PHASES, "all"):
        onward, naive = results["onward"][phase], results["naive"][phase]
        lines.append(f"{phase:<11}{onward['events']:>8,}{onward['requests_per_event']:>18.2f}"
                     f"{naive['requests_per_event']:>17.2f}{onward['events_per_s']:>13,.0f}"
                     f"{naive['events_per_s']:>12,.0f}{results['speedup'][phase]:>13.2f}x")
    target_requests = results["targets"]["requests_per_event"]
    worst = max(results["onward"][phase]["requests_per_event"] for phase in PHASES)
    lines += [
        "",
        "onward requests per event, fresh / duplicate / stale: "
        + " / ".join(f"{results['onward'][p]['requests_per_event']:.2f}" for p in PHASES)
        + f" (target {target_requests:g} alike): {verdict(worst <= target_requests)}",
        f"throughput onward / naive on fresh events: {results['speedup']['fresh']:.2f}x "
        f"(target >= {results['targets']['speedup_fresh']:g}x): "
        f"{verdict(results['speedup']['fresh'] >= results['targets']['speedup_fresh'])}",
        "every event classified as its phase expects (applied / duplicate / stale): "
        f"{verdict(results['correct'])}",
        "(duplicate and stale events cost one request in both, onward's refused update vs naive's read:",
        " their ratios are shown, not targeted)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--jobs", type=int, default=JOBS,
                        help=f"jobs whose histories are projected, 3 events each (default {JOBS:,})")
    args = parser.parse_args(argv)
    results = run(jobs=args.jobs)
    print(json.dumps(results, sort_keys=True) if args.json else report(results))
    return 0 if results["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
