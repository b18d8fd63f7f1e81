.PHONY: demo test setup lint bench wheel

# Set up everything (venv, packages, jars), then replicate a small shop from an embedded
# PostgreSQL into Delta tables under demo-output/ and check that they match.
demo:
	scripts/setup.sh
	.venv/bin/cdc demo --dir demo-output

# Set up everything (venv, packages, PostgreSQL 15) and run the tests on both servers.
test:
	scripts/test.sh

setup:
	scripts/setup.sh

# The wheel to install on a cluster (docs/operations.md, "Running on a cluster"), in dist/.
# build/ goes first: setuptools keeps an earlier build's files there and would ship them too.
wheel:
	rm -rf build
	.venv/bin/python -m pip wheel --no-deps -w dist .

lint:
	.venv/bin/ruff check .
	.venv/bin/lint-imports --no-cache
	.venv/bin/ruff format --check cdc

bench:
	.venv/bin/python -m bench.queue_bench
