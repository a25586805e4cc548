//! Transaction blocks seen from two sessions: a block's writes are its own until COMMIT
//! (other sessions and views see none of them), a ROLLBACK leaves no trace whatever other
//! sessions wrote meanwhile, and a COMMIT writes all of the block or, on a conflict, none of
//! it. Expected rows worked out by hand (PostgreSQL 15 gives the same for every step both
//! engines accept; where PostgreSQL would make the second writer wait, Weir lets the first
//! committer win and fails the other's COMMIT).

use crate::common;

type Rows = Vec<Vec<String>>;

fn rows(expected: &[&[&str]]) -> Rows {
    expected
        .iter()
        .map(|r| r.iter().map(|v| v.to_string()).collect())
        .collect()
}

async fn setup(c: &tokio_postgres::Client) {
    c.batch_execute(
        "CREATE TABLE acct (id INT PRIMARY KEY, balance INT);
         CREATE TABLE audit (note TEXT);
         INSERT INTO acct VALUES (1, 100), (2, 50);
         CREATE MATERIALIZED VIEW total AS SELECT count(*) AS n, sum(balance) AS s FROM acct;
         FLUSH",
    )
    .await
    .unwrap();
}

fn code(e: &tokio_postgres::Error) -> Option<&str> {
    e.code().map(|c| c.code())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_is_seen_by_others_only_after_commit() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let a = server.client().await;
    let b = server.client().await;
    setup(&a).await;

    a.batch_execute(
        "BEGIN;
         UPDATE acct SET balance = balance - 30 WHERE id = 1;
         INSERT INTO acct VALUES (3, 7);
         DELETE FROM acct WHERE id = 2;
         INSERT INTO audit VALUES ('moved 30')",
    )
    .await
    .unwrap();
    // The block reads its own writes, with filters and key lookups too.
    let select = "SELECT id, balance FROM acct ORDER BY id";
    assert_eq!(
        common::query_text(&a, select).await,
        rows(&[&["1", "70"], &["3", "7"]])
    );
    assert_eq!(
        common::query_text(&a, "SELECT balance FROM acct WHERE id = 2").await,
        Rows::new()
    );
    assert_eq!(
        common::query_text(&a, "SELECT balance FROM acct WHERE id = 3").await,
        rows(&[&["7"]])
    );
    // The other session and the view see none of it, after an epoch too.
    b.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        common::query_text(&b, select).await,
        rows(&[&["1", "100"], &["2", "50"]])
    );
    assert_eq!(
        common::query_text(&b, "SELECT count(*) FROM audit").await,
        rows(&[&["0"]])
    );
    assert_eq!(
        common::query_text(&b, "SELECT n, s FROM total").await,
        rows(&[&["2", "150"]])
    );

    a.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        common::query_text(&b, select).await,
        rows(&[&["1", "70"], &["3", "7"]])
    );
    assert_eq!(
        common::query_text(&b, "SELECT note FROM audit").await,
        rows(&[&["moved 30"]])
    );
    b.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        common::query_text(&b, "SELECT n, s FROM total").await,
        rows(&[&["2", "77"]])
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_leaves_other_sessions_writes_alone() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let a = server.client().await;
    let b = server.client().await;
    setup(&a).await;

    a.batch_execute(
        "BEGIN;
         INSERT INTO acct VALUES (3, 300);
         UPDATE acct SET balance = 0 WHERE id = 2",
    )
    .await
    .unwrap();
    // Another session changes the row the block changed and takes a key it did not.
    b.batch_execute("UPDATE acct SET balance = 55 WHERE id = 2; INSERT INTO acct VALUES (4, 4)")
        .await
        .unwrap();
    a.batch_execute("ROLLBACK").await.unwrap();
    let expected = rows(&[&["1", "100"], &["2", "55"], &["4", "4"]]);
    for c in [&a, &b] {
        assert_eq!(
            common::query_text(c, "SELECT id, balance FROM acct ORDER BY id").await,
            expected
        );
    }
    b.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        common::query_text(&b, "SELECT n, s FROM total").await,
        rows(&[&["3", "159"]])
    );

    // A block whose connection closes is rolled back: none of it is ever stored.
    let c = server.client().await;
    c.batch_execute("BEGIN; INSERT INTO acct VALUES (5, 5)")
        .await
        .unwrap();
    drop(c);
    b.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        common::query_text(&b, "SELECT count(*) FROM acct WHERE id = 5").await,
        rows(&[&["0"]])
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_commit_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let a = server.client().await;
    let b = server.client().await;
    setup(&a).await;

    // The block takes key 9 and writes another table; another session takes key 9 first.
    a.batch_execute(
        "BEGIN;
         INSERT INTO audit VALUES ('opened 9');
         INSERT INTO acct VALUES (9, 90)",
    )
    .await
    .unwrap();
    b.batch_execute("INSERT INTO acct VALUES (9, 91)")
        .await
        .unwrap();
    let err = a.batch_execute("COMMIT").await.unwrap_err();
    assert_eq!(code(&err), Some("23505"), "{err}");
    // The block is over and none of it was written, not even to the other table.
    assert_eq!(
        common::query_text(&a, "SELECT balance FROM acct WHERE id = 9").await,
        rows(&[&["91"]])
    );
    assert_eq!(
        common::query_text(&a, "SELECT count(*) FROM audit").await,
        rows(&[&["0"]])
    );

    // The block updates a row another session changes before the COMMIT.
    a.batch_execute(
        "BEGIN;
         INSERT INTO audit VALUES ('took 30');
         UPDATE acct SET balance = balance - 30 WHERE id = 1",
    )
    .await
    .unwrap();
    b.batch_execute("UPDATE acct SET balance = 1 WHERE id = 1")
        .await
        .unwrap();
    let err = a.batch_execute("COMMIT").await.unwrap_err();
    assert_eq!(code(&err), Some("40001"), "{err}");
    assert_eq!(
        common::query_text(&b, "SELECT id, balance FROM acct ORDER BY id").await,
        rows(&[&["1", "1"], &["2", "50"], &["9", "91"]])
    );
    assert_eq!(
        common::query_text(&b, "SELECT count(*) FROM audit").await,
        rows(&[&["0"]])
    );
    // Run again, the block commits.
    a.batch_execute(
        "BEGIN;
         INSERT INTO audit VALUES ('took 30');
         UPDATE acct SET balance = balance - 30 WHERE id = 1;
         COMMIT",
    )
    .await
    .unwrap();
    b.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        common::query_text(&b, "SELECT n, s FROM total").await,
        rows(&[&["3", "112"]])
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_after_a_commit_in_one_query_are_a_new_implicit_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let c = server.client().await;
    c.batch_execute("CREATE TABLE m (id INT PRIMARY KEY, x INT)")
        .await
        .unwrap();
    // PostgreSQL keeps 20 (committed) and undoes 21 with the failing division.
    let err = c
        .batch_execute(
            "BEGIN; INSERT INTO m VALUES (20, 1); COMMIT; INSERT INTO m VALUES (21, 1); SELECT 1 / 0",
        )
        .await
        .unwrap_err();
    assert_eq!(code(&err), Some("22012"), "{err}");
    assert_eq!(
        common::query_text(&c, "SELECT id FROM m ORDER BY id").await,
        rows(&[&["20"]])
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_reads_its_own_version_of_the_keys_it_changed() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let a = server.client().await;
    let b = server.client().await;
    setup(&a).await;
    a.batch_execute(
        "BEGIN;
         UPDATE acct SET balance = 10 WHERE id = 1;
         INSERT INTO acct VALUES (3, 30);
         DELETE FROM acct WHERE id = 2",
    )
    .await
    .unwrap();
    // Another session commits other versions of the same keys.
    b.batch_execute(
        "UPDATE acct SET balance = 11 WHERE id = 1;
         INSERT INTO acct VALUES (3, 33);
         UPDATE acct SET balance = 55 WHERE id = 2",
    )
    .await
    .unwrap();
    // The block still sees one row per key, its own (PostgreSQL would have made the other
    // session wait).
    assert_eq!(
        common::query_text(&a, "SELECT id, balance FROM acct ORDER BY id").await,
        rows(&[&["1", "10"], &["3", "30"]])
    );
    assert_eq!(
        common::query_text(&a, "SELECT count(*), sum(balance) FROM acct").await,
        rows(&[&["2", "40"]])
    );
    // A write to a key nobody else changed goes on; the COMMIT then fails whole.
    a.batch_execute("INSERT INTO acct VALUES (4, 4)")
        .await
        .unwrap();
    let err = a.batch_execute("COMMIT").await.unwrap_err();
    assert_eq!(code(&err), Some("40001"), "{err}");
    assert_eq!(
        common::query_text(&a, "SELECT id, balance FROM acct ORDER BY id").await,
        rows(&[&["1", "11"], &["2", "55"], &["3", "33"]])
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_dropped_by_another_session_fails_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let a = server.client().await;
    let b = server.client().await;
    setup(&a).await;
    a.batch_execute("BEGIN; INSERT INTO acct VALUES (3, 3); INSERT INTO audit VALUES ('x')")
        .await
        .unwrap();
    b.batch_execute("DROP MATERIALIZED VIEW total; DROP TABLE acct")
        .await
        .unwrap();
    let err = a.batch_execute("COMMIT").await.unwrap_err();
    assert_eq!(code(&err), Some("40001"), "{err}");
    // Nothing of the block was written, not even to the table still there.
    assert_eq!(
        common::query_text(&b, "SELECT count(*) FROM audit").await,
        rows(&[&["0"]])
    );
    server.stop().await;
}
