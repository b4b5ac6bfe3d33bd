"""procrastinate's side of bench/peer.py: the no-op task, declared as a user would, in a module of its own
(procrastinate warns when its App is created in `__main__`: its workers find tasks by import path).

`make_app` builds an App on its own connection pool: bench/peer.py builds one for the producer and one for
the worker, as two processes (a web app deferring jobs, a worker running them) would each have theirs.
"""

from __future__ import annotations

from procrastinate import App, PsycopgConnector

TASK_NAME = "bench.noop"


def make_app(conninfo: str, pool_size: int) -> App:
    """An App whose psycopg pool holds `pool_size` connections, with the no-op task as `app.tasks[TASK_NAME]`."""
    app = App(connector=PsycopgConnector(conninfo=conninfo, min_size=pool_size, max_size=pool_size))

    @app.task(name=TASK_NAME)
    async def noop(n: int) -> None:
        """Does nothing: the bench measures the queue, not the work. `async`: with concurrency > 1
        procrastinate runs sync tasks in threads, and its documentation asks for async tasks."""

    return app
