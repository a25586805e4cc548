//! End-to-end tests over pgwire: COPY, parameters, concurrency, restart and the data dir lock.

use crate::common;

use futures::SinkExt;

async fn copy_in(
    client: &tokio_postgres::Client,
    sql: &str,
    data: &str,
) -> Result<u64, tokio_postgres::Error> {
    let sink = client.copy_in(sql).await?;
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from(data.to_string())).await?;
    sink.finish().await
}

/// A COPY with a column list gives the columns it leaves out their DEFAULTs, as INSERT does
/// (PostgreSQL 15 on the same statements: `1 | 7 | dflt | x`, `2 | 7 | dflt | y`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_fills_left_out_columns_with_their_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute(
        "CREATE TABLE d (id INT PRIMARY KEY, n INT DEFAULT 7, s TEXT DEFAULT 'dflt', \
         k TEXT NOT NULL DEFAULT 'x')",
    )
    .await
    .unwrap();
    assert_eq!(
        copy_in(&c, "COPY d (id) FROM STDIN", "1\n").await.unwrap(),
        1
    );
    assert_eq!(
        copy_in(&c, "COPY d (k, id) FROM STDIN CSV", "y,2\n")
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        common::query_text(&c, "SELECT id, n, s, k FROM d ORDER BY id").await,
        vec![vec!["1", "7", "dflt", "x"], vec!["2", "7", "dflt", "y"]]
    );
    server.stop().await;
}

/// Parameters of an upsert's SET, WHERE and RETURNING are bound as the statement's own (they
/// are planned apart from the insert). PostgreSQL 15 on the same statements: `n` 3, then no
/// row (WHERE fails), then `k + $2` 11.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upsert_and_returning_bind_parameters() {
    use tokio_postgres::types::Type;
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute("CREATE TABLE q (k INT PRIMARY KEY, n INT); INSERT INTO q VALUES (1, 1)")
        .await
        .unwrap();
    type Param = (&'static (dyn tokio_postgres::types::ToSql + Sync), Type);
    let two =
        |a: &'static i32, b: &'static i32| -> [Param; 2] { [(a, Type::INT4), (b, Type::INT4)] };
    let rows = c
        .query_typed(
            "INSERT INTO q VALUES ($1, 2) ON CONFLICT (k) DO UPDATE SET n = $2 RETURNING n",
            &two(&1, &3),
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, i32>(0), 3);
    let rows = c
        .query_typed(
            "INSERT INTO q VALUES ($1, 2) ON CONFLICT (k) DO UPDATE SET n = 9 WHERE q.n < $2 \
             RETURNING n",
            &two(&1, &3),
        )
        .await
        .unwrap();
    assert!(rows.is_empty());
    let rows = c
        .query_typed(
            "INSERT INTO q VALUES ($1, 2) RETURNING k + $2",
            &two(&5, &6),
        )
        .await
        .unwrap();
    assert_eq!(rows[0].get::<_, i32>(0), 11);
    assert_eq!(
        common::query_text(&c, "SELECT k, n FROM q ORDER BY k").await,
        vec![vec!["1", "3"], vec!["5", "2"]]
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_csv_text_and_bad_rows() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute("CREATE TABLE f (id BIGINT, name TEXT, delay DOUBLE PRECISION)")
        .await
        .unwrap();
    c.batch_execute("CREATE MATERIALIZED VIEW fv AS SELECT count(*) AS n, sum(delay) AS s FROM f")
        .await
        .unwrap();
    let n = copy_in(
        &c,
        "COPY f FROM STDIN CSV HEADER NULL 'NA'",
        "id,name,delay\n1,a,1.5\n2,\"b, quoted\",NA\n",
    )
    .await
    .unwrap();
    assert_eq!(n, 2);
    let n = copy_in(&c, "COPY f (name, id) FROM STDIN", "c\t3\n\\N\t4\n")
        .await
        .unwrap();
    assert_eq!(n, 2);
    // One bad row refuses the whole COPY and names the line and column.
    let err = copy_in(
        &c,
        "COPY f FROM STDIN WITH (FORMAT csv)",
        "5,e,1\n6,f,oops\n7,g,2\n",
    )
    .await
    .unwrap_err();
    let db = err.as_db_error().expect("db error");
    assert_eq!(db.code().code(), "22P02");
    assert!(
        db.message().contains("line 2") && db.message().contains("delay"),
        "{}",
        db.message()
    );
    let err = copy_in(&c, "COPY f FROM STDIN CSV", "8,h\n")
        .await
        .unwrap_err();
    assert_eq!(err.as_db_error().unwrap().code().code(), "22P04");
    // Text-format escapes as PostgreSQL reads them (docs, COPY "Text Format"): octal
    // `\101` and hex `\x41` are 'A', `\x` without a hex digit is 'x', `\\` a backslash.
    let n = copy_in(
        &c,
        "COPY f (id, name) FROM STDIN",
        "10\ta\\x41\\101\\x\\\\\n11\ta\\tb\\7\n",
    )
    .await
    .unwrap();
    assert_eq!(n, 2);
    // A zero byte is not text (22021), and refuses the whole COPY.
    let err = copy_in(&c, "COPY f (id, name) FROM STDIN", "12\tok\n13\ta\\0b\n")
        .await
        .unwrap_err();
    assert_eq!(err.as_db_error().unwrap().code().code(), "22021");
    // The session is still usable and nothing of the bad COPYs was applied.
    c.batch_execute("FLUSH").await.unwrap();
    let rows = common::query_text(&c, "SELECT id, name, delay FROM f ORDER BY id").await;
    assert_eq!(
        rows,
        vec![
            vec!["1", "a", "1.5"],
            vec!["2", "b, quoted", "NULL"],
            vec!["3", "c", "NULL"],
            vec!["4", "NULL", "NULL"],
            vec!["10", "aAAx\\", "NULL"],
            vec!["11", "a\tb\u{7}", "NULL"],
        ]
    );
    assert_eq!(
        common::query_text(&c, "SELECT n, s FROM fv").await,
        vec![vec!["6", "1.5"]]
    );
    server.stop().await;
}

/// `COPY ... FROM STDIN (FORMAT binary)` as drivers send it (tokio-postgres's
/// `BinaryCopyInWriter`, like asyncpg's `copy_records_to_table`): each value in its column
/// type's binary form, NULLs, a subset of columns, and a materialized view over the table.
/// The expected text is each value's PostgreSQL output, written by hand; bad binary data
/// is refused whole (`22P03`, `22P04`) and leaves the table as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_from_binary() {
    use tokio_postgres::binary_copy::BinaryCopyInWriter;
    use tokio_postgres::types::{ToSql, Type};
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute(
        "SET TIME ZONE 'UTC';
         CREATE TABLE b (id BIGINT PRIMARY KEY, name TEXT, qty INT, price NUMERIC(10,2),
           day DATE, at TIMESTAMP, seen TIMESTAMPTZ, ok BOOLEAN, w DOUBLE PRECISION, s SMALLINT);
         CREATE MATERIALIZED VIEW bv AS SELECT count(*) AS n, sum(qty) AS q, sum(price) AS p FROM b",
    )
    .await
    .unwrap();
    let types = [
        Type::INT8,
        Type::TEXT,
        Type::INT4,
        Type::NUMERIC,
        Type::DATE,
        Type::TIMESTAMP,
        Type::TIMESTAMPTZ,
        Type::BOOL,
        Type::FLOAT8,
        Type::INT2,
    ];
    let sink = c
        .copy_in("COPY b FROM STDIN (FORMAT binary)")
        .await
        .unwrap();
    let writer = BinaryCopyInWriter::new(sink, &types);
    futures::pin_mut!(writer);
    let day = chrono::NaiveDate::from_ymd_opt(2024, 2, 29).unwrap();
    let at = day.and_hms_micro_opt(13, 5, 9, 250_000).unwrap();
    let seen = chrono::DateTime::<chrono::Utc>::from_naive_utc_and_offset(at, chrono::Utc);
    let price = rust_decimal::Decimal::new(1999, 2);
    let row1: [&(dyn ToSql + Sync); 10] = [
        &1i64,
        &"fay\tx",
        &3i32,
        &price,
        &day,
        &at,
        &seen,
        &true,
        &0.5f64,
        &(-7i16),
    ];
    writer.as_mut().write(&row1).await.unwrap();
    let none: Option<i32> = None;
    let no_text: Option<&str> = None;
    let no_price: Option<rust_decimal::Decimal> = None;
    let no_day: Option<chrono::NaiveDate> = None;
    let no_at: Option<chrono::NaiveDateTime> = None;
    let no_seen: Option<chrono::DateTime<chrono::Utc>> = None;
    let no_ok: Option<bool> = None;
    let no_w: Option<f64> = None;
    let no_s: Option<i16> = None;
    let row2: [&(dyn ToSql + Sync); 10] = [
        &2i64, &no_text, &none, &no_price, &no_day, &no_at, &no_seen, &no_ok, &no_w, &no_s,
    ];
    writer.as_mut().write(&row2).await.unwrap();
    assert_eq!(writer.finish().await.unwrap(), 2);
    // Some columns, in another order; a whole-number numeric gets the column's scale.
    let sink = c
        .copy_in("COPY b (qty, id, price) FROM STDIN WITH (FORMAT binary)")
        .await
        .unwrap();
    let writer = BinaryCopyInWriter::new(sink, &[Type::INT4, Type::INT8, Type::NUMERIC]);
    futures::pin_mut!(writer);
    let ten = rust_decimal::Decimal::new(10, 0);
    writer.as_mut().write(&[&4i32, &3i64, &ten]).await.unwrap();
    assert_eq!(writer.finish().await.unwrap(), 1);
    c.batch_execute("FLUSH").await.unwrap();
    let expected = vec![
        vec![
            "1",
            "fay\tx",
            "3",
            "19.99",
            "2024-02-29",
            "2024-02-29 13:05:09.25",
            "2024-02-29 13:05:09.25+00",
            "t",
            "0.5",
            "-7",
        ],
        vec![
            "2", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL",
        ],
        vec![
            "3", "NULL", "4", "10.00", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL",
        ],
    ];
    let rows = common::query_text(&c, "SELECT * FROM b ORDER BY id").await;
    assert_eq!(rows, expected);
    assert_eq!(
        common::query_text(&c, "SELECT n, q, p FROM bv").await,
        vec![vec!["3", "7", "29.99"]]
    );
    // An int4 where the column is bigint: not its binary form.
    let sink = c
        .copy_in("COPY b (id) FROM STDIN (FORMAT binary)")
        .await
        .unwrap();
    let writer = BinaryCopyInWriter::new(sink, &[Type::INT4]);
    futures::pin_mut!(writer);
    writer.as_mut().write(&[&9i32]).await.unwrap();
    let e = writer.finish().await.unwrap_err();
    assert_eq!(e.code().unwrap().code(), "22P03", "{e}");
    // Text data sent as binary: no signature.
    let e = copy_in(&c, "COPY b FROM STDIN (FORMAT binary)", "9\tx\n")
        .await
        .unwrap_err();
    assert_eq!(e.code().unwrap().code(), "22P04", "{e}");
    // Text options beside the binary format.
    let e = c
        .copy_in::<_, bytes::Bytes>("COPY b FROM STDIN (FORMAT binary, DELIMITER ',')")
        .await
        .err()
        .unwrap();
    assert_eq!(e.code().unwrap().code(), "42601", "{e}");
    // (A new connection: tokio-postgres does not resume one whose COPY was refused before
    // its data.)
    let c = server.client().await;
    c.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        common::query_text(&c, "SELECT * FROM b ORDER BY id").await,
        expected
    );
    server.stop().await;
}

/// Everything a `COPY ... TO STDOUT` sends, as one string.
async fn copy_out(client: &tokio_postgres::Client, sql: &str) -> String {
    use futures::TryStreamExt;
    let stream = client.copy_out(sql).await.unwrap();
    let chunks: Vec<bytes::Bytes> = stream.try_collect().await.unwrap();
    String::from_utf8(chunks.concat()).unwrap()
}

/// `COPY ... TO STDOUT` in text and CSV, of a table, some columns and a query. The expected
/// bytes follow PostgreSQL's COPY reference ("File Formats") by hand: text escapes tab,
/// newline and backslash and writes NULL as `\N`; CSV writes NULL as nothing, quotes an empty
/// string and a field with a comma, quote or line break, doubling its quotes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute(
        "CREATE TABLE co (a INT, b TEXT, c DOUBLE PRECISION, d TIMESTAMP, e BOOLEAN);
         INSERT INTO co VALUES (1, E'x\ty', 1.5, '2020-01-01 10:00:00.5', true),
           (2, NULL, NULL, NULL, NULL), (3, 'said \"hi\", ok', 0.1, '2020-01-02', false),
           (4, '', 2, '2020-01-02', false), (5, E'back\\\\slash\nnl', 3, '2020-01-02', true)",
    )
    .await
    .unwrap();
    let text = copy_out(&c, "COPY co TO STDOUT").await;
    // Rows come in no set order: compare them sorted.
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "1\tx\\ty\t1.5\t2020-01-01 10:00:00.5\tt",
            "2\t\\N\t\\N\t\\N\t\\N",
            "3\tsaid \"hi\", ok\t0.1\t2020-01-02 00:00:00\tf",
            "4\t\t2\t2020-01-02 00:00:00\tf",
            "5\tback\\\\slash\\nnl\t3\t2020-01-02 00:00:00\tt",
        ]
    );
    let csv = copy_out(
        &c,
        "COPY (SELECT a, b FROM co WHERE a > 1 ORDER BY a) TO STDOUT WITH (FORMAT csv, HEADER)",
    )
    .await;
    assert_eq!(
        csv,
        "a,b\n2,\n3,\"said \"\"hi\"\", ok\"\n4,\"\"\n5,\"back\\slash\nnl\"\n"
    );
    let cols = copy_out(&c, "COPY co (e, a) TO STDOUT WITH CSV").await;
    let mut lines: Vec<&str> = cols.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, [",2", "f,3", "f,4", "t,1", "t,5"]);
    // The command tag counts the rows (the header is not one).
    let msgs = c
        .simple_query("COPY (SELECT a FROM co WHERE a < 3) TO STDOUT WITH CSV HEADER")
        .await;
    // tokio-postgres's simple_query does not take COPY data; what matters is that the
    // connection is still usable afterwards.
    drop(msgs);
    assert_eq!(
        c.query_one("SELECT count(*) FROM co", &[])
            .await
            .unwrap()
            .get::<_, i64>(0),
        5
    );
    for (sql, code) in [
        ("COPY co TO '/tmp/co.txt'", "0A000"),
        ("COPY co TO STDOUT (FORMAT binary)", "0A000"),
        ("COPY nope TO STDOUT", "42P01"),
    ] {
        let e = c.copy_out(sql).await.err().unwrap();
        assert_eq!(e.code().unwrap().code(), code, "{sql}");
    }
    server.stop().await;
}

/// A view fails only while its inputs' contents fail it: a row that fails the view (`a / b`
/// with `b = 0`) and is fixed by the next statement of the same query string (written in the
/// same epoch, or in the next one when a barrier falls between them) leaves the view readable
/// with the fixed row's value, as a PostgreSQL view over the table would be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_fixed_in_the_same_epoch_does_not_fail_the_view() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute(
        "CREATE TABLE vh (a INT, b INT); INSERT INTO vh VALUES (0, 1); \
         CREATE MATERIALIZED VIEW vh_q AS SELECT a, a / b AS q FROM vh",
    )
    .await
    .unwrap();
    for a in 1..=5 {
        c.batch_execute(&format!(
            "INSERT INTO vh VALUES ({a}, 0); UPDATE vh SET b = 2 WHERE a = {a}; FLUSH"
        ))
        .await
        .unwrap();
        let rows = c
            .query("SELECT a, q FROM vh_q ORDER BY a", &[])
            .await
            .unwrap_or_else(|e| panic!("round {a}: the view failed: {e}"));
        let got: Vec<(i32, i32)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        // Integer division truncates: a / 2.
        let want: Vec<(i32, i32)> = (0..=a)
            .map(|x| (x, if x == 0 { 0 } else { x / 2 }))
            .collect();
        assert_eq!(got, want, "round {a}");
    }
    server.stop().await;
}

/// The statements of one simple Query are one implicit transaction, as in PostgreSQL
/// (protocol docs 55.2.2.1): when one fails, the writes of those before it are undone, and
/// the session goes on. Expected counts worked out by hand (PostgreSQL 15 answers the same).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_statement_undoes_its_query_string() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute(
        "CREATE TABLE it (id INT PRIMARY KEY, v TEXT); INSERT INTO it VALUES (1, 'kept')",
    )
    .await
    .unwrap();
    let err = c
        .batch_execute(
            "INSERT INTO it VALUES (2, 'undone'); UPDATE it SET v = 'changed' WHERE id = 1; \
             SELECT 1 / 0; INSERT INTO it VALUES (3, 'never run')",
        )
        .await
        .unwrap_err();
    assert_eq!(err.code().map(|c| c.code()), Some("22012"), "{err}");
    let rows = c
        .query("SELECT id, v FROM it ORDER BY id", &[])
        .await
        .unwrap();
    let got: Vec<(i32, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(got, vec![(1, "kept".to_string())]);
    // A query string whose statements all succeed keeps them all.
    c.batch_execute("INSERT INTO it VALUES (4, 'a'); INSERT INTO it VALUES (5, 'b')")
        .await
        .unwrap();
    let n: i64 = c
        .query_one("SELECT count(*) FROM it", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 3);
    // Inside a block, a failure aborts the block; ROLLBACK undoes all of it.
    let err = c
        .batch_execute("BEGIN; INSERT INTO it VALUES (6, 'c'); SELECT 1 / 0")
        .await
        .unwrap_err();
    assert_eq!(err.code().map(|c| c.code()), Some("22012"), "{err}");
    c.batch_execute("ROLLBACK").await.unwrap();
    let n: i64 = c
        .query_one("SELECT count(*) FROM it", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 3);
    server.stop().await;
}

/// Parameters DataFusion cannot type get PostgreSQL's: `LIMIT $1`/`OFFSET $2` are bigint,
/// a bare `SELECT $1` is text; the statements then run with those values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn implied_parameter_types() {
    use tokio_postgres::types::Type;
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute("CREATE TABLE ip (a INT); INSERT INTO ip VALUES (1), (2), (3); FLUSH")
        .await
        .unwrap();
    let page = c
        .prepare("SELECT a FROM ip ORDER BY a LIMIT $1 OFFSET $2")
        .await
        .unwrap();
    assert_eq!(page.params(), [Type::INT8, Type::INT8]);
    let rows = c.query(&page, &[&2_i64, &1_i64]).await.unwrap();
    let got: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(got, [2, 3]);
    let echo = c.prepare("SELECT $1 AS s").await.unwrap();
    assert_eq!(echo.params(), [Type::TEXT]);
    let row = c.query_one(&echo, &[&"x"]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "x");
    // Beside a declared parameter, an untyped one is `text` too, and so is its column (as
    // psycopg 3 sends `SELECT %s, %s` with 7 and 'x'); an output column of no type is `text`
    // (PostgreSQL 15: `SELECT NULL` is described as text).
    let mixed = c
        .prepare_typed("SELECT $1 AS n, $2 AS s, NULL AS z", &[Type::INT2])
        .await
        .unwrap();
    assert_eq!(mixed.params(), [Type::INT2, Type::TEXT]);
    let types: Vec<&Type> = mixed.columns().iter().map(|c| c.type_()).collect();
    assert_eq!(types, [&Type::INT2, &Type::TEXT, &Type::TEXT]);
    let row = c.query_one(&mixed, &[&7_i16, &"x"]).await.unwrap();
    assert_eq!(
        (row.get::<_, i16>(0), row.get::<_, String>(1)),
        (7, "x".to_string())
    );
    assert_eq!(row.get::<_, Option<String>>(2), None);
    // `a = ANY($1)` takes an array of `a`'s type (PostgreSQL: `integer[]`), NULLs included.
    let any = c
        .prepare("SELECT a FROM ip WHERE a = ANY($1) ORDER BY a")
        .await
        .unwrap();
    assert_eq!(any.params(), [Type::INT4_ARRAY]);
    let rows = c
        .query(&any, &[&vec![Some(3_i32), None, Some(1)]])
        .await
        .unwrap();
    let got: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(got, [1, 3]);
    server.stop().await;
}

/// A parameter whose type the Parse message declares has that type, as in PostgreSQL: a
/// `float8` 1.5 compared with an integer column matches nothing (it is not cut to 1), added to
/// an integer gives 2.5, and stored in an integer column is rounded (7.5 to 8, ties to even).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_parameter_types_are_honoured() {
    use tokio_postgres::types::Type;
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute("CREATE TABLE d (i INT); INSERT INTO d VALUES (1), (2)")
        .await
        .unwrap();
    let deleted = c
        .query_typed("DELETE FROM d WHERE i = $1", &[(&1.5f64, Type::FLOAT8)])
        .await
        .unwrap();
    assert!(deleted.is_empty());
    c.query_typed("INSERT INTO d VALUES ($1)", &[(&7.5f64, Type::FLOAT8)])
        .await
        .unwrap();
    let rows = c
        .query_typed("SELECT $1 + 1 AS s", &[(&1.5f64, Type::FLOAT8)])
        .await
        .unwrap();
    assert_eq!(rows[0].get::<_, f64>(0), 2.5);
    let rows = c
        .query_typed(
            "SELECT i FROM d WHERE i > $1 ORDER BY i",
            &[(&1i16, Type::INT2)],
        )
        .await
        .unwrap();
    let got: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(got, vec![2, 8]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_protocol_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute("CREATE TABLE p (id BIGINT, name TEXT, x DOUBLE PRECISION)")
        .await
        .unwrap();
    let ins = c
        .prepare("INSERT INTO p VALUES ($1, $2, $3)")
        .await
        .unwrap();
    for i in 0..5i64 {
        c.execute(&ins, &[&i, &format!("n{i}"), &(i as f64 * 0.5)])
            .await
            .unwrap();
    }
    let rows = c
        .query(
            "SELECT id, name, x FROM p WHERE id >= $1 ORDER BY id",
            &[&3i64],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    let id: i64 = rows[0].get(0);
    let name: String = rows[0].get(1);
    let x: f64 = rows[1].get(2);
    assert_eq!((id, name.as_str(), x), (3, "n3", 2.0));
    // An error in the extended protocol leaves the session usable.
    assert!(
        c.query("SELECT * FROM nope WHERE id = $1", &[&1i64])
            .await
            .is_err()
    );
    assert_eq!(
        c.query("SELECT count(*) FROM p", &[]).await.unwrap()[0].get::<_, i64>(0),
        5
    );
    // A parameter cast as a whole takes the cast's type, as PostgreSQL infers it: drivers
    // (asyncpg) then send an int4, and the value comes back as one.
    let cast = c.prepare("SELECT $1::int AS n").await.unwrap();
    assert_eq!(cast.params(), &[tokio_postgres::types::Type::INT4]);
    assert_eq!(
        cast.columns()[0].type_(),
        &tokio_postgres::types::Type::INT4
    );
    let rows = c.query(&cast, &[&41i32]).await.unwrap();
    assert_eq!(rows[0].get::<_, i32>(0), 41);
    // RETURNING through the extended protocol: the statement describes its rows.
    let ret = c
        .prepare("INSERT INTO p VALUES ($1, $2, $3) RETURNING id, upper(name)")
        .await
        .unwrap();
    let names: Vec<&str> = ret.columns().iter().map(|c| c.name()).collect();
    assert_eq!(names, ["id", "upper"]);
    let rows = c
        .query(&ret, &[&7i64, &"seven".to_string(), &1.5f64])
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, i64>(0), 7);
    assert_eq!(rows[0].get::<_, String>(1), "SEVEN");
    assert_eq!(
        c.query("SELECT count(*) FROM p", &[]).await.unwrap()[0].get::<_, i64>(0),
        6
    );
    server.stop().await;
}

/// The column names of the first row `sql` returns over the simple protocol (which sends
/// them with the rows).
/// A relation, its schema and its columns have one OID in every session, so an OID a driver
/// looked up on one connection of a pool names the same relation on another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relation_oids_agree_across_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let first = server.client().await;
    first
        .batch_execute("CREATE TABLE oa (x INT); CREATE TABLE oc (y INT)")
        .await
        .unwrap();
    const OIDS: &str = "SELECT c.relname, c.oid::int8, c.relnamespace::int8, \
                        (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = c.oid) \
                        FROM pg_class c WHERE c.relname IN ('oa', 'ob', 'oc', 'pg_type') \
                        ORDER BY c.relname";
    async fn oids(c: &tokio_postgres::Client) -> Vec<(String, i64, i64, i64)> {
        c.query(OIDS, &[])
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect()
    }
    // The first session numbers the relations it has seen, then meets `ob` after them; a
    // session opened later meets all of them at once.
    let before = oids(&first).await;
    assert_eq!(before.len(), 3);
    first
        .batch_execute("CREATE TABLE ob (z INT)")
        .await
        .unwrap();
    let seen_first = oids(&first).await;
    let second = server.client().await;
    let seen_second = oids(&second).await;
    assert_eq!(seen_first.len(), 4);
    assert_eq!(seen_first, seen_second);
    assert_eq!(seen_first[0], before[0]);
    // Each relation's columns are found by its OID (one column per table here).
    assert!(
        seen_first.iter().take(3).all(|r| r.3 == 1),
        "{seen_first:?}"
    );
    for c in [&first, &second] {
        let row = c
            .query_one("SELECT 'ob'::regclass::int8", &[])
            .await
            .unwrap();
        assert_eq!(row.get::<_, i64>(0), seen_first[1].1);
    }
    // The catalogs' OID columns are `oid`, as PostgreSQL declares them (none `regclass` or
    // `regnamespace`), and read as numbers in binary; an OID cast to a wider integer is that.
    let described = first
        .prepare(
            "SELECT c.oid, c.relnamespace, a.attrelid, a.atttypid, c.oid::int8 \
             FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid WHERE c.relname = 'ob'",
        )
        .await
        .unwrap();
    use tokio_postgres::types::Type;
    let types: Vec<&Type> = described.columns().iter().map(|c| c.type_()).collect();
    assert_eq!(
        types,
        [&Type::OID, &Type::OID, &Type::OID, &Type::OID, &Type::INT8]
    );
    let row = first.query_one(&described, &[]).await.unwrap();
    assert_eq!(i64::from(row.get::<_, u32>(2)), seen_first[1].1);
    assert_eq!(i64::from(row.get::<_, u32>(1)), seen_first[1].2);
    assert_eq!(row.get::<_, u32>(3), 23);
}

/// The types of a prepared statement's result columns, as its RowDescription gives them.
fn column_types(stmt: &tokio_postgres::Statement) -> Vec<tokio_postgres::types::Type> {
    stmt.columns()
        .iter()
        .map(|col| col.type_().clone())
        .collect()
}

async fn simple_query_names(c: &tokio_postgres::Client, sql: &str) -> Vec<String> {
    let msgs = c.simple_query(sql).await.unwrap();
    let row = msgs
        .iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => Some(r),
            _ => None,
        })
        .unwrap();
    row.columns()
        .iter()
        .map(|col| col.name().to_string())
        .collect()
}

/// Output columns are named as PostgreSQL 15 names them (checked there by hand), in both
/// protocols and in a materialized view's columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_columns_have_postgres_names() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute("CREATE TABLE n (a INT, b TEXT)")
        .await
        .unwrap();
    let sql = "SELECT count(*), sum(a), 1, a + 1, 2::int, b::text, CASE WHEN a > 0 THEN 1 END, \
               (SELECT max(a) FROM n), upper(b), a AS \"Mixed\" FROM n GROUP BY a, b";
    let expected = [
        "count", "sum", "?column?", "?column?", "int4", "b", "case", "max", "upper", "Mixed",
    ];
    // Extended protocol: the names come with Describe.
    let stmt = c.prepare(sql).await.unwrap();
    let names: Vec<&str> = stmt.columns().iter().map(|col| col.name()).collect();
    assert_eq!(names, expected);
    // Simple protocol: the names come with the rows.
    c.batch_execute("INSERT INTO n VALUES (1, 'x')")
        .await
        .unwrap();
    assert_eq!(simple_query_names(&c, sql).await, expected);
    // A wildcard's columns keep their names.
    let stmt = c
        .prepare("SELECT 1, *, count(*) FROM n GROUP BY a, b")
        .await
        .unwrap();
    let names: Vec<&str> = stmt.columns().iter().map(|col| col.name()).collect();
    assert_eq!(names, ["?column?", "a", "b", "count"]);
    // The SQL-standard user and catalog functions keep their own names, as does ARRAY(query).
    let stmt = c
        .prepare(
            "SELECT current_user, session_user, user, current_role, current_catalog, \
             current_schema, ARRAY(SELECT a FROM n), ARRAY(SELECT 1 UNION SELECT 2)",
        )
        .await
        .unwrap();
    let names: Vec<&str> = stmt.columns().iter().map(|col| col.name()).collect();
    assert_eq!(
        names,
        [
            "current_user",
            "session_user",
            "user",
            "current_role",
            "current_catalog",
            "current_schema",
            "array",
            "array"
        ]
    );
    // Integer literals in the output are `integer` when they fit in 32 bits (PostgreSQL's
    // typing of numeric constants), `bigint` beyond.
    let stmt = c
        .prepare("SELECT 1 AS one, -2, 3000000000 ORDER BY 1 LIMIT 1")
        .await
        .unwrap();
    assert_eq!(
        column_types(&stmt),
        [
            tokio_postgres::types::Type::INT4,
            tokio_postgres::types::Type::INT4,
            tokio_postgres::types::Type::INT8
        ]
    );
    let row = c.query_one(&stmt, &[]).await.unwrap();
    assert_eq!((row.get::<_, i32>(0), row.get::<_, i32>(1)), (1, -2));
    // Integer arithmetic over integer columns and such literals is `integer` too
    // (node-postgres returned the `bigint` it was as a string); with a written bigint cast
    // it is `bigint`.
    let stmt = c
        .prepare("SELECT a + 1, -a, a * 2 / 3, a::bigint + 1 FROM n ORDER BY 1 LIMIT 1")
        .await
        .unwrap();
    assert_eq!(
        column_types(&stmt),
        [
            tokio_postgres::types::Type::INT4,
            tokio_postgres::types::Type::INT4,
            tokio_postgres::types::Type::INT4,
            tokio_postgres::types::Type::INT8
        ]
    );
    // A UNION is named after its first branch.
    let stmt = c
        .prepare("SELECT min(a), 2 AS two FROM n UNION SELECT 1, 2")
        .await
        .unwrap();
    let names: Vec<&str> = stmt.columns().iter().map(|col| col.name()).collect();
    assert_eq!(names, ["min", "two"]);
    // A view's columns take the same names; PostgreSQL refuses a view whose names repeat.
    c.batch_execute("CREATE MATERIALIZED VIEW nv AS SELECT a, count(*), sum(a) FROM n GROUP BY a")
        .await
        .unwrap();
    let rows = c.query("SELECT count, sum FROM nv", &[]).await.unwrap();
    assert_eq!((rows[0].get::<_, i64>(0), rows[0].get::<_, i64>(1)), (1, 1));
    let err = c
        .batch_execute("CREATE MATERIALIZED VIEW nv2 AS SELECT count(*), count(a) FROM n")
        .await
        .unwrap_err();
    assert_eq!(err.code().unwrap().code(), "42701", "{err:?}");
    // A scalar subquery's column is named after its item, with or without an aggregate
    // (PostgreSQL 15: b, other, ?column?).
    let stmt = c
        .prepare(
            "SELECT (SELECT x.b FROM n x WHERE x.a = n.a), \
             (SELECT x.b AS other FROM n x WHERE x.a < n.a), \
             (SELECT 1 FROM n x WHERE x.a = n.a) FROM n",
        )
        .await
        .unwrap();
    let names: Vec<&str> = stmt.columns().iter().map(|col| col.name()).collect();
    assert_eq!(names, ["b", "other", "?column?"]);
    // Field selection is named after the field, a subscript after its base (PostgreSQL 15:
    // x, array).
    let stmt = c
        .prepare("SELECT (information_schema._pg_expandarray(ARRAY[7])).x, (ARRAY[1, 2])[1]")
        .await
        .unwrap();
    let names: Vec<&str> = stmt.columns().iter().map(|col| col.name()).collect();
    assert_eq!(names, ["x", "array"]);
    // The forms the parser rewrites keep PostgreSQL's names (PostgreSQL 15: ?column?,
    // ?column?, a, varchar, timezone), and so do the columns of a subquery in FROM and of a
    // WITH query (PostgreSQL 15: count, ?column?, array, max; sum, upper; count).
    let named = |sql: &'static str| {
        let c = &c;
        async move {
            let stmt = c.prepare(sql).await.unwrap();
            stmt.columns()
                .iter()
                .map(|col| col.name().to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        named(
            "SELECT a = ANY(ARRAY[1, 2]), a IN (SELECT 1), a::varchar(3), 5::varchar(2), \
             now() AT TIME ZONE 'UTC' FROM n"
        )
        .await,
        ["?column?", "?column?", "a", "varchar", "timezone"]
    );
    // (PostgreSQL 15: ?column?, text, int4, generate_series, ?column?.)
    assert_eq!(
        named("SELECT @ -5, '{a}'::text[], '{1}'::int[], generate_series(1, 2), |/ 4.0").await,
        ["?column?", "text", "int4", "generate_series", "?column?"]
    );
    // A view's IN (subquery) as a value is `?column?` too (PostgreSQL 15: a, ?column?).
    c.batch_execute("CREATE MATERIALIZED VIEW n_in AS SELECT a, a IN (SELECT 1) FROM n")
        .await
        .unwrap();
    assert_eq!(named("SELECT * FROM n_in").await, ["a", "?column?"]);
    assert_eq!(
        named(
            "SELECT * FROM (SELECT count(*), a + 1, ARRAY(SELECT 1), max(b)::varchar(2) \
             FROM n GROUP BY a) s"
        )
        .await,
        ["count", "?column?", "array", "max"]
    );
    assert_eq!(
        named("WITH c AS (SELECT sum(a), upper(b) FROM n GROUP BY b) SELECT * FROM c").await,
        ["sum", "upper"]
    );
    let rows = c
        .query("SELECT s.count FROM (SELECT count(*) FROM n) s", &[])
        .await
        .unwrap();
    assert_eq!(rows[0].get::<_, i64>(0), 1);
    // SHOW names its column after the setting (PostgreSQL 15: `TimeZone`, and a dotted
    // custom setting's whole name).
    for (sql, name) in [
        ("SHOW streaming.parallelism", "streaming.parallelism"),
        ("SHOW timezone", "TimeZone"),
    ] {
        assert_eq!(simple_query_names(&c, sql).await, [name], "{sql}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_and_flush() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute("CREATE TABLE w (s INT, v BIGINT)")
        .await
        .unwrap();
    c.batch_execute(
        "CREATE MATERIALIZED VIEW ws AS SELECT s, count(*) AS n, sum(v) AS t FROM w GROUP BY s",
    )
    .await
    .unwrap();
    let mut tasks = Vec::new();
    for s in 0..8 {
        let addr = server.addr;
        tasks.push(tokio::spawn(async move {
            let c = common::connect(addr).await;
            for v in 1..=25 {
                c.batch_execute(&format!("INSERT INTO w VALUES ({s}, {v})"))
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    c.batch_execute("FLUSH").await.unwrap();
    let rows = common::query_text(&c, "SELECT s, n, t FROM ws ORDER BY s").await;
    let expected: Vec<Vec<String>> = (0..8)
        .map(|s| vec![s.to_string(), "25".into(), (25 * 26 / 2).to_string()])
        .collect();
    assert_eq!(rows, expected);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_restores_tables_and_views_and_lock_refuses_second_server() {
    let dir = tempfile::tempdir().unwrap();
    {
        let server = common::TestServer::start(dir.path()).await;
        let c = server.client().await;
        c.batch_execute(
            "CREATE TABLE r (k INT PRIMARY KEY, v TEXT);
             CREATE TABLE s (k INT, w INT);
             CREATE MATERIALIZED VIEW rv AS SELECT r.k, v, sum(w) AS sw FROM r LEFT JOIN s ON r.k = s.k GROUP BY r.k, v;
             CREATE MATERIALIZED VIEW rvv AS SELECT count(*) AS n FROM rv WHERE sw IS NULL;
             INSERT INTO r VALUES (1, 'a'), (2, 'b'), (3, 'c');
             INSERT INTO s VALUES (1, 10), (1, 5), (3, 1);
             UPDATE r SET v = 'bb' WHERE k = 2;
             DELETE FROM s WHERE w = 1;
             CREATE UNIQUE INDEX r_v ON r (v);
             CREATE INDEX rv_sw ON rv (sw DESC);
             INSERT INTO r VALUES (4, 'd');",
        )
        .await
        .unwrap();
        // A second server on the same directory refuses to start.
        let err = weir::Engine::open(dir.path(), std::time::Duration::from_millis(50)).unwrap_err();
        assert!(
            err.to_string().contains("in use by another Weir server"),
            "{err}"
        );
        // No FLUSH: acknowledged writes must survive anyway.
        drop(c);
        server.stop().await;
    }
    // The engine is released once its connections and barrier clock have stopped.
    wait_for_release(dir.path()).await;
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    let rows = common::query_text(&c, "SELECT k, v, sw FROM rv ORDER BY k").await;
    assert_eq!(
        rows,
        vec![
            vec!["1", "a", "15"],
            vec!["2", "bb", "NULL"],
            vec!["3", "c", "NULL"],
            vec!["4", "d", "NULL"]
        ]
    );
    assert_eq!(
        common::query_text(&c, "SELECT n FROM rvv").await,
        vec![vec!["3"]]
    );
    // The indexes are rebuilt from the restored rows: reads through them, and the unique
    // index's check, see everything written before the restart.
    assert_eq!(
        common::query_text(&c, "SELECT k FROM r WHERE v = 'd'").await,
        vec![vec!["4"]]
    );
    let err = c
        .batch_execute("INSERT INTO r VALUES (5, 'bb')")
        .await
        .unwrap_err();
    assert_eq!(err.code().map(|c| c.code()), Some("23505"), "{err}");
    assert_eq!(
        common::query_text(&c, "SELECT k FROM rv WHERE sw = 15").await,
        vec![vec!["1"]]
    );
    // The views (and their indexes) keep following changes after the restart.
    c.batch_execute("INSERT INTO s VALUES (2, 7); FLUSH")
        .await
        .unwrap();
    assert_eq!(
        common::query_text(&c, "SELECT n FROM rvv").await,
        vec![vec!["2"]]
    );
    assert_eq!(
        common::query_text(&c, "SELECT k FROM rv WHERE sw < 10").await,
        vec![vec!["2"]]
    );
    server.stop().await;
}

/// A ROLLUP view and a DISTINCT ON view come back after a restart with their state and keep
/// following changes: a retracted first row is replaced from the restored ordered state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouping_sets_and_distinct_on_views_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let server = common::TestServer::start(dir.path()).await;
        let c = server.client().await;
        c.batch_execute(
            "CREATE TABLE t (k TEXT, v INT);
             CREATE MATERIALIZED VIEW r AS SELECT k, sum(v)::BIGINT AS s FROM t GROUP BY ROLLUP (k);
             CREATE MATERIALIZED VIEW d AS SELECT DISTINCT ON (k) k, v FROM t ORDER BY k, v DESC;
             INSERT INTO t VALUES ('a', 1), ('a', 5), ('b', 2);
             FLUSH",
        )
        .await
        .unwrap();
        drop(c);
        server.stop().await;
    }
    wait_for_release(dir.path()).await;
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    let rollup = "SELECT k, s FROM r ORDER BY k NULLS LAST";
    assert_eq!(
        common::query_text(&c, rollup).await,
        vec![vec!["a", "6"], vec!["b", "2"], vec!["NULL", "8"]]
    );
    let first = "SELECT k, v FROM d ORDER BY k";
    assert_eq!(
        common::query_text(&c, first).await,
        vec![vec!["a", "5"], vec!["b", "2"]]
    );
    c.batch_execute("DELETE FROM t WHERE v = 5; INSERT INTO t VALUES ('b', 7); FLUSH")
        .await
        .unwrap();
    assert_eq!(
        common::query_text(&c, rollup).await,
        vec![vec!["a", "1"], vec!["b", "9"], vec!["NULL", "10"]]
    );
    assert_eq!(
        common::query_text(&c, first).await,
        vec![vec!["a", "1"], vec!["b", "7"]]
    );
    server.stop().await;
}

/// Views joining a table with a single-row aggregate (no equi-key) keep their state across a
/// restart: the stored rows of both sides are joined again when the aggregate moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_row_joins_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let server = common::TestServer::start(dir.path()).await;
        let c = server.client().await;
        c.batch_execute("CREATE TABLE t (id INT, x INT); CREATE TABLE s (y INT)")
            .await
            .unwrap();
        // The comparison is a dynamic filter; the cross join keeps the single row's column.
        let plan = |sql: &'static str| {
            let c = &c;
            async move {
                common::query_text(c, &format!("EXPLAIN CREATE MATERIALIZED VIEW p AS {sql}"))
                    .await
                    .concat()
                    .join("\n")
            }
        };
        let above = plan("SELECT id FROM t WHERE x > (SELECT sum(y) FROM s)").await;
        assert!(above.contains("StreamDynamicFilter"), "{above}");
        let share = plan("SELECT t.id, a.total FROM t, (SELECT sum(x) AS total FROM t) a").await;
        assert!(
            share.contains("cross join with a single-row side"),
            "{share}"
        );
        c.batch_execute(
            "CREATE MATERIALIZED VIEW above AS SELECT id FROM t WHERE x > (SELECT sum(y) FROM s);
             CREATE MATERIALIZED VIEW share AS SELECT t.id, t.x, a.total FROM t, (SELECT sum(x) AS total FROM t) a;
             INSERT INTO t VALUES (1, 10), (2, 20), (3, 30);
             INSERT INTO s VALUES (15);
             FLUSH",
        )
        .await
        .unwrap();
        drop(c);
        server.stop().await;
    }
    wait_for_release(dir.path()).await;
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    let above = "SELECT id FROM above ORDER BY id";
    let share = "SELECT id, x, total FROM share ORDER BY id";
    assert_eq!(
        common::query_text(&c, above).await,
        vec![vec!["2"], vec!["3"]]
    );
    // 10 + 20 + 30 = 60.
    assert_eq!(
        common::query_text(&c, share).await,
        vec![
            vec!["1", "10", "60"],
            vec!["2", "20", "60"],
            vec!["3", "30", "60"]
        ]
    );
    // The threshold falls to 15 - 10 = 5 and a row of x = 4 arrives: 1, 2 and 3 pass, 4 not;
    // the total becomes 64.
    c.batch_execute("INSERT INTO s VALUES (-10); INSERT INTO t VALUES (4, 4); FLUSH")
        .await
        .unwrap();
    assert_eq!(
        common::query_text(&c, above).await,
        vec![vec!["1"], vec!["2"], vec!["3"]]
    );
    assert_eq!(
        common::query_text(&c, share).await,
        vec![
            vec!["1", "10", "64"],
            vec!["2", "20", "64"],
            vec!["3", "30", "64"],
            vec!["4", "4", "64"]
        ]
    );
    server.stop().await;
}

/// A statement that panics (here by a failpoint) fails with `XX000`; the connection, an open
/// transaction's rules and the data stay as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_statement_fails_alone() {
    weir::failpoint::cfg("session::statement_panic", "return(weir_panic_marker)").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute("CREATE TABLE pk (v INT); INSERT INTO pk VALUES (1)")
        .await
        .unwrap();
    for extended in [false, true] {
        let err = if extended {
            c.query("SELECT 'weir_panic_marker'", &[])
                .await
                .unwrap_err()
        } else {
            c.simple_query("SELECT 'weir_panic_marker'")
                .await
                .unwrap_err()
        };
        assert_eq!(err.code().map(|c| c.code()), Some("XX000"), "{err}");
        let message = err.as_db_error().map(|d| d.message().to_string());
        assert!(
            message.as_deref().is_some_and(|m| m.contains("panicked")),
            "{message:?}"
        );
    }
    // In a block the panic aborts it, as any failed statement does.
    c.batch_execute("BEGIN").await.unwrap();
    assert!(c.simple_query("SELECT 'weir_panic_marker'").await.is_err());
    let err = c.simple_query("SELECT 1").await.unwrap_err();
    assert_eq!(err.code().map(|c| c.code()), Some("25P02"), "{err}");
    c.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        common::query_text(&c, "SELECT v FROM pk").await,
        vec![vec!["1"]]
    );
    weir::failpoint::cfg("session::statement_panic", "off").unwrap();
    server.stop().await;
}

/// Waits until no engine holds the data directory.
async fn wait_for_release(dir: &std::path::Path) {
    for _ in 0..100 {
        if weir::Engine::open(dir, std::time::Duration::from_millis(50)).is_ok() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("data directory still locked");
}

/// Rows beyond `--memory-limit` live on disk in the state backend and read back correctly,
/// through deletes and a restart; `weir_catalog.memory` reports the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_beyond_the_memory_limit_spill_and_stay_correct() {
    let dir = tempfile::tempdir().unwrap();
    let limit: u64 = 32 << 20;
    let config = || {
        let mut config = weir::engine::EngineConfig::new(dir.path());
        config.memory_limit = limit;
        config
    };
    let server = common::TestServer::start_with(config()).await;
    let c = server.client().await;
    c.batch_execute(
        "CREATE TABLE big (id BIGINT PRIMARY KEY, g INT, pad TEXT);
         CREATE MATERIALIZED VIEW per_g AS SELECT g, count(*) AS n, sum(id) AS s FROM big GROUP BY g;
         CREATE MATERIALIZED VIEW wide AS SELECT id, pad FROM big WHERE id % 2 = 0;",
    )
    .await
    .unwrap();
    // 400,000 rows of about 120 bytes: several times the budget across the table, the
    // aggregate's input and the projection.
    let n: i64 = 400_000;
    let mut csv = String::new();
    for id in 0..n {
        csv.push_str(&format!("{id},{},{:0>100}\n", id % 7, id));
    }
    copy_in(&c, "COPY big FROM STDIN CSV", &csv).await.unwrap();
    c.batch_execute("FLUSH").await.unwrap();
    // Expected values by arithmetic: ids congruent to g mod 7.
    let expect = |deleted_below: i64| -> Vec<Vec<String>> {
        (0..7)
            .map(|g| {
                let ids: Vec<i64> = (deleted_below..n).filter(|i| i % 7 == g).collect();
                vec![
                    g.to_string(),
                    ids.len().to_string(),
                    ids.iter().sum::<i64>().to_string(),
                ]
            })
            .collect()
    };
    let per_g = "SELECT g, n, s FROM per_g ORDER BY g";
    assert_eq!(common::query_text(&c, per_g).await, expect(0));
    let point = "SELECT pad FROM wide WHERE id = 123456";
    assert_eq!(
        common::query_text(&c, point).await,
        vec![vec![format!("{:0>100}", 123456)]]
    );
    c.batch_execute("DELETE FROM big WHERE id < 200000; FLUSH")
        .await
        .unwrap();
    assert_eq!(common::query_text(&c, per_g).await, expect(200_000));
    assert!(common::query_text(&c, point).await.is_empty());
    let counts = "SELECT count(*), min(id), max(id) FROM big";
    let left = vec![vec![
        "200000".to_string(),
        "200000".into(),
        (n - 1).to_string(),
    ]];
    assert_eq!(common::query_text(&c, counts).await, left);
    let memory = common::query_text(
        &c,
        // The cache may hold a block or two beyond its capacity while they are in use.
        "SELECT limit_bytes, cache_bytes <= limit_bytes + 8388608, rss_bytes > 0 FROM weir_catalog.memory",
    )
    .await;
    assert_eq!(
        memory,
        vec![vec![limit.to_string(), "t".into(), "t".into()]]
    );
    drop(c);
    server.stop().await;

    // After a restart the rows come back from the table's snapshot and changelog.
    let server = common::TestServer::start_with(config()).await;
    let c = server.client().await;
    assert_eq!(common::query_text(&c, per_g).await, expect(200_000));
    assert_eq!(common::query_text(&c, counts).await, left);
    drop(c);
    server.stop().await;
}

/// Views created over tables that already hold several backfill batches of rows (65,536
/// each) start with the right answer: an aggregate, a join, a semi join and a view over a
/// view, checked against arithmetic, then kept up to date through a delete and a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_created_over_large_tables_are_backfilled_batch_by_batch() {
    let dir = tempfile::tempdir().unwrap();
    let config = || weir::engine::EngineConfig::new(dir.path());
    let server = common::TestServer::start_with(config()).await;
    let c = server.client().await;
    c.batch_execute("CREATE TABLE f (id BIGINT PRIMARY KEY, g BIGINT); CREATE TABLE d (g BIGINT)")
        .await
        .unwrap();
    let n: i64 = 300_000;
    let csv: String = (0..n).map(|id| format!("{id},{}\n", id % 10)).collect();
    copy_in(&c, "COPY f FROM STDIN CSV", &csv).await.unwrap();
    c.batch_execute(
        "INSERT INTO d VALUES (1), (3), (3);
         FLUSH;
         CREATE MATERIALIZED VIEW per_g AS SELECT g, count(*) AS n, sum(id) AS s, max(id) AS hi FROM f GROUP BY g;
         CREATE MATERIALIZED VIEW joined AS SELECT f.g, count(*) AS n FROM f JOIN d ON f.g = d.g GROUP BY f.g;
         CREATE MATERIALIZED VIEW semi AS SELECT count(*) AS n, sum(id) AS s FROM f WHERE g IN (SELECT g FROM d);
         CREATE MATERIALIZED VIEW top AS SELECT sum(n) AS n, max(hi) AS hi FROM per_g;",
    )
    .await
    .unwrap();
    check_backfilled(&c, n, 0).await;
    c.batch_execute("DELETE FROM f WHERE id < 100000; FLUSH")
        .await
        .unwrap();
    check_backfilled(&c, n, 100_000).await;
    drop(c);
    server.stop().await;
    // Without checkpoints the views are backfilled again at start, batch by batch.
    wait_for_release(dir.path()).await;
    let server = common::TestServer::start_with(config()).await;
    let c = server.client().await;
    check_backfilled(&c, n, 100_000).await;
    drop(c);
    server.stop().await;
}

/// The answers of the views of `views_created_over_large_tables_are_backfilled_batch_by_batch`
/// by arithmetic, with the ids below `low` deleted from `0..n`.
async fn check_backfilled(c: &tokio_postgres::Client, n: i64, low: i64) {
    let ids = move |g: i64| (low..n).filter(move |i| i % 10 == g);
    let per_g: Vec<Vec<String>> = (0..10)
        .map(|g| {
            vec![
                g.to_string(),
                ids(g).count().to_string(),
                ids(g).sum::<i64>().to_string(),
                ids(g).max().unwrap().to_string(),
            ]
        })
        .collect();
    // d holds g = 1 once and g = 3 twice: each row of group 3 joins two rows.
    let joined = vec![
        vec!["1".to_string(), ids(1).count().to_string()],
        vec!["3".to_string(), (2 * ids(3).count()).to_string()],
    ];
    let semi = vec![vec![
        (ids(1).count() + ids(3).count()).to_string(),
        (ids(1).sum::<i64>() + ids(3).sum::<i64>()).to_string(),
    ]];
    let top = vec![vec![(n - low).to_string(), (n - 1).to_string()]];
    assert_eq!(
        common::query_text(c, "SELECT g, n, s, hi FROM per_g ORDER BY g").await,
        per_g
    );
    assert_eq!(
        common::query_text(c, "SELECT g, n FROM joined ORDER BY g").await,
        joined
    );
    assert_eq!(common::query_text(c, "SELECT n, s FROM semi").await, semi);
    assert_eq!(common::query_text(c, "SELECT n, hi FROM top").await, top);
}

/// `statement_timeout` and a client's cancel request stop a running query with `57014`
/// (PostgreSQL's messages), for `pg_sleep` and for a long DataFusion query, in both
/// protocols; the connection, an open block's rules and the data stay as they were, and a
/// cancel request while nothing runs does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_timeout_and_cancel_requests_stop_queries() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute("CREATE TABLE kept (v INT); INSERT INTO kept VALUES (1)")
        .await
        .unwrap();
    let long_query = "SELECT count(*) FROM generate_series(1, 4000000000) g";
    let expect_canceled = |err: tokio_postgres::Error, why: &str, started: Instant| {
        assert_eq!(err.code().map(|c| c.code()), Some("57014"), "{err}");
        let message = err.as_db_error().map(|d| d.message().to_string());
        assert_eq!(
            message.as_deref(),
            Some(format!("canceling statement due to {why}").as_str())
        );
        assert!(started.elapsed() < Duration::from_secs(10), "stopped late");
    };

    c.batch_execute("SET statement_timeout = '300ms'")
        .await
        .unwrap();
    for sql in ["SELECT pg_sleep(60)", long_query] {
        let started = Instant::now();
        let err = c.simple_query(sql).await.unwrap_err();
        expect_canceled(err, "statement timeout", started);
        let started = Instant::now();
        let err = c.query(sql, &[]).await.unwrap_err();
        expect_canceled(err, "statement timeout", started);
    }
    c.batch_execute("SET statement_timeout = 0").await.unwrap();

    // Nothing runs: the request is ignored and the next statement runs normally. The
    // client returns once the request is sent, not when the server has read it: the wait
    // lets the server take it while the session is idle, as this case means.
    c.cancel_token()
        .cancel_query(tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(common::query_text(&c, "SELECT 1").await, vec![vec!["1"]]);

    for sql in ["SELECT pg_sleep(60)", long_query] {
        // Sent again every 300 ms (one that comes before the statement starts is ignored),
        // until the statement ends.
        let token = c.cancel_token();
        let canceler = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(300)).await;
                token.cancel_query(tokio_postgres::NoTls).await.unwrap();
            }
        });
        let started = Instant::now();
        let err = c.simple_query(sql).await.unwrap_err();
        canceler.abort();
        expect_canceled(err, "user request", started);
    }

    // In a block the canceled statement aborts it, as any failed statement does.
    c.batch_execute("BEGIN").await.unwrap();
    c.batch_execute("SET statement_timeout = '200ms'")
        .await
        .unwrap();
    assert!(c.simple_query("SELECT pg_sleep(60)").await.is_err());
    let err = c.simple_query("SELECT 1").await.unwrap_err();
    assert_eq!(err.code().map(|c| c.code()), Some("25P02"), "{err}");
    c.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        common::query_text(&c, "SELECT v FROM kept").await,
        vec![vec!["1"]]
    );
    server.stop().await;
}

/// One frontend message: its type byte, then its length (itself included) and body.
fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// Reads backend messages until ReadyForQuery; returns their type bytes and bodies.
async fn read_until_ready(s: &mut tokio::net::TcpStream) -> Vec<(u8, Vec<u8>)> {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    loop {
        let kind = s
            .read_u8()
            .await
            .expect("a message (the server closed the connection)");
        let len = s.read_i32().await.unwrap() as usize;
        let mut body = vec![0; len - 4];
        s.read_exact(&mut body).await.unwrap();
        out.push((kind, body));
        if kind == b'Z' {
            return out;
        }
    }
}

/// An Execute message whose row limit is negative returns every row, as zero does (protocol
/// docs, 55.7: "zero denotes no limit"; PostgreSQL reads a negative limit so too): it
/// dropped the connection. Raw protocol messages, written by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_negative_execute_row_limit_means_all_rows() {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let mut s = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    // StartupMessage: length, protocol 3.0, user, end of parameters.
    let mut startup = 196_608i32.to_be_bytes().to_vec();
    startup.extend_from_slice(b"user\0postgres\0\0");
    let mut m = (startup.len() as i32 + 4).to_be_bytes().to_vec();
    m.extend_from_slice(&startup);
    s.write_all(&m).await.unwrap();
    read_until_ready(&mut s).await;
    for limit in [-1i32, 0, i32::MIN] {
        let mut batch = message(b'P', b"\0SELECT 1 UNION ALL SELECT 2\0\0\0");
        batch.extend(message(b'B', b"\0\0\0\0\0\0\0\0"));
        let mut execute = b"\0".to_vec();
        execute.extend_from_slice(&limit.to_be_bytes());
        batch.extend(message(b'E', &execute));
        batch.extend(message(b'S', b""));
        s.write_all(&batch).await.unwrap();
        let got = read_until_ready(&mut s).await;
        let kinds: Vec<u8> = got.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds, b"12DDCZ".to_vec(), "limit {limit}: {got:?}");
        assert_eq!(&got[4].1[..8], b"SELECT 2", "limit {limit}");
    }
    server.stop().await;
}

/// COPY reads numbers as a cast reads them: exponent forms into a `numeric` (PostgreSQL's
/// `numeric_in`), and a value too large for the column's precision is 22003 "numeric field
/// overflow", not a syntax error. Expected values by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_reads_numbers_as_casts_do() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute("CREATE TABLE m (id INT, v NUMERIC(8,2), x NUMERIC)")
        .await
        .unwrap();
    let n = copy_in(
        &c,
        "COPY m FROM STDIN CSV",
        "1,1e3,1.5E-3\n2,-2.5e-1,12E2\n",
    )
    .await
    .unwrap();
    assert_eq!(n, 2);
    let err = copy_in(&c, "COPY m FROM STDIN CSV", "3,1,1\n4,999999.999,1\n")
        .await
        .unwrap_err();
    let db = err.as_db_error().expect("db error");
    assert_eq!(db.code().code(), "22003", "{}", db.message());
    assert!(db.message().contains("line 2"), "{}", db.message());
    assert_eq!(
        common::query_text(&c, "SELECT id, v, x FROM m ORDER BY id").await,
        vec![vec!["1", "1000.00", "0.0015"], vec!["2", "-0.25", "1200"]]
    );
    server.stop().await;
}

/// A `numeric` parameter as raw `numeric_send` bytes (tokio-postgres has no decimal type).
#[derive(Debug)]
struct RawNumeric(Vec<i16>);

impl tokio_postgres::types::ToSql for RawNumeric {
    fn to_sql(
        &self,
        _ty: &tokio_postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<tokio_postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        for w in &self.0 {
            out.extend_from_slice(&w.to_be_bytes());
        }
        Ok(tokio_postgres::types::IsNull::No)
    }

    fn accepts(ty: &tokio_postgres::types::Type) -> bool {
        *ty == tokio_postgres::types::Type::NUMERIC
    }

    tokio_postgres::types::to_sql_checked!();
}

/// `numeric` parameters of 20 and more digits keep every digit, in a query and into a
/// table's `numeric` and `numeric(30,4)` columns (12345678901234567891 came in as
/// 1234567890123456789.1). Binary parameters; expected values by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numeric_parameters_keep_every_digit() {
    use tokio_postgres::types::Type;
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    // 12345678901234567891.5 in base 10000: 1234 5678 9012 3456 7891 . 5000.
    let big = RawNumeric(vec![6, 4, 0, 1, 1234, 5678, 9012, 3456, 7891, 5000]);
    let q = c
        .prepare_typed("SELECT $1::text", &[Type::NUMERIC])
        .await
        .unwrap();
    let row = c.query_one(&q, &[&big]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "12345678901234567891.5");
    c.batch_execute("CREATE TABLE pn (x NUMERIC, y NUMERIC(30,4))")
        .await
        .unwrap();
    let ins = c
        .prepare_typed(
            "INSERT INTO pn VALUES ($1, $2)",
            &[Type::NUMERIC, Type::NUMERIC],
        )
        .await
        .unwrap();
    c.execute(&ins, &[&big, &big]).await.unwrap();
    assert_eq!(
        common::query_text(&c, "SELECT x, y FROM pn").await,
        vec![vec!["12345678901234567891.5", "12345678901234567891.5000"]]
    );
    server.stop().await;
}

/// A `character(n)` value is sent padded to `n` characters and described as `bpchar`, a
/// `varchar` column as `varchar` (PostgreSQL 15 on the same rows: `'ab  '`, `'x   '`,
/// `'    '` and types 1042 and 1043), in the simple and the extended protocol, from a table
/// and from a view over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn character_values_are_padded_on_output() {
    use tokio_postgres::SimpleQueryMessage;
    use tokio_postgres::types::Type;
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute(
        "CREATE TABLE ch (id INT, a CHAR(4), v VARCHAR(3));
         INSERT INTO ch VALUES (1, 'ab', 'ab'), (2, 'x  ', 'x'), (3, '', ''), (4, NULL, NULL);
         CREATE MATERIALIZED VIEW chv AS SELECT id, a FROM ch;
         FLUSH",
    )
    .await
    .unwrap();
    let want = vec![
        Some("ab  ".to_string()),
        Some("x   ".to_string()),
        Some("    ".to_string()),
        None,
    ];
    for rel in ["ch", "chv"] {
        let sql = format!("SELECT a FROM {rel} ORDER BY id");
        let simple: Vec<Option<String>> = c
            .simple_query(&sql)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(r) => Some(r.get(0).map(str::to_string)),
                _ => None,
            })
            .collect();
        assert_eq!(simple, want, "{rel}, simple protocol");
        let stmt = c.prepare(&sql).await.unwrap();
        assert_eq!(column_types(&stmt), vec![Type::BPCHAR], "{rel}");
        let extended: Vec<Option<String>> = c
            .query(&stmt, &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(extended, want, "{rel}, extended protocol");
    }
    let stmt = c
        .prepare("SELECT v, 'ab'::char(3) FROM ch WHERE id = 1")
        .await
        .unwrap();
    assert_eq!(column_types(&stmt), vec![Type::VARCHAR, Type::BPCHAR]);
    let row = c.query_one(&stmt, &[]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "ab");
    assert_eq!(row.get::<_, String>(1), "ab ");
}

/// A client whose notices and warnings ([`tokio_postgres::AsyncMessage::Notice`]) arrive on
/// the returned channel as (severity, SQLSTATE, message).
async fn client_with_notices(
    addr: std::net::SocketAddr,
) -> (
    tokio_postgres::Client,
    tokio::sync::mpsc::UnboundedReceiver<(String, String, String)>,
) {
    let mut config = tokio_postgres::Config::new();
    config
        .host(addr.ip().to_string())
        .port(addr.port())
        .user("weir")
        .dbname("weir");
    let (client, mut conn) = config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connect");
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| conn.poll_message(cx));
        while let Some(Ok(message)) = futures::StreamExt::next(&mut messages).await {
            if let tokio_postgres::AsyncMessage::Notice(n) = message {
                let _ = tx.send((
                    n.severity().to_string(),
                    n.code().code().to_string(),
                    n.message().to_string(),
                ));
            }
        }
    });
    (client, rx)
}

/// A client and the notices it was sent.
struct Notices {
    client: tokio_postgres::Client,
    rx: tokio::sync::mpsc::UnboundedReceiver<(String, String, String)>,
}

impl Notices {
    /// Runs `sql` (simple protocol) and checks the notices it raised.
    async fn expect(&mut self, sql: &str, want: &[(&str, &str, &str)]) {
        self.client.batch_execute(sql).await.unwrap();
        // Each notice precedes its statement's CommandComplete, so all have arrived.
        let mut got = Vec::new();
        while let Ok(n) = self.rx.try_recv() {
            got.push(n);
        }
        let want: Vec<(String, String, String)> = want
            .iter()
            .map(|(s, c, m)| (s.to_string(), c.to_string(), m.to_string()))
            .collect();
        assert_eq!(got, want, "{sql}");
    }
}

/// Notices and warnings come as PostgreSQL sends them (PostgreSQL 15 on the same statements:
/// the same severities, SQLSTATEs and words), before the statement's result, in both
/// protocols, and `client_min_messages` holds back the lower levels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notices_and_warnings_reach_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let (c, notices) = client_with_notices(server.addr).await;
    let mut notices = Notices {
        client: c,
        rx: notices,
    };
    notices.expect("CREATE TABLE nt (a INT)", &[]).await;
    notices
        .expect(
            "CREATE TABLE IF NOT EXISTS nt (a INT)",
            &[(
                "NOTICE",
                "42P07",
                "relation \"nt\" already exists, skipping",
            )],
        )
        .await;
    notices
        .expect(
            "CREATE MATERIALIZED VIEW IF NOT EXISTS nt AS SELECT 1 AS x",
            &[(
                "NOTICE",
                "42P07",
                "relation \"nt\" already exists, skipping",
            )],
        )
        .await;
    notices.expect("CREATE INDEX nt_a ON nt (a)", &[]).await;
    notices
        .expect(
            "CREATE INDEX IF NOT EXISTS nt_a ON nt (a)",
            &[(
                "NOTICE",
                "42P07",
                "relation \"nt_a\" already exists, skipping",
            )],
        )
        .await;
    notices
        .expect(
            "DROP TABLE IF EXISTS nt_missing, nt_gone",
            &[
                (
                    "NOTICE",
                    "00000",
                    "table \"nt_missing\" does not exist, skipping",
                ),
                (
                    "NOTICE",
                    "00000",
                    "table \"nt_gone\" does not exist, skipping",
                ),
            ],
        )
        .await;
    notices
        .expect(
            "DROP MATERIALIZED VIEW IF EXISTS mv_missing",
            &[(
                "NOTICE",
                "00000",
                "materialized view \"mv_missing\" does not exist, skipping",
            )],
        )
        .await;
    notices
        .expect(
            "DROP INDEX IF EXISTS ix_missing",
            &[(
                "NOTICE",
                "00000",
                "index \"ix_missing\" does not exist, skipping",
            )],
        )
        .await;
    // In a block, where drops are deferred to COMMIT.
    notices
        .expect(
            "BEGIN; DROP TABLE IF EXISTS nt_missing; DROP INDEX IF EXISTS ix_missing; COMMIT",
            &[
                (
                    "NOTICE",
                    "00000",
                    "table \"nt_missing\" does not exist, skipping",
                ),
                (
                    "NOTICE",
                    "00000",
                    "index \"ix_missing\" does not exist, skipping",
                ),
            ],
        )
        .await;
    notices
        .expect(
            "COMMIT",
            &[("WARNING", "25P01", "there is no transaction in progress")],
        )
        .await;
    notices
        .expect(
            "ROLLBACK",
            &[("WARNING", "25P01", "there is no transaction in progress")],
        )
        .await;
    notices
        .expect(
            "BEGIN; BEGIN; COMMIT",
            &[(
                "WARNING",
                "25001",
                "there is already a transaction in progress",
            )],
        )
        .await;
    notices
        .expect(
            "SET LOCAL application_name = 'x'",
            &[(
                "WARNING",
                "25P01",
                "SET LOCAL can only be used in transaction blocks",
            )],
        )
        .await;
    // The extended protocol sends them too.
    notices
        .client
        .execute("DROP TABLE IF EXISTS nt_missing", &[])
        .await
        .unwrap();
    assert_eq!(
        notices.rx.try_recv().ok(),
        Some((
            "NOTICE".to_string(),
            "00000".to_string(),
            "table \"nt_missing\" does not exist, skipping".to_string()
        ))
    );
    // `warning` holds back notices, `error` warnings too.
    notices
        .expect("SET client_min_messages = warning", &[])
        .await;
    notices.expect("DROP TABLE IF EXISTS nt_missing", &[]).await;
    notices
        .expect(
            "COMMIT",
            &[("WARNING", "25P01", "there is no transaction in progress")],
        )
        .await;
    notices.expect("SET client_min_messages = error", &[]).await;
    notices.expect("COMMIT", &[]).await;
    let err = notices
        .client
        .batch_execute("SET client_min_messages = 'loud'")
        .await
        .unwrap_err();
    assert_eq!(err.code().map(|c| c.code()), Some("22023"), "{err}");
    drop(notices);
    server.stop().await;
}
