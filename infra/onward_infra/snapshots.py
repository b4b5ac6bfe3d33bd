"""The embedded endpoint's state on disk (`onward up --data-dir DIR`): every moto backend the endpoint
serves (tables with their items, DynamoDB streams with their records, shards and sequence numbers, Kinesis
streams with theirs, the CloudFormation stack, queues) as one consistent snapshot, taken between requests.

How it is durable, and what a crash may lose:
- A snapshot is a consistent cut of the whole account: it is taken while the endpoint's request lock is
  held, so it never holds half a request, and tables, streams and the pollers' checkpoints (items of the
  checkpoint table) always agree with each other.
- It is written to a temporary file, fsynced, renamed over the previous one and the directory fsynced: the
  file on disk is always a complete snapshot, the new one or the previous one.
- While the endpoint runs, a snapshot is taken every `every_s` seconds when something was written since the
  last one, by a forked child (as Redis's BGSAVE does): the child pickles its copy-on-write view of the
  state while the endpoint goes on serving; the request lock is held only for the fork itself.
- A graceful stop (Ctrl-C, SIGTERM) takes a last snapshot after the last request: nothing is lost.
- A crash (kill -9, power loss) loses what was written after the last snapshot: at most about `every_s`
  seconds of acknowledged writes, of every service together, as if the whole account had stepped back to
  that instant. The platform absorbs that as it absorbs a crash of its own: jobs that had finished in the
  window run again (at least once, never applied twice), and the status view, rolled back with everything
  else, moves forward again as they do.
"""

from __future__ import annotations

import contextlib
import copyreg
import fcntl
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import moto
from moto.backends import get_backend
from moto.core.base_backend import BackendDict
from moto.dynamodb.models.table import Table

SNAPSHOT_FILE = "endpoint-state.pickle"
LOCK_FILE = "LOCK"
# /2: the job store's dispatch items moved to per-tenant keys (onward.store.dynamo.keys: queue entries, RUNNING shards,
# the active index) and the outbox's by_time index is sharded; a /1 state's waiting jobs have no queue entry
# and would never be claimed, so it is refused rather than migrated (no deployment ever held /1 data).
# /3: the status view's listing index is sharded (`by_listing` on listing_pk, onward.pipeline.listing): a /2
# state's view rows carry no listing_pk and would vanish from every listing and count, so it is refused too.
# /4: the status table's `by_tag` index (tags) and the webhook deliveries' queues: a restored stack is not
# updated (EmbeddedEndpoint.deploy keeps it), so a /3 state would answer every tag listing and webhook with an error.
FORMAT = f"onward-embedded-endpoint-state/4 moto/{moto.__version__}".encode()

# Attributes our moto fixes keep on a table at run time (infra/onward_infra/moto_fixes/queries.py's index maps,
# retention.py's TTL hook): rebuilt from the items after a restore, never saved.
_RUNTIME_TABLE_ATTRIBUTES = ("_onward_index_partitions", "_onward_on_write")

Backends = dict[str, dict[str, dict[str, Any]]]  # service -> account -> region -> moto backend


class DataDirectoryInUse(RuntimeError):
    """Another endpoint holds the directory."""


class IncompatibleSnapshot(RuntimeError):
    """The snapshot was written by another format or moto version."""


@dataclass(frozen=True)
class SnapshotWritten:
    """One snapshot on disk: its size, how long it took, and how many changes it covers."""

    bytes: int
    seconds: float
    changes: int


def _backend_dicts() -> dict[str, BackendDict[Any]]:
    """Every moto service backend this process has loaded and used, by service name."""
    found: dict[str, BackendDict[Any]] = {}
    for name, module in list(sys.modules.items()):
        if not (name.startswith("moto.") and name.endswith(".models")):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, BackendDict) and len(value):
                found.setdefault(value.service_name, value)
    return found


def current_backends() -> Backends:
    return {service: {account: dict(regions) for account, regions in backends.items()}
            for service, backends in _backend_dicts().items()}


def tables(backends: Backends) -> Iterator[Table]:
    for regions in backends.get("dynamodb", {}).values():
        for backend in regions.values():
            yield from backend.tables.values()


@contextlib.contextmanager
def _without_runtime_attributes(backends: Backends) -> Iterator[None]:
    """The tables without what our fixes keep on them at run time, put back afterwards."""
    kept: list[tuple[Table, dict[str, Any]]] = []
    for table in tables(backends):
        taken = {name: table.__dict__.pop(name) for name in _RUNTIME_TABLE_ATTRIBUTES if name in table.__dict__}
        kept.append((table, taken))
    try:
        yield
    finally:
        for table, taken in kept:
            table.__dict__.update(taken)


def _new_lock(kind: str) -> Any:
    return threading.RLock() if kind == "rlock" else threading.Lock()


class _Pickler(pickle.Pickler):
    """Locks (moto's SQS queues and CloudFormation stacks hold some) are saved as new, unheld locks."""

    def __init__(self, file: IO[bytes]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.dispatch_table = {**copyreg.dispatch_table,
                               type(threading.RLock()): lambda lock: (_new_lock, ("rlock",)),
                               type(threading.Lock()): lambda lock: (_new_lock, ("lock",))}


def _dump(backends: Backends, file: IO[bytes]) -> None:
    file.write(FORMAT + b"\n")
    _Pickler(file).dump(backends)


class DataDirectory:
    """The directory an endpoint keeps its state in, held (flock) for as long as it is open."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(path / LOCK_FILE, "a+b")  # noqa: SIM115 - held open until close()
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            raise DataDirectoryInUse(f"{path} is in use by another embedded endpoint") from None

    @property
    def snapshot(self) -> Path:
        return self.path / SNAPSHOT_FILE

    def close(self) -> None:
        fcntl.flock(self._lock_file, fcntl.LOCK_UN)
        self._lock_file.close()

    def load(self) -> Backends | None:
        """The saved backends, or None when nothing was saved yet."""
        try:
            file = open(self.snapshot, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            return None
        with file:
            header = file.readline().rstrip(b"\n")
            if header != FORMAT:
                raise IncompatibleSnapshot(
                    f"{self.snapshot} was written as {header.decode(errors='replace')!r}; this endpoint reads "
                    f"{FORMAT.decode()!r} only (start with another --data-dir, or delete it to start empty)")
            backends: Backends = pickle.load(file)  # our own file, in a directory we hold
        return backends

    def save(self, backends: Backends) -> int:
        """Write `backends` as the snapshot, atomically and durably; its size. The caller keeps them still."""
        temporary = self.snapshot.with_suffix(".tmp")
        try:
            with _without_runtime_attributes(backends), open(temporary, "wb") as file:
                _dump(backends, file)
                file.flush()
                os.fsync(file.fileno())
                size = file.tell()
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        os.replace(temporary, self.snapshot)
        directory = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        return size

    def save_forked(self, backends: Backends) -> int:
        """`save` in a forked child, so that the caller (holding the request lock) waits only for the fork;
        returns the child's pid, to be passed to `wait_for`."""
        pid = os.fork()
        if pid == 0:  # the child: a copy-on-write image of the state at this instant; it only writes it out
            status = 1
            try:
                self.save(backends)
                status = 0
            finally:
                os._exit(status)
        return pid

    def wait_for(self, pid: int) -> int:
        """The size of the snapshot child `pid` wrote; OSError when it failed."""
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise OSError(f"the snapshot child {pid} failed (status {status}); the previous snapshot stays")
        return self.snapshot.stat().st_size


def restore(backends: Backends) -> None:
    """Put saved backends in place of moto's, service by service (before the endpoint serves)."""
    for service, accounts in backends.items():
        live: BackendDict[Any] = get_backend(service)  # type: ignore[call-overload]  # typed per literal name
        for account, regions in accounts.items():
            for region, backend in regions.items():
                live[account][region] = backend


class Snapshotter:
    """Keeps a data directory up to date with an endpoint's state: every `every_s` seconds when `changes()`
    moved, in a forked child, while holding `exclusive()` (the request lock) only for the fork; `final()`
    once the endpoint stopped serving."""

    def __init__(self, directory: DataDirectory, exclusive: Callable[[], AbstractContextManager[Any]],
                 changes: Callable[[], int], every_s: float) -> None:
        self.directory = directory
        self.every_s = every_s
        self.last: SnapshotWritten | None = None
        self._exclusive = exclusive
        self._changes = changes
        self._saved_changes = changes()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failures = 0
        self.taken = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="embedded-aws-snapshots", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.take(forked=True)
            except OSError as error:
                self.failures += 1
                print(f"embedded endpoint: a snapshot failed ({error}); the next one retries", file=sys.stderr)

    def take(self, *, forked: bool) -> SnapshotWritten | None:
        """A snapshot now if anything changed since the last one (None otherwise)."""
        started = time.monotonic()
        with self._exclusive():
            changes = self._changes()
            if changes == self._saved_changes:
                return None
            if forked:
                pid = self.directory.save_forked(current_backends())
            else:
                size = self.directory.save(current_backends())
        if forked:
            size = self.directory.wait_for(pid)
        self._saved_changes = changes
        written = SnapshotWritten(bytes=size, seconds=time.monotonic() - started, changes=changes)
        self.taken += 1
        self.last = written
        return written

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None

    def final(self) -> SnapshotWritten | None:
        """The last snapshot, in this process (the endpoint no longer serves, so nothing waits on it)."""
        self.stop()
        return self.take(forked=False)

    def stats(self) -> dict[str, Any]:
        last = self.last
        return {"data_dir": str(self.directory.path), "every_s": self.every_s, "snapshots": self.taken,
                "changes": self._changes(), "changes_saved": self._saved_changes,
                "failures": self.failures, "last_bytes": last.bytes if last else None,
                "last_seconds": round(last.seconds, 3) if last else None}
