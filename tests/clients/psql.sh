#!/usr/bin/env bash
# psql against Weir: the describe meta-commands (whose catalog queries psql sends), \copy in
# both directions and \watch. Connection from PGHOST, PGPORT, PGUSER, PGDATABASE.
set -u

CLIENT=psql
T=psql_orders
V=psql_by_customer
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# psql without ~/.psqlrc, unaligned, tuples only, stopping at the first error.
q() { psql -X -A -t -v ON_ERROR_STOP=1 "$@"; }

# check NAME COMMAND...: runs COMMAND, which decides by its exit status, and prints the PASS
# or FAIL line (the reason from what it wrote to stderr).
check() {
  local name=$1
  shift
  if "$@" >"$WORK/check.out" 2>"$WORK/err"; then
    echo "PASS $CLIENT $name"
  else
    local why
    why=$(grep -m1 -E 'ERROR|error|FATAL' "$WORK/err" || head -n1 "$WORK/err")
    [ -n "$why" ] || why=$(head -c 300 "$WORK/check.out" | tr "\n" " ")
    echo "FAIL $CLIENT $name: ${why:0:300}"
  fi
}

# expect PATTERN...: each extended regular expression matches some line of $WORK/out.
expect() {
  local p
  for p in "$@"; do
    grep -qE "$p" "$WORK/out" || { echo "no line matches /$p/ in: $(head -c 200 "$WORK/out" | tr '\n' ' ')" >&2; return 1; }
  done
}

# no_error COMMAND...: COMMAND succeeds (output in $WORK/out) and reports no ERROR (psql
# reports "Did not find any relations." on stderr too).
no_error() {
  local status=0
  "$@" >"$WORK/out" 2>"$WORK/e1" || status=$?
  cat "$WORK/e1" >&2
  [ "$status" = 0 ] && ! grep -q ERROR "$WORK/e1"
}

c_connect() { q -c 'SELECT 40 + 2' >"$WORK/out" && [ "$(cat "$WORK/out")" = 42 ]; }

# The startup message's settings (PGAPPNAME, PGTZ, PGOPTIONS' -c switches) are the session's
# defaults, which RESET returns to; a value a setting refuses fails the connection (FATAL
# 22023, as PostgreSQL).
c_startup_settings() {
  PGAPPNAME=psql_check PGTZ=Asia/Kolkata PGOPTIONS='-c statement_timeout=5s' \
    q -c 'SET application_name = other' -c 'RESET application_name' \
    -c "SELECT current_setting('application_name'), current_setting('TimeZone'), current_setting('statement_timeout')" \
    >"$WORK/out" && expect '^psql_check\|Asia/Kolkata\|5s$' || return 1
  if PGTZ=Nowhere/Else q -c 'SELECT 1' >"$WORK/out" 2>"$WORK/e1"; then
    echo "a connection with PGTZ=Nowhere/Else was let in" >&2
    return 1
  fi
  grep -q 'FATAL:  invalid value for parameter "timezone": "Nowhere/Else"' "$WORK/e1" ||
    { cat "$WORK/e1" >&2; return 1; }
}

c_setup() {
  q >"$WORK/out" <<SQL && [ "$(tail -n1 "$WORK/out")" = "ada|2|10" ]
DROP TABLE IF EXISTS $T CASCADE;
CREATE TABLE $T (id BIGINT PRIMARY KEY, customer TEXT NOT NULL, qty INTEGER, price NUMERIC(10,2), day DATE);
INSERT INTO $T VALUES (1, 'ada', 3, 2.50, '2024-03-01'), (2, 'bob', 5, 10.00, '2024-03-02'), (3, 'ada', 7, 1.25, '2024-03-03');
CREATE MATERIALIZED VIEW $V AS SELECT customer, count(*) AS n, sum(qty) AS qty FROM $T GROUP BY customer;
FLUSH;
SELECT customer, n, qty FROM $V WHERE customer = 'ada';
SQL
}

c_list_databases() { q -c '\l' >"$WORK/out" && expect '^weir\|'; }
c_list_schemas() { q -c '\dn' >"$WORK/out" && expect '^public\|'; }
c_list_tables() { q -c '\dt' >"$WORK/out" && expect "^public\|$T\|table\|" && ! grep -q "$V" "$WORK/out"; }
c_list_matviews() { q -c '\dm' >"$WORK/out" && expect "^public\|$V\|materialized view\|"; }
# Weir has no plain views: \dv runs its query and finds none.
c_list_views() { no_error q -c '\dv' && ! grep -qE "$T|$V" "$WORK/out"; }
# Without -t: psql prints a table's footers (Indexes:) only when not in tuples-only mode.
c_describe_table() {
  psql -X -A -v ON_ERROR_STOP=1 -c "\\d $T" >"$WORK/out" &&
    expect '^id\|bigint\|\|not null\|' '^customer\|text\|\|not null\|' '^qty\|integer\|\|\|' \
      '^price\|numeric\(10,2\)\|' '^day\|date\|' "PRIMARY KEY, btree \(id\)"
}
c_describe_view() { q -c "\\d $V" >"$WORK/out" && expect '^customer\|text\|' '^n\|bigint\|' '^qty\|bigint\|'; }
c_describe_table_plus() {
  q -c "\\d+ $T" >"$WORK/out" && expect '^id\|bigint\|\|not null\|\|plain\|' '^customer\|text\|\|not null\|\|extended\|'
}
# Weir has no user-defined functions: \df runs its query and lists none.
c_list_functions() { no_error q -c '\df' && [ ! -s "$WORK/out" ]; }
c_list_roles() {
  q -c 'DROP ROLE IF EXISTS psql_reader' -c 'CREATE ROLE psql_reader LOGIN' >/dev/null &&
    q -c '\du' >"$WORK/out" && expect '^psql_reader\|'
}
c_copy_from() {
  printf 'id,customer,qty,price,day\n30,eve,2,4.00,2024-06-01\n31,eve,6,,\n' >"$WORK/in.csv"
  q -c "\\copy $T FROM '$WORK/in.csv' WITH (FORMAT csv, HEADER)" >/dev/null &&
    q -c "SELECT sum(qty), count(price) FROM $T WHERE customer = 'eve'" >"$WORK/out" &&
    [ "$(cat "$WORK/out")" = "8|1" ]
}
c_copy_to() {
  q -c "\\copy (SELECT id, qty FROM $T WHERE id <= 3 ORDER BY id) TO '$WORK/out.csv' WITH (FORMAT csv)" >/dev/null &&
    [ "$(cat "$WORK/out.csv")" = $'1,3\n2,5\n3,7' ]
}
# \watch re-runs the query every 0.2 s until interrupted: wait (polling, at most 20 s each)
# for the view's answer, insert a row, wait for the answer to change, then stop psql with
# SIGINT as a user's Ctrl-C would.
wait_for_line() {
  local line=$1 pid=$2 i
  for i in $(seq 200); do
    grep -qx "$line" "$WORK/watch.out" && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
c_watch() {
  echo "SELECT qty FROM $V WHERE customer = 'ada' \\watch 0.2" >"$WORK/watch.sql"
  psql -X -A -t -f "$WORK/watch.sql" >"$WORK/watch.out" 2>"$WORK/watch.err" &
  local pid=$! ok=1
  # ada: 3 + 7, then 3 + 7 + 4.
  if wait_for_line 10 "$pid" && q -c "INSERT INTO $T VALUES (5, 'ada', 4, 1.00, NULL)" >/dev/null &&
    wait_for_line 14 "$pid"; then
    ok=0
  fi
  kill -INT "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  cat "$WORK/watch.err" >&2
  [ "$ok" = 0 ] || echo "the watched answer did not go from 10 to 14: $(tr '\n' ' ' <"$WORK/watch.out" | tail -c 100)" >&2
  return "$ok"
}

check connect c_connect
check startup_settings c_startup_settings
check setup c_setup
check list_databases c_list_databases
check list_schemas c_list_schemas
check list_tables c_list_tables
check list_matviews c_list_matviews
check list_views c_list_views
check describe_table c_describe_table
check describe_view c_describe_view
check describe_table_plus c_describe_table_plus
check list_functions c_list_functions
check list_roles c_list_roles
check copy_from c_copy_from
check copy_to c_copy_to
check watch c_watch
exit 0
