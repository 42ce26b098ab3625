# The two commands a newcomer needs: `make demo` and `make test`. Both install what they need first.
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test alerts dashboards lint format clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(BIN)/kobs demo

# TEST_WORKERS=2 runs the suite in two pytest-xdist workers, each with its own session peers (a Kafka cluster,
# a Spark session; a module's tests on one worker): the suite mostly waits on Kafka, Prometheus and
# Alertmanager, so two took 17-18 minutes where one process takes 28-30 on 2 cores. Their load still fails
# timing-bound tests now and then (docs/peers.md), so one process (0) stays the default until those are fixed.
TEST_WORKERS ?= 0

test: setup lint
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

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
