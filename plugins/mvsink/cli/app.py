"""Command line: ``mvsink refresh|read|changes|status|explain|check|compact|vacuum|gc``.

Errors print one line, ``mvsink: error: ...``, and exit 2 for bad input (:class:`MvSinkError`)
or 1 for a runtime failure (:class:`MvSinkRuntimeError`, or anything unexpected); ``-v`` also
prints the traceback (and a failed Spark job's last output).
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import decimal
import json
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from mvsink import settings
from mvsink.definitions.catalog import Catalog
from mvsink.definitions.view import VIEWS_DIR_ENV
from mvsink.exceptions import MvSinkError, MvSinkRuntimeError
from mvsink.times import parse_time
from mvsink.write.runners import Runner


def _time(text: str) -> int:
    try:
        return parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _view_command(sub: Any, name: str, help: str) -> argparse.ArgumentParser:
    """A command on one view: it takes the view's name and the folder of view files."""
    sp: argparse.ArgumentParser = sub.add_parser(name, help=help)
    sp.add_argument("view", help="view name (from its view file)")
    sp.add_argument("--views-dir", help=f"folder of view files (default: ${VIEWS_DIR_ENV} or dags/views)")
    return sp


def _spark_args(sp: argparse.ArgumentParser, *, master_help: str, remote_help: str, in_process: bool = False) -> None:
    """Where a command's Spark runs: ``--master``, ``--spark-conf``, (``--in-process``,) ``--remote``."""
    sp.add_argument("--master", default="local[2]", help=master_help)
    sp.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    if in_process:
        sp.add_argument("--in-process", action="store_true", help="run Spark in this process instead of spark-submit")
    sp.add_argument("--remote", metavar="sc://HOST:PORT", default=None, help=remote_help)


def _add_refresh(sub: Any) -> None:
    r = _view_command(sub, "refresh", help="bring a view up to a refresh time (mint, write, append)")
    r.add_argument(
        "--at",
        required=True,
        type=_time,
        metavar="TIME",
        help="refresh time: ISO-8601 (UTC if no zone) or epoch milliseconds",
    )
    r.add_argument("--dry-run", action="store_true", help="compute and report the corrections, write nothing")
    r.add_argument("--json", action="store_true", help="print the result as a JSON object")
    r.add_argument("--run-id", help="id recorded in the commit log (default: generated)")
    _spark_args(
        r,
        master_help="Spark master of the write step, spark-submit or --in-process (default local[2])",
        in_process=True,
        remote_help="write through a running Spark Connect server (see connect-server; env MVSINK_SPARK_REMOTE)",
    )


def _add_read(sub: Any) -> None:
    rd = _view_command(sub, "read", help="print a view's contents as of a time")
    rd.add_argument("--as-of", type=_time, metavar="TIME", help="time to read (default: upper - 1)")
    rd.add_argument("--format", choices=("table", "csv", "jsonl"), default="table")
    rd.add_argument(
        "--errors",
        choices=("fail", "include", "ignore"),
        default="fail",
        help="rows that failed the view's error checks: fail the read (default), include them "
        "(with _mv_error), or ignore them (ok rows only)",
    )


def _add_changes(sub: Any) -> None:
    ch = _view_command(sub, "changes", help="print a view's updates (row, _mv_time, _mv_diff) between two times")
    ch.add_argument(
        "--from",
        dest="from_time",
        required=True,
        type=_time,
        metavar="T1",
        help="first time included (at or above since)",
    )
    ch.add_argument("--to", dest="to_time", type=_time, metavar="T2", help="first time excluded (default: the upper)")
    ch.add_argument(
        "--format",
        choices=("jsonl", "csv", "table"),
        default="jsonl",
        help="jsonl (default): one JSON object per update; csv: a header line, then one line each",
    )


def _add_maintenance(sub: Any) -> None:
    """``compact``, ``vacuum`` and ``gc``: the commands that keep a view's table small."""
    cp = _view_command(sub, "compact", help="consolidate history older than retain_history (advances since)")
    cp.add_argument(
        "--since", type=_time, metavar="TIME", help="new since (default: upper - 1 - retain_history of the view file)"
    )
    cp.add_argument(
        "--if-due",
        action="store_true",
        help="only if since would advance by at least retain_history / 4 (what the DAG does)",
    )
    cp.add_argument("--json", action="store_true")

    vc = _view_command(sub, "vacuum", help="delete files no retained version needs (never a batch in flight)")
    vc.add_argument(
        "--retention-hours",
        type=int,
        metavar="H",
        help="keep files removed less than H hours ago (default: the table's retention, 168)",
    )
    vc.add_argument("--force", action="store_true", help="allow a retention below the table's minimum")
    vc.add_argument("--dry-run", action="store_true", help="list the files, delete nothing")
    vc.add_argument("--json", action="store_true")

    gc = _view_command(sub, "gc", help="delete staged batches no commit references (never one that may still commit)")
    gc.add_argument(
        "--grace-seconds",
        type=float,
        metavar="N",
        help="an unfinished write younger than N seconds counts as in flight and is kept "
        "(default: $MVSINK_STAGING_GRACE_SECONDS or 3600)",
    )
    gc.add_argument("--dry-run", action="store_true", help="report what would be removed, remove nothing")
    gc.add_argument("--json", action="store_true")


def _add_connect_server(sub: Any) -> None:
    cs = sub.add_parser("connect-server", help="run a Spark Connect server on 127.0.0.1 for fast refreshes")
    cs.add_argument("--port", type=int, default=15002)
    cs.add_argument("--master", default="local[2]")
    cs.add_argument(
        "--bind",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; the server has no authentication: bind another "
        "address only inside a private network, as the compose file does)",
    )
    cs.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE")
    cs.add_argument("--log", metavar="FILE", help="append the server's output to FILE (default: discarded)")


def _add_explain(sub: Any) -> None:
    ex = _view_command(
        sub,
        "explain",
        help="per source: the refresh mode a change of it would take, and if not incremental, why and the fix",
    )
    ex.add_argument("--json", action="store_true", help="print the report as a JSON object")
    _spark_args(
        ex,
        master_help="Spark master of the in-process session (default local[2])",
        remote_help="analyse on a running Spark Connect server instead (env MVSINK_SPARK_REMOTE)",
    )


def _add_check(sub: Any) -> None:
    ck = sub.add_parser(
        "check",
        help="check every view file of a folder before deploying it: parsed, its query analysed against its "
        "sources (one Spark session), deterministic, and each source's refresh mode (as explain); exit 2 if any fails",
    )
    ck.add_argument("views_dir", nargs="?", help=f"folder of view files (default: ${VIEWS_DIR_ENV} or dags/views)")
    ck.add_argument("--views-dir", dest="views_dir_opt", help=argparse.SUPPRESS)
    ck.add_argument("--json", action="store_true", help="print the report as a JSON object")
    _spark_args(
        ck,
        master_help="Spark master of the in-process session (default local[2])",
        remote_help="analyse on a running Spark Connect server instead (env MVSINK_SPARK_REMOTE)",
    )


def _add_status(sub: Any) -> None:
    st = sub.add_parser("status", help="since, upper, as_of, freshness and the last refreshes (--all: every view)")
    st.add_argument("view", nargs="?", help="view name (from its view file); omit with --all")
    st.add_argument("--views-dir", help=f"folder of view files (default: ${VIEWS_DIR_ENV} or dags/views)")
    st.add_argument("--all", action="store_true", help="every view of the folder, one line each (stale ones flagged)")
    st.add_argument("--json", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    """The ``mvsink`` parser: one subcommand each, added in the order ``mvsink --help`` lists them."""
    p = argparse.ArgumentParser(
        prog="mvsink", description="Self-correcting materialized views on Spark and Delta Lake."
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log progress (INFO) to stderr; on an error also print its traceback",
    )
    sub = p.add_subparsers(dest="command", required=True)
    for add in (
        _add_refresh,
        _add_read,
        _add_changes,
        _add_maintenance,
        _add_connect_server,
        _add_explain,
        _add_check,
        _add_status,
    ):
        add(sub)
    return p


def _jsonable(v: Any) -> Any:
    if isinstance(v, (_dt.datetime, _dt.date)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, bytes):
        return v.hex()
    return v


def _print_rows(table: Any, fmt: str) -> None:
    rows = table.to_pylist()
    cols = table.column_names
    if fmt == "jsonl":
        for row in rows:
            print(json.dumps({k: _jsonable(v) for k, v in row.items()}, default=str))
    elif fmt == "csv":
        w = csv.writer(sys.stdout)
        w.writerow(cols)
        for row in rows:
            w.writerow(["" if row[c] is None else _jsonable(row[c]) for c in cols])
    else:
        cells = [[("NULL" if row[c] is None else str(_jsonable(row[c]))) for c in cols] for row in rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
        print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
        print("  ".join("-" * w for w in widths))
        for r in cells:
            print("  ".join(v.ljust(w) for v, w in zip(r, widths)))
        print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")


def _spark_conf(args: argparse.Namespace) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in args.spark_conf if "=" in kv)


def _explain_session(view: Any, args: argparse.Namespace) -> Any:
    """The Spark session ``mvsink explain`` analyses the view on: Spark Connect, else one in this process."""
    remote = args.remote or settings.spark_remote()
    if remote:
        from mvsink.spark.connect import remote_session

        return remote_session(remote, conf={**view.spark_conf, **_spark_conf(args)})
    from mvsink.spark.conf import check_connectors, storage_conf
    from mvsink.write.runners import local_session

    check_connectors(view, role="in-process Spark")
    return local_session(args.master, {**storage_conf(view), **view.spark_conf, **_spark_conf(args)})


def _check(args: argparse.Namespace) -> int:
    """``mvsink check``: every view file of the folder; exit 2 when any has a problem (one line each)."""
    from mvsink.write.check import check_views, session_conf

    catalog = Catalog(args.views_dir or args.views_dir_opt)
    remote = args.remote or settings.spark_remote()
    spark: Any = None
    if catalog.views and remote:
        from mvsink.spark.connect import remote_session

        spark = remote_session(remote, conf=_spark_conf(args))
    elif catalog.views:
        from mvsink.write.runners import local_session

        spark = local_session(args.master, {**session_conf(catalog), **_spark_conf(args)})
    report = check_views(catalog, spark=spark)
    print(json.dumps(report.to_dict(), sort_keys=True) if args.json else report.summary())
    if report.ok:
        return 0
    bad = sum(not c.ok for c in report.checks)
    print(f"mvsink: error: {bad} view file(s) have problems (the FAIL lines above)", file=sys.stderr)
    return BAD_INPUT_EXIT


def _connect_server(args: argparse.Namespace) -> int:
    import signal
    import time

    from mvsink.spark.connect import start_server

    def _interrupt(*_: object) -> None:  # docker stop sends SIGTERM: stop the server too
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _interrupt)
    proc = start_server(
        port=args.port,
        master=args.master,
        conf=_spark_conf(args),
        bind=args.bind,
        log_path=Path(args.log) if args.log else None,
    )
    print(f"Spark Connect server on sc://{args.bind}:{args.port} (pid {proc.pid}); Ctrl-C stops it", flush=True)
    try:
        while proc.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
    return 0


def _gc(view: Any, *, grace_seconds: float | None, dry_run: bool) -> dict[str, Any]:
    from mvsink.core.table import ViewTable
    from mvsink.maintenance.gc import gc

    table = ViewTable.open(view)
    if not table.exists:
        return {"discarded": [], "settled": [], "orphans": [], "kept": [], "upper": None}
    upper = table.frontier.upper
    res: dict[str, Any] = gc(
        view.target, upper=upper, active=table.active_paths(), grace_seconds=grace_seconds, dry_run=dry_run
    )
    return {**res, "upper": upper}


def _gc_summary(name: str, res: dict[str, Any], dry_run: bool) -> str:
    verb = "would remove" if dry_run else "removed"
    lines = [
        f"{name}: {verb} {len(res['discarded'])} dead staged batch(es), {len(res['orphans'])} orphan "
        f"folder(s); {'would settle' if dry_run else 'settled'} {len(res['settled'])} committed batch(es); "
        f"kept {len(res['kept'])} (may still commit, or written less than the grace period ago)"
    ]
    for k in ("discarded", "orphans", "settled", "kept"):
        lines += [f"  {k}: {b}" for b in res[k]]
    return "\n".join(lines)


def _status_all(catalog: Catalog, *, as_json: bool) -> int:
    """Every view, one line each (or a JSON list); exit 1 when a view is stale or cannot be read."""
    from mvsink.readers.overview import all_views, format_summary_line

    rows = all_views(catalog)
    if as_json:
        print(json.dumps(rows, sort_keys=True))
    else:
        for row in rows:
            print(format_summary_line(row))
    return 1 if any(r.get("stale") or r.get("error") for r in rows) else 0


BAD_INPUT_EXIT = 2
RUNTIME_EXIT = 1


def error_line(exc: BaseException) -> str:
    """The one line the CLI prints for an error (its message with line breaks folded)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, (MvSinkError, MvSinkRuntimeError)):
        return f"mvsink: error: {text}"
    return f"mvsink: error: {type(exc).__name__}: {text} (unexpected; run with -v for the traceback)"


def report_error(exc: BaseException, *, verbose: bool) -> int:
    """Print ``exc`` as one line (with its traceback first under ``-v``); the exit status for it."""
    if verbose:
        traceback.print_exception(exc, file=sys.stderr)
        output = getattr(exc, "output", "")
        if output:
            print(f"the job's last output:\n{output}", file=sys.stderr)
    print(error_line(exc), file=sys.stderr)
    return BAD_INPUT_EXIT if isinstance(exc, MvSinkError) else RUNTIME_EXIT


#: The exit status of a command whose reader closed the pipe early, as for any tool killed by SIGPIPE.
BROKEN_PIPE_EXIT = 141


def _reader_gone() -> int:
    """The output's reader went away (``mvsink status | head -1``): stop quietly, as Unix tools do.

    Python would otherwise report a BrokenPipeError again when it flushes stdout at exit: point stdout at
    /dev/null first.
    """
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return BROKEN_PIPE_EXIT


def exit_now(code: int) -> NoReturn:
    """End the command's process with ``code``: as a normal exit (other threads finished, the exit handlers run:
    logging's flush and close among them, the output flushed), but without the interpreter's teardown of every module
    and object (pyarrow's, numpy's and DuckDB's: ~0.05 s of a refresh's process). A thread still running (none of
    ours) gets the normal exit, which waits for it; so does a process run under a profiler or a tracer (``python -m
    cProfile -o F -m mvsink ...`` writes F after the command)."""
    import atexit
    import os
    import threading

    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # (a reader gone, a stream closed: nothing left to write there)
                pass
        os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        code = _run(args)
        sys.stdout.flush()  # inside the try: a reader that went away (`mvsink status | head -1`) is seen here
        return code
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        print("mvsink: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # every error ends as one line and an exit status (2 bad input, 1 otherwise)
        return report_error(exc, verbose=args.verbose)


def _run(args: argparse.Namespace) -> int:
    if args.command == "connect-server":
        return _connect_server(args)
    if args.command == "check":
        return _check(args)
    if args.command == "status" and (args.all == bool(args.view)):
        print("mvsink: error: status needs a view name or --all (not both)", file=sys.stderr)
        return BAD_INPUT_EXIT
    catalog = Catalog(args.views_dir)
    if args.command == "status" and args.all:
        return _status_all(catalog, as_json=args.json)
    view = catalog.get(args.view)
    if args.command == "refresh":
        from mvsink.write.runners import refresh

        remote = args.remote or settings.spark_remote()
        runner: Runner = "connect" if remote else "inprocess" if args.in_process else "submit"
        result = refresh(
            view,
            args.at,
            catalog=catalog,
            dry_run=args.dry_run,
            run_id=args.run_id,
            runner=runner,
            master=args.master,
            spark_conf=_spark_conf(args),
            remote=remote,
        )
        print(json.dumps(result.to_dict(), sort_keys=True) if args.json else result.summary())
    elif args.command == "read":
        from mvsink.readers.arrow import read_view

        _print_rows(read_view(view, as_of=args.as_of, errors=args.errors), args.format)
    elif args.command == "changes":
        from mvsink.readers.arrow import changes

        _print_rows(changes(view, args.from_time, args.to_time), args.format)
    elif args.command == "compact":
        from mvsink.maintenance.compaction import compact

        res = compact(view, catalog=catalog, since=args.since, if_due=args.if_due)
        print(json.dumps(res.to_dict(), sort_keys=True) if args.json else res.summary())
        if res.status == "gave_up":
            return 1
    elif args.command == "vacuum":
        from mvsink.maintenance.vacuum import vacuum

        vres = vacuum(
            view, retention_hours=args.retention_hours, dry_run=args.dry_run, enforce_retention=not args.force
        )
        print(json.dumps(vres.to_dict(), sort_keys=True) if args.json else vres.summary())
    elif args.command == "gc":
        gres = _gc(view, grace_seconds=args.grace_seconds, dry_run=args.dry_run)
        print(json.dumps(gres, sort_keys=True) if args.json else _gc_summary(view.name, gres, args.dry_run))
    elif args.command == "explain":
        from mvsink.write.explain import explain_view

        report = explain_view(view, catalog=catalog, spark=_explain_session(view, args))
        print(json.dumps(report.to_dict(), sort_keys=True) if args.json else report.summary())
    elif args.command == "status":
        from mvsink.readers.status import format_status, view_status

        st = view_status(view)
        print(json.dumps(st, sort_keys=True) if args.json else format_status(st))
    return 0
