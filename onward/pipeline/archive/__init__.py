"""The run-history archive's writing side: finished jobs, read from the authority, written where the archive
lives (onward.domain.archive has the record)."""
