"""GET /jobs/{id} and /jobs/{id}/runs answer a job whose rows have expired from the run-history archive
(`archived: true`, with its runs), scoped to the caller's tenant exactly as a live job is: another tenant's
archived job is the 404 of a job that never was. Without an archive configured, the 404 is unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from onward.pipeline.archive.parquet import ParquetDirectory
from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client
from tests.unit.operator.archive_samples import job_id, record

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-archive-secret", "globex": "globex-archive-secret"}
OPERATOR = "operator-archive-secret"
ACME_JOB, GLOBEX_JOB, MISSING = job_id(0xA1), job_id(0xB2), "c" * 32


@pytest.fixture
def archived(tmp_path: Path) -> Path:
    ParquetDirectory(tmp_path).write([record(ACME_JOB, tenant="acme", attempts=2, state="dead", version=4),
                                      record(GLOBEX_JOB, tenant="globex")])
    return tmp_path


@pytest.fixture
def client(stack_environment, archived: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    monkeypatch.setenv("ONWARD_ARCHIVE_DIR", str(archived))
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


def test_an_archived_job_is_answered_from_the_archive_with_its_runs(client: Client) -> None:
    """Without the archive fallback this is a 404: the job's rows are gone from every table."""
    reply = client.get(f"/jobs/{ACME_JOB}", TOKENS["acme"])
    assert reply.status == 200, reply.body
    assert reply.body["archived"] is True and reply.body["status"] == "dead" and reply.body["version"] == 4
    assert [run["attempt"] for run in reply.body["runs"]] == [1, 2]
    assert reply.body["runs"][0]["error"]["error_type"] == "Boom"
    runs = client.get(f"/jobs/{ACME_JOB}/runs", TOKENS["acme"])
    assert runs.status == 200 and runs.body["archived"] is True
    assert [run["outcome"] for run in runs.body["runs"]] == ["failed", "succeeded"]
    assert client.get(f"/jobs/{ACME_JOB}", OPERATOR).status == 200  # an operator bound to no tenant


def test_another_tenants_archived_job_is_a_missing_ones_404(client: Client) -> None:
    """Without the tenant scope on the archive's read, acme would read globex's archived job by its id."""
    for path in ("/jobs/{}", "/jobs/{}/runs"):
        other = client.get(path.format(GLOBEX_JOB), TOKENS["acme"])
        missing = client.get(path.format(MISSING), TOKENS["acme"])
        assert other.status == missing.status == 404
        assert other.body["detail"].replace(GLOBEX_JOB, "<id>") == missing.body["detail"].replace(MISSING, "<id>")


def test_without_an_archive_the_404_is_unchanged(stack_environment, archived: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ONWARD_ARCHIVE_DIR", raising=False)
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        assert Client(url).get(f"/jobs/{ACME_JOB}", TOKENS["acme"]).status == 404
