# Every target documents itself: `make help` lists them.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The job's JVM code (jvm/src: the de-duplication processor, the undeclared-key
# functions), compiled offline against the wheel's Spark jars (artifacts/job_jar.py);
# model/jvm.py says why they are on the JVM.
JOB_JAR := build/jvm/streaming-job.jar
JAVA_SOURCES := $(shell find jvm/src -name '*.java')
# The venv's own installers, current releases: the ones venv copies from the
# system Python are old and carry published advisories.
PIP_PINS := pip==26.3 setuptools==84.2.1
ARGS ?=
INSTANCE ?=
REASON ?=
# jsii prints an 11-line banner on every CDK run under a Node release it no
# longer supports (Node 20 since 2026-10-30; the README names Node 22 or later):
# silenced for the machine's major version, deprecated ones too (jsii reads
# JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION as a list of major versions).
NODE_MAJOR := $(shell node -p 'process.versions.node.split(".")[0]' 2>/dev/null)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := $(NODE_MAJOR)
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
# The CDK CLI's AWS SDK warns the same way (8 lines) under Node < 22.
export AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED := true
# The stacks of this synth, from its manifest (cdk.out is cleared first, so no
# template of an earlier run is counted).
export SYNTH_COUNT := import json; m = json.load(open("cdk.out/manifest.json")); \
print(sum(a["type"] == "aws:cloudformation:stack" for a in m["artifacts"].values()))

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-17s %s\n", $$1, $$2}'

$(STAMP): requirements-dev.txt requirements-synth.txt package.json package-lock.json
	command -v shellcheck >/dev/null || { apt-get update -qq && apt-get install -y -qq shellcheck; }
	command -v javac >/dev/null || { apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless; }
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check $(PIP_PINS)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	npm ci --no-audit --no-fund --loglevel=error
	touch $(STAMP)

$(JOB_JAR): $(STAMP) $(JAVA_SOURCES)
	$(PY) -m artifacts.job_jar

# EMR Serverless has no bootstrap actions: the job's locked Python packages
# (job/requirements.lock, hash-checked, binary wheels) ship as one archive,
# built for the release's Python on ARM64 and for this machine (make run of a
# serverless instance); artifacts/serverless_archive.py says how. Wheels are kept
# under build/serverless/<platform>/wheels, so a rebuild needs no download.
SERVERLESS_ARCHIVES := build/serverless/aarch64/job-python-deps.tar.gz build/serverless/local/job-python-deps.tar.gz

build/serverless/%/job-python-deps.tar.gz: $(STAMP) job/requirements.lock artifacts/serverless_archive.py emr/releases.py
	$(PY) -m artifacts.serverless_archive --platform $*

.PHONY: serverless-archives
serverless-archives: $(SERVERLESS_ARCHIVES) ## Build the job's Python dependency archives for EMR Serverless (aarch64) and this machine (local)

.PHONY: install
install: $(STAMP) $(JOB_JAR) $(SERVERLESS_ARCHIVES) ## Create/reuse .venv, install the pinned Python and npm dependencies, build the job's jar and the serverless dependency archives

.PHONY: check
check: $(STAMP) ## ruff (lint + format check) and mypy strict on model/, emr/, job/, infra/, artifacts/, producer/, local/, bench/, scripts/, integ/
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

.PHONY: synth
synth: install ## Synthesize every instance with the real CDK CLI, offline (a check: placeholders allowed)
	rm -rf cdk.out
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npx --no-install cdk synth --quiet -c streaming:synth-check=true >/dev/null
	@echo "synth ok: $$($(PY) -c "$$SYNTH_COUNT") templates in cdk.out/"

# Synth without Spark: a virtualenv of requirements-synth.txt only
# (no pyspark, pyiceberg, pyarrow) synthesizes the example, reading the jar and
# the serverless archives that make install built. Part of make test (CI).
SYNTH_VENV := .venv-synth
$(SYNTH_VENV)/.installed: requirements-synth.txt
	test -x $(SYNTH_VENV)/bin/python || python3 -m venv $(SYNTH_VENV)
	$(SYNTH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check $(PIP_PINS)
	$(SYNTH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-synth.txt
	touch $@

.PHONY: synth-light
synth-light: install $(SYNTH_VENV)/.installed ## Synthesize the example in a virtualenv without pyspark (CDK packages only), as a synth-only CI would
	@for heavy in pyspark pyiceberg pyarrow; do \
	  ! $(SYNTH_VENV)/bin/python -c "import $$heavy" 2>/dev/null || { echo "$$heavy is installed in $(SYNTH_VENV)"; exit 1; }; \
	done
	rm -rf cdk.out.light
	PATH="$(CURDIR)/$(SYNTH_VENV)/bin:$$PATH" npx --no-install cdk synth --quiet --output cdk.out.light -c streaming:synth-check=true >/dev/null
	@echo "synth-light ok: $$(ls cdk.out.light/*.template.json | wc -l) templates in cdk.out.light/, without pyspark"

# Test tiers: tests/conftest.py puts every test in exactly one (unit, synth,
# integration, e2e) from the fixtures it uses; `make test` runs them all on two
# pytest-xdist workers that tests/conftest.py plans (CI), and lists the 30
# slowest (where CI's time goes). ARGS go to pytest, e.g. make test-fast ARGS="-k lease -x".
.PHONY: test
# check needs the venv only, so it runs beside the job's jar and the two serverless
# archives that synth waits for (install), then beside synth-light.
test: $(STAMP) ## Install, run every check and both synths (side by side), then every test of every tier on two workers (CI)
	$(MAKE) --no-print-directory -j2 check synth synth-light
	$(VENV)/bin/pytest -n 2 --dist loadscope --no-loadscope-reorder --durations=30 $(ARGS)

.PHONY: test-fast
test-fast: install ## Unit tier: fakes, in-process moto, bare-Stack constructs; no JVM (guarded)
	$(VENV)/bin/pytest -m unit $(ARGS)

.PHONY: test-synth
test-synth: install ## Synth tier: the CDK app and stacks, synthesized once per session
	$(VENV)/bin/pytest -m "synth and not integration" $(ARGS)

.PHONY: test-integration
test-integration: install ## Integration tier: embedded Spark (JVM) and/or moto server + tansu
	$(VENV)/bin/pytest -m integration -n 2 --dist loadscope --no-loadscope-reorder $(ARGS)

.PHONY: test-e2e
test-e2e: install ## End-to-end tier: the job as a child process on fresh emulators
	$(VENV)/bin/pytest -m e2e -n 2 --dist loadscope --no-loadscope-reorder $(ARGS)

.PHONY: run
run: install ## Run the local pipeline end to end on the embedded emulators (ARGS="--instances a,b")
	$(PY) -m local $(ARGS)

.PHONY: maintain
maintain: install ## Expire snapshots and delete orphan files of a local run's tables (ARGS="--work-dir .work/run")
	$(PY) -m local.maintain $(ARGS)

.PHONY: report
report: install ## Render the run report from a metrics dump (ARGS="--metrics .work/run/metrics.json --out .work/report")
	$(PY) -m local.report_cli $(ARGS)

.PHONY: status
status: install ## scripts/status/: shards and tips, committed offsets, lag, last batches, alarms, last snapshot (INSTANCE=domain-region [ARGS="--work-dir .work/run"])
	$(PY) -m scripts.status --instance "$(INSTANCE)" $(ARGS)

.PHONY: stop-job
stop-job: install ## Write the stop marker and wait, bounded, for the job to exit (INSTANCE=domain-region [ARGS="--timeout 300"])
	$(PY) -m scripts.stop --instance "$(INSTANCE)" $(ARGS)

.PHONY: start-job
start-job: install ## Start a stopped job with the stack's own step or request; refused while one runs (INSTANCE=domain-region [ARGS="--work-dir .work/run"])
	$(PY) -m scripts.start --instance "$(INSTANCE)" $(ARGS)

.PHONY: migrate-checkpoint
migrate-checkpoint: install ## Move a dropDuplicatesWithinWatermark checkpoint aside, job stopped (INSTANCE=domain-region [ARGS="--dry-run"])
	$(PY) -m scripts.migrate_checkpoint --instance "$(INSTANCE)" $(ARGS)

.PHONY: produce
produce: install ## Put the sample event mix on an instance's stream (INSTANCE=domain-region ARGS="--count N --rate R")
	$(PY) -m scripts.produce --instance "$(INSTANCE)" $(ARGS)

.PHONY: reprocess
reprocess: install ## scripts/reprocess/: re-send an instance's failure records to its stream (INSTANCE=domain-region ARGS="[--dry-run] [--fix mod:fn]")
	$(PY) -m scripts.reprocess --instance "$(INSTANCE)" $(ARGS)

.PHONY: bench
bench: install ## Benchmarks: ratios against a baseline measured in the same run
	$(PY) -m bench $(ARGS)

.PHONY: bench-report
bench-report: install ## Regenerate docs/benchmarks.md from bench/results/*.json (after make bench)
	$(PY) -m bench.report $(ARGS)

.PHONY: redeploy
redeploy: install ## Stop the running job version gracefully and submit the current one (INSTANCE=domain-region)
	$(PY) -m scripts.redeploy --instance "$(INSTANCE)" $(ARGS)

.PHONY: certs
certs: install ## Create the EMR TLS certificate zip for an instance, upload it, print the config value (INSTANCE=domain-region)
	$(PY) -m scripts.certs --instance "$(INSTANCE)" $(ARGS)

.PHONY: change-check
change-check: install ## Before a deploy: what CloudFormation would refuse or replace between the deployed cdk.json (BEFORE=path) and today's
	$(PY) -m scripts.change_check --before "$(BEFORE)" $(ARGS)

.PHONY: cost
cost: install ## What each instance costs a month, from its synthesized template and list prices ([INSTANCE=domain-region] [ARGS="--live"])
	$(PY) -m scripts.cost $(if $(INSTANCE),--instance "$(INSTANCE)") $(ARGS)

.PHONY: preflight
preflight: install ## scripts/preflight/: check an account/region is ready for an instance's first deploy (INSTANCE=domain-region)
	$(PY) -m scripts.preflight --instance "$(INSTANCE)" $(ARGS)

# Integration tests (docs/integ.md): the committed snapshot of two throwaway
# instances is checked in make test (tests/integ/test_check.py); make integ
# runs one instance's life on an account.
.PHONY: integ-snapshot
integ-snapshot: install ## Accept the integration snapshot's differences after an intended infra change (REASON="why", recorded)
	@test -n "$(REASON)" || { echo "make integ-snapshot: REASON is empty; allowed: one line saying why the templates change (it is recorded in integ/snapshots/updates.json)"; exit 2; }
	$(PY) -m integ.check --update --reason "$(REASON)"

.PHONY: integ
integ: install ## Deploy, assert, update, stop/start and destroy a throwaway instance on your account (ARGS="--dry-run" needs none)
	$(PY) -m integ.run $(ARGS)

.PHONY: clean
clean: ## Remove run outputs (cdk.out, .work); keeps .venv
	rm -rf cdk.out .work
