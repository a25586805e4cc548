"""psycopg2 against Weir: client-side parameter interpolation (psycopg2 always sends simple
Query messages), execute_values, copy_expert in and out, named (server-side) cursors and
transactions as psycopg2 opens them (an implicit BEGIN before the first statement)."""

import datetime as dt
import io
from decimal import Decimal

import psycopg2
import psycopg2.extras

from checks import Checks, conninfo, eq, finish

CLIENT = "psycopg2"
T = "pg2_orders"
V = "pg2_by_customer"
UTC = dt.timezone.utc
ROWS = [
    (1, "ada", 3, Decimal("2.50"), True, dt.datetime(2024, 3, 1, 10, 0, tzinfo=UTC), dt.date(2024, 3, 1)),
    (2, "bob", 5, Decimal("10.00"), False, dt.datetime(2024, 3, 2, 11, 30, tzinfo=UTC), dt.date(2024, 3, 2)),
    (3, "ada", 7, Decimal("1.25"), True, dt.datetime(2024, 3, 3, 12, 45, tzinfo=UTC), dt.date(2024, 3, 3)),
]
COLS = "id, customer, qty, price, paid, placed, day"
INSERT = f"INSERT INTO {T} ({COLS}) VALUES (%s, %s, %s, %s, %s, %s, %s)"

conn = psycopg2.connect(conninfo())
checks = Checks(CLIENT, on_failure=lambda: conn.rollback())


def one(query, params=None):
    with conn.cursor() as cur:
        cur.execute(query, params)
        row = cur.fetchone()
    conn.commit()
    return row


def same_instant(got, want, what):
    if not isinstance(got, dt.datetime) or got.tzinfo is None or got != want:
        raise AssertionError(f"{what}: got {got!r}, expected {want!r}")


def connect():
    eq(conn.closed, 0, "closed")
    assert one("SELECT version()")[0].startswith("PostgreSQL "), "version() names PostgreSQL"
    assert conn.server_version >= 100000, conn.server_version


def select_int4_literal():
    with conn.cursor() as cur:
        cur.execute("SELECT 1 AS one")
        eq(cur.fetchone()[0], 1, "value")
        eq(cur.description[0].type_code, 23, "type OID of SELECT 1")
    conn.commit()


def create_table():
    with conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {T} CASCADE")
        cur.execute(
            f"CREATE TABLE {T} (id BIGINT PRIMARY KEY, customer TEXT NOT NULL, qty INTEGER, "
            "price NUMERIC(10,2), paid BOOLEAN, placed TIMESTAMPTZ, day DATE)"
        )
    conn.commit()
    eq(one(f"SELECT count(*) FROM {T}")[0], 0, "rows in the new table")


def insert_params():
    with conn.cursor() as cur:
        cur.executemany(INSERT, ROWS[:2])
        cur.execute(INSERT, ROWS[2])
    conn.commit()
    eq(one(f"SELECT count(*) FROM {T}")[0], 3, "rows")


def select_typed_params():
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT {COLS} FROM {T} WHERE customer = %s AND qty >= %s AND placed < %s ORDER BY id",
            ("ada", 3, dt.datetime(2024, 3, 10, tzinfo=UTC)),
        )
        rows = cur.fetchall()
    conn.commit()
    eq(len(rows), 2, "rows of ada")
    for got, want in zip(rows, [ROWS[0], ROWS[2]]):
        for i, (g, w) in enumerate(zip(got, want)):
            if isinstance(w, dt.datetime):
                same_instant(g, w, f"column {i} of id {want[0]}")
            else:
                eq(g, w, f"column {i} of id {want[0]}")


def aggregate():
    total, qty, n = one(f"SELECT sum(qty * price), sum(qty), count(*) FROM {T}")
    # 3 * 2.50 + 5 * 10.00 + 7 * 1.25 = 66.25
    eq(Decimal(total).compare(Decimal("66.25")), Decimal(0), f"sum(qty * price) = {total}")
    eq(qty, 15, "sum(qty)")
    eq(n, 3, "count(*)")


def execute_values():
    with conn.cursor() as cur:
        psycopg2.extras.execute_values(
            cur,
            f"INSERT INTO {T} (id, customer, qty, price) VALUES %s",
            [(10, "cy", 1, Decimal("1.00")), (11, "cy", 2, Decimal("2.00")), (12, "cy", 4, None)],
        )
    conn.commit()
    eq(one(f"SELECT sum(qty), count(price) FROM {T} WHERE customer = %s", ("cy",)), (7, 2), "cy's rows")


def materialized_view():
    with conn.cursor() as cur:
        cur.execute(
            f"CREATE MATERIALIZED VIEW {V} AS SELECT customer, count(*) AS n, sum(qty) AS qty "
            f"FROM {T} WHERE id < 10 GROUP BY customer"
        )
        cur.execute(INSERT, (4, "bob", 11, Decimal("3.00"), False, dt.datetime(2024, 3, 4, tzinfo=UTC), dt.date(2024, 3, 4)))
        cur.execute("FLUSH")
        cur.execute(f"SELECT customer, n, qty FROM {V} ORDER BY customer")
        before = cur.fetchall()
    conn.commit()
    with conn.cursor() as cur:
        cur.execute("FLUSH")
        cur.execute(f"SELECT customer, n, qty FROM {V} ORDER BY customer")
        rows = cur.fetchall()
    conn.commit()
    # The driver's transaction is the session's own until its commit: the view shows
    # committed rows only (bob's second order after the commit).
    eq(before, [("ada", 2, 10), ("bob", 1, 5)], "view rows before the commit")
    eq(rows, [("ada", 2, 10), ("bob", 2, 16)], "view rows")


def dict_cursor():
    with conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cur:
        cur.execute(f"SELECT id, customer AS who FROM {T} WHERE id = %(id)s", {"id": 2})
        row = cur.fetchone()
    conn.commit()
    eq(dict(row), {"id": 2, "who": "bob"}, "row as a dict")


def commit():
    with conn.cursor() as cur:
        cur.execute(INSERT, (20, "dee", 4, Decimal("0.50"), True, None, None))
    conn.commit()
    eq(one(f"SELECT count(*) FROM {T} WHERE id = 20")[0], 1, "committed row")


def rollback():
    with conn.cursor() as cur:
        cur.execute(INSERT, (21, "dee", 4, Decimal("0.50"), True, None, None))
    conn.rollback()
    eq(one(f"SELECT count(*) FROM {T} WHERE id = 21")[0], 0, "rows left by a rolled-back insert")


def error_then_rollback():
    # After an error psycopg2 must roll back; the connection is usable again.
    with conn.cursor() as cur:
        try:
            cur.execute(INSERT, (1, "dup", 1, None, None, None, None))
            raise AssertionError("a duplicate primary key was accepted")
        except psycopg2.Error as e:
            eq(e.pgcode, "23505", "SQLSTATE of a duplicate key")
    conn.rollback()
    eq(one(f"SELECT customer FROM {T} WHERE id = 1")[0], "ada", "row 1 after the error")


def copy_from_csv():
    data = io.StringIO("id,customer,qty\n30,eve,2\n31,eve,6\n")
    with conn.cursor() as cur:
        cur.copy_expert(f"COPY {T} (id, customer, qty) FROM STDIN WITH (FORMAT csv, HEADER)", data)
    conn.commit()
    eq(one(f"SELECT sum(qty) FROM {T} WHERE customer = 'eve'")[0], 8, "eve's sum(qty)")


def copy_from_text():
    data = io.StringIO("32\tfay\t9\n33\tfay\t\\N\n")
    with conn.cursor() as cur:
        cur.copy_from(data, T, columns=("id", "customer", "qty"))
    conn.commit()
    eq(one(f"SELECT count(*), sum(qty) FROM {T} WHERE customer = 'fay'"), (2, 9), "fay's rows")


def copy_to_stdout():
    out = io.StringIO()
    with conn.cursor() as cur:
        cur.copy_expert(f"COPY (SELECT id, qty FROM {T} WHERE id <= 3 ORDER BY id) TO STDOUT WITH CSV", out)
    conn.commit()
    eq(out.getvalue(), "1,3\n2,5\n3,7\n", "copied CSV")


def named_cursor():
    with conn.cursor(name="pg2_cur") as cur:
        cur.itersize = 2
        cur.execute(f"SELECT id FROM {T} WHERE id <= 3 ORDER BY id")
        ids = [r[0] for r in cur]
    conn.commit()
    eq(ids, [1, 2, 3], "ids through a named cursor")


for name, fn in [
    ("connect", connect),
    ("select_int4_literal", select_int4_literal),
    ("create_table", create_table),
    ("insert_params", insert_params),
    ("select_typed_params", select_typed_params),
    ("aggregate", aggregate),
    ("execute_values", execute_values),
    ("materialized_view", materialized_view),
    ("dict_cursor", dict_cursor),
    ("commit", commit),
    ("rollback", rollback),
    ("error_then_rollback", error_then_rollback),
    ("copy_from_csv", copy_from_csv),
    ("copy_from_text", copy_from_text),
    ("copy_to_stdout", copy_to_stdout),
    ("named_cursor", named_cursor),
]:
    checks.run(name, fn)
conn.close()
finish()
