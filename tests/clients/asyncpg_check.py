"""asyncpg against Weir: binary-format parameters and results, prepared statements,
executemany, transactions, COPY (asyncpg's COPY FROM is always binary) and the type
introspection asyncpg runs against pg_type when it meets a type it has no built-in codec
for (arrays of bigint, or a codec set up by name with set_type_codec)."""

import asyncio
import datetime as dt
import os
from decimal import Decimal

import asyncpg

from checks import Checks, eq, finish, reason

CLIENT = "asyncpg"
T = "apg_orders"
V = "apg_by_customer"
UTC = dt.timezone.utc
ROWS = [
    (1, "ada", 3, Decimal("2.50"), True, dt.datetime(2024, 3, 1, 10, 0, tzinfo=UTC), dt.date(2024, 3, 1)),
    (2, "bob", 5, Decimal("10.00"), False, dt.datetime(2024, 3, 2, 11, 30, tzinfo=UTC), dt.date(2024, 3, 2)),
    (3, "ada", 7, Decimal("1.25"), True, dt.datetime(2024, 3, 3, 12, 45, tzinfo=UTC), dt.date(2024, 3, 3)),
]
COLS = "id, customer, qty, price, paid, placed, day"
INSERT = f"INSERT INTO {T} ({COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"


async def main():
    results = []

    async def run(name, fn):
        try:
            await fn()
        except Exception as exc:
            print(f"FAIL {CLIENT} {name}: {reason(exc)}", flush=True)
            return
        print(f"PASS {CLIENT} {name}", flush=True)

    conn = None

    async def connect():
        nonlocal conn
        conn = await asyncpg.connect(
            host=os.environ.get("PGHOST", "127.0.0.1"),
            port=int(os.environ.get("PGPORT", "9347")),
            user=os.environ.get("PGUSER", "weir"),
            database=os.environ.get("PGDATABASE", "weir"),
        )
        version = await conn.fetchval("SELECT version()")
        assert version.startswith("PostgreSQL "), version
        assert conn.get_server_version().major >= 10, conn.get_server_version()

    await run("connect", connect)
    if conn is None:
        finish()

    async def select_int4_literal():
        stmt = await conn.prepare("SELECT 1 AS one")
        eq(stmt.get_attributes()[0].type.name, "int4", "type of SELECT 1")
        eq(await stmt.fetchval(), 1, "value")

    async def create_table():
        await conn.execute(f"DROP TABLE IF EXISTS {T} CASCADE")
        await conn.execute(
            f"CREATE TABLE {T} (id BIGINT PRIMARY KEY, customer TEXT NOT NULL, qty INTEGER, "
            "price NUMERIC(10,2), paid BOOLEAN, placed TIMESTAMPTZ, day DATE)"
        )
        eq(await conn.fetchval(f"SELECT count(*) FROM {T}"), 0, "rows in the new table")

    async def executemany():
        await conn.executemany(INSERT, ROWS)
        eq(await conn.fetchval(f"SELECT count(*) FROM {T}"), 3, "rows")

    async def select_typed_params():
        rows = await conn.fetch(
            f"SELECT {COLS} FROM {T} WHERE customer = $1 AND qty >= $2 AND placed < $3 ORDER BY id",
            "ada", 3, dt.datetime(2024, 3, 10, tzinfo=UTC),
        )
        eq(len(rows), 2, "rows of ada")
        for got, want in zip(rows, [ROWS[0], ROWS[2]]):
            for i, (g, w) in enumerate(zip(tuple(got), want)):
                eq(g, w, f"column {i} of id {want[0]}")

    async def aggregate():
        total, qty, n = await conn.fetchrow(f"SELECT sum(qty * price), sum(qty), count(*) FROM {T}")
        eq(Decimal(total).compare(Decimal("66.25")), Decimal(0), f"sum(qty * price) = {total}")
        eq(qty, 15, "sum(qty)")
        eq(n, 3, "count(*)")

    async def materialized_view():
        await conn.execute(
            f"CREATE MATERIALIZED VIEW {V} AS SELECT customer, count(*) AS n, sum(qty) AS qty "
            f"FROM {T} WHERE id < 10 GROUP BY customer"
        )
        await conn.execute(INSERT, 4, "bob", 11, Decimal("3.00"), False, dt.datetime(2024, 3, 4, tzinfo=UTC), dt.date(2024, 3, 4))
        await conn.execute("FLUSH")
        rows = await conn.fetch(f"SELECT customer, n, qty FROM {V} ORDER BY customer")
        eq([tuple(r) for r in rows], [("ada", 2, 10), ("bob", 2, 16)], "view rows")

    async def prepared():
        stmt = await conn.prepare(f"SELECT qty FROM {T} WHERE id = $1")
        got = [await stmt.fetchval(i) for i in (1, 2, 3)]
        eq(got, [3, 5, 7], "qty of ids 1..3")

    async def limit_param():
        # asyncpg encodes each argument as the type the server described for it.
        rows = await conn.fetch(f"SELECT id FROM {T} ORDER BY id LIMIT $1", 2)
        eq([r["id"] for r in rows], [1, 2], "first two ids")

    async def any_array_param():
        rows = await conn.fetch(f"SELECT id FROM {T} WHERE id = ANY($1) ORDER BY id", [1, 3])
        eq([r["id"] for r in rows], [1, 3], "ids 1 and 3")

    async def introspect_array():
        # bigint[] has no built-in codec: asyncpg asks pg_type about OID 1016 first.
        ids = await conn.fetchval(f"SELECT array_agg(id ORDER BY id) FROM {T} WHERE id <= 3")
        eq(ids, [1, 2, 3], "array_agg(id)")

    async def introspect_codec():
        # set_type_codec looks the type up by name in pg_type (asyncpg's TYPE_BY_NAME query).
        await conn.set_type_codec("numeric", encoder=str, decoder=str, schema="pg_catalog", format="text")
        eq(await conn.fetchval(f"SELECT price FROM {T} WHERE id = $1", 2), "10.00", "numeric as text")
        await conn.reset_type_codec("numeric", schema="pg_catalog")

    async def transaction_commit():
        async with conn.transaction():
            await conn.execute(INSERT, 20, "dee", 4, Decimal("0.50"), True, None, None)
        eq(await conn.fetchval(f"SELECT count(*) FROM {T} WHERE id = 20"), 1, "committed row")

    async def transaction_rollback():
        class Abort(Exception):
            pass

        try:
            async with conn.transaction():
                await conn.execute(INSERT, 21, "dee", 4, Decimal("0.50"), True, None, None)
                raise Abort()
        except Abort:
            pass
        eq(await conn.fetchval(f"SELECT count(*) FROM {T} WHERE id = 21"), 0, "rows left by a rolled-back insert")

    async def cursor():
        # asyncpg cursors are portals of the extended protocol fetched a few rows at a time.
        async with conn.transaction():
            ids = [r["id"] async for r in conn.cursor(f"SELECT id FROM {T} WHERE id <= 3 ORDER BY id", prefetch=2)]
        eq(ids, [1, 2, 3], "ids through a cursor")

    async def copy_records_to_table():
        await conn.copy_records_to_table(T, records=[(30, "eve", 2), (31, "eve", 6)], columns=["id", "customer", "qty"])
        eq(await conn.fetchval(f"SELECT sum(qty) FROM {T} WHERE customer = 'eve'"), 8, "eve's sum(qty)")

    async def copy_from_query():
        import io

        out = io.BytesIO()
        await conn.copy_from_query(f"SELECT id, qty FROM {T} WHERE id <= 3 ORDER BY id", output=out, format="csv")
        eq(out.getvalue(), b"1,3\n2,5\n3,7\n", "copied CSV")

    async def plan_changed():
        # A prepared statement whose table was dropped and created with other column types
        # since: PostgreSQL's 0A000 "cached plan must not change result type" (asyncpg read
        # the new real as the int of its bits), and a fresh prepare reads the new types.
        await conn.execute("DROP TABLE IF EXISTS apg_shape")
        await conn.execute("CREATE TABLE apg_shape (a INT)")
        await conn.execute("INSERT INTO apg_shape VALUES (1)")
        stmt = await conn.prepare("SELECT a FROM apg_shape")
        eq(await stmt.fetchval(), 1, "before the change")
        await conn.execute("DROP TABLE apg_shape")
        await conn.execute("CREATE TABLE apg_shape (a REAL)")
        await conn.execute("INSERT INTO apg_shape VALUES (1.5)")
        try:
            value = await stmt.fetchval()
            raise AssertionError(f"the old statement read {value!r}")
        except asyncpg.exceptions.FeatureNotSupportedError as e:
            assert "cached plan must not change result type" in str(e), str(e)
        stmt = await conn.prepare("SELECT a FROM apg_shape")
        eq(await stmt.fetchval(), 1.5, "prepared again")

    async def insert_plan_changed():
        # A prepared INSERT whose table was created again with narrower columns: values that
        # no longer fit are PostgreSQL's 22003, never stored as NULL.
        await conn.execute("DROP TABLE IF EXISTS apg_narrow")
        await conn.execute("CREATE TABLE apg_narrow (a BIGINT, b INT)")
        ins = await conn.prepare("INSERT INTO apg_narrow VALUES ($1, $2)")
        await ins.fetch(10**12, 1)
        await conn.execute("DROP TABLE apg_narrow")
        await conn.execute("CREATE TABLE apg_narrow (a INT, b SMALLINT)")
        await ins.fetch(5, 2)
        for args in [(10**12, 3), (1, 100000)]:
            try:
                await ins.fetch(*args)
                raise AssertionError(f"{args} was inserted")
            except asyncpg.exceptions.NumericValueOutOfRangeError:
                pass
        rows = [tuple(r) for r in await conn.fetch("SELECT a, b FROM apg_narrow ORDER BY a")]
        eq(rows, [(5, 2)], "rows after the change")

    async def executemany_atomic():
        # executemany sends every row's Bind/Execute before one Sync: PostgreSQL runs them as
        # one implicit transaction, so a duplicate key in the middle stores no row at all
        # (the rows before it were kept, the rows after it run after the error).
        await conn.execute("DROP TABLE IF EXISTS apg_many")
        await conn.execute("CREATE TABLE apg_many (id INT PRIMARY KEY, v INT)")
        try:
            await conn.executemany(
                "INSERT INTO apg_many VALUES ($1, $2)", [(1, 1), (2, 2), (2, 3), (4, 4), (5, 5)]
            )
            raise AssertionError("the duplicate key was accepted")
        except asyncpg.exceptions.UniqueViolationError:
            pass
        eq(await conn.fetchval("SELECT count(*) FROM apg_many"), 0, "rows after the failed batch")
        await conn.executemany("INSERT INTO apg_many VALUES ($1, $2)", [(1, 1), (2, 2)])
        eq(await conn.fetchval("SELECT count(*) FROM apg_many"), 2, "rows after a good batch")

    async def numeric_param_keeps_decimals():
        # asyncpg lets the server type its parameters: beside a numeric(10,2) column $1 is
        # `numeric`, without the column's scale (PostgreSQL types parameters without type
        # modifiers), so 1.005 is not rounded to 1.01 before it is compared or added; a
        # write rounds it to the column's scale (1.005 stored as 1.01, half away from zero).
        await conn.execute("DROP TABLE IF EXISTS apg_num")
        await conn.execute("CREATE TABLE apg_num (id INT, v NUMERIC(10,2))")
        await conn.execute("INSERT INTO apg_num VALUES (1, 1.01), (2, 1.00)")
        eq(await conn.fetch("SELECT id FROM apg_num WHERE v = $1", Decimal("1.005")), [], "v = 1.005")
        rows = await conn.fetch("SELECT id FROM apg_num WHERE v < $1 ORDER BY id", Decimal("1.005"))
        eq([r["id"] for r in rows], [2], "v < 1.005")
        sums = await conn.fetch("SELECT v + $1 AS s FROM apg_num ORDER BY id", Decimal("0.001"))
        eq([r["s"] for r in sums], [Decimal("1.011"), Decimal("1.001")], "v + 0.001")
        await conn.execute("INSERT INTO apg_num VALUES ($1, $2)", 3, Decimal("1.005"))
        eq(await conn.fetchval("SELECT v FROM apg_num WHERE id = 3"), Decimal("1.01"), "stored 1.005")

    async def zero_byte_param():
        # A text value cannot hold a zero byte: PostgreSQL refuses one in a parameter with
        # 22021 (asyncpg sends text in binary form, typed text or unknown), and the
        # connection and the table's rows stay as they were.
        await conn.execute("DROP TABLE IF EXISTS apg_zero")
        await conn.execute("CREATE TABLE apg_zero (id INT, s TEXT)")
        await conn.execute("INSERT INTO apg_zero VALUES (1, 'a')")
        for query, args in [
            ("SELECT $1::text", ("a\x00b",)),
            ("SELECT length($1)", ("a\x00b",)),
            ("INSERT INTO apg_zero VALUES ($1, $2)", (2, "x\x00")),
        ]:
            try:
                await conn.fetch(query, *args)
                raise AssertionError(f"{query} took a zero byte")
            except asyncpg.exceptions.CharacterNotInRepertoireError:
                pass
        eq(await conn.fetchval("SELECT count(*) FROM apg_zero"), 1, "rows after the refusals")
        eq(await conn.fetchval("SELECT $1::text", "a b"), "a b", "a text after the refusals")

    for name, fn in [
        ("select_int4_literal", select_int4_literal),
        ("create_table", create_table),
        ("executemany", executemany),
        ("select_typed_params", select_typed_params),
        ("aggregate", aggregate),
        ("materialized_view", materialized_view),
        ("prepared", prepared),
        ("limit_param", limit_param),
        ("any_array_param", any_array_param),
        ("introspect_array", introspect_array),
        ("introspect_codec", introspect_codec),
        ("transaction_commit", transaction_commit),
        ("transaction_rollback", transaction_rollback),
        ("cursor", cursor),
        ("copy_records_to_table", copy_records_to_table),
        ("copy_from_query", copy_from_query),
        ("plan_changed", plan_changed),
        ("insert_plan_changed", insert_plan_changed),
        ("executemany_atomic", executemany_atomic),
        ("numeric_param_keeps_decimals", numeric_param_keeps_decimals),
        ("zero_byte_param", zero_byte_param),
    ]:
        await run(name, fn)
    await conn.close()


asyncio.run(main())
finish()
