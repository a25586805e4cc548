//! Randomized differential test: random inserts, updates and deletes (with NULLs and duplicate
//! rows) on small tables under live views; after each seed every view must equal the same query
//! run in batch by DataFusion over the final table contents.

use crate::common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const VIEWS: &[(&str, &str)] = &[
    (
        "agg",
        "SELECT k, count(*) AS n, count(v) AS nv, sum(v) AS s, min(v) AS mn, max(v) AS mx, count(DISTINCT v) AS d FROM a GROUP BY k",
    ),
    (
        "glob",
        "SELECT count(*) AS n, sum(v) AS s, max(v) AS m, avg(v) AS av FROM a",
    ),
    ("ij", "SELECT a.k, a.v, b.w FROM a JOIN b ON a.k = b.k"),
    (
        "lj",
        "SELECT a.k AS ak, a.v, b.k AS bk, b.w FROM a LEFT JOIN b ON a.k = b.k",
    ),
    (
        "fj",
        "SELECT a.k AS ak, a.v, b.k AS bk, b.w FROM a FULL JOIN b ON a.k = b.k",
    ),
    (
        "rjagg",
        "SELECT b.k, sum(a.v) AS s, count(*) AS n, count(a.v) AS nv FROM a RIGHT JOIN b ON a.k = b.k GROUP BY b.k",
    ),
    (
        "un",
        "SELECT v AS x FROM a WHERE v > 2 UNION ALL SELECT w FROM b",
    ),
    ("dist", "SELECT DISTINCT k, v FROM a"),
    (
        "having",
        "SELECT k, sum(w) AS s FROM b GROUP BY k HAVING count(*) > 1",
    ),
];

/// A view over a view, checked the same way.
const VIEW_ON_VIEW: (&str, &str) = ("vv", "SELECT n, count(*) AS c FROM agg GROUP BY n");

fn value(rng: &mut StdRng) -> String {
    if rng.random_bool(0.15) {
        "NULL".into()
    } else {
        rng.random_range(0..6).to_string()
    }
}

fn sorted(mut rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
    rows.sort();
    rows
}

/// Compares rows as text, numbers to 1e-9 relative.
fn same(a: &[Vec<String>], b: &[Vec<String>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.len() == y.len()
                && x.iter().zip(y).all(|(p, q)| {
                    p == q
                        || match (p.parse::<f64>(), q.parse::<f64>()) {
                            (Ok(p), Ok(q)) => (p - q).abs() <= 1e-9 * p.abs().max(q.abs()).max(1.0),
                            _ => false,
                        }
                })
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_changes_match_batch_queries() {
    let seeds: u64 = std::env::var("WEIR_DIFF_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start(dir.path()).await;
    let client = server.client().await;
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        client
            .batch_execute("CREATE TABLE a (k INT, v INT); CREATE TABLE b (k INT, w INT)")
            .await
            .unwrap();
        // Some data before the views exist (backfill), the rest after.
        let before = rng.random_range(0..4);
        for step in 0..24 {
            if step == before {
                for (name, q) in VIEWS.iter().chain(std::iter::once(&VIEW_ON_VIEW)) {
                    client
                        .batch_execute(&format!("CREATE MATERIALIZED VIEW {name} AS {q}"))
                        .await
                        .unwrap_or_else(|e| panic!("seed {seed}: {name}: {e}"));
                }
            }
            let table = if rng.random_bool(0.5) {
                ("a", "v")
            } else {
                ("b", "w")
            };
            let sql = match rng.random_range(0..10) {
                0..=4 => {
                    let rows: Vec<String> = (0..rng.random_range(1..5))
                        .map(|_| format!("({}, {})", value(&mut rng), value(&mut rng)))
                        .collect();
                    // Duplicate rows on purpose.
                    let dup = if rng.random_bool(0.3) {
                        format!(", {}", rows[0])
                    } else {
                        String::new()
                    };
                    format!("INSERT INTO {} VALUES {}{}", table.0, rows.join(", "), dup)
                }
                5..=6 => format!(
                    "DELETE FROM {} WHERE k = {}",
                    table.0,
                    rng.random_range(0..6)
                ),
                7 => format!("DELETE FROM {} WHERE {} IS NULL", table.0, table.1),
                _ => format!(
                    "UPDATE {} SET {} = {} + 1 WHERE k = {}",
                    table.0,
                    table.1,
                    table.1,
                    rng.random_range(0..6)
                ),
            };
            client
                .batch_execute(&sql)
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: {sql}: {e}"));
            if rng.random_bool(0.2) {
                client.batch_execute("FLUSH").await.unwrap();
            }
        }
        client.batch_execute("FLUSH").await.unwrap();
        for (name, q) in VIEWS.iter().chain(std::iter::once(&VIEW_ON_VIEW)) {
            let live = sorted(common::query_text(&client, &format!("SELECT * FROM {name}")).await);
            let batch = sorted(common::query_text(&client, q).await);
            assert!(
                same(&live, &batch),
                "seed {seed}, view {name}:\nlive  {live:?}\nbatch {batch:?}"
            );
        }
        client
            .batch_execute("DROP TABLE a CASCADE; DROP TABLE b CASCADE")
            .await
            .unwrap();
    }
    server.stop().await;
}
