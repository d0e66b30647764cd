"""Helpers shared by the tests of every layer (and by ``bench/soak.py``).

- ``delta``: source tables written at controlled commit times, table states, staged leftovers, the log's
  mvsink metadata;
- ``oracle``: the independent DuckDB oracle and multisets of rows;
- ``data``: the random source tables and histories, and the queries over them;
- ``viewfiles``: view files written for a test, and the YAML snippets the parser tests start from;
- ``cli``: the ``mvsink`` command line, in a subprocess or in this process;
- ``airflow``: one Airflow client: a throw-away installation, a running one, and the REST calls
  (trigger, wait, runs, XCom, task instances);
- ``faults``: what every Airflow fault test asserts once Airflow's retry has recovered the run;
- ``probes``: a Spark job that reports which settings reached it, and the listening sockets and
  command lines of a process tree.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
