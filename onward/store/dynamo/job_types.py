"""The declared job types in the jobs table (onward.store.job_types.JobTypeRecorder on DynamoDB).

One item per type: `JOBTYPES` / `TYPE#<type>` (entity `job_type`), the declaration as a map, put
unconditionally (the last declaration wins). Every type is one Query of that one partition: they are few,
written when a worker pool starts and read by the API at most once per CACHE_S per process.
"""

from __future__ import annotations

from typing import Any

from onward.domain.retry_policy import JobTypeDeclaration
from onward.store.dynamo.attributes import from_item, to_item

JOB_TYPES_PK = "JOBTYPES"
JOB_TYPE_SK_PREFIX = "TYPE#"
JOB_TYPE_ENTITY = "job_type"


def job_type_key(job_type: str) -> dict[str, Any]:
    return {"pk": {"S": JOB_TYPES_PK}, "sk": {"S": f"{JOB_TYPE_SK_PREFIX}{job_type}"}}


class DynamoJobTypes:
    """JobTypeRecorder on the jobs table (the items in this module's docstring)."""

    def __init__(self, client: Any, jobs_table: str) -> None:
        self._db = client
        self._table = jobs_table

    def put_declarations(self, declarations: list[JobTypeDeclaration]) -> None:
        for declaration in declarations:
            item = {**to_item({"declaration": declaration.to_document()}), **job_type_key(declaration.job_type),
                    "entity": {"S": JOB_TYPE_ENTITY}}
            self._db.put_item(TableName=self._table, Item=item)

    def declarations(self) -> list[JobTypeDeclaration]:
        pages = self._db.get_paginator("query").paginate(
            TableName=self._table, ConsistentRead=True,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": JOB_TYPES_PK}, ":prefix": {"S": JOB_TYPE_SK_PREFIX}})
        found = [JobTypeDeclaration.from_document(from_item(item)["declaration"])
                 for page in pages for item in page["Items"]]
        return sorted(found, key=lambda declared: declared.job_type)
