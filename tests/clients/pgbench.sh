#!/usr/bin/env bash
# pgbench against Weir: a short load with a custom script (pgbench -n -f), 2 clients x 50
# transactions in each of pgbench's query modes (simple, extended, prepared), then the view's
# totals checked against what the clients wrote. Connection from PGHOST, PGPORT, PGUSER,
# PGDATABASE; PGBENCH names the binary (default: pgbench on PATH, else PostgreSQL's).
set -u

CLIENT=pgbench
HERE=$(cd "$(dirname "$0")" && pwd)
PGBENCH=${PGBENCH:-$(command -v pgbench || ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | tail -n1)}
CLIENTS=2
TXNS=50
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

if [ -z "$PGBENCH" ] || ! command -v "$PGBENCH" >/dev/null; then
  echo "pgbench not found (set PGBENCH)" >&2
  exit 2
fi

q() { psql -X -A -t -v ON_ERROR_STOP=1 "$@"; }

check() {
  local name=$1
  shift
  if "$@" >"$WORK/check.out" 2>"$WORK/err"; then
    echo "PASS $CLIENT $name"
  else
    local why
    why=$(grep -m1 -E 'ERROR|error|FATAL' "$WORK/err" || head -n1 "$WORK/err")
    echo "FAIL $CLIENT $name: ${why:0:300}"
  fi
}

c_setup() {
  q >/dev/null <<SQL
DROP TABLE IF EXISTS pgb_events CASCADE;
CREATE TABLE pgb_events (mode INTEGER, client INTEGER, amount INTEGER);
CREATE MATERIALIZED VIEW pgb_totals AS
  SELECT mode, client, count(*) AS n, sum(amount) AS total FROM pgb_events GROUP BY mode, client;
SQL
}

# load MODE_NAME MODE_NUMBER: the run succeeds with every transaction processed, none failed.
load() {
  "$PGBENCH" -n -f "$HERE/pgbench_load.sql" -M "$1" -D mode="$2" -c "$CLIENTS" -t "$TXNS" >"$WORK/bench" 2>"$WORK/bench.err"
  local status=$?
  cat "$WORK/bench.err" >&2
  [ "$status" = 0 ] || return 1
  grep -q "number of transactions actually processed: $((CLIENTS * TXNS))/$((CLIENTS * TXNS))" "$WORK/bench" || {
    grep "processed" "$WORK/bench" >&2
    return 1
  }
  if grep -q "number of failed transactions: [1-9]" "$WORK/bench"; then
    grep "failed" "$WORK/bench" >&2
    return 1
  fi
}

# Each client wrote TXNS events of amount client_id + 1 in each mode that ran.
c_totals() {
  q -c 'FLUSH' >/dev/null &&
    q -c 'SELECT mode, client, n, total FROM pgb_totals ORDER BY mode, client' >"$WORK/totals" || return 1
  local want="" mode
  for mode in 1 2 3; do
    want+="$mode|0|$TXNS|$TXNS"$'\n'"$mode|1|$TXNS|$((2 * TXNS))"$'\n'
  done
  [ "$(cat "$WORK/totals")" = "${want%$'\n'}" ] || {
    echo "totals: $(tr '\n' ' ' <"$WORK/totals"), expected: $(echo "$want" | tr '\n' ' ')" >&2
    return 1
  }
}

check setup c_setup
check simple load simple 1
check extended load extended 2
check prepared load prepared 3
check view_totals c_totals
exit 0
