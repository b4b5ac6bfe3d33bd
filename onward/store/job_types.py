"""The declared job types (issue 37): each type's retry policy as the last worker to start declared it
(onward.domain.retry_policy.JobTypeDeclaration), kept where the API and `explain` read it.

A worker pool publishes its registry's types when it starts (`JobTypes.declare`: one item per type, put
unconditionally, so the last declaration wins; each names the declaring worker and its onward version, so
two versions declaring different policies show whose is in force). The API reads them through `JobTypes`,
cached CACHE_S per process: a create without max_attempts gets its type's policy's (`with_type_defaults`),
`explain` and GET /types show the policy in force. `JobTypeRecorder` is answered on DynamoDB by
onward.store.dynamo.job_types.DynamoJobTypes (in the jobs table) and in memory by `MemoryJobTypes`, with the
same behaviour (tests/contract/test_job_types_contract.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from importlib.metadata import PackageNotFoundError, version
from typing import Protocol

from onward.domain.clock import Clock
from onward.domain.models import NewJob
from onward.domain.retry_policy import PLATFORM_POLICY, JobTypeDeclaration, RetryPolicy

CACHE_S = 5.0  # how long a process keeps the declared types it read (a new declaration shows within it)


class JobTypeRecorder(Protocol):
    def put_declarations(self, declarations: list[JobTypeDeclaration]) -> None:
        """Store each declaration, replacing the type's earlier one (the last writer wins)."""

    def declarations(self) -> list[JobTypeDeclaration]:
        """Every declared type, by name (strongly consistent)."""


class MemoryJobTypes:
    """The recorder in memory (onward.store.memory.recorder holds one, shared by the stores over it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._declared: dict[str, JobTypeDeclaration] = {}

    def put_declarations(self, declarations: list[JobTypeDeclaration]) -> None:
        with self._lock:
            self._declared.update({declared.job_type: declared for declared in declarations})

    def declarations(self) -> list[JobTypeDeclaration]:
        with self._lock:
            return [self._declared[name] for name in sorted(self._declared)]


def recorder_of(job_recorder: object) -> JobTypeRecorder:
    """The job types' recorder beside a JobRecorder (its `type_declarations`), or a fresh one in memory for a recorder
    without (a test's stand-in)."""
    found: JobTypeRecorder | None = getattr(job_recorder, "type_declarations", None)
    return found if found is not None else MemoryJobTypes()


def onward_version() -> str:
    try:
        return version("onward")
    except PackageNotFoundError:  # pragma: no cover - run from a tree that is not installed
        return "unknown"


class JobTypes:
    """The declared types of one store: declare (workers), read with a CACHE_S cache (the API). Thread-safe."""

    def __init__(self, recorder: JobTypeRecorder, clock: Clock, *, cache_s: float = CACHE_S,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._recorder = recorder
        self._clock = clock
        self._cache_s = cache_s
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._cached: tuple[float, dict[str, JobTypeDeclaration]] | None = None

    def declare(self, policies: Iterable[tuple[str, RetryPolicy]], declared_by: str) -> list[JobTypeDeclaration]:
        """Publish each (type, policy) as declared now by `declared_by`, running this onward version."""
        now, running = self._clock(), onward_version()
        declarations = [JobTypeDeclaration(job_type, policy, declared_by, running, now)
                        for job_type, policy in sorted(policies)]
        if declarations:
            self._recorder.put_declarations(declarations)
        with self._lock:
            self._cached = None
        return declarations

    def declared_types(self, *, fresh: bool = False) -> dict[str, JobTypeDeclaration]:
        """Every declared type by name: from the cache when it is younger than CACHE_S (unless `fresh`)."""
        with self._lock:
            cached = self._cached
        if not fresh and cached is not None and self._monotonic() - cached[0] < self._cache_s:
            return cached[1]
        read_at = self._monotonic()
        declared = {declaration.job_type: declaration for declaration in self._recorder.declarations()}
        with self._lock:
            self._cached = (read_at, declared)
        return declared

    def declared(self, job_type: str) -> JobTypeDeclaration | None:
        return self.declared_types().get(job_type)

    def policy(self, job_type: str) -> RetryPolicy:
        """The policy in force for the type: its declared one, else PLATFORM_POLICY."""
        declared = self.declared(job_type)
        return PLATFORM_POLICY if declared is None else declared.policy

    def with_type_defaults(self, request: NewJob) -> NewJob:
        """`request` with its type's max_attempts when it gave none of its own (read only then)."""
        if "max_attempts" in request.model_fields_set:
            return request
        declared = self.declared(request.type)
        if declared is None or declared.policy.max_attempts == request.max_attempts:
            return request
        return request.model_copy(update={"max_attempts": declared.policy.max_attempts})
