# The two commands a newcomer needs: `make demo` and `make test`. Both install what they need first.
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test check alerts dashboards lint format clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(BIN)/kobs demo

# The suite runs in two pytest-xdist workers, each with its own session peers (a Kafka cluster, a Spark
# session; a module's tests on one worker): about 30 minutes on 2 cores, bound by CPU (one process takes
# about half as long again, three workers are no faster). TEST_WORKERS=0 runs one process.
TEST_WORKERS ?= 2

test: setup lint
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

# The fast lane: lint and every test that starts no server, JVM or browser (the markers conftest.py derives
# from what each test reaches), for a change to pure logic, rules or docs. `make test` before a merge.
check: setup lint
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile -m "not peers and not spark"

alerts: setup
	$(BIN)/kobs alerts test --quiet

dashboards: setup   # Grafana JSON to import or provision (docker-compose generates its own)
	$(BIN)/kobs dashboards generate --out var/dashboards

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format:
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf var .pytest_cache
