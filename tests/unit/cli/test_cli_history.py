"""`onward history` over a generated local archive: readable tables, --json, and the exit statuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onward.cli import main as cli
from onward.pipeline.archive.parquet import ParquetDirectory
from tests.unit.operator.archive_samples import job_id, record

pytestmark = pytest.mark.fast


@pytest.fixture
def archive_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    ParquetDirectory(tmp_path).write([record(job_id(1), attempts=2, state="dead"),
                                      record(job_id(2), tenant="other", ran_ms=9000)])
    for name in ("ARCHIVE_DATABASE", "ARCHIVE_TABLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONWARD_ARCHIVE_DIR", str(tmp_path))
    return tmp_path


def test_a_job_shows_its_attempts(archive_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["history", "job", job_id(1), "--tenant", "acme"]) == 0
    out = capsys.readouterr().out
    assert "dead at version 3, 2 of 5 attempts" in out
    assert "Boom" in out and "(2 rows)" in out
    assert cli.main(["history", "job", job_id(1), "--since", "2025-12-02"]) == 1  # it finished the day before


def test_another_tenants_job_is_not_found(archive_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 1, as for a job the archive never held: --tenant scopes the lookup."""
    assert cli.main(["history", "job", job_id(2), "--tenant", "acme"]) == 1
    assert "holds no job" in capsys.readouterr().err


def test_the_questions_answer_tables_and_json(archive_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    window = ["--since", "2025-12-01", "--until", "2025-12-02"]
    assert cli.main(["history", "waits", *window]) == 0
    assert "wait_p95_ms" in capsys.readouterr().out
    assert cli.main(["history", "retries", *window, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["columns"][:2] == ["type", "jobs"] and answer["rows"][0][1] == 2
    assert cli.main(["history", "slowest", "--day", "2025-12-01", "--limit", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0][0] == job_id(2)
    assert cli.main(["history", "sql", "SELECT tenant, count(*) AS n FROM jobs GROUP BY tenant ORDER BY tenant"]) == 0
    out = capsys.readouterr().out
    assert "acme" in out and "other" in out and "(2 rows)" in out


def test_bad_sql_is_the_engines_message_and_exit_2(archive_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["history", "sql", "SELECT nope FROM jobs"]) == 2
    assert "nope" in capsys.readouterr().err


def test_no_archive_configured_says_what_to_set(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("ONWARD_ARCHIVE_DIR", "ARCHIVE_DATABASE", "ARCHIVE_TABLE"):
        monkeypatch.delenv(name, raising=False)
    assert cli.main(["history", "retries"]) == 2
    assert "ONWARD_ARCHIVE_DIR" in capsys.readouterr().err
