"""Issue 14: the UI plugin registers exactly once, by Airflow's own plugin manager, both ways it can be found:

- the repository's ``plugins/`` folder as Airflow's plugins folder: Airflow imports every ``.py`` file of it
  as a top-level module, so ``.airflowignore`` keeps it out of ``mvsink/`` and ``mvsink_airflow_plugin.py``
  is the file it registers from (none of the package's modules may end up imported under a wrong name);
- the ``airflow.plugins`` entry point of the installed package (a wheel built from the repository).

With both, the shim defers to the entry point: one plugin, no plugin import error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytestmark = [pytest.mark.airflow]

REPO = Path(__file__).resolve().parents[2]
ENTRY_POINT = "mvsink.airflow.plugin.airflow_plugin:MvsinkPlugin"

PROBE = r"""
import json, os, sys
from airflow import plugins_manager as pm
plugins, errors = pm._get_plugins()
import mvsink
pkg = os.path.dirname(mvsink.__file__)
stray = sorted(n for n, m in list(sys.modules.items()) if not n.startswith("mvsink")
               and str(getattr(m, "__file__", None) or "").startswith(pkg + os.sep))
print("PROBE " + json.dumps({
    "plugins": [[p.name, str(p.source)] for p in plugins], "errors": errors, "stray": stray, "mvsink": pkg,
    "fastapi": [[a["url_prefix"], type(a["app"]).__name__] for p in plugins if p.name == "mvsink" for a in p.fastapi_apps],
    "views": [[v["name"], v["destination"], v["href"]] for p in plugins if p.name == "mvsink" for v in p.external_views],
    "timetables": [t.__module__ + "." + t.__qualname__ for p in plugins for t in (p.timetables or [])]}))
"""


def _installed_entry_point() -> bool:
    """Does this interpreter's own metadata (e.g. ``make install``'s editable install) declare the entry point?"""
    return any(ep.value == ENTRY_POINT for ep in entry_points(group="airflow.plugins"))


def _probe(tmp_path: Path, *, plugins_folder: Path, pythonpath: list[Path]) -> dict:
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "home"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins_folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "PYTHONPATH": os.pathsep.join(map(str, pythonpath)),
    }
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("PROBE ")), None)
    assert line, proc.stderr[-4000:]
    return json.loads(line[len("PROBE ") :])


def _assert_one_plugin(found: dict, source_part: str) -> None:
    assert found["errors"] == {}, found["errors"]
    mine = [p for p in found["plugins"] if p[0] == "mvsink"]
    assert len(mine) == 1, found["plugins"]  # registered exactly once
    assert source_part in mine[0][1], found["plugins"]
    # any other plugin is an installed Airflow provider's (apache-airflow-providers-openlineage's listener)
    others = [p for p in found["plugins"] if p[0] != "mvsink"]
    assert all("apache-airflow-providers-" in p[1] for p in others), others
    assert found["stray"] == [], f"package modules imported under other names: {found['stray']}"
    assert found["fastapi"] == [["/mvsink", "LazyApp"]]
    assert found["views"] == [["Materialized views", "nav", "mvsink/"], ["View", "dag", "mvsink/dags/{DAG_ID}"]]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from the repository's packaging inputs (pip wheel, as tests/e2e/test_wheel_install.py builds it)."""
    tmp = tmp_path_factory.mktemp("ui-wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        (src / name).write_bytes((REPO / name).read_bytes())
    import shutil

    shutil.copytree(REPO / "plugins", src / "plugins", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"), str(src)],
        check=True,
        capture_output=True,
        timeout=600,
        cwd=tmp,
    )
    (whl,) = (tmp / "dist").glob("mvsink-*.whl")
    return whl


def test_the_wheel_declares_the_entry_point_and_ships_no_shim(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        eps = next(z.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert f"[airflow.plugins]\nmvsink = {ENTRY_POINT}" in eps, eps
    assert "mvsink_airflow_plugin.py" not in names  # the shim is for the plugins folder only
    assert "mvsink/airflow/plugin/airflow_plugin.py" in names and "mvsink/airflow/plugin/render.py" in names


def test_registered_from_the_plugins_folder(tmp_path):
    """plugins/ as Airflow's plugins folder: one plugin, from the shim (or from the entry point, when this
    environment's own install declares it: then the shim defers to it)."""
    found = _probe(tmp_path, plugins_folder=REPO / "plugins", pythonpath=[REPO / "plugins"])
    assert found["mvsink"] == str(REPO / "plugins" / "mvsink")
    _assert_one_plugin(found, "mvsink==" if _installed_entry_point() else "$PLUGINS_FOLDER/mvsink_airflow_plugin.py")
    # the timetable of every/at schedules, which the scheduler looks up among the plugins' timetables
    assert found["timetables"] == ["mvsink.airflow.timetable.MvsinkTimetable"]


def test_registered_through_the_entry_point_of_the_installed_package(tmp_path, wheel):
    """The package installed from its wheel, an empty plugins folder: the entry point registers the plugin; with
    the repository's plugins folder as well, still exactly one plugin (no duplicate-name import error)."""
    empty = tmp_path / "no-plugins"
    empty.mkdir()
    if _installed_entry_point():  # this environment's own install (make install) is the installed package
        path: list[Path] = []
    else:
        target = tmp_path / "site"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
            check=True,
            capture_output=True,
            timeout=600,
        )
        path = [target]
    found = _probe(tmp_path, plugins_folder=empty, pythonpath=path)
    _assert_one_plugin(found, f"mvsink==0.1.0: EntryPoint(name='mvsink', value='{ENTRY_POINT}'")
    both = _probe(tmp_path, plugins_folder=REPO / "plugins", pythonpath=path)
    _assert_one_plugin(both, "mvsink==0.1.0: EntryPoint")


def test_without_the_ignore_file_airflow_would_import_the_package_as_loose_modules(tmp_path):
    """The negative control: plugins/ without .airflowignore. Airflow imports ``mvsink/__main__.py`` as the
    module ``__main__``, which runs mvsink's command line inside Airflow's process and ends it."""
    import shutil

    assert (REPO / "plugins" / ".airflowignore").read_text().split() == ["mvsink/"]
    folder = tmp_path / "plugins"
    shutil.copytree(REPO / "plugins" / "mvsink", folder / "mvsink", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "plugins" / "mvsink_airflow_plugin.py", folder)
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "home"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "PYTHONPATH": str(folder),
    }
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert "PROBE " not in proc.stdout and "usage: mvsink" in proc.stderr, (proc.stdout[-2000:], proc.stderr[-2000:])
