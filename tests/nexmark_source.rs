//! Connector tables fed by the Nexmark generator, read back over pgwire and checked against
//! the committed reference data of the Python generator (`tests/data/nexmark/`): the three
//! tables of the 100,000-bid stream whole (their CSV lines' SHA-256), a view over the bids
//! against aggregates computed here from those lines, refused writes, and exactly-once
//! ingestion across a crash mid-stream.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use weir::connectors::nexmark::{NexmarkConfig, NexmarkGenerator, NexmarkTable, events_for_bids};

const BID_COLUMNS: &str = "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, \
     url VARCHAR, date_time TIMESTAMP, extra VARCHAR";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The committed line count and SHA-256 of the reference generator's CSV file of `table`
/// for the 100,000-bid stream.
fn committed_hash(table: &str) -> (usize, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/nexmark/reference_100k.txt");
    let text = std::fs::read_to_string(path).expect("reference_100k.txt");
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{table} ")))
        .expect("a line of the table");
    let fields: Vec<&str> = line.split_whitespace().collect();
    (fields[1].parse().unwrap(), fields[2].to_string())
}

fn committed_bid_hash() -> String {
    let (lines, sha) = committed_hash("bid");
    assert_eq!(lines, 100_000);
    sha
}

fn ts(t: chrono::NaiveDateTime) -> String {
    t.format("%Y-%m-%d %H:%M:%S%.3f").to_string()
}

/// Every row of `table` (person or auction) in id order, which is event order, as the
/// reference CSV's lines.
async fn table_lines_by_id(client: &tokio_postgres::Client, table: &str) -> Vec<String> {
    let query = match table {
        "person" => {
            "SELECT id, name, email_address, credit_card, city, state, date_time, extra \
             FROM person ORDER BY id"
        }
        _ => {
            "SELECT id, item_name, description, initial_bid, reserve, date_time, expires, \
             seller, category, extra FROM auction ORDER BY id"
        }
    };
    let rows = client.query(query, &[]).await.unwrap();
    rows.iter()
        .map(|r| match table {
            "person" => format!(
                "{},{},{},{},{},{},{},{}",
                r.get::<_, i64>(0),
                r.get::<_, String>(1),
                r.get::<_, String>(2),
                r.get::<_, String>(3),
                r.get::<_, String>(4),
                r.get::<_, String>(5),
                ts(r.get(6)),
                r.get::<_, String>(7)
            ),
            _ => format!(
                "{},{},{},{},{},{},{},{},{},{}",
                r.get::<_, i64>(0),
                r.get::<_, String>(1),
                r.get::<_, String>(2),
                r.get::<_, i64>(3),
                r.get::<_, i64>(4),
                ts(r.get(5)),
                ts(r.get(6)),
                r.get::<_, i64>(7),
                r.get::<_, i64>(8),
                r.get::<_, String>(9)
            ),
        })
        .collect()
}

/// The bid CSV lines of events `0 .. events` of the default stream, in event order.
fn reference_bid_lines(events: u64) -> Vec<String> {
    let generator =
        NexmarkGenerator::new(NexmarkConfig::default(), NexmarkTable::Bid, Some(events)).unwrap();
    let mut out = Vec::new();
    generator.write_csv_between(0, events, &mut out).unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Every row of bid table `table`, formatted as the reference CSV's lines, sorted.
async fn table_bid_lines(client: &tokio_postgres::Client, table: &str) -> Vec<String> {
    let rows = client
        .query(
            &format!("SELECT auction, bidder, price, channel, url, date_time, extra FROM {table}"),
            &[],
        )
        .await
        .unwrap();
    let mut lines: Vec<String> = rows
        .iter()
        .map(|r| {
            let t: chrono::NaiveDateTime = r.get(5);
            format!(
                "{},{},{},{},{},{},{}",
                r.get::<_, i64>(0),
                r.get::<_, i64>(1),
                r.get::<_, i64>(2),
                r.get::<_, String>(3),
                r.get::<_, String>(4),
                ts(t),
                r.get::<_, String>(6)
            )
        })
        .collect();
    lines.sort();
    lines
}

fn sha_of_lines(lines: &[String]) -> String {
    let mut hasher = Sha256::new();
    for l in lines {
        hasher.update(l.as_bytes());
        hasher.update(b"\n");
    }
    hex(&hasher.finalize())
}

async fn source_status(client: &tokio_postgres::Client, name: &str) -> (i64, String) {
    let row = client
        .query_one(
            "SELECT offset_events, status FROM weir_catalog.sources WHERE name = $1",
            &[&name],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_100k_bid_stream_equals_the_reference_and_feeds_a_view() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let client = server.client().await;
    let events = events_for_bids(100_000);
    client
        .batch_execute(&format!(
            "CREATE TABLE bid ({BID_COLUMNS}) WITH (connector = 'nexmark', \
             nexmark.table = 'bid', nexmark.events = {events}, nexmark.events_per_second = 0)"
        ))
        .await
        .unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE person (id BIGINT, name VARCHAR, email_address VARCHAR, \
             credit_card VARCHAR, city VARCHAR, state VARCHAR, date_time TIMESTAMP, \
             extra VARCHAR) WITH (connector = 'nexmark', nexmark.table = 'person', \
             nexmark.events = {events}); \
             CREATE TABLE auction (id BIGINT, item_name VARCHAR, description VARCHAR, \
             initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, \
             seller BIGINT, category BIGINT, extra VARCHAR) WITH (connector = 'nexmark', \
             nexmark.table = 'auction', nexmark.events = {events})"
        ))
        .await
        .unwrap();
    // The view exists before most rows arrive: it is maintained, not only backfilled.
    client
        .batch_execute(
            "CREATE MATERIALIZED VIEW per_auction AS \
             SELECT auction, count(*) AS bids, max(price) AS top FROM bid GROUP BY auction",
        )
        .await
        .unwrap();
    client.batch_execute("FLUSH").await.unwrap();
    assert_eq!(
        source_status(&client, "bid").await,
        (events as i64, "DONE".to_string())
    );

    // The reference lines: the generator's, which must hash to the committed reference file.
    let reference = reference_bid_lines(events);
    assert_eq!(reference.len(), 100_000);
    let mut hasher = Sha256::new();
    for l in &reference {
        hasher.update(l.as_bytes());
        hasher.update(b"\n");
    }
    assert_eq!(hex(&hasher.finalize()), committed_bid_hash());

    // The table holds exactly those rows (bids sharing a date_time have no order in SQL:
    // compare the sorted lines).
    let mut sorted = reference.clone();
    sorted.sort();
    let got = table_bid_lines(&client, "bid").await;
    assert_eq!(got.len(), 100_000);
    assert_eq!(sha_of_lines(&got), sha_of_lines(&sorted));

    // Persons and auctions have unique, increasing ids: in id order their lines are the
    // reference files themselves.
    for table in ["person", "auction"] {
        let lines = table_lines_by_id(&client, table).await;
        let (count, sha) = committed_hash(table);
        assert_eq!(lines.len(), count, "{table} rows");
        let mut hasher = Sha256::new();
        for l in &lines {
            hasher.update(l.as_bytes());
            hasher.update(b"\n");
        }
        assert_eq!(hex(&hasher.finalize()), sha, "{table} SHA-256");
    }

    // The view against aggregates of the reference lines.
    let mut expected: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for l in &reference {
        let mut f = l.split(',');
        let auction: i64 = f.next().unwrap().parse().unwrap();
        let price: i64 = f.nth(1).unwrap().parse().unwrap();
        let e = expected.entry(auction).or_insert((0, i64::MIN));
        e.0 += 1;
        e.1 = e.1.max(price);
    }
    let rows = client
        .query("SELECT auction, bids, top FROM per_auction", &[])
        .await
        .unwrap();
    let got: BTreeMap<i64, (i64, i64)> = rows
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    assert_eq!(got.len(), expected.len());
    assert_eq!(got, expected);

    // Writes are refused, COPY included.
    let err = client
        .copy_in::<_, bytes::Bytes>("COPY bid FROM STDIN")
        .await
        .err()
        .expect("COPY refused");
    let db = err.as_db_error().expect("a database error");
    assert_eq!(db.code().code(), "0A000");
    assert!(
        db.message().contains("fed by the nexmark connector"),
        "{db}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_stream_neither_loses_nor_repeats_a_row() {
    let dir = tempfile::tempdir().unwrap();
    let bids = 30_000;
    let events = events_for_bids(bids);
    let server = common::TestServer::start(dir.path()).await;
    let client = server.client().await;
    // About 2 seconds of stream at 16,000 events per second.
    client
        .batch_execute(&format!(
            "CREATE TABLE bid ({BID_COLUMNS}) WITH (connector = 'nexmark', \
             nexmark.table = 'bid', nexmark.events = {events}, \
             nexmark.events_per_second = 16000)"
        ))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let at_crash = loop {
        let (offset, status) = source_status(&client, "bid").await;
        assert_eq!(status, "RUNNING", "the stream ended before the crash");
        if offset > 0 {
            break offset;
        }
        assert!(Instant::now() < deadline, "no progress");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!((at_crash as u64) < events);
    drop(client);
    server.stop_without_shutdown().await;

    let server = common::TestServer::start(dir.path()).await;
    let client = server.client().await;
    let (resumed, _) = source_status(&client, "bid").await;
    assert!(
        resumed >= at_crash,
        "resumed at {resumed}, before {at_crash}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (offset, status) = source_status(&client, "bid").await;
        if status == "DONE" {
            assert_eq!(offset as u64, events);
            break;
        }
        assert_eq!(status, "RUNNING");
        assert!(Instant::now() < deadline, "the stream did not end");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut reference = reference_bid_lines(events);
    reference.sort();
    let got = table_bid_lines(&client, "bid").await;
    assert_eq!(got.len() as u64, bids);
    assert_eq!(got, reference);
    server.stop().await;
}
