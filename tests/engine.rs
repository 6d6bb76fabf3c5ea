//! Engine behaviour that needs more than one session or engine: concurrent writers on one warehouse.

use std::sync::Arc;

use futures::TryStreamExt;
use sqe_engine::{Engine, EngineConfig};
use sqe_sessions::{Principal, QueryService, Session};

async fn run(engine: &Engine, sql: &str) -> Vec<arrow::array::RecordBatch> {
    let session = Session::new(Principal::new("test"), engine.default_catalog(), "default");
    let result = match engine.execute(&session, sql).await {
        Ok(r) => r,
        Err(e) => panic!("{sql}: {e}"),
    };
    match result.batches.try_collect().await {
        Ok(b) => b,
        Err(e) => panic!("{sql}: {e}"),
    }
}

/// Two engines on one warehouse stand for two processes: each commit is a compare-and-swap on the
/// catalog row, so every acknowledged INSERT is in the table afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_lose_no_rows() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = EngineConfig {
        catalogs: vec![("iceberg".into(), dir.path().to_path_buf())],
    };
    let first = Arc::new(Engine::open(config.clone()).unwrap_or_else(|e| panic!("{e}")));
    let second = Arc::new(Engine::open(config).unwrap_or_else(|e| panic!("{e}")));
    run(&first, "CREATE TABLE t (writer bigint, n bigint) WITH (\"commit.retry.num-retries\" = '50', \"commit.retry.min-wait-ms\" = '5', \"commit.retry.max-wait-ms\" = '50')").await;

    let writers: Vec<_> = [first.clone(), second.clone()]
        .into_iter()
        .enumerate()
        .map(|(w, engine)| {
            tokio::spawn(async move {
                for n in 0..8 {
                    run(&engine, &format!("INSERT INTO t VALUES ({w}, {n})")).await;
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap_or_else(|e| panic!("{e}"));
    }

    let batches = run(&first, "SELECT writer, count(*) AS c, count(DISTINCT n) AS d FROM t GROUP BY writer ORDER BY writer").await;
    let text = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap_or_else(|e| panic!("{e}"))
        .to_string();
    assert_eq!(
        text,
        "+--------+---+---+\n| writer | c | d |\n+--------+---+---+\n| 0      | 8 | 8 |\n| 1      | 8 | 8 |\n+--------+---+---+"
    );
    let snapshots = run(&second, "SELECT count(*) AS s FROM \"t$snapshots\"").await;
    let text = arrow::util::pretty::pretty_format_batches(&snapshots)
        .unwrap_or_else(|e| panic!("{e}"))
        .to_string();
    assert_eq!(text, "+----+\n| s  |\n+----+\n| 16 |\n+----+");
}
