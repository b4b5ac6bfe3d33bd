"""The worker runtime: claim -> run -> complete, the handler's execution and its child process, the
worker pool, the Lambda worker's drain and the demo job types."""
