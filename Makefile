# DLC developer entry points. Every target installs what it needs (Debian, as root).
#   make demo   - set up and run the main job on the embedded default
#   make test   - set up and run the whole test suite (what CI runs)
#   make soak   - 300 short jobs through a 2-CPU agent on the real Mesos (and 100 on the
#                  emulator): all finish, no executor left, agent resources back to zero
#   make fault  - the full fault-injection run (FAULT_KILLS kill points over every target;
#                  docs/fault-tolerance.md); writes bench/results/fault.json
#   make e2e-pytorch - build a CPU PyTorch image locally and run real training (one node, then a
#                  2-node torchrun gloo step) through dlc submit -> real Mesos -> Docker (~1 GB; not in CI)
#   make e2e-jupyter - build a JupyterLab image locally (PyPI wheels), start it with
#                  dlc submit --interactive on the emulator, open it in headless chromium (not in CI)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
DLC    := $(VENV)/bin/dlc
STAMP  := $(VENV)/.installed

.PHONY: setup services demo test lint unit bench clean dist probe shim e2e-pytorch e2e-jupyter gpu-check gpu-usage-check gpu-isolation-check soak fault ha-fault

$(STAMP): setup.cfg pyproject.toml scripts/setup-python.sh compat/http-parser/pyproject.toml
	PYTHON=$(PYTHON) VENV=$(VENV) bash scripts/setup-python.sh
	touch $(STAMP)

setup: $(STAMP) probe shim

# DLC's CUDA driver-API interposer for `shim` shares (native/cuda_shim, plain gcc, no CUDA):
# native/cuda_shim/build/libdlc_cuda_shim.so, where the executor looks for it (docs/sharing.md)
shim:
	@if command -v gcc >/dev/null 2>&1; then $(MAKE) -s -C native/cuda_shim; \
	else echo "notice: gcc not found, skipping the CUDA shim build (shim shares need it)"; fi

# The native P2P probe needs nvcc; without it the build is skipped with a notice
# (dlc probe --probe-json FILE still works); `make test` installs nvcc first (scripts/cuda.sh).
NVCC ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
probe:
	@if [ -n "$(NVCC)" ]; then $(MAKE) -s -C native/p2p_probe NVCC=$(NVCC); \
	else echo "notice: nvcc not found, skipping the native P2P probe build (native/p2p_probe/README.md)"; fi

# What an operator installs, no checkout needed (docs/install.md): the DLC wheel (code, systemd
# units, example settings, docs: `dlc setup-host`) and the http-parser compatibility wheel that
# pymesos needs, so that `pip install --find-links dist dlc` resolves from dist/ plus the index.
dist: $(STAMP)
	rm -rf dist build/lib build/bdist.* && mkdir -p dist
	$(PY) -m pip wheel -q --no-deps -w dist . ./compat/http-parser
	@ls dist

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy

unit: setup
	$(PY) -m pytest -q -m "not docker and not mesos and not browser and not multihost"

# What the docker-, mesos- and browser-marked tests need: the Docker engine with a local
# registry and test image, ZooKeeper and PostgreSQL (Debian packages; the HA and store tests
# start private servers on free loopback ports), the real Apache Mesos 1.11 from ../shared/mesos-local (the tests
# start it on a free port), Debian's chromium, and nvcc for the native P2P probe. Each script installs what is missing and
# fails loudly when it cannot.
services:
	bash scripts/docker.sh start
	bash scripts/mesos-local.sh build
	bash scripts/browser.sh
	bash scripts/cuda.sh
	bash scripts/zookeeper.sh install
	bash scripts/postgres.sh install

test: setup lint services
	bash scripts/test.sh

demo: setup
	bash scripts/demo.sh

bench: setup
	$(PY) bench/allocator.py
	$(PY) bench/scheduler.py
	$(PY) bench/share_placement.py

soak: setup services
	DLC_SOAK_JOBS=300 DLC_SOAK_EMULATOR_JOBS=100 $(PY) -m pytest -q -s tests/e2e/test_soak.py

FAULT_SEED  ?= 1
FAULT_KILLS ?= 60
fault: setup services
	$(PY) -m tests.fault.run --seed $(FAULT_SEED) --kills $(FAULT_KILLS) --target all \
		--json bench/results/fault.json

# HA fault run (docs/ha.md): HA_KILLS leader kills (SIGKILL-like session drop and session
# expiry) over scheduler instances on ZooKeeper + PostgreSQL; writes bench/results/ha.json
HA_SEED  ?= 1
HA_KILLS ?= 25
# ... then HA_REAL_KILLS SIGKILLs of the leading real `dlc scheduler` (master found through
# ZooKeeper, Docker jobs); writes bench/results/ha-real.json
HA_REAL_KILLS ?= 20
ha-fault: setup services
	$(PY) -m tests.ha.run --seed $(HA_SEED) --kills $(HA_KILLS) --json bench/results/ha.json
	$(PY) -m tests.ha.real_run --seed $(HA_SEED) --kills $(HA_REAL_KILLS) --json bench/results/ha-real.json

e2e-pytorch: setup
	VENV=$(VENV) bash scripts/e2e-pytorch.sh

e2e-jupyter: setup
	VENV=$(VENV) bash scripts/e2e-jupyter.sh

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache

# On a machine with an NVIDIA GPU (no network needed): DLC's GPU paths against the real driver
# (NVML and nvidia-smi discovery, node-config, the P2P probe, MPS limits, the NVML memory
# reading of the watchdog), one table; raw outputs in build/gpu-check. See docs/gpu-check.md.
GPU_PY ?= $(shell test -x $(VENV)/bin/python && echo $(VENV)/bin/python || echo python3)
gpu-check:
	$(MAKE) -s -C native/p2p_probe NVCC=$(or $(NVCC),nvcc)
	$(MAKE) -s -C native/share_check NVCC=$(or $(NVCC),nvcc)
	$(MAKE) -s -C native/cuda_shim
	$(GPU_PY) scripts/gpu_check.py

# Isolation on one GPU (no Docker, no network, as root, under 4 minutes): the CUDA shim with
# PyTorch, its cost, the blast radius of a faulting tenant per backend and k-tenant throughput;
# python3 with PyTorch runs the tenants. Writes ISO_OUT/results.json and table.md (docs/sharing.md).
ISO_PY  ?= python3
ISO_OUT ?= build/gpu-isolation-check
gpu-isolation-check:
	$(ISO_PY) scripts/gpu_isolation_check.py --out $(ISO_OUT) --python $(ISO_PY)

# Allocated versus used on a real GPU: the executor's NVML sampler reads an idle GPU, a memory
# holder and a copy loop (docs/executor.md, "GPU usage").
gpu-usage-check:
	$(MAKE) -s -C native/p2p_probe NVCC=$(or $(NVCC),nvcc)
	$(MAKE) -s -C native/share_check NVCC=$(or $(NVCC),nvcc)
	$(GPU_PY) scripts/gpu_usage_check.py
