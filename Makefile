# The two commands a newcomer needs: `make demo` and `make test`. Both install what they need first.
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test alerts dashboards lint format clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(BIN)/kobs demo

test: setup lint
	$(BIN)/pytest

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
