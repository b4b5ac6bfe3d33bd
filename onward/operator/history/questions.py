"""The ready-made questions over the archive, written once as SQL that DuckDB and Athena (Trino) both read.

Each query reads `{source}` (the reader puts its table there: DuckDB's read_parquet over the directory, Athena's
Glue table) and takes its values as `?` parameters (DuckDB's prepared parameters; Athena's ExecutionParameters),
never formatted into the text. The common subset they keep to: no UNNEST (DuckDB unnests an array of structs
into one struct column, Trino into one column per field), no array functions (`attempts` counts a job's runs),
dates as the `day` strings (`YYYY-MM-DD` compares as text in both), epoch-millisecond arithmetic on BIGINTs,
`approx_percentile(x, q)` (Trino's; the DuckDB reader defines it as a macro over its approx_quantile).

A window (`day` from .. to) selects the versions that finished in it, and the newest of those per job counts
(LATEST_VERSIONS): a job replayed and finished again on a later day counts on that day too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from onward.domain.archive import LATEST_VERSIONS

# The newest version of each job among those of the days from ? to ? (both inclusive, YYYY-MM-DD).
_IN_DAYS = LATEST_VERSIONS.replace("{source}", "(SELECT * FROM {source} WHERE day BETWEEN ? AND ?)")

DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class Question:
    """One ready-made question: its SQL over `{source}` and what it answers."""

    name: str
    about: str
    sql: str


WAITS = Question(
    "waits", "time waiting (due to first claim) vs running (the attempts, summed) per tenant and type, in ms",
    f"""
SELECT tenant, type, count(*) AS jobs,
  approx_percentile(waited_ms, 0.5) AS wait_p50_ms, approx_percentile(waited_ms, 0.95) AS wait_p95_ms,
  avg(waited_ms) AS wait_avg_ms,
  approx_percentile(ran_ms, 0.5) AS run_p50_ms, approx_percentile(ran_ms, 0.95) AS run_p95_ms,
  avg(ran_ms) AS run_avg_ms
FROM ({_IN_DAYS}) latest
GROUP BY tenant, type
ORDER BY tenant, type
""")

RETRIES = Question(
    "retries", "retry and poison rates per type: runs per job, the share of jobs retried, dead, quarantined",
    f"""
SELECT type, count(*) AS jobs,
  avg(CAST(attempts AS DOUBLE)) AS runs_per_job,
  max(attempts) AS most_runs,
  avg(CASE WHEN attempts > 1 THEN 1.0 ELSE 0.0 END) AS retried_share,
  avg(CASE WHEN state = 'dead' THEN 1.0 ELSE 0.0 END) AS dead_share,
  avg(CASE WHEN state = 'quarantined' THEN 1.0 ELSE 0.0 END) AS quarantined_share
FROM ({_IN_DAYS}) latest
GROUP BY type
ORDER BY type
""")


def slowest(limit: int) -> Question:
    """The slowest jobs of a day, created to finished (`limit` is a whole number, checked here: Athena takes no
    parameter in LIMIT)."""
    count = int(limit)
    if not 1 <= count <= 1000:
        raise ValueError(f"the limit is from 1 to 1000, not {limit}")
    return Question(
        "slowest", "the jobs of a day that took longest from created to finished",
        f"""
SELECT job_id, tenant, type, state, attempts, finished_ms - created_ms AS total_ms, waited_ms, ran_ms
FROM ({_IN_DAYS}) latest
ORDER BY finished_ms - created_ms DESC, job_id
LIMIT {count}
""")


def job_lookup(*, scoped: bool, windowed: bool) -> str:
    """One job's newest version (what GET /jobs/{id} and `onward history job` read), parameters in order: the
    job id, its tenant (`scoped`), the first and last day it may have finished on (`windowed`: on Athena only
    those partitions are read; without it a lookup reads the job_id column of every day's files)."""
    where = "job_id = ?" + (" AND tenant = ?" if scoped else "") + (" AND day BETWEEN ? AND ?" if windowed else "")
    return LATEST_VERSIONS.replace("{source}", f"(SELECT * FROM {{source}} WHERE {where})")


# `onward history sql`: `jobs` names the newest version of every job.
JOBS_VIEW = "jobs"


def over_jobs(user_sql: str) -> str:
    """The user's query with `jobs` defined as the newest versions (a WITH of its own is joined to ours)."""
    definition = f"{JOBS_VIEW} AS ({LATEST_VERSIONS.strip()})"
    head = re.match(r"\s*with\s+(?!recursive\b)", user_sql, flags=re.IGNORECASE)
    if head:
        return f"WITH {definition},\n{user_sql[head.end():]}"
    return f"WITH {definition}\n{user_sql}"


def day_window(since: str, until: str) -> list[str]:
    """The parameters of a window of days, checked: both YYYY-MM-DD, `since` not after `until`."""
    for day in (since, until):
        if not DAY.fullmatch(day):
            raise ValueError(f"a day is YYYY-MM-DD, not {day!r}")
    if since > until:
        raise ValueError(f"--since {since} is after --until {until}")
    return [since, until]
