"""Where the archiver writes: the archive sink. ParquetDirectory (parquet.py) is the local one; the AWS one
delivers through Firehose. A sink takes one batch's records in ONE write and returns the bytes written; the
archiver acknowledges its batch only after that returns, so a record may be written twice (a redelivered
batch), never lost; readers take the newest version per job (onward.domain.archive.LATEST_VERSIONS)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from onward.domain.archive import ArchivedJob


class ArchiveSink(Protocol):
    def write(self, records: Sequence[ArchivedJob]) -> int:
        """Write every record, at once; the bytes written. Raises when any was not written."""
        ...


class ListSink:
    """A sink keeping what it was given, batch by batch (tests, and drills that count writes)."""

    def __init__(self) -> None:
        self.batches: list[list[ArchivedJob]] = []

    def write(self, records: Sequence[ArchivedJob]) -> int:
        self.batches.append(list(records))
        return sum(len(record.model_dump_json()) for record in records)

    @property
    def records(self) -> list[ArchivedJob]:
        return [record for batch in self.batches for record in batch]
