# Two commands do all set-up on a fresh machine:  make demo   and   make test
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
PIP     := $(BIN)/pip install -q --disable-pip-version-check -c constraints.txt
ROOT    ?= data/root

.PHONY: demo test test-heavy test-fast bench install system clean

$(BIN)/python:
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) (python 3.11)"; exit 1; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check --upgrade pip

REQS    := $(sort $(wildcard requirements/*.txt))
# Wheels whose declared deps must not be installed (see the comments inside each file).
NODEPS  := $(sort $(wildcard requirements/nodeps/*.txt))
# The extras of pyproject.toml, which read requirements/<area>.txt: the same set `pip install ".[all]"` gets.
EXTRAS  ?= all

$(STAMP): $(BIN)/python pyproject.toml constraints.txt $(REQS) $(NODEPS)
	$(PIP) -e ".[$(EXTRAS)]"
	$(if $(NODEPS),$(PIP) --no-deps $(addprefix -r ,$(NODEPS)))
	@touch $(STAMP)

# System packages (requirements/system/debian.txt): installed when root with apt-get, else one line naming the
# command to run. `.ci/run` gets them only through this target, so the two cannot differ.
system:
	@sh requirements/system/install.sh

install: system $(STAMP)

demo: install
	$(BIN)/python -m manifests.demo --root $(ROOT)

test: install
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not heavy" tests

test-heavy: install
	$(BIN)/python -m pytest -q -p no:cacheprovider -m heavy tests

test-fast: install
	$(BIN)/python -m pytest -q -m "not slow" tests

bench: $(STAMP)
	$(BIN)/python benchmarks/executor_overhead.py

# Every GPU path in one run (issue 42): a pass/fail line per step and a table in $$OUT, else data/reports/gpu-check.
# Without CUDA it checks each step's setup and says `skipped: no GPU`; GPU_CHECK_ARGS=--dry also runs the
# training steps on the CPU at tiny shapes (what tests/training/test_gpu_check.py does in CI).
.PHONY: gpu-check
gpu-check: $(STAMP)
	$(BIN)/python benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

clean:
	rm -rf $(VENV) $(ROOT) build *.egg-info
