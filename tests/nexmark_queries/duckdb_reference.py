"""Batch answers of the Nexmark queries, computed by DuckDB from the generator's CSV files.

Usage: duckdb_reference.py DIR
DIR holds bid.csv, person.csv and auction.csv (no header, the generator's column order). Prints,
for each query, a line "== name" and then one line per result row, its values separated by
tabs: NULL as "NULL", timestamps as "YYYY-MM-DD HH:MM:SS.mmm", other values as Python prints
them. Row order is not meaningful (tests/nexmark_queries.rs sorts).

The SQL here is written for DuckDB on its own, not copied from the view definitions: time windows
are computed with epoch arithmetic (a 10-second tumbling window of a time t starts at
floor(t / 10 s) * 10 s; the 10-second windows sliding every 2 seconds that hold t start at the
five multiples of 2 s in (t - 10 s, t]; a bidder's session opens at a bid more than 10 s after
the bidder's previous one, numbered by a running count of openings), Top-1 per window with a
window function, and filtered
aggregates with CASE; Top-N with DuckDB's QUALIFY. Where a query's ORDER BY leaves ties
(q19 orders bids by price alone), row_number() may number tied rows either way; Weir numbers
them by the rest of the row in column order (docs/sql.md), so the reference spells that order
out.
"""

import datetime
import decimal
import sys

import duckdb

BID = """auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
    date_time TIMESTAMP, extra VARCHAR"""
PERSON = """id BIGINT, name VARCHAR, email_address VARCHAR, credit_card VARCHAR, city VARCHAR,
    state VARCHAR, date_time TIMESTAMP, extra VARCHAR"""
AUCTION = """id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT,
    reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT,
    extra VARCHAR"""

# Milliseconds since the epoch of a timestamp, and back.
MS = "epoch_ms({})"
TS = "make_timestamp(({}) * 1000)"

# bid with the start (in ms) of each 10-second window sliding by 2 seconds that holds it.
HOPPED_BID = """(
    SELECT b.*, (floor(epoch_ms(b.date_time) / 2000)::BIGINT - k.k) * 2000 AS ws
    FROM bid AS b, (SELECT range AS k FROM range(0, 5)) AS k
)"""

# The end of a bidder's session: its last bid's time plus the 10-second gap.
SESSION_END = TS.format("max(" + MS.format("date_time") + ") + 10000")

# Count, per price range, as the q15-q17 reports do.
RANGES = {
    "rank1": "price < 10000",
    "rank2": "price >= 10000 AND price < 1000000",
    "rank3": "price >= 1000000",
}


def counts(distinct_of=None):
    cols = []
    for name, cond in RANGES.items():
        if distinct_of is None:
            cols.append(f"sum(CASE WHEN {cond} THEN 1 ELSE 0 END) AS {name}_bids")
        else:
            cols.append(
                f"count(DISTINCT CASE WHEN {cond} THEN {distinct_of} END) AS {name}_{distinct_of}s"
            )
    return ", ".join(cols)


def report_columns():
    return (
        f"count(*) AS total_bids, {counts()}, "
        f"count(DISTINCT bidder) AS total_bidders, {counts('bidder')}, "
        f"count(DISTINCT auction) AS total_auctions, {counts('auction')}"
    )


QUERIES = {
    "q0": "SELECT auction, bidder, price, date_time, extra FROM bid",
    "q1": "SELECT auction, bidder, price * 0.908, date_time, extra FROM bid",
    "q2": "SELECT auction, price FROM bid WHERE auction % 123 = 0",
    "q3": """
        SELECT p.name, p.city, p.state, a.id
        FROM auction AS a, person AS p
        WHERE a.seller = p.id AND a.category = 10 AND p.state IN ('OR', 'ID', 'CA')""",
    "q4": """
        WITH winning AS (
            SELECT a.id, a.category, max(b.price) AS final
            FROM auction AS a, bid AS b
            WHERE b.auction = a.id AND b.date_time >= a.date_time AND b.date_time <= a.expires
            GROUP BY a.id, a.category
        )
        SELECT category, avg(final) FROM winning GROUP BY category""",
    "q5": f"""
        WITH per_auction AS (
            SELECT auction, ws, count(*) AS num FROM {HOPPED_BID} GROUP BY auction, ws
        ), ranked AS (
            SELECT *, max(num) OVER (PARTITION BY ws) AS maxn FROM per_auction
        )
        SELECT auction, num, {TS.format('ws')} FROM ranked WHERE num = maxn""",
    "q5_maxn": f"""
        WITH per_auction AS (
            SELECT auction, ws, count(*) AS num FROM {HOPPED_BID} GROUP BY auction, ws
        ), ranked AS (
            SELECT *, max(num) OVER (PARTITION BY ws) AS maxn FROM per_auction
        )
        SELECT auction, num, {TS.format('ws')}, maxn FROM ranked WHERE num = maxn""",
    "q6": """
        WITH winning AS (
            SELECT a.seller, b.price AS final, b.date_time
            FROM auction AS a, bid AS b
            WHERE a.id = b.auction AND b.date_time >= a.date_time AND b.date_time <= a.expires
            QUALIFY row_number() OVER (PARTITION BY a.id ORDER BY b.price DESC) = 1
        )
        SELECT seller,
               avg(final) OVER (PARTITION BY seller ORDER BY date_time
                                ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)
        FROM winning""",
    "q7": f"""
        WITH windows AS (
            SELECT floor({MS.format('date_time')} / 10000)::BIGINT * 10000 + 10000 AS we,
                   max(price) AS maxprice
            FROM bid GROUP BY 1
        )
        SELECT b.auction, b.price, b.bidder, b.date_time, b.extra
        FROM bid AS b, windows AS w
        WHERE b.price = w.maxprice
          AND {MS.format('b.date_time')} >= w.we - 10000
          AND {MS.format('b.date_time')} <= w.we""",
    "q8": f"""
        WITH p AS (
            SELECT DISTINCT id, name, floor({MS.format('date_time')} / 10000)::BIGINT AS w
            FROM person
        ), a AS (
            SELECT DISTINCT seller, floor({MS.format('date_time')} / 10000)::BIGINT AS w
            FROM auction
        )
        SELECT p.id, p.name, {TS.format('p.w * 10000')}
        FROM p, a WHERE p.id = a.seller AND p.w = a.w""",
    "q9": """
        SELECT a.id, a.item_name, a.description, a.initial_bid, a.reserve, a.date_time,
               a.expires, a.seller, a.category, b.auction, b.bidder, b.price, b.date_time
        FROM auction AS a, bid AS b
        WHERE a.id = b.auction AND b.date_time >= a.date_time AND b.date_time <= a.expires
        QUALIFY row_number() OVER (PARTITION BY a.id ORDER BY b.price DESC, b.date_time) = 1""",
    "q11": f"""
        WITH marked AS (
            SELECT bidder, date_time,
                   CASE WHEN {MS.format('date_time')}
                             - lag({MS.format('date_time')}) OVER (PARTITION BY bidder ORDER BY date_time)
                             <= 10000
                        THEN 0 ELSE 1 END AS opens
            FROM bid
        ), numbered AS (
            SELECT *, sum(opens) OVER (PARTITION BY bidder ORDER BY date_time
                                       ROWS UNBOUNDED PRECEDING) AS session
            FROM marked
        )
        SELECT bidder, count(*), min(date_time),
               {SESSION_END}
        FROM numbered GROUP BY bidder, session""",
    "q12": "SELECT bidder, count(*), true FROM bid GROUP BY bidder",
    "q13": """
        SELECT auction, bidder, price, date_time, 'value-' || CAST(auction % 10000 AS VARCHAR)
        FROM bid""",
    "q10": """
        SELECT auction, bidder, price, date_time, extra,
               strftime(date_time, '%Y-%m-%d'), strftime(date_time, '%H:%M')
        FROM bid""",
    "q14": """
        SELECT auction, bidder, price * 0.908,
               CASE
                   WHEN hour(date_time) BETWEEN 8 AND 18 THEN 'dayTime'
                   WHEN hour(date_time) <= 6 OR hour(date_time) >= 20 THEN 'nightTime'
                   ELSE 'otherTime'
               END,
               date_time, extra,
               len(extra) - len(replace(extra, 'c', ''))
        FROM bid
        WHERE price * 0.908 > 1000000 AND price * 0.908 < 50000000""",
    "q15": f"""
        SELECT strftime(date_time, '%Y-%m-%d'), {report_columns()}
        FROM bid GROUP BY 1""",
    "q16": f"""
        SELECT channel, strftime(date_time, '%Y-%m-%d'), strftime(max(date_time), '%H:%M'),
               {report_columns()}
        FROM bid GROUP BY 1, 2""",
    "q17": f"""
        SELECT auction, strftime(date_time, '%Y-%m-%d'), count(*), {counts()},
               min(price), max(price), avg(price), sum(price)
        FROM bid GROUP BY 1, 2""",
    "q18": """
        SELECT auction, bidder, price, channel, url, date_time, extra
        FROM bid
        QUALIFY row_number() OVER (PARTITION BY bidder, auction ORDER BY date_time DESC, extra) = 1""",
    "q19": """
        SELECT *,
               row_number() OVER (PARTITION BY auction ORDER BY price DESC, bidder, channel, url,
                                  date_time, extra) AS rank_number
        FROM bid
        QUALIFY rank_number <= 10""",
    "q20": """
        SELECT b.auction, b.bidder, b.price, b.channel, b.url, b.date_time, b.extra,
               a.item_name, a.description, a.initial_bid, a.reserve, a.date_time, a.expires,
               a.seller, a.category, a.extra
        FROM bid AS b, auction AS a
        WHERE a.id = b.auction AND a.category = 10""",
    "q21": """
        WITH t AS (
            SELECT *,
                   CASE WHEN regexp_matches(url, '(&|^)channel_id=')
                        THEN regexp_extract(url, '(&|^)channel_id=([^&]*)', 2) END AS param
            FROM bid
        )
        SELECT auction, bidder, price, channel,
               CASE lower(channel)
                   WHEN 'apple' THEN '0' WHEN 'google' THEN '1'
                   WHEN 'facebook' THEN '2' WHEN 'baidu' THEN '3'
                   ELSE param
               END
        FROM t
        WHERE param IS NOT NULL OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')""",
    "q22": """
        SELECT auction, bidder, price, channel,
               coalesce(string_split(url, '/')[4], ''),
               coalesce(string_split(url, '/')[5], ''),
               coalesce(string_split(url, '/')[6], '')
        FROM bid""",
}


def text(v):
    if v is None:
        return "NULL"
    if isinstance(v, datetime.datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S.") + f"{v.microsecond // 1000:03d}"
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, decimal.Decimal):
        return str(v)
    return str(v)


def main():
    folder = sys.argv[1]
    con = duckdb.connect()
    for table, columns in (("bid", BID), ("person", PERSON), ("auction", AUCTION)):
        con.execute(f"CREATE TABLE {table} ({columns})")
        con.execute(
            f"INSERT INTO {table} SELECT * FROM read_csv(?, header = false, delim = ',', "
            f"quote = '', escape = '', columns = {{{column_spec(columns)}}}, "
            f"timestampformat = '%Y-%m-%d %H:%M:%S.%g')",
            [f"{folder}/{table}.csv"],
        )
    out = sys.stdout
    for name, sql in QUERIES.items():
        out.write(f"== {name}\n")
        for row in con.execute(sql).fetchall():
            out.write("\t".join(text(v) for v in row))
            out.write("\n")


def column_spec(columns):
    pairs = []
    for col in columns.split(","):
        name, kind = col.split()
        pairs.append(f"'{name}': '{kind}'")
    return ", ".join(pairs)


if __name__ == "__main__":
    main()
