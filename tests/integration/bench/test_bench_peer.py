"""bench/peer.py in a reduced mode (20 jobs, one run each side): Onward's embedded stack and procrastinate on
a PostgreSQL cluster the bench creates, installs when missing (as root, with apt-get) and removes. Checks the
JSON's shape and arithmetic and that nothing of the cluster outlives the bench; speeds are not asserted (a
shared machine says nothing about them: `python -m bench.peer --json` measures 300 jobs, 3 runs each).

Not skipped when PostgreSQL is missing: the bench installs Debian's package itself (CI runs as root)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT_S = 300
CLUSTER_LINE = re.compile(r"cluster in (\S+) on 127\.0\.0\.1:(\d+)")


def _run_bench(*arguments: str) -> tuple[int, str, str]:
    """The bench as a command; on a timeout it gets SIGTERM (it then stops and deletes its cluster), not
    SIGKILL, so that even a failing run leaves nothing behind."""
    process = subprocess.Popen([sys.executable, "-m", "bench.peer", *arguments], cwd=ROOT, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
        pytest.fail(f"bench/peer.py took more than {TIMEOUT_S}s:\n{stderr[-3000:]}")
    return process.returncode, stdout, stderr


def _processes_in(directory: Path) -> list[str]:
    """Processes whose working directory is in `directory` (a postmaster and its children live in their data
    directory) or whose command line names it."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone, or not ours to read
            continue
        if cwd.startswith(str(directory)) or str(directory) in command:
            found.append(f"{entry.name}: {command}")
    return found


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_the_peer_bench_compares_both_sides_and_leaves_no_cluster_behind():
    """Without the medians and the ratio computed from them the comparison could not be read; without each
    side's requests or statements per job it would compare speeds only; without stopping and deleting the
    cluster every run would leave a PostgreSQL server behind on the machine."""
    returncode, stdout, stderr = _run_bench("--json", "--jobs", "20", "--runs", "1")
    assert returncode == 0, stderr[-3000:]
    result = json.loads(stdout)

    for key in ("onward_jobs_per_s", "peer_jobs_per_s", "ratio", "onward_requests_per_job",
                "peer_statements_per_job"):
        assert isinstance(result[key], int | float) and result[key] > 0, (key, result)
    assert result["ratio"] == round(result["peer_jobs_per_s"] / result["onward_jobs_per_s"], 2), result
    assert result["jobs"] == 20 and result["workers"] == 4
    assert result["runs"]["onward"] == [result["onward_jobs_per_s"]], result
    assert result["runs"]["peer"] == [result["peer_jobs_per_s"]], result
    assert result["machine"]["cpus"] >= 1
    # Each side did the work it is credited with: Onward's job transactions (create, claim, complete), and
    # procrastinate's defer, fetch and finish, a statement each per job (its SQL functions are versioned:
    # procrastinate_defer_jobs_v1, ...; matched by their stem).
    assert result["onward_requests_per_job_by_operation"]["dynamodb.TransactWriteItems"] >= 3, result
    statements = result["peer_statements_per_job_by_statement"]
    for stem in ("procrastinate_defer_job", "procrastinate_fetch_job", "procrastinate_finish_job"):
        assert sum(n for name, n in statements.items() if stem in name) >= 1, (stem, statements)
    assert result["peer_statements_per_job"] >= 3, result
    # The ceiling is the arithmetic it says: every CPU spending the floor on each request of a job
    ceiling = result["machine"]["cpus"] * 1000 / (result["request_floor_ms"] * result["onward_requests_per_job"])
    assert result["onward_ceiling_jobs_per_s"] == pytest.approx(ceiling, rel=0.02), result
    assert result["ratio_at_ceiling"] == pytest.approx(
        result["peer_jobs_per_s"] / result["onward_ceiling_jobs_per_s"], rel=0.02), result
    assert result["requests_per_job_for_ratio_3"] == pytest.approx(
        result["machine"]["cpus"] * 1000 / (result["request_floor_ms"] * result["peer_jobs_per_s"] / 3), rel=0.02)

    match = CLUSTER_LINE.search(stderr)
    assert match, stderr[-3000:]
    directory, port = Path(match.group(1)), int(match.group(2))
    assert f"cluster stopped, {directory} deleted" in stderr, stderr[-3000:]
    assert not directory.exists(), f"{directory} left behind"
    assert _processes_in(directory) == []
    assert not _listening(port), f"something still listens on 127.0.0.1:{port}"
