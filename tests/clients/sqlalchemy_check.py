"""SQLAlchemy 2 and pandas against Weir: the dialect's queries on first
connect, reflection through inspect() (table, column, primary key and materialized view
names, as schema tools and ORMs call them), Core inserts and selects, pandas read_sql and
to_sql."""

import datetime as dt
import os
from decimal import Decimal

import pandas as pd
import sqlalchemy as sa

from checks import Checks, eq, finish

CLIENT = "sqlalchemy"
T = "sa_orders"
V = "sa_by_customer"

def make_url(driver):
    return sa.URL.create(
        driver,
        username=os.environ.get("PGUSER", "weir"),
        host=os.environ.get("PGHOST", "127.0.0.1"),
        port=int(os.environ.get("PGPORT", "9347")),
        database=os.environ.get("PGDATABASE", "weir"),
    )


# SQLAlchemy 2.1 runs `postgresql://` URLs on psycopg 3 (connect_default below); the other
# checks name psycopg2, whose dialect gets through the first connect.
engine = sa.create_engine(make_url("postgresql+psycopg2"))
checks = Checks(CLIENT)
state = {}


def connect():
    # The first connect runs the dialect's initialize(): version, current_schema(),
    # standard_conforming_strings, ...
    with engine.connect() as c:
        eq(c.execute(sa.text("SELECT 40 + 2 AS answer")).scalar_one(), 42, "40 + 2")
    assert engine.dialect.server_version_info >= (10,), engine.dialect.server_version_info
    eq(engine.dialect.default_schema_name, "public", "default schema")


def connect_default():
    # A plain `postgresql://` URL: the psycopg 3 dialect, whose first connect looks up hstore.
    e = sa.create_engine(make_url("postgresql"))
    eq(e.dialect.driver, "psycopg", "default driver")
    try:
        with e.connect() as c:
            eq(c.execute(sa.text("SELECT 40 + 2 AS answer")).scalar_one(), 42, "40 + 2")
    finally:
        e.dispose()


def create_table():
    with engine.begin() as c:
        c.execute(sa.text(f"DROP TABLE IF EXISTS {T} CASCADE"))
        c.execute(sa.text(
            f"CREATE TABLE {T} (id BIGINT PRIMARY KEY, customer VARCHAR NOT NULL, qty INTEGER, "
            "price NUMERIC(10,2), paid BOOLEAN, placed TIMESTAMP, day DATE)"
        ))
        c.execute(sa.text(
            f"CREATE MATERIALIZED VIEW {V} AS SELECT customer, count(*) AS n, sum(qty) AS qty "
            f"FROM {T} GROUP BY customer"
        ))


def core_insert():
    md = sa.MetaData()
    orders = sa.Table(
        T, md,
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("customer", sa.String, nullable=False),
        sa.Column("qty", sa.Integer),
        sa.Column("price", sa.Numeric(10, 2)),
        sa.Column("paid", sa.Boolean),
        sa.Column("placed", sa.DateTime),
        sa.Column("day", sa.Date),
    )
    state["orders"] = orders
    with engine.begin() as c:
        c.execute(orders.insert(), [
            {"id": 1, "customer": "ada", "qty": 3, "price": Decimal("2.50"), "paid": True,
             "placed": dt.datetime(2024, 3, 1, 10, 0), "day": dt.date(2024, 3, 1)},
            {"id": 2, "customer": "bob", "qty": 5, "price": Decimal("10.00"), "paid": False,
             "placed": dt.datetime(2024, 3, 2, 11, 30), "day": dt.date(2024, 3, 2)},
            {"id": 3, "customer": "ada", "qty": 7, "price": Decimal("1.25"), "paid": True,
             "placed": dt.datetime(2024, 3, 3, 12, 45), "day": dt.date(2024, 3, 3)},
        ])
    with engine.connect() as c:
        eq(c.execute(sa.select(sa.func.count()).select_from(orders)).scalar_one(), 3, "rows")


def core_select():
    orders = state["orders"]
    q = (sa.select(orders.c.customer, sa.func.sum(orders.c.qty * orders.c.price).label("value"))
         .where(orders.c.day >= dt.date(2024, 3, 1))
         .group_by(orders.c.customer)
         .order_by(orders.c.customer))
    with engine.connect() as c:
        rows = [tuple(r) for r in c.execute(q)]
    # ada: 3 * 2.50 + 7 * 1.25 = 16.25; bob: 5 * 10.00 = 50.
    eq([r[0] for r in rows], ["ada", "bob"], "customers")
    eq([Decimal(r[1]).compare(x) for r, x in zip(rows, [Decimal("16.25"), Decimal("50")])],
       [Decimal(0), Decimal(0)], f"values {rows}")


def get_table_names():
    names = sa.inspect(engine).get_table_names()
    assert T in names, f"{T} not in {names}"
    assert V not in names, f"the view {V} is listed as a table: {names}"


def has_table():
    eq(sa.inspect(engine).has_table(T), True, f"has_table({T})")
    eq(sa.inspect(engine).has_table("sa_no_such_table"), False, "has_table(missing)")


def get_columns():
    cols = sa.inspect(engine).get_columns(T)
    eq([c["name"] for c in cols], ["id", "customer", "qty", "price", "paid", "placed", "day"], "names")
    kinds = [type(c["type"]).__name__ for c in cols]
    eq(kinds, ["BIGINT", "VARCHAR", "INTEGER", "NUMERIC", "BOOLEAN", "TIMESTAMP", "DATE"], "types")
    eq((cols[3]["type"].precision, cols[3]["type"].scale), (10, 2), "numeric(10,2)")
    eq([c["nullable"] for c in cols], [False, False, True, True, True, True, True], "nullable")


def get_pk_constraint():
    pk = sa.inspect(engine).get_pk_constraint(T)
    eq(pk["constrained_columns"], ["id"], "primary key columns")


def get_materialized_view_names():
    names = sa.inspect(engine).get_materialized_view_names()
    assert V in names, f"{V} not in {names}"
    assert T not in names, f"the table {T} is listed as a materialized view: {names}"


def view_columns():
    cols = sa.inspect(engine).get_columns(V)
    eq([c["name"] for c in cols], ["customer", "n", "qty"], "view columns")


def metadata_reflect():
    md = sa.MetaData()
    t = sa.Table(T, md, autoload_with=engine)
    eq([c.name for c in t.primary_key.columns], ["id"], "reflected primary key")


def pandas_read_sql():
    with engine.connect() as c:
        c.execute(sa.text("FLUSH"))
        df = pd.read_sql(sa.text(f"SELECT customer, n, qty FROM {V} ORDER BY customer"), c)
    eq(list(df["customer"]), ["ada", "bob"], "customers")
    eq([int(x) for x in df["n"]], [2, 1], "n")
    eq([int(x) for x in df["qty"]], [10, 5], "qty")


def pandas_read_sql_params():
    with engine.connect() as c:
        df = pd.read_sql(sa.text(f"SELECT id, price, day FROM {T} WHERE qty > :q ORDER BY id"), c,
                         params={"q": 4}, parse_dates=["day"])
    eq(list(df["id"]), [2, 3], "ids with qty > 4")
    eq(str(df["day"].dtype).startswith("datetime64"), True, f"day dtype {df['day'].dtype}")


def pandas_to_sql():
    df = pd.DataFrame({"k": [1, 2, 3], "label": ["x", "y", "z"], "w": [0.5, 1.5, 2.0]})
    with engine.begin() as c:
        c.execute(sa.text("DROP TABLE IF EXISTS sa_frame"))
    df.to_sql("sa_frame", engine, index=False)
    with engine.connect() as c:
        eq(float(c.execute(sa.text("SELECT sum(w) FROM sa_frame")).scalar_one()), 4.0, "sum(w)")


for name, fn in [
    ("connect_default", connect_default),
    ("connect", connect),
    ("create_table", create_table),
    ("core_insert", core_insert),
    ("core_select", core_select),
    ("get_table_names", get_table_names),
    ("has_table", has_table),
    ("get_columns", get_columns),
    ("get_pk_constraint", get_pk_constraint),
    ("get_materialized_view_names", get_materialized_view_names),
    ("view_columns", view_columns),
    ("metadata_reflect", metadata_reflect),
    ("pandas_read_sql", pandas_read_sql),
    ("pandas_read_sql_params", pandas_read_sql_params),
    ("pandas_to_sql", pandas_to_sql),
]:
    checks.run(name, fn)
engine.dispose()
finish()
