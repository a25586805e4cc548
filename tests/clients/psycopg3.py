"""psycopg 3 against Weir: server-side parameters (the default), client-side (simple
protocol) parameters, binary results, prepared statements, COPY, transactions and cursors."""

import datetime as dt
from decimal import Decimal

import psycopg
from psycopg import sql  # noqa: F401  (imported as applications do)

from checks import Checks, conninfo, eq, finish

CLIENT = "psycopg3"
T = "pg3_orders"
V = "pg3_by_customer"
UTC = dt.timezone.utc
ROWS = [
    (1, "ada", 3, Decimal("2.50"), True, dt.datetime(2024, 3, 1, 10, 0, tzinfo=UTC), dt.date(2024, 3, 1)),
    (2, "bob", 5, Decimal("10.00"), False, dt.datetime(2024, 3, 2, 11, 30, tzinfo=UTC), dt.date(2024, 3, 2)),
    (3, "ada", 7, Decimal("1.25"), True, dt.datetime(2024, 3, 3, 12, 45, tzinfo=UTC), dt.date(2024, 3, 3)),
]
INSERT = f"INSERT INTO {T} (id, customer, qty, price, paid, placed, day) VALUES (%s, %s, %s, %s, %s, %s, %s)"

conn = psycopg.connect(conninfo())
checks = Checks(CLIENT, on_failure=lambda: conn.rollback())


def count(where="TRUE"):
    with conn.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {T} WHERE {where}")
        n = cur.fetchone()[0]
    conn.commit()
    return n


def connect():
    eq(conn.info.status, psycopg.pq.ConnStatus.OK, "status")
    with conn.cursor() as cur:
        cur.execute("SELECT version()")
        assert cur.fetchone()[0].startswith("PostgreSQL "), "version() names PostgreSQL"
    assert conn.info.server_version >= 100000, conn.info.server_version
    conn.commit()


def select_int4_literal():
    # PostgreSQL types the literal 1 as integer (OID 23).
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
    eq(count(), 0, "rows in the new table")


def insert_params():
    with conn.cursor() as cur:
        cur.executemany(INSERT, ROWS)
    conn.commit()
    eq(count(), 3, "rows after executemany")


def select_typed_params():
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT id, customer, qty, price, paid, placed, day FROM {T} "
            "WHERE customer = %s AND qty >= %s AND placed < %s ORDER BY id",
            ("ada", 3, dt.datetime(2024, 3, 10, tzinfo=UTC)),
        )
        rows = cur.fetchall()
    conn.commit()
    eq(len(rows), 2, "rows of ada")
    for got, want in zip(rows, [ROWS[0], ROWS[2]]):
        for i, (g, w) in enumerate(zip(got, want)):
            eq(g, w, f"column {i} of id {want[0]}")


def aggregate():
    # 3 * 2.50 + 5 * 10.00 + 7 * 1.25 = 66.25; 3 + 5 + 7 = 15.
    with conn.cursor() as cur:
        cur.execute(f"SELECT sum(qty * price), sum(qty), count(*) FROM {T}")
        total, qty, n = cur.fetchone()
    conn.commit()
    eq(Decimal(total).compare(Decimal("66.25")), Decimal(0), f"sum(qty * price) = {total}")
    eq(qty, 15, "sum(qty)")
    eq(n, 3, "count(*)")


def materialized_view():
    with conn.cursor() as cur:
        cur.execute(
            f"CREATE MATERIALIZED VIEW {V} AS SELECT customer, count(*) AS n, sum(qty) AS qty "
            f"FROM {T} GROUP BY customer"
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
    # ada: 3 + 7; bob: 5 + 11.
    eq(rows, [("ada", 2, 10), ("bob", 2, 16)], "view rows")


def param_float_vs_numeric():
    # A Python float is a float8 parameter; PostgreSQL compares numeric with it as float8.
    with conn.cursor() as cur:
        cur.execute(f"SELECT id FROM {T} WHERE id <= 4 AND price > %s ORDER BY id", (2.0,))
        ids = [r[0] for r in cur.fetchall()]
    conn.commit()
    # prices 2.50, 10.00, 1.25, 3.00
    eq(ids, [1, 2, 4], "ids with price > 2.0")


def param_interval_arith():
    # datetime - timedelta: timestamptz - interval parameters.
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT id FROM {T} WHERE id <= 4 AND placed > %s - %s ORDER BY id",
            (dt.datetime(2024, 3, 3, 13, 0, tzinfo=UTC), dt.timedelta(days=1)),
        )
        ids = [r[0] for r in cur.fetchall()]
    conn.commit()
    # after 2024-03-02 13:00: ids 3 (March 3, 12:45) and 4 (March 4)
    eq(ids, [3, 4], "ids placed after March 2, 13:00")


def select_param_echo():
    # Parameters selected back keep their types (int2 and text as psycopg sends them).
    with conn.cursor() as cur:
        cur.execute("SELECT %s AS n, %s AS s", (7, "x"))
        eq(cur.fetchone(), (7, "x"), "selected parameters")
    conn.commit()


def select_param_echo_binary():
    with conn.cursor(binary=True) as cur:
        cur.execute("SELECT %s AS n, %s AS s", (7, "x"))
        eq(cur.fetchone(), (7, "x"), "selected parameters in binary")
    conn.commit()


def null_param():
    # psycopg sends None untyped: PostgreSQL's NULL of type unknown, which coalesce resolves.
    with conn.cursor() as cur:
        cur.execute("SELECT coalesce(%s, 'fallback') AS c, %s::int AS i", (None, None))
        eq(cur.fetchone(), ("fallback", None), "untyped NULL parameters")
    conn.commit()


def simple_protocol():
    # A ClientCursor merges the parameters into the text and sends a simple Query.
    with psycopg.ClientCursor(conn) as cur:
        cur.execute(f"SELECT customer, qty, price, day FROM {T} WHERE id = %s AND customer = %s", (2, "bob"))
        row = cur.fetchone()
    conn.commit()
    eq(row, ("bob", 5, Decimal("10.00"), dt.date(2024, 3, 2)), "row 2")


def binary_results():
    with conn.cursor(binary=True) as cur:
        cur.execute(f"SELECT id, customer, qty, price, paid, placed, day FROM {T} WHERE id = %s", (3,))
        row = cur.fetchone()
    conn.commit()
    eq(row, ROWS[2], "row 3 in binary")


def binary_numeric_38_digits():
    # avg(bigint) is numeric, held at 16 decimals: this one is 35 digits there, past the 28
    # that rust_decimal holds. Expected: (2^63 - 1 + 2^63 - 1 - (2^63 - 2)) / 3 rounded as
    # PostgreSQL 15 rounds it (19 integer digits keep no decimals: 3074457345618258603).
    q = """SELECT avg(x), sum(x) FROM (VALUES (9223372036854775807::bigint),
           (9223372036854775807), (-9223372036854775806)) v(x)"""
    for binary in (False, True):
        with conn.cursor(binary=binary) as cur:
            cur.execute(q)
            row = cur.fetchone()
        conn.commit()
        eq(
            row,
            (Decimal("3074457345618258603"), Decimal(9223372036854775808)),
            f"avg and sum of bigints ({'binary' if binary else 'text'})",
        )


def binary_params():
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT sum(qty) FROM {T} WHERE customer = %b AND day >= %b",
            ("ada", dt.date(2024, 3, 2)),
        )
        eq(cur.fetchone()[0], 7, "sum(qty) of ada from March 2")
    conn.commit()


def prepared():
    # prepare=True makes a named server-side statement, then executes it again by name.
    got = []
    with conn.cursor() as cur:
        for i in (1, 2, 3):
            cur.execute(f"SELECT qty FROM {T} WHERE id = %s", (i,), prepare=True)
            got.append(cur.fetchone()[0])
    conn.commit()
    eq(got, [3, 5, 7], "qty of ids 1..3")


def pipeline():
    with conn.pipeline():
        with conn.cursor() as cur:
            cur.execute(INSERT, (10, "cy", 1, Decimal("1.00"), True, dt.datetime(2024, 4, 1, tzinfo=UTC), dt.date(2024, 4, 1)))
            cur.execute(INSERT, (11, "cy", 2, Decimal("1.00"), True, dt.datetime(2024, 4, 2, tzinfo=UTC), dt.date(2024, 4, 2)))
            cur.execute(f"SELECT sum(qty) FROM {T} WHERE customer = %s", ("cy",))
            total = cur.fetchone()[0]
    conn.commit()
    eq(total, 3, "sum(qty) of cy")


def commit():
    with conn.transaction():
        with conn.cursor() as cur:
            cur.execute(INSERT, (20, "dee", 4, Decimal("0.50"), True, dt.datetime(2024, 5, 1, tzinfo=UTC), dt.date(2024, 5, 1)))
    conn.commit()
    eq(count("id = 20"), 1, "committed row")


def rollback():
    try:
        with conn.transaction():
            with conn.cursor() as cur:
                cur.execute(INSERT, (21, "dee", 4, Decimal("0.50"), True, dt.datetime(2024, 5, 2, tzinfo=UTC), dt.date(2024, 5, 2)))
            raise psycopg.Rollback()
    finally:
        conn.commit()
    eq(count("id = 21"), 0, "rows left by a rolled-back insert")


def copy_from_text():
    with conn.cursor() as cur:
        with cur.copy(f"COPY {T} (id, customer, qty, price, paid, placed, day) FROM STDIN") as copy:
            copy.write_row((30, "eve", 2, Decimal("4.00"), False, dt.datetime(2024, 6, 1, tzinfo=UTC), dt.date(2024, 6, 1)))
            copy.write_row((31, "eve", 6, None, None, None, None))
    conn.commit()
    with conn.cursor() as cur:
        cur.execute(f"SELECT sum(qty), count(price) FROM {T} WHERE customer = 'eve'")
        eq(cur.fetchone(), (8, 1), "eve's sum(qty) and count(price)")
    conn.commit()


def copy_from_binary():
    with conn.cursor() as cur:
        with cur.copy(f"COPY {T} (id, customer, qty) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "text", "int4"])
            copy.write_row((40, "fay", 9))
    conn.commit()
    eq(count("customer = 'fay' AND qty = 9"), 1, "row copied in binary")


def copy_to_stdout():
    with conn.cursor() as cur:
        with cur.copy(f"COPY (SELECT id, qty FROM {T} WHERE id <= 3 ORDER BY id) TO STDOUT") as copy:
            rows = [tuple(int(x) for x in r) for r in copy.rows()]
    conn.commit()
    eq(rows, [(1, 3), (2, 5), (3, 7)], "copied rows")


def server_side_cursor():
    # A named cursor is DECLARE ... CURSOR, then FETCH FORWARD n.
    with conn.cursor(name="pg3_cur") as cur:
        cur.itersize = 2
        cur.execute(f"SELECT id FROM {T} WHERE id <= 3 ORDER BY id")
        ids = [r[0] for r in cur]
    conn.commit()
    eq(ids, [1, 2, 3], "ids through a server-side cursor")


def cancel_and_timeout():
    # conn.cancel() sends a CancelRequest on a new connection (as psql's Ctrl-C does);
    # statement_timeout cancels on its own. Both are 57014 (QueryCanceled).
    import threading
    import time

    with conn.cursor() as cur:
        done = threading.Event()

        def cancel_until_done():
            while not done.wait(0.3):
                conn.cancel()

        threading.Thread(target=cancel_until_done, daemon=True).start()
        started = time.monotonic()
        try:
            cur.execute("SELECT pg_sleep(60)")
            raise AssertionError("pg_sleep(60) was not canceled")
        except psycopg.errors.QueryCanceled as e:
            assert "user request" in str(e), str(e)
        finally:
            done.set()
        conn.rollback()
        cur.execute("SET statement_timeout = '300ms'")
        try:
            cur.execute("SELECT count(*) FROM generate_series(1, 4000000000) g")
            raise AssertionError("the long query was not canceled")
        except psycopg.errors.QueryCanceled as e:
            assert "statement timeout" in str(e), str(e)
        conn.rollback()
        cur.execute("SET statement_timeout = 0")
        assert time.monotonic() - started < 20, "canceled late"
        cur.execute("SELECT 1")
        eq(cur.fetchone()[0], 1, "the connection goes on")
    conn.commit()


def array_params():
    # Lists are sent as declared arrays; selected back they keep their type and elements
    # (the numeric[] came back as the text '{2,28}'). In text format a quoted "NULL" is a
    # string and "" the empty string, as PostgreSQL reads array text.
    for binary in (False, True):
        with conn.cursor(binary=binary) as cur:
            cur.execute("SELECT %s AS a", ([Decimal("1.5"), Decimal("2.75")],))
            eq(cur.fetchone()[0], [Decimal("1.5"), Decimal("2.75")], f"numeric[] (binary={binary})")
            cur.execute("SELECT %s AS a", ([1, None, 3],))
            eq(cur.fetchone()[0], [1, None, 3], f"int[] (binary={binary})")
            # psycopg sends a list of strings untyped in text format (PostgreSQL then returns
            # the text); the cast reads it as text[].
            cur.execute("SELECT %s::text[] AS a", (["NULL", "", " b ", None],))
            eq(cur.fetchone()[0], ["NULL", "", " b ", None], f"text[] (binary={binary})")
            cur.execute(f"SELECT count(*) FROM {T} WHERE customer = ANY(%s::text[])", (["ada", "NULL"],))
            eq(cur.fetchone()[0], 2, f"= ANY of a text[] (binary={binary})")
        conn.commit()


def rollback_at_disconnect():
    # A block left open when its connection closes is rolled back, as in PostgreSQL.
    other = psycopg.connect(conninfo())
    with other.cursor() as cur:
        cur.execute(f"INSERT INTO {T} (id, customer) VALUES (900, 'gone')")
    other.close()
    eq(count("id = 900"), 0, "rows of the dropped connection's open block")


def text_param_ranges():
    # Text parameters PostgreSQL's input functions refuse, or that Weir cannot hold, are
    # errors, never stored as NULL or Infinity: a timestamp past 2262 (22008), float text
    # past double precision's range (22003, as PostgreSQL's float8in answers).
    other = psycopg.connect(conninfo(), autocommit=True)
    with other.cursor() as cur:
        for sql, value, code in [
            ("SELECT %t::timestamp", "9999-12-31 23:59:59", "22008"),
            ("SELECT %t::float8", "1e400", "22003"),
        ]:
            try:
                cur.execute(sql, (value,))
                raise AssertionError(f"{value!r} read as {cur.fetchone()[0]!r}")
            except psycopg.Error as e:
                eq(e.sqlstate, code, f"SQLSTATE of {value!r}")
        cur.execute("SELECT %t::float8, %t::timestamp", ("-Infinity", "2024-03-01 10:00:00"))
        eq(cur.fetchone(), (float("-inf"), dt.datetime(2024, 3, 1, 10, 0)), "values in range")
    other.close()


def failed_commit_ends_block():
    # A COMMIT that fails (another session changed the row: 40001) ends the block, as in
    # PostgreSQL: the connection is idle, so the next `transaction()` opens a new block
    # (BEGIN, not a SAVEPOINT of a block that no longer exists) and its rollback undoes it.
    a = psycopg.connect(conninfo(), autocommit=True)
    b = psycopg.connect(conninfo(), autocommit=True)
    a.execute("DROP TABLE IF EXISTS pg3_fc")
    a.execute("CREATE TABLE pg3_fc (k INT PRIMARY KEY, v INT)")
    a.execute("INSERT INTO pg3_fc VALUES (1, 0)")
    a.execute("BEGIN")
    a.execute("UPDATE pg3_fc SET v = 1 WHERE k = 1")
    b.execute("UPDATE pg3_fc SET v = 2 WHERE k = 1")
    try:
        a.execute("COMMIT")
        raise AssertionError("the conflicting COMMIT succeeded")
    except psycopg.Error as e:
        eq(e.sqlstate, "40001", "SQLSTATE of the conflicting COMMIT")
    eq(a.info.transaction_status, psycopg.pq.TransactionStatus.IDLE, "status after it")
    try:
        with a.transaction():
            a.execute("INSERT INTO pg3_fc VALUES (2, 2)")
            raise RuntimeError("undo")
    except RuntimeError:
        pass
    eq(b.execute("SELECT count(*), sum(v) FROM pg3_fc").fetchone(), (1, 2), "rows after")
    a.execute("DROP TABLE pg3_fc")
    a.close()
    b.close()


def parse_and_bind_errors_abort_block():
    # An error of the extended protocol's Parse (a syntax error, an unknown column) or Bind
    # (a parameter that does not decode) aborts the block as any failed statement does
    # (PostgreSQL: 25P02 until its end); its COMMIT then rolls the block back.
    c = psycopg.connect(conninfo(), autocommit=True)
    c.execute("DROP TABLE IF EXISTS pg3_pe")
    c.execute("CREATE TABLE pg3_pe (id INT)")
    c.autocommit = False
    bad = [
        ("SELECT %s::int", ("12x",), "22P02"),
        ("SELEC 1", None, "42601"),
        ("SELECT nocol FROM pg3_pe WHERE id = %s", (1,), "42703"),
    ]
    for prepare in (True, False):
        for query, params, code in bad:
            c.execute("INSERT INTO pg3_pe VALUES (1)")
            try:
                c.execute(query, params, prepare=prepare)
                raise AssertionError(f"{query!r} succeeded")
            except psycopg.Error as e:
                eq(e.sqlstate, code, f"SQLSTATE of {query!r}")
            eq(c.info.transaction_status, psycopg.pq.TransactionStatus.INERROR, "status after it")
            try:
                c.execute("SELECT 1")
                raise AssertionError("a statement after the error ran")
            except psycopg.Error as e:
                eq(e.sqlstate, "25P02", "SQLSTATE of the next statement")
            c.commit()
    c.autocommit = True
    eq(c.execute("SELECT count(*) FROM pg3_pe").fetchone(), (0,), "rows after the commits")
    c.execute("DROP TABLE pg3_pe")
    c.close()


def implicit_transaction_ddl():
    # The statements of one simple Query are one implicit transaction, DDL included: a later
    # statement's failure keeps the table a DROP dropped and removes one a CREATE created.
    c = psycopg.connect(conninfo(), autocommit=True)
    c.execute("DROP TABLE IF EXISTS pg3_keep")
    c.execute("DROP TABLE IF EXISTS pg3_gone")
    c.execute("CREATE TABLE pg3_keep (id INT)")
    c.execute("INSERT INTO pg3_keep VALUES (1), (2)")
    with c.cursor() as cur:
        for script in [
            "DROP TABLE pg3_keep; SELECT 1 / 0",
            "CREATE TABLE pg3_gone (id INT); INSERT INTO pg3_gone VALUES (1); SELECT 1 / 0",
            # Dropped and created again under the same name: the old table comes back.
            "DROP TABLE pg3_keep; CREATE TABLE pg3_keep (z TEXT); SELECT 1 / 0",
        ]:
            try:
                # No parameters: psycopg sends the string as one simple Query.
                cur.execute(script.encode(), prepare=False)
                raise AssertionError(f"{script!r} succeeded")
            except psycopg.Error as e:
                eq(e.sqlstate, "22012", "SQLSTATE of the script")
    eq(c.execute("SELECT count(*) FROM pg3_keep").fetchone(), (2,), "rows of the dropped table")
    eq(
        c.execute("SELECT id FROM pg3_keep ORDER BY id").fetchall(),
        [(1,), (2,)],
        "columns and rows of the table dropped and created again",
    )
    eq(
        c.execute("SELECT count(*) FROM pg_catalog.pg_tables WHERE tablename = 'pg3_gone'").fetchone(),
        (0,),
        "tables named pg3_gone",
    )
    c.execute("DROP TABLE pg3_keep")
    c.close()


def copy_special_values_in_session_zone():
    # COPY reads 'today' on the clock of the session's zone, as a cast does (PostgreSQL):
    # with the zone at UTC+14, the date is the one there, not UTC's.
    c = psycopg.connect(conninfo(), autocommit=True)
    c.execute("DROP TABLE IF EXISTS pg3_today")
    c.execute("CREATE TABLE pg3_today (d DATE, ts TIMESTAMP)")
    c.execute("SET TIME ZONE 'Pacific/Kiritimati'")
    here = "CAST(now() AT TIME ZONE 'Pacific/Kiritimati' AS DATE)"
    before = c.execute(f"SELECT {here}").fetchone()[0]
    with c.cursor() as cur:
        with cur.copy("COPY pg3_today (d, ts) FROM STDIN") as copy:
            copy.write(b"today\ttoday\n")
    after = c.execute(f"SELECT {here}").fetchone()[0]
    d, ts = c.execute("SELECT d, ts FROM pg3_today").fetchone()
    if d not in (before, after):
        raise AssertionError(f"'today' read as {d}, the zone's date being {before} then {after}")
    eq(ts, dt.datetime(d.year, d.month, d.day), "'today' as a timestamp: that date's midnight")
    c.execute("DROP TABLE pg3_today")
    c.close()


def text_datetime_params():
    # Dates, times and intervals sent as text parameters (`%t`; node-postgres and psycopg2
    # send every value so) are read as PostgreSQL reads their text: a time without seconds,
    # an interval in PostgreSQL's own output form, a timestamptz naming its zone.
    c = psycopg.connect(conninfo(), autocommit=True)
    cases = [
        ("SELECT %t::time", "13:00", dt.time(13, 0)),
        ("SELECT %t::time", "12:34:56.5", dt.time(12, 34, 56, 500000)),
        ("SELECT %t::interval", "-1 days +02:00:00", dt.timedelta(days=-1, hours=2)),
        ("SELECT %t::interval", "0", dt.timedelta(0)),
        ("SELECT %t::interval", "1 day 02:03:04", dt.timedelta(days=1, seconds=7384)),
        # Los Angeles is 8 hours behind UTC in January.
        (
            "SELECT %t::timestamptz",
            "2000-01-01 00:00:00 America/Los_Angeles",
            dt.datetime(2000, 1, 1, 8, 0, tzinfo=UTC),
        ),
        ("SELECT %t::timestamptz", "2000-01-01 00:00:00 UTC", dt.datetime(2000, 1, 1, tzinfo=UTC)),
        ("SELECT %t::date", "2024-02-29", dt.date(2024, 2, 29)),
    ]
    for query, text, expected in cases:
        eq(c.execute(query, (text,)).fetchone()[0], expected, f"{query} with {text!r}")
    try:
        c.execute("SELECT %t::time", ("noon-ish",))
        raise AssertionError("a time parameter that is no time was read")
    except psycopg.Error as e:
        eq(e.sqlstate, "22007", "SQLSTATE of a time parameter that is no time")
    c.close()


def parameter_status():
    # A SET of a setting PostgreSQL reports (TimeZone, DateStyle, ...) sends its new value
    # (ParameterStatus); psycopg shows timestamptz values in the reported zone.
    c = psycopg.connect(conninfo(), autocommit=True)
    eq(c.info.parameter_status("DateStyle"), "ISO, MDY", "DateStyle at startup")
    c.execute("SET TimeZone = 'Asia/Kolkata'")
    eq(c.info.parameter_status("TimeZone"), "Asia/Kolkata", "TimeZone after SET")
    ts = c.execute("SELECT '2020-06-15 12:00+00'::timestamptz").fetchone()[0]
    eq(ts.utcoffset(), dt.timedelta(hours=5, minutes=30), "offset of a timestamptz")
    eq(ts, dt.datetime(2020, 6, 15, 12, 0, tzinfo=UTC), "the instant")
    c.execute("BEGIN")
    c.execute("SET TimeZone = 'America/New_York'")
    eq(c.info.parameter_status("TimeZone"), "America/New_York", "TimeZone in a block")
    c.execute("ROLLBACK")
    eq(c.info.parameter_status("TimeZone"), "Asia/Kolkata", "TimeZone after ROLLBACK")
    c.execute("SET application_name = 'weir-check'")
    eq(c.info.parameter_status("application_name"), "weir-check", "application_name")
    try:
        c.execute("SET IntervalStyle = 'iso_8601'")
        raise AssertionError("an IntervalStyle Weir does not write was accepted")
    except psycopg.Error as e:
        eq(e.sqlstate, "22023", "SQLSTATE of an IntervalStyle Weir does not write")
    c.close()


for name, fn in [
    ("connect", connect),
    ("select_int4_literal", select_int4_literal),
    ("create_table", create_table),
    ("insert_params", insert_params),
    ("select_typed_params", select_typed_params),
    ("aggregate", aggregate),
    ("materialized_view", materialized_view),
    ("param_float_vs_numeric", param_float_vs_numeric),
    ("param_interval_arith", param_interval_arith),
    ("select_param_echo", select_param_echo),
    ("select_param_echo_binary", select_param_echo_binary),
    ("null_param", null_param),
    ("simple_protocol", simple_protocol),
    ("binary_results", binary_results),
    ("binary_numeric_38_digits", binary_numeric_38_digits),
    ("binary_params", binary_params),
    ("prepared", prepared),
    ("pipeline", pipeline),
    ("commit", commit),
    ("rollback", rollback),
    ("copy_from_text", copy_from_text),
    ("copy_from_binary", copy_from_binary),
    ("copy_to_stdout", copy_to_stdout),
    ("server_side_cursor", server_side_cursor),
    ("cancel_and_timeout", cancel_and_timeout),
    ("array_params", array_params),
    ("rollback_at_disconnect", rollback_at_disconnect),
    ("text_param_ranges", text_param_ranges),
    ("failed_commit_ends_block", failed_commit_ends_block),
    ("parse_and_bind_errors_abort_block", parse_and_bind_errors_abort_block),
    ("implicit_transaction_ddl", implicit_transaction_ddl),
    ("copy_special_values_in_session_zone", copy_special_values_in_session_zone),
    ("text_datetime_params", text_datetime_params),
    ("parameter_status", parameter_status),
]:
    checks.run(name, fn)
conn.close()
finish()
