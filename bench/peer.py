"""Onward against a peer: the same burst on Onward's embedded stack and on procrastinate over PostgreSQL.

    .venv/bin/python -m bench.peer [--jobs 300] [--runs 3] [--workers 4] [--json]

The workload, on each side: `--jobs` no-op jobs submitted as one burst, `--workers` worker slots, timed from
the first submit until every job reads `succeeded`. The two sides alternate (Onward, peer, Onward, ...)
`--runs` times each in one window, so both see the same machine; progress lines go to stderr.

- Onward: bench/e2e.py's burst, imported (`run`): the whole platform in this process against the embedded
  endpoint (moto) in a process of its own, as `onward up` runs it; demo.echo jobs POSTed over HTTP on 8
  connections, until the status view shows every job succeeded: the view is fed through the DynamoDB
  stream, relay, Kinesis and projector, so "reads succeeded" includes that pipeline (e2e polls the rows of
  the jobs not yet seen succeeded every 0.25 s). Requests per job:
  every AWS request the platform made in the window (DynamoDB, DynamoDB Streams, Kinesis; the bench's reads
  of the view excluded), as e2e's Meter counts them, idle polls and heartbeats included (the endpoint counts
  requests only, `--meter requests`: billing each request's units would take the endpoint's time from the
  platform, which `onward up` does not pay).
- Peer: procrastinate (App, PsycopgConnector) on a PostgreSQL cluster this bench creates: an `async def`
  no-op task in bench/peer_tasks.py (procrastinate runs sync tasks in threads and its documentation advises
  against concurrency with synchronous tasks), each job
  deferred on its own with `defer_async(n=i)` by 8 concurrent coroutines (a user's burst of independent
  submissions, as e2e's 8 HTTP connections; not `batch_defer_async`, which would be one INSERT for the whole
  burst), and a worker with `concurrency=--workers` and procrastinate's defaults otherwise (LISTEN/NOTIFY on,
  jobs kept). Producer and worker run in this process on one event loop, each with a pool of its own as two
  processes would have (producer 8 connections, worker `--workers` + 2: one per running job, a fetch and the
  heartbeat; LISTEN has a connection of its own). Each run has a fresh database (as each Onward run has a
  fresh endpoint), and the worker is registered and LISTENing before the clock starts (as Onward's platform
  is up before its first submit). "Reads succeeded" is the job's row in `procrastinate_jobs`, which the bench
  polls every 0.05 s (the peer's runs last a few seconds: e2e's 0.25 s would be a large share of them) as a
  superuser role of its own.
  Statements per job: pg_stat_statements' `calls` for the role procrastinate connects as, reset when the
  clock starts and read when the last job reads succeeded: every statement procrastinate sent, idle
  polls, heartbeats and BEGIN/COMMIT included (psycopg opens a transaction around each query on a pooled
  connection), the bench's polls excluded. Statements run inside procrastinate's PL/pgSQL functions are not
  counted (pg_stat_statements.track = top), so this is statements sent, the analogue of requests sent; the
  pool's liveness check of each borrowed connection (an empty query) is a round trip not counted.
  `peer_statements_per_job_without_begin_commit` leaves BEGIN and COMMIT out: procrastinate's own calls.

PostgreSQL: initdb, pg_ctl and postgres from PATH, else /usr/lib/postgresql/*/bin (newest). When they are
missing the bench installs Debian's `postgresql` package with apt-get, as root only (else it exits saying
so), and stops any cluster the package started (Debian creates and may start a `main` cluster). It then
initdb's a cluster in a fresh temporary directory, starts it listening on 127.0.0.1 only (port chosen free,
its Unix socket in that directory) with fsync and synchronous_commit on (the defaults, stated in the
configuration) and trust authentication (loopback only, for the bench's lifetime), with
pg_stat_statements preloaded. As root the server runs as the `postgres` user (`runuser -u postgres`;
`nobody` if there is none): postgres refuses to run as root. The cluster is stopped and its directory
deleted at the end, whatever happens (try/finally; SIGTERM is turned into an exit; pg_ctl runs in a session
of its own so a Ctrl-C reaches only the bench, which then stops the server).

Prints (`--json`: one object): onward_jobs_per_s and peer_jobs_per_s (medians of the runs), ratio (peer /
Onward, 2 decimals, from those medians), runs (each side's jobs/s in the order they ran),
onward_requests_per_job, peer_statements_per_job (over all runs) with their breakdowns by operation and by
statement, jobs, workers, and machine (CPU count, versions). Then what the request count alone allows
(bench/request_floor.py, measured after the runs): request_floor_ms (CPU of the cheapest request, client and
endpoint), onward_ceiling_jobs_per_s (every CPU busy with nothing but the jobs' requests at that floor),
ratio_at_ceiling (the best ratio at this many requests per job) and requests_per_job_for_ratio_3. Times
come from a shared machine: read the ratio, not the absolute values.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import glob
import json
import os
import platform
import pwd
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any, Self

os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

from bench import e2e, peer_tasks, request_floor

JOBS = 300
RUNS = 3
WORKERS = 4
FLOOR_REQUESTS = 1000
SUBMITTERS = 8  # concurrent submitters, as bench/e2e.py's HTTP connections
POLL_S = 0.05
SUPERUSER = "bench"  # the bench's own role: creates databases, resets and reads pg_stat_statements, polls
PEER_ROLE = "peer"  # the role procrastinate connects as; only its statements are counted
CLUSTER_PREFIX = "onward-peer-pg-"
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK")
NEEDED = ("initdb", "pg_ctl", "postgres")

Say = Callable[[str], None]


# --- PostgreSQL ------------------------------------------------------------------------------------------

def _has_binaries(directory: Path) -> bool:
    return all(os.access(directory / name, os.X_OK) for name in NEEDED)


def find_bindir() -> Path | None:
    """initdb, pg_ctl and postgres together: PATH first (symlinks resolved), then /usr/lib/postgresql/*/bin."""
    found = shutil.which("pg_ctl")
    if found:
        directory = Path(found).resolve().parent
        if _has_binaries(directory):
            return directory
    def version(path: str) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", Path(path).parent.name))
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        if _has_binaries(Path(candidate)):
            return Path(candidate)
    return None


def install_postgres(say: Say) -> Path:
    """Debian's `postgresql` with apt-get (root only); any cluster the package started is stopped."""
    if os.geteuid() != 0:
        sys.exit("bench/peer.py: PostgreSQL (initdb, pg_ctl, postgres) not found on PATH nor in "
                 "/usr/lib/postgresql/*/bin, and installing it needs root: run `apt-get install postgresql` "
                 "(or put its bin directory on PATH) and try again.")
    if shutil.which("apt-get") is None:
        sys.exit("bench/peer.py: PostgreSQL not found and there is no apt-get to install Debian's package.")
    say("peer: PostgreSQL not found; installing Debian's postgresql package with apt-get")
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=environment, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql"], check=True,
                   env=environment, stdout=subprocess.DEVNULL)
    if shutil.which("pg_lsclusters") and shutil.which("pg_ctlcluster"):
        listing = subprocess.run(["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=False)
        for line in listing.stdout.splitlines():
            fields = line.split()
            if len(fields) >= 4 and fields[3] == "online":
                say(f"peer: stopping cluster {fields[0]}/{fields[1]} that installing the package started")
                subprocess.run(["pg_ctlcluster", fields[0], fields[1], "stop"], check=False)
    directory = find_bindir()
    if directory is None:
        sys.exit("bench/peer.py: installed Debian's postgresql, yet no initdb/pg_ctl/postgres was found.")
    return directory


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _server_user() -> str | None:
    """None: run as ourselves. As root: `postgres` (Debian's package creates it), else `nobody`."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    sys.exit("bench/peer.py: running as root and neither a `postgres` nor a `nobody` user exists to run "
             "the server as (postgres refuses to run as root).")


class LocalPostgres:
    """A throwaway cluster in a temporary directory on 127.0.0.1; `with` stops it and deletes the directory."""

    def __init__(self, bindir: Path, say: Say) -> None:
        self.bindir = bindir
        self.say = say
        self.user = _server_user()
        self.directory = Path(tempfile.mkdtemp(prefix=CLUSTER_PREFIX))
        self.data = self.directory / "data"
        self.log = self.directory / "server.log"
        self.port = 0
        self.started = False
        self.version = ""

    def _run(self, program: str, *arguments: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / program), *arguments]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        # A session of its own: a Ctrl-C in the terminal reaches the bench, not the server it starts.
        return subprocess.run(command, cwd=self.directory, capture_output=True, text=True, check=check,
                              start_new_session=True, timeout=120)

    def __enter__(self) -> Self:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _start(self) -> None:
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)
        self.directory.chmod(0o700)
        self.version = self._run("postgres", "--version").stdout.strip()
        done = self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8",
                         "--no-locale", check=False)
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{done.stdout}\n{done.stderr}")
        for attempt in range(3):
            self.port = _free_port()
            with (self.data / "postgresql.conf").open("a") as conf:
                conf.write(
                    "\n# bench/peer.py\n"
                    "listen_addresses = '127.0.0.1'\n"
                    f"port = {self.port}\n"
                    f"unix_socket_directories = '{self.directory}'\n"
                    "fsync = on  # the default, stated\n"
                    "synchronous_commit = on  # the default, stated\n"
                    "shared_preload_libraries = 'pg_stat_statements'\n"
                    "pg_stat_statements.track = top\n")
            done = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start",
                             check=False)
            if done.returncode == 0:
                self.started = True
                self.say(f"peer: {self.version} cluster in {self.directory} on 127.0.0.1:{self.port}")
                return
            log = self.log.read_text(errors="replace") if self.log.exists() else ""
            if "could not bind" not in log or attempt == 2:
                raise RuntimeError(f"pg_ctl start failed:\n{done.stdout}\n{done.stderr}\n{log[-3000:]}")

    def conninfo(self, user: str, database: str) -> str:
        return f"host=127.0.0.1 port={self.port} user={user} dbname={database}"

    def _postmaster_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.data / "postmaster.pid").read_text().splitlines()[0])
        return None

    def close(self) -> None:
        """Stop the server (fast, then immediate, then SIGKILL) and delete the directory."""
        try:
            pid = self._postmaster_pid()
            if pid is not None:
                stopped = self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "30", "stop",
                                    check=False)
                if stopped.returncode != 0 and self._postmaster_pid() is not None:
                    self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "stop",
                              check=False)
                for signal_number in (signal.SIGQUIT, signal.SIGKILL):
                    if not _alive(pid):
                        break
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal_number)
                    _wait_gone(pid, 10)
            if self.started:
                self.say(f"peer: cluster stopped, {self.directory} deleted")
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait_gone(pid: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


# --- the peer's run ------------------------------------------------------------------------------------

def _statement_label(query: str) -> str:
    text = " ".join(query.split())
    called = re.search(r"\b(procrastinate_\w+)\s*\(", text)
    if called:
        return f"{text.split()[0].upper()} {called.group(1)}(...)"
    return text[:70]


async def _peer_run(server: LocalPostgres, database: str, jobs: int, workers: int) -> dict[str, Any]:
    import psycopg

    async def connect(dbname: str) -> psycopg.AsyncConnection[Any]:
        return await psycopg.AsyncConnection.connect(server.conninfo(SUPERUSER, dbname), autocommit=True)

    admin = await connect("postgres")
    async with admin:
        await admin.execute(f'CREATE DATABASE "{database}" OWNER "{PEER_ROLE}"')
    observer = await connect(database)
    async with observer:
        await observer.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        worker_app = peer_tasks.make_app(server.conninfo(PEER_ROLE, database), workers + 2)
        producer_app = peer_tasks.make_app(server.conninfo(PEER_ROLE, database), SUBMITTERS)
        noop = producer_app.tasks[peer_tasks.TASK_NAME]
        async with worker_app.open_async(), producer_app.open_async():
            await worker_app.schema_manager.apply_schema_async()
            worker = asyncio.create_task(worker_app.run_worker_async(
                concurrency=workers, install_signal_handlers=False, name="bench-worker"))
            try:
                deadline = time.monotonic() + 30
                while True:  # registered, and its LISTEN connection up: a job deferred now wakes it
                    cursor = await observer.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND datname = %s"
                        " AND query ILIKE 'LISTEN%%'", (PEER_ROLE, database))
                    row = await cursor.fetchone()
                    if row and row[0] >= 1:
                        break
                    if worker.done():
                        worker.result()  # raises what stopped it
                    if time.monotonic() > deadline:
                        raise RuntimeError("procrastinate's worker did not start LISTENing within 30 s")
                    await asyncio.sleep(0.02)
                await observer.execute("SELECT pg_stat_statements_reset()")
                started = time.perf_counter()
                numbers = iter(range(jobs))  # shared: each submitter defers the next number until none is left

                async def submitter() -> list[int]:
                    return [await noop.defer_async(n=number) for number in numbers]

                deferred = await asyncio.gather(*(submitter() for _ in range(SUBMITTERS)))
                job_ids = [job_id for ids in deferred for job_id in ids]
                while True:
                    cursor = await observer.execute(
                        "SELECT count(*) FROM procrastinate_jobs WHERE id = ANY(%s) AND status = 'succeeded'",
                        (job_ids,))
                    row = await cursor.fetchone()
                    if row and row[0] == jobs:
                        break
                    if worker.done():
                        worker.result()
                        raise RuntimeError("procrastinate's worker stopped before every job succeeded")
                    await asyncio.sleep(POLL_S)
                elapsed_s = time.perf_counter() - started
                cursor = await observer.execute(
                    "SELECT s.query, s.calls FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid"
                    " JOIN pg_database d ON d.oid = s.dbid WHERE r.rolname = %s AND d.datname = %s",
                    (PEER_ROLE, database))
                statements = Counter[str]()
                for query, calls in await cursor.fetchall():
                    statements[_statement_label(query)] += calls
            finally:
                worker.cancel()  # procrastinate's graceful stop: running jobs finish first
                with contextlib.suppress(asyncio.CancelledError):
                    await worker
    return {"elapsed_s": elapsed_s, "jobs_per_s": round(jobs / elapsed_s, 1), "statements": statements}


def peer_run(server: LocalPostgres, number: int, jobs: int, workers: int) -> dict[str, Any]:
    return asyncio.run(_peer_run(server, f"peer_run_{number}", jobs, workers))


def _create_peer_role(server: LocalPostgres) -> None:
    import psycopg

    with psycopg.connect(server.conninfo(SUPERUSER, "postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{PEER_ROLE}" LOGIN')


# --- Onward's run --------------------------------------------------------------------------------------

def onward_run(jobs: int, workers: int) -> dict[str, Any]:
    """bench/e2e.py's burst. It puts its stack's names in os.environ (as Lambda would): restored after."""
    saved = dict(os.environ)
    try:
        results = e2e.run(jobs=jobs, workers=workers, billing=False)  # counts requests: as `onward up`, no units
    finally:
        os.environ.clear()
        os.environ.update(saved)
    requests = {name: per_job * jobs for name, per_job in results["requests_per_job"].items()}
    return {"elapsed_s": results["elapsed_s"], "jobs_per_s": results["jobs_per_s"], "requests": requests}


# --- the comparison ------------------------------------------------------------------------------------

def compare(jobs: int = JOBS, runs: int = RUNS, workers: int = WORKERS, say: Say | None = None) -> dict[str, Any]:
    say = say or (lambda line: None)
    bindir = find_bindir() or install_postgres(say)
    onward: list[dict[str, Any]] = []
    peer: list[dict[str, Any]] = []
    with LocalPostgres(bindir, say) as server:
        _create_peer_role(server)
        for index in range(1, runs + 1):
            say(f"onward run {index}/{runs}: {jobs} jobs, {workers} workers: starting")
            onward.append(onward_run(jobs, workers))
            say(f"onward run {index}/{runs}: {onward[-1]['jobs_per_s']} jobs/s ({onward[-1]['elapsed_s']}s)")
            say(f"peer run {index}/{runs}: {jobs} jobs, concurrency {workers}: starting")
            peer.append(peer_run(server, index, jobs, workers))
            say(f"peer run {index}/{runs}: {peer[-1]['jobs_per_s']} jobs/s ({peer[-1]['elapsed_s']:.2f}s)")
        version = server.version
    say("the request floor: CPU per request on the embedded stack")
    floor = request_floor.measure(FLOOR_REQUESTS)
    onward_median = statistics.median(r["jobs_per_s"] for r in onward)
    peer_median = statistics.median(r["jobs_per_s"] for r in peer)
    requests: Counter[str] = Counter()
    for r in onward:
        requests.update(r["requests"])
    statements: Counter[str] = Counter()
    for r in peer:
        statements.update(r["statements"])
    total_jobs = jobs * runs
    requests_per_job = sum(requests.values()) / total_jobs
    cpus = os.cpu_count() or 1
    ceiling = request_floor.ceiling_jobs_per_s(floor["floor_ms"], requests_per_job, cpus)
    return {
        "onward_jobs_per_s": onward_median,
        "peer_jobs_per_s": peer_median,
        "ratio": round(peer_median / onward_median, 2),
        "runs": {"onward": [r["jobs_per_s"] for r in onward], "peer": [r["jobs_per_s"] for r in peer]},
        "onward_requests_per_job": round(requests_per_job, 2),
        # What the request count alone allows (bench/request_floor.py): every CPU busy with nothing but
        # requests at their floor. The best ratio that many requests per job can reach, and the requests per
        # job at which a ratio of 3 becomes reachable at all.
        "request_floor_ms": floor["floor_ms"],
        "onward_ceiling_jobs_per_s": ceiling,
        "ratio_at_ceiling": round(peer_median / ceiling, 2),
        "requests_per_job_for_ratio_3": round(cpus * 1000 / (floor["floor_ms"] * peer_median / 3), 2),
        "peer_statements_per_job": round(sum(statements.values()) / total_jobs, 2),
        "peer_statements_per_job_without_begin_commit": round(
            sum(n for name, n in statements.items() if name not in TRANSACTION_CONTROL) / total_jobs, 2),
        "onward_requests_per_job_by_operation": {name: round(n / total_jobs, 3)
                                                 for name, n in sorted(requests.items())},
        "peer_statements_per_job_by_statement": {name: round(n / total_jobs, 3)
                                                 for name, n in statements.most_common()},
        "jobs": jobs,
        "workers": workers,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "postgres": version,
                    "procrastinate": metadata.version("procrastinate")},
    }


def report(results: dict[str, Any]) -> str:
    machine = results["machine"]
    lines = [
        f"Onward vs procrastinate: {results['jobs']} no-op jobs as a burst, {results['workers']} worker slots, "
        f"until every job reads succeeded; {len(results['runs']['onward'])} runs each, alternating",
        f"  machine: {machine['cpus']} CPUs; {machine['postgres']}; procrastinate {machine['procrastinate']}",
        f"  {'':28} {'jobs/s (median)':>16}   runs",
        f"  {'Onward (embedded stack)':28} {results['onward_jobs_per_s']:>16}   {results['runs']['onward']}",
        f"  {'procrastinate (PostgreSQL)':28} {results['peer_jobs_per_s']:>16}   {results['runs']['peer']}",
        f"  ratio (peer / Onward)        {results['ratio']:>16}",
        f"  Onward AWS requests per job        {results['onward_requests_per_job']}",
        f"  request floor {results['request_floor_ms']} ms CPU: at most {results['onward_ceiling_jobs_per_s']} jobs/s "
        f"at that many requests (ratio {results['ratio_at_ceiling']} at best); a ratio of 3 needs at most "
        f"{results['requests_per_job_for_ratio_3']} requests per job",
    ]
    lines += [f"    {name:48} {value}" for name, value in results["onward_requests_per_job_by_operation"].items()]
    lines.append(f"  procrastinate statements per job   {results['peer_statements_per_job']}  "
                 f"({results['peer_statements_per_job_without_begin_commit']} without BEGIN and COMMIT)")
    lines += [f"    {name:48} {value}" for name, value in results["peer_statements_per_job_by_statement"].items()]
    return "\n".join(lines)


def _exit_on_sigterm(signal_number: int, _frame: object) -> None:
    raise SystemExit(128 + signal_number)  # unwinds through the finally blocks: the cluster is removed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.runs < 1 or args.workers < 1:
        parser.error("--jobs, --runs and --workers must be at least 1")

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        results = compare(args.jobs, args.runs, args.workers, say)
    except KeyboardInterrupt:  # the cluster is already stopped and deleted (LocalPostgres.close)
        say("interrupted")
        return 130
    print(json.dumps(results) if args.json else report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
