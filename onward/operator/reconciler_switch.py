"""The fence reconciler's event source mapping, enabled by `onward failover` in the new home (issue 39's gaps:
the reconciler's idle cost). template.yaml creates the mapping disabled (ReconcilerEnabled=false, both roles):
before a failover every record of the jobs table's stream would cost an invocation and be skipped, and no
filter can drop them instead (docs/regional-recovery.md, "The fence reconciler's idle cost"). The operator's
policy may update that one mapping only (OperatorPolicy: lambda:UpdateEventSourceMapping on its ARN)."""

from __future__ import annotations

from typing import Any


class LambdaMappingSwitch:
    """Enables one event source mapping by its UUID (the stack output ReconcilerMappingId)."""

    def __init__(self, lambda_client: Any) -> None:
        self._lambda = lambda_client

    def enable(self, mapping_id: str) -> None:
        self._lambda.update_event_source_mapping(UUID=mapping_id, Enabled=True)
