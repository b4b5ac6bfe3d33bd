"""The progress role in memory (issue 38): the same conditions as on DynamoDB (onward.store.dynamo.progress_log),
under the state's one lock; progress events are kept apart from the job's transition events."""

from __future__ import annotations

from onward.domain.progress import ProgressEvent
from onward.domain.states import JobState
from onward.store.memory.job_log import kept_running
from onward.store.memory.state import MemoryState
from onward.store.ports.progress_log import ProgressLog, ProgressWrite, ProgressWritten


class MemoryProgressLog(ProgressLog):
    _state: MemoryState

    def record_progress(self, write: ProgressWrite) -> ProgressWritten:
        with self._state.lock:
            row = self._state.rows.get(write.job_id)
            if row is None or (row.job.state, row.job.version, row.job.attempt, row.job.lease_owner) != (
                    JobState.RUNNING, write.version, write.attempt, write.worker_id):
                return ProgressWritten.JOB_MOVED
            if write.attempt not in self._state.runs.get(write.job_id, {}):
                kept_running(self._state, write.job_id, write.attempt)  # (its record from the row: issue 34)
            stored = self._state.runs.get(write.job_id, {}).get(write.attempt)
            if stored is None or stored.run.outcome is not None:
                return ProgressWritten.JOB_MOVED  # (DynamoDB says so too: the job row's condition fails first)
            held = stored.run.progress
            events = self._state.progress.setdefault(write.job_id, [])
            if (held is not None and held.seq >= write.seq) or any(
                    (event.version, event.seq) == (write.version, write.seq) for event in events):
                return ProgressWritten.ALREADY
            stored.run = stored.run.model_copy(update={"progress": write.on_run()})
            events.append(write.event())
            return ProgressWritten.WRITTEN

    def progress_events(self, job_id: str) -> list[ProgressEvent]:
        with self._state.lock:
            return sorted(self._state.progress.get(job_id, []), key=lambda event: (event.version, event.seq))
