"""Parked records read back a page at a time, for operators: what a consumer could not read, where it was
on its stream, why, and the head of its raw bytes.

Records are kept per source (`projector`, `relay`) under `<shard>#<sequence>` (onward.pipeline.parking), so a page
comes in that order, newest shard id and sequence first, not in the order they were parked; each carries its
`parked_at`. Parking is rare (every record parked alarms): a page is read with one Query per source.
"""

from __future__ import annotations

from typing import Any, Literal

from onward.pipeline.parking import ParkedRecord, parked_record

Source = Literal["projector", "relay"]
SOURCES: tuple[Source, ...] = ("projector", "relay")


class ParkedRecordReader:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def page(self, source: str, limit: int) -> tuple[list[ParkedRecord], bool]:
        """Up to `limit` of the source's parked records, and whether it has more."""
        answer = self._db.query(
            TableName=self._table, KeyConditionExpression="#s = :s", ScanIndexForward=False, Limit=limit,
            ExpressionAttributeNames={"#s": "source"}, ExpressionAttributeValues={":s": {"S": source}})
        records = [parked_record(item) for item in answer["Items"]]
        return records, "LastEvaluatedKey" in answer


def preview(raw: bytes, limit: int = 240) -> str:
    """The head of a record's bytes as text a page can show (bytes that are not UTF-8 escaped)."""
    text = raw[:limit].decode("utf-8", errors="backslashreplace")
    return text + ("…" if len(raw) > limit else "")

