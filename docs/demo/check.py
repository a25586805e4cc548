"""Checks the flights demo's view dumps against DuckDB computing the same queries.

usage: check.py DATA_DIR WORK_DIR STAGE   (STAGE: before | after | restarted)
"""
import csv
import math
import sys

import duckdb

data, work, stage = sys.argv[1:4]
con = duckdb.connect()
con.execute(f"""
CREATE TABLE airlines AS SELECT * FROM read_csv('{data}/airlines.csv', header=true, nullstr='NA',
  columns={{'carrier': 'VARCHAR', 'name': 'VARCHAR'}});
CREATE TABLE flights AS SELECT * FROM read_csv('{data}/flights.csv', header=true, nullstr='NA',
  columns={{'year': 'INT', 'month': 'INT', 'day': 'INT', 'dep_time': 'INT', 'sched_dep_time': 'INT',
  'dep_delay': 'INT', 'arr_time': 'INT', 'sched_arr_time': 'INT', 'arr_delay': 'INT',
  'carrier': 'VARCHAR', 'flight': 'INT', 'tailnum': 'VARCHAR', 'origin': 'VARCHAR', 'dest': 'VARCHAR',
  'air_time': 'INT', 'distance': 'INT', 'hour': 'INT', 'minute': 'INT', 'time_hour': 'VARCHAR'}});
CREATE TABLE weather AS SELECT * FROM read_csv('{data}/weather.csv', header=true, nullstr='NA',
  columns={{'origin': 'VARCHAR', 'year': 'INT', 'month': 'INT', 'day': 'INT', 'hour': 'INT',
  'temp': 'DOUBLE', 'dewp': 'DOUBLE', 'humid': 'DOUBLE', 'wind_dir': 'DOUBLE', 'wind_speed': 'DOUBLE',
  'wind_gust': 'DOUBLE', 'precip': 'DOUBLE', 'pressure': 'DOUBLE', 'visib': 'DOUBLE',
  'time_hour': 'VARCHAR'}});
""")
if stage != "before":
    con.execute("DELETE FROM flights WHERE carrier = 'UA' AND month <= 6")
    con.execute("UPDATE airlines SET name = 'United Air Lines (renamed)' WHERE carrier = 'UA'")

QUERIES = {
    "carrier_stats": """SELECT carrier, count(*), count(dep_delay), sum(dep_delay), min(dep_delay),
        max(arr_delay), avg(arr_delay) FROM flights GROUP BY carrier""",
    "airline_routes": """SELECT a.name, f.origin, f.dest, count(*) FROM flights f
        JOIN airlines a ON f.carrier = a.carrier GROUP BY a.name, f.origin, f.dest""",
    "late_dests": """SELECT dest, count(*) FROM flights WHERE arr_delay > 60 GROUP BY dest
        HAVING count(*) > 500""",
    "origin_month_weather": """SELECT f.origin, f.month, count(*), count(w.temp), avg(f.dep_delay),
        max(w.wind_speed) FROM flights f LEFT JOIN weather w
        ON f.origin = w.origin AND f.time_hour = w.time_hour GROUP BY f.origin, f.month""",
}


def norm(v):
    if v is None or v == "":
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def key(row):
    return tuple((0, "") if v is None else (1, v) if isinstance(v, float) else (2, v) for v in row)


failed = False
for view, q in QUERIES.items():
    expected = sorted(([norm(v) for v in r] for r in con.execute(q).fetchall()), key=key)
    with open(f"{work}/{stage}.{view}.csv", newline="") as f:
        got = sorted(([norm(v) for v in r] for r in csv.reader(f) if r), key=key)
    ok = len(expected) == len(got) and all(
        len(e) == len(g) and all(same(x, y) for x, y in zip(e, g)) for e, g in zip(expected, got))
    print(f"{stage:9} {view:22} rows={len(got):5} {'equal to DuckDB' if ok else 'DIFFERENT'}")
    if not ok:
        failed = True
        for e, g in zip(expected, got):
            if not all(same(x, y) for x, y in zip(e, g)):
                print("  duckdb:", e, "\n  weir:  ", g)
                break
        else:
            print(f"  duckdb has {len(expected)} rows, weir {len(got)}")
sys.exit(1 if failed else 0)
