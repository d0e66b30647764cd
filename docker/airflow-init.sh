#!/usr/bin/env bash
# One-shot initialisation (compose service airflow-init): migrate Airflow's metadata database,
# optionally set the UI admin's password, and check that the shared Delta volume is writable.
# It writes no secret anywhere but the auth volume.
set -euo pipefail

airflow db migrate

# SimpleAuthManager user `admin`: the password is AIRFLOW_ADMIN_PASSWORD if given; otherwise
# the api-server generates one on first start, prints it to its log and keeps it in this file.
passwords_file="${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE:-${AIRFLOW_HOME}/simple_auth_manager_passwords.json.generated}"
if [[ -n "${AIRFLOW_ADMIN_PASSWORD:-}" ]]; then
  mkdir -p "$(dirname "$passwords_file")"
  (umask 077 && python -c 'import json, os, sys; json.dump({"admin": os.environ["AIRFLOW_ADMIN_PASSWORD"]}, open(sys.argv[1], "w"))' "$passwords_file")
  echo "mvsink: admin password set from AIRFLOW_ADMIN_PASSWORD"
fi

data_root="${MVSINK_DATA_ROOT:-/data}"
probe="${data_root}/.mvsink-write-probe-$$"
if ! (touch "$probe" && rm -f "$probe"); then
  echo "mvsink: the data root ${data_root} is not writable by uid $(id -u). Fix: chown the volume to $(id -u)." >&2
  exit 1
fi
echo "mvsink: airflow-init done"
