"""How long the "Materialized views" page takes for N views (issue 14: under a second for 50 views).

    python -m bench.ui_overview [--views 50] [--refreshes 20] [--rounds 7] [--out bench/reports/ui.md]

Builds N views over shared source tables, each with a real Delta log of ``--refreshes`` refreshes (mint and
append of the project's own protocol; write reports that stage no files, so no Spark is needed: the page
reads only the logs), starts a local Airflow on 127.0.0.1 with the UI plugin (api-server and scheduler), and
times:

- in-process: loading the views folder, reading every view's status (``readers.overview.all_views``) and
  rendering the page, separately;
- over HTTP: ``GET /mvsink/`` with a token, as the browser's frame fetches it (first request, then the median);
- in a browser (Debian chromium, when present): the page's own load time (navigation start to the load event)
  when the frame's document is opened with the UI's session cookie.

Results (medians of ``--rounds``) go into the results file with the machine and the date.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build(root: Path, n_views: int, refreshes: int) -> Path:
    from mvsink.core.deltalog import set_commit_time
    from mvsink.definitions.catalog import Catalog
    from tests.support.refreshlog import BASE, HOUR, refresh, source, view_file

    data, views = root / "data", root / "dags" / "views"
    data.mkdir(parents=True)
    views.mkdir(parents=True)
    (root / "dags" / "mvsink_views.py").write_bytes((REPO / "dags" / "mvsink_views.py").read_bytes())
    os.environ["MVSINK_DATA_ROOT"] = str(data)
    sources = [f"src{i}" for i in range(5)]
    for s in sources:
        source(data, s)
    for i in range(n_views):
        s = sources[i % len(sources)]
        view_file(
            views,
            f"view_{i:03d}",
            extra=f"max_lag: {'1h' if i % 3 == 0 else '36500d'}\n",
            sources=f"{{{s}: {s}}}",
            query=f"SELECT id, qty FROM {s}",
        )
    catalog = Catalog(views)
    t0 = time.monotonic()
    for r in range(refreshes):
        at = BASE + r * HOUR
        if r % 4 == 1:  # a source moves now and then: full or incremental refreshes between no-change ones
            for s in sources:
                import pyarrow as pa
                from deltalake import write_deltalake

                write_deltalake(str(data / s), pa.table({"id": [r], "qty": [r]}), mode="append")
                set_commit_time(str(data / s), at - 1000)
        for name in catalog.views:
            refresh(
                catalog,
                name,
                at,
                added=r + 1,
                retracted=r // 2,
                nbytes=1000 * (r + 1),
                mode="incremental" if r % 2 else "full",
                seconds=1.5,
            )
    print(f"built {n_views} views x {refreshes} refreshes in {time.monotonic() - t0:.1f}s", flush=True)
    return views


def in_process(views: Path, rounds: int) -> dict[str, float]:
    """Medians: the parts of one page with every log read (the status cache emptied first), and a warm page."""
    from mvsink.airflow.plugin import render
    from mvsink.definitions.catalog import Catalog
    from mvsink.readers import overview

    load, read, draw, warm = [], [], [], []
    for _ in range(rounds):
        overview._STATUS_CACHE.clear()
        t0 = time.perf_counter()
        catalog = Catalog(views)
        t1 = time.perf_counter()
        rows = overview.all_views(catalog)
        t2 = time.perf_counter()
        render.overview_page(rows, links=render.Links(), nonce="bench")
        t3 = time.perf_counter()
        render.overview_page(overview.all_views(Catalog(views)), links=render.Links(), nonce="bench")
        warm.append(time.perf_counter() - t3)
        load.append(t1 - t0)
        read.append(t2 - t1)
        draw.append(t3 - t2)
    return {
        "load the views folder": statistics.median(load),
        "read every view's log (nothing cached)": statistics.median(read),
        "render the page": statistics.median(draw),
        "total, nothing cached": statistics.median([a + b + c for a, b, c in zip(load, read, draw)]),
        "total, no commit since the last page (logs cached)": statistics.median(warm),
    }


def _get(af, token: str) -> tuple[float, int]:
    req = urllib.request.Request(f"{af.url}/mvsink/", headers={"Authorization": f"Bearer {token}"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=60) as r:
        body = r.read()
    return time.perf_counter() - t0, len(body)


def over_http(af, views: Path, rounds: int, refreshes: int) -> dict[str, float]:
    """The first request (builds the app, reads every log), warm requests, and requests after every view
    committed a new refresh (every log read again)."""
    from mvsink.definitions.catalog import Catalog
    from tests.support.refreshlog import BASE, HOUR, refresh

    token = af.token()
    first, size = _get(af, token)
    warm = [_get(af, token)[0] for _ in range(rounds)]
    catalog = Catalog(views)
    cold = []
    for r in range(rounds):
        for name in catalog.views:  # a new commit in every view's log (a no-change refresh)
            refresh(catalog, name, BASE + (refreshes + r) * HOUR)
        cold.append(_get(af, token)[0])
    return {
        "first request after start (builds the app, reads every log)": first,
        "every view committed since the last page (every log read)": statistics.median(cold),
        "no commit since the last page": statistics.median(warm),
        "size": size,
    }


def in_browser(af, rounds: int) -> float | None:
    from tests.support.browser import ARGS, CHROMIUM

    if not Path(CHROMIUM).exists():
        return None
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        context = browser.new_context(viewport={"width": 1600, "height": 1000})
        context.add_cookies([{"name": "_token", "value": af.token(), "url": af.url}])
        page = context.new_page()
        loads = []
        for _ in range(rounds + 1):
            page.goto(f"{af.url}/mvsink/", wait_until="load")
            loads.append(
                page.evaluate(
                    "() => { const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime; }"
                )
            )
        assert page.locator("tr[data-view]").count() > 0
        browser.close()
    return statistics.median(loads[1:]) / 1000


def machine() -> str:
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.processor() or "?",
    )
    load = os.getloadavg()
    return (
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()} "
        f"{platform.release()}; load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--views", type=int, default=50)
    ap.add_argument("--refreshes", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default=str(REPO / "bench" / "reports" / "ui.md"))
    args = ap.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    where = machine()
    root = Path(tempfile.mkdtemp(prefix="mvsink-ui-bench-"))
    views = build(root, args.views, args.refreshes)
    local = in_process(views, args.rounds)
    print(json.dumps(local, indent=1), flush=True)

    from mvsink.devtools.localairflow import LocalAirflow

    af = LocalAirflow(root / "home", root / "dags", data_root=root / "data")
    af.start(components=("api-server", "scheduler"))
    try:
        http = over_http(af, views, args.rounds, args.refreshes)
        browser = in_browser(af, args.rounds)
    finally:
        af.stop()
    when = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        '# UI benchmark: the "Materialized views" page',
        "",
        f"`python -m bench.ui_overview --views {args.views} --refreshes {args.refreshes} --rounds {args.rounds}`"
        f" — {when}",
        "",
        f"Machine: {where}.",
        "",
        f"{args.views} views, each with a Delta log of {args.refreshes} refreshes ({args.refreshes + 2} commits: "
        "create, the bump to as_of, the appends); medians of "
        f"{args.rounds} rounds. Target (issue 14): the page loads in under a second for 50 views.",
        "",
        "| what | seconds |",
        "| --- | ---: |",
        *[f"| in-process: {k} | {v:.3f} |" for k, v in local.items()],
        *[
            f"| HTTP `GET /mvsink/` through the api-server (auth included): {k} | {v:.3f} |"
            for k, v in http.items()
            if k != "size"
        ],
        (
            f"| browser (chromium): the page's load time, navigation start to load event, no commit since | {browser:.3f} |"
            if browser is not None
            else "| browser: not measured (no chromium) | - |"
        ),
        "",
        f"Page size: {http['size'] / 1024:.0f} KiB of HTML (inline CSS and SVG, no other requests). The overview "
        "reads the views' logs on 4 threads and keeps each view's status until its table's newest commit file "
        "changes (the lag is recomputed on every page).",
        "",
    ]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines))
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
