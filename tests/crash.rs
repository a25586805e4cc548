//! Crash test: the real server binary is killed with SIGKILL at random moments (checkpoints run
//! every 100 ms, so many kills land during one) while a client streams INSERTs, COPYs, DELETEs
//! and UPDATEs into tables under views with aggregates, joins and a view over a view. After each
//! restart the client resolves its one in-doubt write from the table contents and resumes.
//! At the end every view must equal the answer computed here from the acknowledged writes.
//!
//! `WEIR_CRASH_KILLS` sets the kills per mode (default 20; the long mode uses 200);
//! `WEIR_CRASH_SEED` replaces the seeds.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{connect_child_logging, free_port};
use futures::SinkExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const KEYS: i32 = 20;

fn start(dir: &Path, port: u16, mode: &str) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .unwrap();
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
            dir.join("data").to_str().unwrap(),
            "--barrier-interval-ms",
            "50",
            // Table snapshot steps and changelog truncation every 100 ms, so kills land in them.
            "--table-snapshot-interval-ms",
            "100",
            "--set",
            "checkpoint.interval=100ms",
            "--set",
            &format!("checkpoint.mode={mode}"),
        ])
        // Widen the checkpoints' async phase so that kills land inside it (test builds only).
        .env("WEIR_FAILPOINTS", "checkpoint::async_phase=sleep(20)")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start weir")
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Vec<(i64, i32, Option<i64>)>),
    Copy(Vec<(i64, i32, Option<i64>)>),
    Delete(i64, i64),
    Update(i32, String),
}

fn gen_rows(rng: &mut StdRng, n: usize, next_id: &mut i64) -> Vec<(i64, i32, Option<i64>)> {
    (0..n)
        .map(|_| {
            let id = *next_id;
            *next_id += 1;
            let v = if rng.random_range(0..10) == 0 {
                None
            } else {
                Some(rng.random_range(-100..1000))
            };
            (id, rng.random_range(0..KEYS + 3), v)
        })
        .collect()
}

/// A group of `v_agg`: count, sum, min, max.
type Group = (i64, Option<i64>, Option<i64>, Option<i64>);

/// What the client knows was acknowledged.
#[derive(Default)]
struct Model {
    ev: BTreeMap<i64, (i32, Option<i64>)>,
    batches: Vec<(i64, i64)>,
    dim: BTreeMap<i32, String>,
    next_id: i64,
    version: u64,
    /// Rows of all acknowledged changes to `ev` (inserts and deletes).
    changes: usize,
}

impl Model {
    fn next_op(&mut self, rng: &mut StdRng) -> Op {
        let roll = rng.random_range(0..100);
        if roll < 45 {
            Op::Insert(gen_rows(rng, 1 + (roll as usize % 30), &mut self.next_id))
        } else if roll < 75 {
            Op::Copy(gen_rows(rng, 100 + roll as usize * 20, &mut self.next_id))
        } else if roll < 88 && !self.batches.is_empty() {
            let i = rng.random_range(0..self.batches.len());
            let (a, b) = self.batches[i];
            Op::Delete(a, b)
        } else {
            self.version += 1;
            let k = rng.random_range(0..KEYS);
            Op::Update(k, format!("n{k}_{}", self.version))
        }
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Insert(rows) | Op::Copy(rows) => {
                for (id, k, v) in rows {
                    self.ev.insert(*id, (*k, *v));
                }
                self.changes += rows.len();
                self.batches.push((rows[0].0, rows[rows.len() - 1].0 + 1));
            }
            Op::Delete(a, b) => {
                let ids: Vec<i64> = self.ev.range(*a..*b).map(|(id, _)| *id).collect();
                self.changes += ids.len();
                for id in ids {
                    self.ev.remove(&id);
                }
                self.batches.retain(|r| *r != (*a, *b));
            }
            Op::Update(k, name) => {
                self.dim.insert(*k, name.clone());
            }
        }
    }

    /// The views' expected rows, as text, in the order the check queries use.
    fn expected(&self) -> BTreeMap<&'static str, Vec<Vec<String>>> {
        let opt = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or("NULL".into());
        let mut groups: BTreeMap<i32, Group> = BTreeMap::new();
        for (k, v) in self.ev.values() {
            let g = groups.entry(*k).or_insert((0, None, None, None));
            g.0 += 1;
            if let Some(v) = v {
                g.1 = Some(g.1.unwrap_or(0) + v);
                g.2 = Some(g.2.map_or(*v, |m| m.min(*v)));
                g.3 = Some(g.3.map_or(*v, |m| m.max(*v)));
            }
        }
        let agg: Vec<Vec<String>> = groups
            .iter()
            .map(|(k, g)| vec![k.to_string(), g.0.to_string(), opt(g.1), opt(g.2), opt(g.3)])
            .collect();
        let mut by_name: BTreeMap<String, (i64, Option<i64>)> = BTreeMap::new();
        for (k, v) in self.ev.values() {
            if let Some(name) = self.dim.get(k) {
                let g = by_name.entry(name.clone()).or_insert((0, None));
                g.0 += 1;
                if let Some(v) = v {
                    g.1 = Some(g.1.unwrap_or(0) + v);
                }
            }
        }
        let join: Vec<Vec<String>> = by_name
            .iter()
            .map(|(n, g)| vec![n.clone(), g.0.to_string(), opt(g.1)])
            .collect();
        let left: Vec<Vec<String>> = self
            .dim
            .keys()
            .map(|k| {
                let n = self.ev.values().filter(|(kk, _)| kk == k).count();
                vec![k.to_string(), n.to_string()]
            })
            .collect();
        let top = vec![vec![groups.len().to_string(), self.ev.len().to_string()]];
        BTreeMap::from([
            ("SELECT k, n, s, lo, hi FROM v_agg ORDER BY k", agg),
            ("SELECT name, n, s FROM v_join ORDER BY name", join),
            ("SELECT k, n FROM v_left ORDER BY k", left),
            ("SELECT groups, total FROM v_top", top),
        ])
    }
}

fn values(rows: &[(i64, i32, Option<i64>)]) -> String {
    rows.iter()
        .map(|(id, k, v)| {
            format!(
                "({id}, {k}, {})",
                v.map(|x| x.to_string()).unwrap_or("NULL".into())
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

async fn execute(c: &tokio_postgres::Client, op: &Op) -> Result<(), tokio_postgres::Error> {
    match op {
        Op::Insert(rows) => {
            c.batch_execute(&format!("INSERT INTO ev VALUES {}", values(rows)))
                .await
        }
        Op::Copy(rows) => {
            let mut data = String::new();
            for (id, k, v) in rows {
                let v = v.map(|x| x.to_string()).unwrap_or("\\N".into());
                data.push_str(&format!("{id}\t{k}\t{v}\n"));
            }
            let sink = c.copy_in("COPY ev FROM STDIN").await?;
            futures::pin_mut!(sink);
            sink.send(bytes::Bytes::from(data)).await?;
            sink.finish().await.map(|_| ())
        }
        Op::Delete(a, b) => {
            c.batch_execute(&format!("DELETE FROM ev WHERE id >= {a} AND id < {b}"))
                .await
        }
        Op::Update(k, name) => {
            c.batch_execute(&format!("UPDATE dim SET name = '{name}' WHERE k = {k}"))
                .await
        }
    }
}

/// Decides from the table contents whether an interrupted write happened, and applies it to
/// the model if so. A write is atomic: anything in between is a failure.
async fn resolve(c: &tokio_postgres::Client, model: &mut Model, op: &Op) {
    let count = |a: i64, b: i64| format!("SELECT count(*) FROM ev WHERE id >= {a} AND id < {b}");
    match op {
        Op::Insert(rows) | Op::Copy(rows) => {
            let (a, b) = (rows[0].0, rows[rows.len() - 1].0 + 1);
            let n: i64 = common::query_text(c, &count(a, b)).await[0][0]
                .parse()
                .unwrap();
            if n == rows.len() as i64 {
                model.apply(op);
            } else {
                assert_eq!(n, 0, "a write was torn: {n} of {} rows", rows.len());
            }
        }
        Op::Delete(a, b) => {
            let n: i64 = common::query_text(c, &count(*a, *b)).await[0][0]
                .parse()
                .unwrap();
            let live = model.ev.range(*a..*b).count() as i64;
            if n == 0 {
                model.apply(op);
            } else {
                assert_eq!(n, live, "a delete was torn");
            }
        }
        Op::Update(k, name) => {
            let rows = common::query_text(c, &format!("SELECT name FROM dim WHERE k = {k}")).await;
            if &rows[0][0] == name {
                model.apply(op);
            } else {
                assert_eq!(&rows[0][0], &model.dim[k], "an update was torn");
            }
        }
    }
}

async fn run_ops(
    c: &tokio_postgres::Client,
    model: &mut Model,
    rng: &mut StdRng,
    pending: &mut Option<Op>,
) {
    loop {
        let op = model.next_op(rng);
        *pending = Some(op.clone());
        if let Err(e) = execute(c, &op).await {
            panic!("write failed before any kill: {e:?}");
        }
        model.apply(&op);
        *pending = None;
    }
}

async fn crash_run(mode: &str, seed: u64, parallelism: usize) {
    let kills: usize = std::env::var("WEIR_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    // `WEIR_CRASH_SEED` replaces the test's seed, to explore other schedules.
    let seed = std::env::var("WEIR_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::default();
    let mut port = free_port();
    let mut child = start(dir.path(), port, mode);
    let log = dir.path().join("server.log");
    let connect =
        async |port: u16, child: &mut Child| connect_child_logging(port, child, Some(&log)).await;
    {
        let c = connect(port, &mut child).await;
        let dims: Vec<String> = (0..KEYS).map(|k| format!("({k}, 'n{k}_0')")).collect();
        c.batch_execute(&format!(
            "SET streaming.parallelism = {parallelism};
             CREATE TABLE ev (id BIGINT, k INT, v BIGINT);
             CREATE TABLE dim (k INT PRIMARY KEY, name TEXT);
             INSERT INTO dim VALUES {};
             CREATE MATERIALIZED VIEW v_agg AS
                SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi FROM ev GROUP BY k;
             CREATE MATERIALIZED VIEW v_join AS
                SELECT d.name, count(*) AS n, sum(e.v) AS s FROM ev e JOIN dim d ON e.k = d.k
                GROUP BY d.name;
             CREATE MATERIALIZED VIEW v_left AS
                SELECT d.k, count(e.id) AS n FROM dim d LEFT JOIN ev e ON d.k = e.k GROUP BY d.k;
             CREATE MATERIALIZED VIEW v_top AS SELECT count(*) AS groups, sum(n) AS total FROM v_agg;",
            dims.join(", ")
        ))
        .await
        .unwrap();
        for k in 0..KEYS {
            model.dim.insert(k, format!("n{k}_0"));
        }
    }
    let mut from_checkpoint = 0;
    let mut replayed_less = 0;
    for round in 0..kills {
        let c = connect(port, &mut child).await;
        if round > 0 {
            // How the views came back: from which checkpoint, replaying how much.
            let rows = common::query_text(
                &c,
                "SELECT recovered_checkpoint_id, replayed_rows FROM weir_catalog.jobs WHERE name = 'v_agg'",
            )
            .await;
            if rows[0][0] != "NULL" {
                from_checkpoint += 1;
                let replayed: usize = rows[0][1].parse().unwrap();
                if replayed < model.changes {
                    replayed_less += 1;
                }
            }
        }
        let mut pending = None;
        let run_for = Duration::from_millis(rng.random_range(150..900));
        let mut op_rng = StdRng::seed_from_u64(rng.random());
        tokio::select! {
            _ = run_ops(&c, &mut model, &mut op_rng, &mut pending) => unreachable!(),
            _ = tokio::time::sleep(run_for) => {}
        }
        child.kill().expect("kill -9");
        child.wait().unwrap();
        drop(c);
        // A fresh port: while the server was down, another test's server or a client's
        // ephemeral port may have taken the old one (the restart then fails to listen).
        port = free_port();
        child = start(dir.path(), port, mode);
        if let Some(op) = pending {
            let c = connect(port, &mut child).await;
            resolve(&c, &mut model, &op).await;
        }
    }
    let c = connect(port, &mut child).await;
    c.batch_execute("FLUSH").await.unwrap();
    // Every acknowledged write survived.
    let n = common::query_text(&c, "SELECT count(*) FROM ev").await;
    assert_eq!(n[0][0], model.ev.len().to_string());
    let mut wrong = Vec::new();
    for (sql, expected) in model.expected() {
        let got = common::query_text(&c, sql).await;
        if mode == "exactly_once" {
            if got != expected {
                wrong.push(format!(
                    "{sql}:\n  got      {got:?}\n  expected {expected:?}"
                ));
            }
        } else {
            // At-least-once promises that nothing is lost: every expected row is there.
            let missing: Vec<_> = expected.iter().filter(|row| !got.contains(row)).collect();
            if !missing.is_empty() {
                wrong.push(format!("{sql}: missing {missing:?}\n  got {got:?}"));
            } else if got != expected {
                eprintln!("{mode}: {sql} counted some records twice");
            }
        }
    }
    if !wrong.is_empty() {
        // Keep the data directory and the server log for a post-mortem.
        let kept = dir.keep();
        panic!(
            "{mode}: wrong view contents (data and server.log kept in {}):\n{}",
            kept.display(),
            wrong.join("\n")
        );
    }
    eprintln!(
        "{mode}: {kills} kills, {} rows live, {from_checkpoint} recoveries from a checkpoint, {replayed_less} of them replaying only part of the input",
        model.ev.len()
    );
    assert!(
        from_checkpoint * 2 >= kills.saturating_sub(1),
        "too few recoveries from checkpoints: {from_checkpoint} of {kills}"
    );
    assert!(
        replayed_less >= from_checkpoint / 2,
        "recovery replayed everything"
    );
    child.kill().ok();
    child.wait().ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_exactly_once() {
    crash_run("exactly_once", 7, 1).await;
}

/// The same with every keyed operator split into two instances by key hash: each instance's
/// state tables are checkpointed and restored under their own names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_exactly_once_parallelism_2() {
    crash_run("exactly_once", 13, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_least_once() {
    crash_run("at_least_once", 11, 2).await;
}
