# The two commands a newcomer needs: `make demo` and `make test`. Both install what they need first.
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint format clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(BIN)/kobs demo

test: setup lint
	$(BIN)/pytest

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format:
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf var .pytest_cache
