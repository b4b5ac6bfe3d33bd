"""The rate limits role in memory (onward.store.ports.rate_buckets): definitions and buckets under the state's
lock, every compare-and-set checked whole before anything is applied, as in one DynamoDB transaction."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from onward.domain.rate_limits import BucketMove
from onward.store.memory.state import MemoryState
from onward.store.ports.rate_buckets import RateBuckets, RateLimitDefinition, Reservation, ReserveOutcome


def moves_hold(state: MemoryState, tenant_id: str, moves: Iterable[BucketMove]) -> bool:
    """Whether every bucket still holds the TAT its move was decided from (the caller holds the lock)."""
    return all(state.rate_tats.get((tenant_id, move.key)) == move.expected for move in moves)


def apply_moves(state: MemoryState, tenant_id: str, moves: Iterable[BucketMove]) -> None:
    for move in moves:
        state.rate_tats[(tenant_id, move.key)] = move.tat


class MemoryRateBuckets(RateBuckets):
    """Rate limit definitions and buckets over a MemoryState (`_state`)."""

    _state: MemoryState

    def rate_limits(self, tenant_id: str) -> list[RateLimitDefinition]:
        with self._state.lock:
            found = [definition for (tenant, _), definition in self._state.rate_limits.items() if tenant == tenant_id]
        return sorted(found, key=lambda definition: definition.key)

    def rate_limits_of(self, tenant_id: str, keys: Collection[str]) -> dict[str, RateLimitDefinition]:
        with self._state.lock:
            return {key: self._state.rate_limits[(tenant_id, key)] for key in keys
                    if (tenant_id, key) in self._state.rate_limits}

    def put_rate_limit(self, tenant_id: str, definition: RateLimitDefinition) -> None:
        with self._state.lock:
            self._state.rate_limits[(tenant_id, definition.key)] = definition

    def delete_rate_limit(self, tenant_id: str, key: str) -> bool:
        with self._state.lock:
            return self._state.rate_limits.pop((tenant_id, key), None) is not None

    def bucket_tats(self, tenant_id: str, keys: Collection[str]) -> dict[str, int]:
        with self._state.lock:
            return {key: self._state.rate_tats[(tenant_id, key)] for key in keys
                    if (tenant_id, key) in self._state.rate_tats}

    def reserve(self, reservation: Reservation) -> ReserveOutcome:
        state = self._state
        with state.lock:
            row = state.rows.get(reservation.job_id)
            if row is None or ((row.job.state, row.job.version, row.job.attempt) != reservation.expected
                               or row.job.rate_reserved_at != reservation.reserved_read):
                return ReserveOutcome.JOB_MOVED
            if not moves_hold(state, reservation.tenant_id, reservation.moves):
                return ReserveOutcome.BUCKET_MOVED
            apply_moves(state, reservation.tenant_id, reservation.moves)
            state.put_row(row._replace(job=row.job.model_copy(update={
                "not_before": reservation.at, "rate_reserved_at": reservation.at})))
        return ReserveOutcome.RESERVED
