# Two commands do all the set-up on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test deploy-test generate bench peers

$(STAMP): pyproject.toml clients/python/pyproject.toml scripts/install_deploy_tools.py scripts/install_browser.py \
		scripts/debian_packages.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e 'clients/python[tools]' -e '.[dev]'
	$(BIN)/python scripts/install_deploy_tools.py
	$(BIN)/python scripts/install_browser.py
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/memplane serve

# The local model runtime (compiled, 4-8 minutes on 2 cores) and the test model (1.1 GB, pinned by
# sha256) for the real-model tests and benchmarks: `make test` needs them, `make serve` does not.
LOCAL_MODEL := $(VENV)/.local-model
$(LOCAL_MODEL): $(STAMP) scripts/install_local_model.py
	$(BIN)/python scripts/install_local_model.py
	touch $(LOCAL_MODEL)

# Node.js and the npm packages of clients/typescript (buf, for the proto contract checks).
NODE_TOOLS := clients/typescript/node_modules/.installed
$(NODE_TOOLS): clients/typescript/package-lock.json scripts/install_node_tools.py
	$(PYTHON) scripts/install_node_tools.py
	touch $(NODE_TOOLS)

# The lint and type gate first (ruff; mypy on core and services, strict on the SDK): it takes
# seconds and names the line, where a failing test would take minutes to point at it. Then the
# tests, one worker per core (at most 4), a test file to a worker: the e2e and benchmark tests
# wait on servers and subprocesses most of the time, so two workers on 2 cores take 0.6x the time.
test: $(STAMP) $(LOCAL_MODEL) $(NODE_TOOLS)
	$(BIN)/python scripts/lint.py
	$(BIN)/python -m pytest --numprocesses=auto --maxprocesses=4 --dist=loadfile --ignore=tests/containers

# The image, compose file and chart run for real under podman (tests/containers), which this
# installs and configures first (as root; elsewhere the checks skip and say why). CI runs it too.
# Then the suites that matter run again with the server's database traffic through a real
# PgBouncer in transaction mode (tests/conftest.py, database_settings).
POOLED_SUITES := tests/integration/test_search.py tests/integration/test_write.py \
	tests/integration/test_write_requests.py tests/integration/test_write_history.py tests/integration/test_watch.py \
	tests/integration/test_isolation_*.py \
	tests/integration/test_user_keys.py \
	tests/e2e/test_memory_rpcs.py tests/e2e/test_watch.py tests/e2e/test_watch_access.py tests/e2e/test_worker.py
# And the Redis suites with the product on a real 3-master Redis Cluster.
CLUSTER_SUITES := tests/integration/test_working_expiry.py tests/integration/test_idempotency_and_auth.py \
	tests/integration/test_write_requests.py tests/integration/test_erasure.py tests/integration/test_erasure_reach.py \
	tests/e2e/test_memory_rpcs.py tests/e2e/test_limits.py tests/e2e/test_replay.py
deploy-test: $(STAMP)
	$(BIN)/python scripts/install_container_runtime.py
	$(BIN)/python -m pytest tests/containers
	MEMPLANE_TEST_PGBOUNCER=1 $(BIN)/python -m pytest $(POOLED_SUITES)
	MEMPLANE_TEST_REDIS_CLUSTER=1 $(BIN)/python -m pytest $(CLUSTER_SUITES)

generate: $(STAMP) $(NODE_TOOLS)
	$(BIN)/python scripts/gen_proto.py
	$(BIN)/python scripts/gen_settings_doc.py
	$(BIN)/python scripts/gen_sync_client.py

bench: $(STAMP)
	$(BIN)/python bench/foundation.py

# Mem0 OSS in a virtual environment of its own, for bench/peers.py (never needed by the server or the tests).
PEERS := .venv-peers
peers: $(STAMP) $(PEERS)/.installed

$(PEERS)/.installed: bench/peers-requirements.txt
	$(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS)/bin/python -m pip install --quiet -r bench/peers-requirements.txt
	touch $@
