# Fresh machine: Python 3.11, Java 17, pip. Everything else is installed into .venv.
VENV ?= .venv
PY := $(VENV)/bin/python
DATA_ROOT ?= $(CURDIR)/data
export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: install demo test test-fast lint check-views bench bench-inprocess bench-scaling bench-connect bench-airflow bench-formulations soak airflow cluster clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,airflow]'
	# the build leaves plugins/mvsink.egg-info, which the editable install puts on sys.path beside the
	# installed metadata: Airflow would then find the airflow.plugins entry point twice (docs/ui.md)
	rm -rf plugins/*.egg-info
	touch $@

# the object-storage test servers from npm (tests/storage): Azurite (Azure Blob) and s3rver (an S3 without
# conditional writes, the probe's negative control), into a git-ignored folder; nothing to do once there
STORAGE_SERVERS := .storage-servers/node_modules/.bin
$(STORAGE_SERVERS)/azurite-blob $(STORAGE_SERVERS)/s3rver:
	npm install --prefix .storage-servers --no-audit --no-fund --loglevel=error azurite@3.35.0 s3rver@3.7.1

# the JVM jars every Spark session gets (delta-spark, hadoop-aws, hadoop-azure at pyspark's Hadoop 3.5.0):
# fetched with mvn from Maven Central into a git-ignored folder (docs/spark.md); nothing to do once there
JARS := .jars
$(JARS)/.fetched: spark_jobs/pom.xml
	rm -rf $(JARS)
	mvn -B -q -f spark_jobs/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(JARS)
	touch $@

# mvsink's Spark Connect plugin (spark_jobs/connect: a relation that answers a client's analysed plan, so a Connect
# client reads the same plan facts as a classic session; docs/spark.md), compiled against pyspark's own jars
PLUGIN_SRC := $(wildcard spark_jobs/connect/mvsink/connect/*.java)
# (without a JDK's javac it is left out, with a warning: Connect clients then read the coarser EXPLAIN text)
$(JARS)/mvsink-connect-plugin.jar: $(JARS)/.fetched $(VENV)/.installed $(PLUGIN_SRC)
	@if ! command -v javac >/dev/null 2>&1; then \
		echo "warning: no javac (a JDK 17): mvsink's Spark Connect plugin is not built (docs/spark.md)" >&2; exit 0; fi; \
	rm -rf $(JARS)/.plugin-classes \
	&& javac --release 17 -nowarn -cp "$$($(PY) -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')/jars/*" \
		-d $(JARS)/.plugin-classes $(PLUGIN_SRC) \
	&& jar cf $@ -C $(JARS)/.plugin-classes . \
	&& rm -rf $(JARS)/.plugin-classes

# a class-data sharing archive of the Spark driver JVM (a new driver maps its classes instead of loading them: about
# half the CPU of a small spark-submit refresh; docs/spark.md), made by one small refresh (~50 s, 180 MB) for this JDK,
# pyspark and these jars: named by their digest, so it is made again when one changes and is a no-op otherwise
install: $(VENV)/.installed $(STORAGE_SERVERS)/azurite-blob $(STORAGE_SERVERS)/s3rver $(JARS)/.fetched $(JARS)/mvsink-connect-plugin.jar
	@$(PY) -m mvsink.write.cdsarchive --quiet || echo "warning: no class-data archive of the Spark driver (docs/spark.md)" >&2

## demo: source tables with 4 days of history, example views refreshed at several times
demo: install
	MVSINK_DATA_ROOT=$(DATA_ROOT) MVSINK_VIEWS_DIR=$(CURDIR)/dags/views $(PY) -m mvsink.devtools.demo

## test: lint, type-check, then every test (unit, Spark integration, spark-submit end to end); the 25 slowest listed.
## Two pytest processes (pytest-xdist): one runs the Airflow tests, which mostly wait on a scheduler, while the other
## keeps the cores busy; groups in tests/conftest.py, in collection order (TEST_PROCESSES=0: one process)
TEST_PROCESSES ?= 2
test: lint check-views
	$(PY) -m pytest -q --durations=25 $(if $(filter-out 0,$(TEST_PROCESSES)),-n $(TEST_PROCESSES) --dist loadgroup --no-loadscope-reorder)

## test-fast: unit tests only (no Spark)
test-fast: install
	$(PY) -m pytest -q -m unit

## check-views: `mvsink check dags/views` (docs/cli.md), over the demo's source tables (their schemas, no history)
## written into a temporary data root: every example view parses, analyses on Spark and is deterministic
check-views: install
	@root=$$(mktemp -d) && trap 'rm -rf "$$root"' EXIT && \
	$(PY) -c 'import sys, pathlib; from mvsink.devtools.demo import build_sources; build_sources(pathlib.Path(sys.argv[1]))' "$$root" && \
	MVSINK_DATA_ROOT="$$root" $(PY) -m mvsink check dags/views

lint: install
	$(VENV)/bin/ruff check plugins tests spark_jobs dags bench
	$(VENV)/bin/ruff format --check plugins tests spark_jobs dags bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

## airflow: Airflow 3 on 127.0.0.1:$(AIRFLOW_PORT) with dags/ and a Spark Connect server on 127.0.0.1:$(CONNECT_PORT)
## that the write tasks use (AIRFLOW_SPARK=submit: spark-submit instead; CONNECT_URL=sc://HOST:PORT: a running
## server instead of starting one); Ctrl-C stops both
AIRFLOW_PORT ?= 8080
AIRFLOW_SPARK ?= connect
CONNECT_PORT ?= 15002
CONNECT_URL ?=
airflow: install
	$(PY) -m mvsink.devtools.localairflow --home $(CURDIR)/.airflow --dags $(CURDIR)/dags --data-root $(DATA_ROOT) --port $(AIRFLOW_PORT) --spark $(AIRFLOW_SPARK) $(if $(CONNECT_URL),--connect-url $(CONNECT_URL),--connect-port $(CONNECT_PORT))

## cluster: a Spark standalone master + $(CLUSTER_WORKERS) workers on 127.0.0.1 (master port $(CLUSTER_PORT)), state in .spark-cluster/ (Ctrl-C stops it)
CLUSTER_WORKERS ?= 2
CLUSTER_PORT ?= 7077
CLUSTER_UI_PORT ?= 8090
cluster: install
	$(PY) -m mvsink.devtools.sparkcluster --dir $(CURDIR)/.spark-cluster --workers $(CLUSTER_WORKERS) --master-port $(CLUSTER_PORT) --ui-port $(CLUSTER_UI_PORT)

## bench: the headline: what an Airflow write task runs, a new process per refresh through one running Spark Connect
## server, against an overwrite of the same query in a new process through the same server, and a no-change refresh;
## on TPC-H (SF=0.1 by default) under a change STREAM (rf: TPC-H's RF1/RF2 pairs, PAIRS pairs per round, the default;
## rf3: price updates of recent orders; scattered: o_orderkey % m), REPEAT rounds, sources in files of FILE_MB MB;
## the report into bench/reports/connect-sf<SF>-<STREAM>.md, the run's raw rows ("path": "connect-process") into
## bench/results/connect-<date>-sf<SF>-<STREAM>.json
SF ?= 0.1
STREAM ?= rf
FILE_MB ?= 32
PAIRS ?= 1
REPEAT ?= 3
bench: install
	$(VENV)/bin/pip install --quiet tpchgen-cli==4.0.0
	$(PY) -m bench.connect_process --sf $(SF) --stream $(STREAM) --pairs $(PAIRS) --repeat $(REPEAT) --file-mb $(FILE_MB)

## bench-connect: the same as bench
bench-connect: bench

## bench-inprocess: warm, in-process: refresh vs full overwrite vs MERGE vs the compute floor in one warm Spark
## (local[2]) on TPC-H (SF, STREAM, FILE_MB as for bench), then the Spark start-up per refresh by runner; the report
## into bench/reports/tpch-sf<SF>-<STREAM>.md (+ .png), the run's raw rows into
## bench/results/tpch-<date>-sf<SF>-<STREAM>.json
bench-inprocess: install
	$(VENV)/bin/pip install --quiet tpchgen-cli==4.0.0 matplotlib==3.11.2
	$(PY) -m bench.tpch_refresh --sf $(SF) --stream $(STREAM) --file-mb $(FILE_MB)

## bench-scaling: warm, in-process: refresh vs overwrite vs the compute floor as the table grows: the same ~1,500
## changed orders of the STREAM per round at each TPC-H scale factor in SFS (0.1,1,3 by default; one warm Spark
## process per SF); the report into bench/reports/scaling-<STREAM>.md (+ .png), the run's raw rows into
## bench/results/scaling-<date>-sf<SFS>-<STREAM>.json
SFS ?= 0.1,1,3
bench-scaling: install
	$(VENV)/bin/pip install --quiet tpchgen-cli==4.0.0 matplotlib==3.11.2
	$(PY) -m bench.scaling --sfs $(SFS) --stream $(STREAM) --file-mb $(FILE_MB)

## bench-airflow: refreshes end to end through Airflow (trigger -> success, and trigger -> the append's commit split
## into scheduling, task start and the refresh's work), Spark Connect vs spark-submit, for a 1 % change of wide; the
## report into bench/reports/airflow.md, the run's raw rows into bench/results/airflow-<date>-sf<SF>.json (a one-pair
## change of several views: python -m bench.airflow_e2e --stream rf --pairs 1 --view-names wide,q3,q1, in
## docs/benchmarks.md)
RUNS ?= 5
VIEWS ?= 10
bench-airflow: install
	$(VENV)/bin/pip install --quiet tpchgen-cli==4.0.0 matplotlib==3.11.2
	$(PY) -m bench.airflow_e2e --sf $(SF) --runs $(RUNS) --views $(VIEWS)

## bench-formulations: the correction formulations side by side (about 15 minutes); the report into
## bench/reports/formulations.md, the run's raw rows into bench/results/formulations-<date>.json
bench-formulations: install
	$(PY) bench/diff_formulations.py

## soak: 2 Airflow installations + CLI refreshes race on one view for ROUNDS rounds; report in bench/reports/soak.md
ROUNDS ?= 12
soak: install
	$(PY) -m bench.soak --rounds $(ROUNDS) --homes 2 --report bench/reports/soak.md

clean:
	rm -rf $(VENV) $(JARS) data .airflow .spark-cluster .pytest_cache .mypy_cache .ruff_cache .storage-servers
