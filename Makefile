# Two commands on a fresh machine: `make up` runs the platform, `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# aws-sam-cli pins an older boto3 than ours: it lives in its own environment.
SAM_VENV ?= .venv-sam
SAM_STAMP := $(SAM_VENV)/.installed
SAM := SAM_CLI_TELEMETRY=0 $(SAM_VENV)/bin/sam

.PHONY: up test test-fast bench endpoint clean sam-build soak browser

# The product (onward, with the test tools) and, beside it, the local stand-in for AWS (infra/: onward-infra,
# which brings moto and adds `onward up` / `onward endpoint`).
$(STAMP): pyproject.toml infra/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]' -e ./infra
	touch $(STAMP)

up: $(STAMP)
	$(BIN)/onward up --demo $(UP_ARGS)

$(SAM_STAMP):
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet --upgrade pip
	$(SAM_VENV)/bin/pip install --quiet aws-sam-cli
	touch $(SAM_STAMP)

# The browser tests drive Debian's Chromium (Playwright downloads nothing): installed here when missing.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO="sudo"; \
	  $$SUDO apt-get update -qq || true; \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The suite includes `sam build` (tests/integration/project/test_sam_build.py), so it needs aws-sam-cli too.
test: $(STAMP) $(SAM_STAMP) browser
	ONWARD_SAM=$(SAM_VENV)/bin/sam $(BIN)/python -m pytest

# Seconds, not minutes: the pure tests and the store on its in-memory backend (no endpoint, no browser).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m fast -q

# What `sam deploy` uploads, built offline into .aws-sam/build (samconfig.toml: build in source).
sam-build: $(SAM_STAMP)
	$(SAM) build

# Called by `sam build` (Metadata BuildMethod: makefile) for each function, in this directory, with
# ARTIFACTS_DIR set: the function's code is the package and its status page, without the command line (the
# local stand-in for AWS is not in the package: it lives in infra/). Powertools, pydantic and the X-Ray SDK
# come from the Powertools layer, boto3 from the Lambda runtime.
# Beside it, the function's folder, whose module its Handler names (handlers/, relay/, projector/, archiver/, reconciler/).
FUNCTIONS := build-ApiFunction build-RelayFunction build-ProjectorFunction build-ReaperFunction \
             build-WorkerFunction build-SchedulerFunction build-ArchiverFunction \
             build-WebhookMatcherFunction build-WebhookDelivererFunction build-ReconcilerFunction
build-ApiFunction build-ReaperFunction build-WorkerFunction build-SchedulerFunction: FUNCTION_FOLDER = handlers
build-RelayFunction: FUNCTION_FOLDER = relay
build-ProjectorFunction: FUNCTION_FOLDER = projector
build-ArchiverFunction: FUNCTION_FOLDER = archiver
build-WebhookMatcherFunction build-WebhookDelivererFunction: FUNCTION_FOLDER = webhooks
build-ReconcilerFunction: FUNCTION_FOLDER = reconciler  # fence reconciler (issue 39)
$(FUNCTIONS):
	cp -R onward $(FUNCTION_FOLDER) "$(ARTIFACTS_DIR)/"
	rm -rf "$(ARTIFACTS_DIR)/onward/cli" "$(ARTIFACTS_DIR)/onward/client" "$(ARTIFACTS_DIR)/onward/template.yaml"
	find "$(ARTIFACTS_DIR)" -name __pycache__ -type d -prune -exec rm -rf {} +

# The long crash-point soak (the short one runs in `make test`): 20,000 jobs, then its audit table.
soak: $(STAMP)
	$(BIN)/python -m tests.soak.driver --jobs $(or $(JOBS),20000)
	$(BIN)/python -m tests.soak.fairness_at_scale

bench: $(STAMP)
	$(BIN)/python -m bench.transactions
	$(BIN)/python -m bench.execution
	$(BIN)/python -m bench.relay
	$(BIN)/python -m bench.projector
	$(BIN)/python -m bench.fairness
	$(BIN)/python -m bench.scale
	$(BIN)/python -m bench.e2e
	$(BIN)/python -m bench.peer
	$(BIN)/python -m bench.archive_path --jobs 500
	$(BIN)/python -m bench.archive_cost
	$(BIN)/python -m bench.archive_queries
	$(BIN)/python -m bench.memory
	$(BIN)/python -m bench.webhooks
	$(BIN)/python -m bench.concurrency_keys
	$(BIN)/python -m bench.held_spread

endpoint: $(STAMP)
	$(BIN)/onward endpoint

clean:
	rm -rf $(VENV) $(SAM_VENV) .aws-sam .pytest_cache .hypothesis .cache

# The regional failover drill (issue 39, the drill): two Regions on one machine, the home partitioned while it
# works, `onward failover`, the heal and the reconciler, then its audit table (the short one runs in `make test`).
.PHONY: drill
drill: $(STAMP)
	$(BIN)/python -m tests.drill.driver $(DRILL_ARGS)
