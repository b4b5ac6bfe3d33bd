# syntax=docker/dockerfile:1
#
# onward-worker: `onward worker` in a container (the ECS Fargate service of template.yaml, WorkerRuntime=ecs).
#
#   docker build -t onward-worker .
#
# Contract (the task definition relies on it; tests/e2e/test_wheel.py checks it offline, see the README):
# - ENTRYPOINT ["onward"], CMD ["worker"]: the container runs `onward worker`. Flags go after the command
#   (task definition `command: ["worker", "--concurrency", "16", "--lease-s", "60"]`); any other `onward`
#   command runs the same way (`docker run --rm -e ... onward-worker reconcile`, `... lag`): the operator
#   commands are in the image, the local stack (infra/, with moto) is not (`onward up`/`onward endpoint` say so).
# - Environment it reads:
#     ONWARD_WORKER_MODULE   the module whose `registry` (onward.runtime.worker.Registry) holds the job handlers, as
#                            `--module` would; required (the image sets none: it ships only onward.runtime.demo_jobs)
#     JOBS_TABLE, OUTBOX_TABLE
#                            the stack's tables (required)
#     AWS_REGION             set by ECS; credentials come from the task role (ECS's credentials endpoint)
#     ONWARD_JOB_RETENTION_DAYS, ONWARD_OUTBOX_RETENTION_DAYS, ONWARD_ACTIVE_SHARDS
#                            as the stack was deployed with (the TTLs and index partitions the worker writes)
#     POWERTOOLS_LOG_LEVEL   the structured (JSON) logs' level, on stdout (awslogs -> CloudWatch)
#     AWS_ENDPOINT_URL       only to point it at an emulator
#     ONWARD_WORKER_STOP_TIMEOUT_S
#                            as `--stop-timeout` (default 90 s): on SIGTERM, how long running jobs may take to end
# - Stop: SIGTERM (ECS's stop, `docker stop`) ends `onward worker` gracefully: no new claims, running jobs get
#   the stop timeout to end, then are asked to stop and released (not charged an attempt), exit status 0.
#   SIGKILL follows after the task's stopTimeout (ECS: 30 s unless set, at most 120 s): keep the worker's
#   stop timeout 25 s under it (`onward worker --help`).
# - Init: each worker slot forks a child that runs the handlers, and reaps it itself; processes a handler
#   leaves behind are reaped only by an init. Run with one: ECS `linuxParameters.initProcessEnabled: true`,
#   `docker run --init`.
# - User: uid/gid 10001 (`onward`), not root; its home /home/onward is the working directory, /tmp is writable.
# - Your handlers: a derived image that installs the package holding them and names the module, e.g.
#
#     FROM onward-worker
#     USER root
#     RUN pip install my-jobs==1.4.2     # or your wheel: RUN --mount=type=bind,source=dist,target=/dist \
#                                        #                    pip install /dist/my_jobs-1.4.2-py3-none-any.whl
#     USER onward
#     ENV ONWARD_WORKER_MODULE=my_jobs.handlers
#
#   (pip keeps no cache here: PIP_NO_CACHE_DIR is set.) A handler's own dependencies go in the same install.
#
# No HEALTHCHECK: the worker serves no port and has no cheap liveness answer. A worker that fails exits (ECS
# replaces the task); one that hangs stops renewing its leases, and the reaper requeues its jobs.

ARG PYTHON_IMAGE=python:3.12-slim-bookworm

# --- builder: the wheel of this package and the wheels of its dependencies ------------------------------------
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# onward/template.yaml is a symlink to ./template.yaml: the wheel carries the file itself.
COPY pyproject.toml README.md template.yaml ./
COPY onward/ onward/
RUN --mount=type=cache,target=/root/.cache/pip \
    pip wheel --wheel-dir /wheels '.[otlp]'

# --- the image: the wheels installed, nothing else of the build ---------------------------------------------
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="onward-worker" \
      org.opencontainers.image.description="Onward's job worker: onward worker (and the operator commands)"
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
# The wheels are mounted, not copied: no layer keeps them. --no-index: exactly what the builder resolved.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels 'onward[otlp]' \
 && groupadd --system --gid 10001 onward \
 && useradd --system --uid 10001 --gid onward --create-home --home-dir /home/onward --shell /usr/sbin/nologin onward
USER 10001:10001
WORKDIR /home/onward
STOPSIGNAL SIGTERM
ENTRYPOINT ["onward"]
CMD ["worker"]
