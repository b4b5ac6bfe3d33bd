"""The conflicts table read back (the projector keeps a same-version event with other content there:
projector.StatusProjector._keep_conflict): a bounded Scan, as plain values, for onward.operator.conflicts.
Conflicts are rare, each one alarms."""

from __future__ import annotations

from typing import Any

from onward.store.dynamo.attributes import from_item


class KeptConflictTable:
    """Reads a deployment's conflicts table (CONFLICTS_TABLE)."""

    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def first(self, limit: int) -> tuple[list[dict[str, Any]], bool]:
        """Up to `limit` kept conflicts as plain values (in the table's order), and whether more are kept."""
        found: list[dict[str, Any]] = []
        start: dict[str, Any] | None = None
        while len(found) < limit:
            page = self._db.scan(TableName=self._table, Limit=limit - len(found),
                                 **({"ExclusiveStartKey": start} if start else {}))
            found += [from_item(item) for item in page["Items"]]
            start = page.get("LastEvaluatedKey")
            if start is None:
                break
        return found, start is not None
