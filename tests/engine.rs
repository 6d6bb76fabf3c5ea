//! Engine behaviour that needs more than one session or engine: concurrent writers on one warehouse.

mod position_deletes;

use std::sync::Arc;

use futures::TryStreamExt;
use sqe_engine::{AdmissionConfig, Engine, EngineConfig};
use sqe_sessions::{ErrorCode, Principal, QueryService, Session};

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

/// An engine with `config` over a warehouse in `dir`, mounted as `iceberg`.
fn open_in(dir: &tempfile::TempDir, config: EngineConfig) -> Engine {
    Engine::open(EngineConfig {
        catalogs: vec![("iceberg".into(), dir.path().to_path_buf())],
        ..config
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Two engines on one warehouse stand for two processes: each commit is a compare-and-swap on the
/// catalog row, so every acknowledged INSERT is in the table afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_lose_no_rows() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = EngineConfig {
        catalogs: vec![("iceberg".into(), dir.path().to_path_buf())],
        ..EngineConfig::default()
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

/// Two engines on one warehouse: one inserts rows one at a time while the other deletes every
/// row, again and again. Each DELETE that loses the race is decided again on the new head, so no
/// row is lost or counted twice: the rows the DELETEs answered they removed, and the rows left,
/// add up to the rows inserted, and each snapshot's totals agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_racing_inserts_remove_each_row_once() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = EngineConfig {
        catalogs: vec![("iceberg".into(), dir.path().to_path_buf())],
        ..EngineConfig::default()
    };
    let inserter = Arc::new(Engine::open(config.clone()).unwrap_or_else(|e| panic!("{e}")));
    let deleter = Arc::new(Engine::open(config).unwrap_or_else(|e| panic!("{e}")));
    run(&inserter, "CREATE TABLE t (n bigint) WITH (\"commit.retry.num-retries\" = '50', \"commit.retry.min-wait-ms\" = '5', \"commit.retry.max-wait-ms\" = '50')").await;
    const ROWS: i64 = 16;
    let inserts = tokio::spawn({
        let engine = inserter.clone();
        async move {
            for n in 0..ROWS {
                run(&engine, &format!("INSERT INTO t VALUES ({n})")).await;
            }
        }
    });
    let deletes = tokio::spawn({
        let engine = deleter.clone();
        async move {
            let mut removed = 0i64;
            for _ in 0..6 {
                let answer = lines(&run(&engine, "DELETE FROM t").await);
                removed += answer[0].parse::<i64>().unwrap_or_else(|e| panic!("{e}"));
                tokio::time::sleep(std::time::Duration::from_millis(15)).await;
            }
            removed
        }
    });
    inserts.await.unwrap_or_else(|e| panic!("{e}"));
    let removed = deletes.await.unwrap_or_else(|e| panic!("{e}"));
    let left: i64 = lines(&run(&inserter, "SELECT count(*) FROM t").await)[0]
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(removed + left, ROWS, "{removed} removed, {left} left");
    // Every delete snapshot removed what its DELETE answered, and the table's totals agree.
    let deleted = lines(
        &run(
            &inserter,
            "SELECT coalesce(sum(CAST(summary['deleted-records'] AS bigint)), 0) FROM \"t$snapshots\" WHERE operation = 'delete'",
        )
        .await,
    );
    assert_eq!(deleted, [removed.to_string()]);
    let total = lines(
        &run(
            &inserter,
            "SELECT summary['total-records'] FROM \"t$snapshots\" WHERE snapshot_id = (SELECT snapshot_id FROM \"t$history\" WHERE is_current_ancestor ORDER BY made_current_at DESC LIMIT 1)",
        )
        .await,
    );
    assert_eq!(total, [left.to_string()]);
}

/// Two engines on one warehouse (two processes) change the same rows at once, in both write
/// modes: one adds 1 to every row's `v`, the other 10, 25 times each; a third statement deletes
/// rows one by one. A change that loses the race is decided again on the new head (or fails with
/// a conflict that says so), so the rows end as some serial order leaves them: every row left has
/// `v` = 1 × the first's successes + 10 × the second's, and the rows deleted are the DELETEs'
/// answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicting_updates_end_as_some_serial_order() {
    for mode in ["copy-on-write", "merge-on-read"] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let config = EngineConfig {
            catalogs: vec![("iceberg".into(), dir.path().to_path_buf())],
            ..EngineConfig::default()
        };
        let first = Arc::new(Engine::open(config.clone()).unwrap_or_else(|e| panic!("{e}")));
        let second = Arc::new(Engine::open(config).unwrap_or_else(|e| panic!("{e}")));
        run(
            &first,
            &format!(
                "CREATE TABLE t (k bigint, v bigint) WITH (\"write.update.mode\" = '{mode}', \"write.delete.mode\" = '{mode}', \"commit.retry.num-retries\" = '50', \"commit.retry.min-wait-ms\" = '2', \"commit.retry.max-wait-ms\" = '20')"
            ),
        )
        .await;
        run(
            &first,
            "INSERT INTO t SELECT id, 0 FROM generate_series(1, 40) AS g(id)",
        )
        .await;
        let changer = |engine: Arc<Engine>, sql: String, times: usize| {
            tokio::spawn(async move {
                let session =
                    Session::new(Principal::new("test"), engine.default_catalog(), "default");
                let mut done = Vec::new();
                for i in 0..times {
                    let sql = sql.replace("{i}", &(i + 1).to_string());
                    match engine.execute(&session, &sql).await {
                        Ok(result) => {
                            let batches: Vec<_> = result
                                .batches
                                .try_collect()
                                .await
                                .unwrap_or_else(|e| panic!("{sql}: {e}"));
                            done.push(lines(&batches)[0].parse::<i64>().unwrap_or(-1));
                        }
                        Err(e) if e.code() == ErrorCode::Conflict => {
                            assert!(e.message().contains("overtaken by other writers"), "{e}");
                        }
                        Err(e) => panic!("{sql}: {e}"),
                    }
                }
                done
            })
        };
        let ones = changer(first.clone(), "UPDATE t SET v = v + 1".into(), 25);
        let tens = changer(second.clone(), "UPDATE t SET v = v + 10".into(), 25);
        let deletes = changer(first.clone(), "DELETE FROM t WHERE k = {i}".into(), 10);
        let ones = ones.await.unwrap_or_else(|e| panic!("{e}"));
        let tens = tens.await.unwrap_or_else(|e| panic!("{e}"));
        let deletes = deletes.await.unwrap_or_else(|e| panic!("{e}"));
        let deleted: i64 = deletes.iter().sum();
        let left = 40 - deleted;
        // Every UPDATE changed every row there was when it ran.
        assert!(
            ones.iter().chain(&tens).all(|n| (left..=40).contains(n)),
            "{ones:?} {tens:?}"
        );
        let expected = ones.len() as i64 + 10 * tens.len() as i64;
        let got = lines(&run(&second, "SELECT count(*), min(v), max(v) FROM t").await);
        assert_eq!(got, [format!("{left}|{expected}|{expected}")], "{mode}");
        // The rows deleted are the first ones, each once.
        let gone = lines(&run(&second, "SELECT count(*) FROM t WHERE k <= 10").await);
        assert_eq!(gone, [(10 - deleted).to_string()], "{mode}");
    }
}

fn session(user: &str, engine: &Engine) -> Session {
    Session::new(Principal::new(user), engine.default_catalog(), "default")
}

/// `fact(k, v)`: keys 1 to 200000, `v = 2k`.
async fn create_fact(engine: &Engine) {
    run(
        engine,
        "CREATE TABLE fact AS SELECT id AS k, id * 2 AS v FROM generate_series(1, 200000) AS g(id)",
    )
    .await;
}

/// `dim(k, tag)`: keys 1 to 2000, tagged 'x' every hundredth and 'y' otherwise.
async fn create_dim(engine: &Engine) {
    run(
        engine,
        "CREATE TABLE dim AS SELECT id AS k, CASE WHEN id % 100 = 0 THEN 'x' ELSE 'y' END AS tag \
         FROM generate_series(1, 2000) AS g(id)",
    )
    .await;
}

/// The rows of `batches` as [`lines`], sorted: for answers whose order the query leaves open.
fn sorted(batches: Vec<arrow::array::RecordBatch>) -> Vec<String> {
    let mut rows = lines(&batches);
    rows.sort();
    rows
}

/// Each row as its cells joined by `|`.
fn lines(batches: &[arrow::array::RecordBatch]) -> Vec<String> {
    let mut out = Vec::new();
    for b in batches {
        for row in 0..b.num_rows() {
            let cells: Vec<String> = b
                .columns()
                .iter()
                .map(|c| {
                    arrow::util::display::array_value_to_string(c, row)
                        .unwrap_or_else(|e| panic!("{e}"))
                })
                .collect();
            out.push(cells.join("|"));
        }
    }
    out
}

fn text(batches: &[arrow::array::RecordBatch]) -> String {
    arrow::util::pretty::pretty_format_batches(batches)
        .unwrap_or_else(|e| panic!("{e}"))
        .to_string()
}

/// One slot: a second statement waits in the queue while there is room, gets "server busy" when
/// there is not, and every statement is in `system.runtime.queries` with its user and how it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_queues_then_refuses_and_the_registry_shows_each_query() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = EngineConfig {
        catalogs: vec![("iceberg".into(), dir.path().to_path_buf())],
        admission: AdmissionConfig {
            max_concurrent_queries: 1,
            max_queued: 1,
            queue_timeout: std::time::Duration::from_secs(10),
            ..AdmissionConfig::default()
        },
        admin_roles: vec!["admin".into()],
        ..EngineConfig::default()
    };
    let engine = Arc::new(Engine::open(config).unwrap_or_else(|e| panic!("{e}")));
    let (alice, bob, carol) = (
        session("alice", &engine),
        session("bob", &engine),
        session("carol", &engine),
    );

    // Alice holds the only slot until her result is dropped.
    let held = engine
        .execute(&alice, "SELECT * FROM range(0, 10)")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Bob waits in the queue...
    let waiting = {
        let engine = engine.clone();
        tokio::spawn(async move {
            let r = engine.execute(&bob, "SELECT 2 AS two").await?;
            r.batches.try_collect::<Vec<_>>().await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    // ...so the queue is full and Carol is refused at once.
    let busy = engine
        .execute(&carol, "SELECT 3")
        .await
        .err()
        .unwrap_or_else(|| panic!("expected busy"));
    assert_eq!(busy.code(), ErrorCode::ResourceExhausted);
    assert_eq!(
        busy.message(),
        "server busy: 1 queries are running and the queue of 1 is full; try again later"
    );

    drop(held);
    let bobs = waiting
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text(&bobs), "+-----+\n| two |\n+-----+\n| 2   |\n+-----+");

    // An admin reads everyone's queries.
    let mut root = session("root", &engine);
    root.principal.roles = vec!["admin".into()];
    let registry = engine
        .execute(
            &root,
            "SELECT \"user\", state, query FROM system.runtime.queries ORDER BY created, query_id",
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let registry: Vec<_> = registry
        .batches
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        lines(&registry),
        vec![
            "alice|CANCELLED|SELECT * FROM range(0, 10)",
            "bob|FINISHED|SELECT 2 AS two",
            "carol|FAILED|SELECT 3",
            "root|RUNNING|SELECT \"user\", state, query FROM system.runtime.queries ORDER BY created, query_id",
        ]
    );
}

/// An engine with `slots` query slots, of which one user may take `per_user` and have one statement
/// waiting, and a result unread for `idle` gives its slot back.
fn fair_engine(
    dir: &tempfile::TempDir,
    slots: usize,
    per_user: usize,
    idle_ms: u64,
) -> Arc<Engine> {
    let config = EngineConfig {
        catalogs: vec![("iceberg".into(), dir.path().to_path_buf())],
        admission: AdmissionConfig {
            max_concurrent_queries: slots,
            max_queued: 8,
            queue_timeout: std::time::Duration::from_secs(30),
            max_running_per_user: Some(per_user),
            max_queued_per_user: Some(1),
            idle_slot: std::time::Duration::from_millis(idle_ms),
        },
        ..EngineConfig::default()
    };
    Arc::new(Engine::open(config).unwrap_or_else(|e| panic!("{e}")))
}

/// `sql` as `user`, read to its end, within `secs` seconds.
async fn answered_within(engine: &Arc<Engine>, user: &str, sql: &str, secs: u64) -> String {
    let session = session(user, engine);
    let answer = async {
        let result = engine.execute(&session, sql).await?;
        result.batches.try_collect::<Vec<_>>().await
    };
    let batches = tokio::time::timeout(std::time::Duration::from_secs(secs), answer)
        .await
        .unwrap_or_else(|_| panic!("{user}'s {sql} waited more than {secs}s"))
        .unwrap_or_else(|e| panic!("{e}"));
    lines(&batches).join("\n")
}

/// Bob takes what one user may (one slot of two, one statement waiting): his next statement is
/// refused at once naming the limit, and Alice's statement runs at once in the slot he may not take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_user_takes_at_most_his_share_of_the_slots() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // Nobody's result counts as unread within this test.
    let engine = fair_engine(&dir, 2, 1, 600_000);
    let bob = session("bob", &engine);
    let held = engine
        .execute(&bob, "SELECT * FROM range(0, 10)")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let waiting = {
        let (engine, bob) = (engine.clone(), bob.clone());
        tokio::spawn(async move {
            let r = engine.execute(&bob, "SELECT 2 AS two").await?;
            r.batches.try_collect::<Vec<_>>().await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let refused = engine
        .execute(&bob, "SELECT 3")
        .await
        .err()
        .unwrap_or_else(|| panic!("expected a refusal"));
    assert_eq!(refused.code(), ErrorCode::ResourceExhausted);
    assert_eq!(
        refused.message(),
        "too many statements of yours: 1 running and 1 waiting, the most one user may have waiting (max_queued_per_user = 1); wait for them to finish"
    );
    assert_eq!(
        answered_within(&engine, "alice", "SELECT 1 AS one", 5).await,
        "1"
    );
    // Bob's waiting statement runs once his first is done.
    drop(held);
    let two = waiting
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lines(&two), vec!["2"]);
}

/// Bob takes the only slot and stops reading his result: after the idle time the slot is Alice's,
/// and when Bob reads on he gets the rows that follow, not the query again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_nobody_reads_gives_its_slot_back_until_it_is_read() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = fair_engine(&dir, 1, 1, 1000);
    let bob = session("bob", &engine);
    let mut result = engine
        .execute(&bob, "SELECT value FROM range(0, 100000000)")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let first = result
        .batches
        .try_next()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("no rows"));
    // Bob reads no more; Alice's statement waits at most about the idle time.
    assert_eq!(
        answered_within(&engine, "alice", "SELECT 1 AS one", 5).await,
        "1"
    );
    // Bob reads on: his rows continue where they stopped.
    let next = result
        .batches
        .try_next()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("no more rows"));
    let value = |batch: &arrow::array::RecordBatch, row: usize| {
        arrow::util::display::array_value_to_string(batch.column(0), row)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    assert_eq!(value(&first, 0), "0");
    assert_eq!(value(&next, 0), first.num_rows().to_string());
    // While Bob holds the slot again, Alice waits for it: a slot given back is taken back.
    let alice = session("alice", &engine);
    let waits = tokio::time::timeout(
        std::time::Duration::from_millis(200),
        engine.execute(&alice, "SELECT 1"),
    )
    .await;
    assert!(waits.is_err(), "alice ran while bob held the only slot");
    drop(result);
    assert_eq!(
        answered_within(&engine, "alice", "SELECT 1 AS one", 5).await,
        "1"
    );
}

/// A table written in several commits has several files; the scan is planned over several
/// partitions (one per file here), reads every row once, and still reads them after a column is
/// renamed (columns resolve by field id).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_file_scan_is_spread_over_partitions() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(
        &dir,
        EngineConfig {
            target_partitions: Some(4),
            ..EngineConfig::default()
        },
    );
    run(&engine, "CREATE TABLE t (id bigint, name varchar)").await;
    for chunk in [
        "(1, 'a'), (2, 'b')",
        "(3, 'c')",
        "(4, 'd'), (5, 'e'), (6, 'f')",
    ] {
        run(&engine, &format!("INSERT INTO t VALUES {chunk}")).await;
    }
    let plan = lines(&run(&engine, "EXPLAIN SELECT id, name FROM t").await).join("\n");
    assert!(
        plan.contains("DataSourceExec: file_groups={3 groups: ")
            && plan.contains("projection=[id, name], file_type=parquet"),
        "{plan}"
    );
    let all = "SELECT id, name FROM t ORDER BY id";
    let expected = ["1|a", "2|b", "3|c", "4|d", "5|e", "6|f"];
    // With no delete files the manifests' row counts are exact: count(*) reads no data file.
    let count = "SELECT count(*) FROM t";
    let plan = lines(&run(&engine, &format!("EXPLAIN {count}")).await).join("\n");
    assert!(!plan.contains("IcebergScan"), "{plan}");
    assert_eq!(lines(&run(&engine, count).await), ["6"]);
    assert_eq!(lines(&run(&engine, all).await), expected);
    assert_eq!(
        lines(&run(&engine, "SELECT count(*), sum(id) FROM t WHERE id > 2").await),
        ["4|18"]
    );

    run(&engine, "ALTER TABLE t RENAME COLUMN name TO label").await;
    let renamed = "SELECT id, label FROM t ORDER BY id";
    assert_eq!(lines(&run(&engine, renamed).await), expected);
    // The filter prunes the files whose statistics rule it out: one file is left to read.
    let point = "SELECT label FROM t WHERE id = 4";
    let plan = lines(&run(&engine, &format!("EXPLAIN {point}")).await).join("\n");
    assert!(
        plan.contains("DataSourceExec: file_groups={1 group: ")
            && plan.contains("projection=[id, label], file_type=parquet, predicate=id@0 = 4"),
        "{plan}"
    );
    assert_eq!(lines(&run(&engine, point).await), ["d"]);
    // Strings are scanned as views; a filter on one still prunes the files.
    let by_label = "SELECT id FROM t WHERE label = 'e'";
    let plan = lines(&run(&engine, &format!("EXPLAIN {by_label}")).await).join("\n");
    assert!(
        plan.contains("DataSourceExec: file_groups={1 group: "),
        "{plan}"
    );
    assert_eq!(lines(&run(&engine, by_label).await), ["5"]);
}

/// Columns are found in each file by field id, by both readers (DataFusion's for plain files,
/// iceberg-rust's when there are delete files): two columns that swapped names read their own data,
/// and the statistics that prune files are the right column's. A column added later is NULL in
/// the files written before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn columns_resolve_by_field_id_after_renames() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(
        &dir,
        EngineConfig {
            target_partitions: Some(2),
            ..EngineConfig::default()
        },
    );
    run(&engine, "CREATE TABLE s (a bigint, b bigint)").await;
    run(&engine, "INSERT INTO s VALUES (1, 100), (2, 200)").await;
    run(&engine, "INSERT INTO s VALUES (3, 300)").await;
    for rename in ["a TO c", "b TO a", "c TO b"] {
        run(&engine, &format!("ALTER TABLE s RENAME COLUMN {rename}")).await;
    }
    run(&engine, "ALTER TABLE s ADD COLUMN d varchar").await;
    // The columns keep their places: (b, a, d) now.
    run(&engine, "INSERT INTO s VALUES (4, 400, 'x')").await;
    let all = "SELECT a, b, d FROM s ORDER BY b";
    assert_eq!(
        lines(&run(&engine, all).await),
        ["100|1|", "200|2|", "300|3|", "400|4|x"]
    );
    // Each file's statistics are the column's own: b = 3 keeps only the second file.
    let point = "SELECT a, b FROM s WHERE b = 3";
    let plan = lines(&run(&engine, &format!("EXPLAIN {point}")).await).join("\n");
    assert!(plan.contains("file_groups={1 group: "), "{plan}");
    assert_eq!(lines(&run(&engine, point).await), ["300|3"]);
    assert_eq!(
        lines(&run(&engine, "SELECT b FROM s WHERE a = 200").await),
        ["2"]
    );
    assert_eq!(
        lines(
            &run(
                &engine,
                "SELECT count(*) FROM s WHERE d IS NULL AND a > 150"
            )
            .await
        ),
        ["2"]
    );
}

/// SHOW CREATE TABLE gives the sort order back as `sorted_by` takes it (defaults left out, names
/// quoted where they must be), and a statement made from it makes the same order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_create_table_gives_the_sort_order_back() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    run(
        &engine,
        "CREATE TABLE o (id bigint, \"Day\" date, v double) WITH (partitioning = ARRAY['v'], sorted_by = ARRAY['\"Day\" DESC', 'id ASC NULLS LAST', 'v DESC NULLS FIRST'])",
    )
    .await;
    let location = dir.path().join("default").join("o");
    let create = lines(&run(&engine, "SHOW CREATE TABLE o").await).join("\n");
    assert_eq!(
        create,
        format!(
            "CREATE TABLE iceberg.default.o (\n   id bigint,\n   \"Day\" date,\n   v double\n)\nWITH (\n   format = 'PARQUET',\n   format_version = 2,\n   partitioning = ARRAY['v'],\n   sorted_by = ARRAY['\"Day\" DESC', 'id NULLS LAST', 'v DESC NULLS FIRST'],\n   location = '{}'\n)",
            location.display()
        )
    );
    run(&engine, "ALTER TABLE o SET PROPERTIES sorted_by = ARRAY[]").await;
    let create = lines(&run(&engine, "SHOW CREATE TABLE o").await).join("\n");
    assert!(!create.contains("sorted_by"), "{create}");
}

/// Iceberg format version 3's default values, on a column another engine added: a write that
/// leaves the column out stores its write-default, and a read of it is refused by name (SQE's
/// readers would give NULL for the rows written before it, not its initial-default); the other
/// columns read as ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_values_are_written_and_their_reads_refused() {
    use iceberg::spec::{Literal, NestedField, PrimitiveType, Schema, Type};
    use iceberg::{Catalog, TableIdent, TableRequirement, TableUpdate};

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    run(
        &engine,
        "CREATE TABLE d (id bigint) WITH (format_version = 3)",
    )
    .await;
    run(&engine, "INSERT INTO d VALUES (1), (2)").await;
    // The column as a version 3 writer adds it, default 7.
    let catalog = sqe_engine::catalog::sql::SqlCatalog::open("iceberg", dir.path())
        .unwrap_or_else(|e| panic!("{e}"));
    let ident = TableIdent::from_strs(["default", "d"]).unwrap_or_else(|e| panic!("{e}"));
    let table = catalog
        .load_table(&ident)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let metadata = table.metadata();
    let mut fields = metadata.current_schema().as_struct().fields().to_vec();
    let mut score = NestedField::optional(2, "score", Type::Primitive(PrimitiveType::Long));
    score.initial_default = Some(Literal::long(7));
    score.write_default = Some(Literal::long(7));
    fields.push(Arc::new(score));
    let schema = Schema::builder()
        .with_schema_id(metadata.current_schema_id() + 1)
        .with_fields(fields)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    catalog
        .commit(
            &ident,
            vec![TableRequirement::CurrentSchemaIdMatch {
                current_schema_id: metadata.current_schema_id(),
            }],
            vec![
                TableUpdate::AddSchema { schema },
                TableUpdate::SetCurrentSchema { schema_id: -1 },
            ],
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    run(&engine, "INSERT INTO d (id) VALUES (3)").await;
    run(&engine, "INSERT INTO d VALUES (4, 40)").await;
    assert_eq!(
        lines(&run(&engine, "SELECT id FROM d ORDER BY id").await),
        ["1", "2", "3", "4"]
    );
    let session = Session::new(Principal::new("test"), engine.default_catalog(), "default");
    let e = match engine.execute(&session, "SELECT id, score FROM d").await {
        Ok(_) => panic!("a column with an initial-default was read"),
        Err(e) => e,
    };
    assert_eq!(
        e.message(),
        "column 'score' has a default value for rows written before it was added (Iceberg format version 3's initial-default), which SQE does not read yet"
    );
    // The files the two INSERTs wrote hold 7 and 40.
    let written = lines(
        &run(
            &engine,
            "SELECT file_path FROM \"d$files\" ORDER BY file_path DESC LIMIT 2",
        )
        .await,
    );
    let mut scores = Vec::new();
    for path in written {
        scores.extend(lines(
            &run(
                &engine,
                &format!("SELECT score FROM read_parquet('{path}')"),
            )
            .await,
        ));
    }
    scores.sort();
    assert_eq!(scores, ["40", "7"]);
}

/// The partitions of a scan share its byte ranges (DataFusion's work stealing): a partition that is
/// done takes the next range left. Every row is still read exactly once, in a file cut into several
/// ranges, with the sharing on (the default) and off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_ranges_read_every_row_once() {
    for stealing in ["true", "false"] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let engine = open_in(
            &dir,
            EngineConfig {
                target_partitions: Some(2),
                options: vec![(
                    "datafusion.execution.enable_file_stream_work_stealing".into(),
                    stealing.into(),
                )],
                ..EngineConfig::default()
            },
        );
        create_ranged(&engine).await;
        let plan = lines(&run(&engine, "EXPLAIN SELECT id FROM t").await).join("\n");
        let scan = plan
            .lines()
            .find(|l| l.contains("DataSourceExec: "))
            .unwrap_or_else(|| panic!("no DataSourceExec in {plan}"));
        // Three ranges of the big file, one of the small one.
        let big = scan.matches("-00000.parquet:").count();
        assert!(
            big >= 4,
            "{big} ranges of files with stealing={stealing}: {scan}"
        );
        let all = "SELECT count(*), count(DISTINCT id), sum(id), min(id), max(id) FROM t";
        assert_eq!(
            lines(&run(&engine, all).await),
            ["60001|60001|1800030000|0|60000"],
            "stealing={stealing}"
        );
        let some = "SELECT count(*), sum(id) FROM t WHERE id % 7 = 0 AND name <> 'last'";
        assert_eq!(
            lines(&run(&engine, some).await),
            ["8572|257147142"],
            "stealing={stealing}"
        );
    }
}

/// Table `t` (id, name): ids 0 to 59,999 with names of their digits and 300 `x`s, uncompressed in
/// row groups of about 1 MB, a file of about 18 MB that the scan cuts into ranges of at least 8 MB;
/// then id 60,000 named `last`, in a small file of its own.
async fn create_ranged(engine: &Engine) {
    run(engine, "CREATE TABLE t (id bigint, name varchar) WITH (\"write.parquet.compression-codec\" = 'uncompressed', \"write.parquet.row-group-size-bytes\" = '1048576')").await;
    run(engine, "INSERT INTO t SELECT value, concat(CAST(value AS varchar), repeat('x', 300)) FROM range(0, 60000)").await;
    run(engine, "INSERT INTO t VALUES (60000, 'last')").await;
}

/// DataFusion's nested loop join runs its left side a second time (to spill it to disk) when
/// holding it in memory fails. A scan there keeps its own ranges, so that the second run reads every
/// row again instead of the ranges the first run left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_loop_join_that_spills_its_left_side_loses_no_rows() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(
        &dir,
        EngineConfig {
            target_partitions: Some(2),
            memory_limit: Some(12 * 1024 * 1024),
            // The big table stays the join's left side, as written.
            options: vec![(
                "datafusion.optimizer.join_reordering".into(),
                "false".into(),
            )],
            ..EngineConfig::default()
        },
    );
    create_ranged(&engine).await;
    run(&engine, "CREATE TABLE s (x bigint)").await;
    run(&engine, "INSERT INTO s VALUES (10), (20000)").await;
    let join = "SELECT count(*), sum(b.id), sum(length(b.name)) FROM t b JOIN s ON b.id < s.x";
    assert_eq!(
        lines(&run(&engine, join).await),
        ["20010|199990045|6091900"]
    );
    let plan = lines(&run(&engine, &format!("EXPLAIN ANALYZE {join}")).await).join("\n");
    let nested = plan
        .lines()
        .find(|l| l.contains("NestedLoopJoinExec: "))
        .unwrap_or_else(|| panic!("no NestedLoopJoinExec in {plan}"));
    assert!(metric(nested, "spill_count") >= 1.0, "{nested}");
}

/// Position deletes committed by another engine (see [`position_deletes`]) hide exactly their rows
/// in a scan spread over partitions: in small files, and in both byte ranges of a file the scan
/// cuts in two (a position counts from the start of the file, not of the range). Files with
/// position deletes are read by SQE's reader of rows by position, which skips them as it reads.
/// Filters and a renamed column change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn position_deletes_hide_their_rows_in_every_partition_and_range() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(
        &dir,
        EngineConfig {
            target_partitions: Some(4),
            ..EngineConfig::default()
        },
    );
    // Uncompressed, and a row group per written batch (8,192 rows, over 1 MB): the big file below
    // is over the scan's smallest range (8 MB), so it is cut in two ranges of several row groups.
    run(&engine, "CREATE TABLE t (id bigint, name varchar) WITH (\"write.parquet.compression-codec\" = 'uncompressed', \"write.parquet.row-group-size-bytes\" = '1048576')").await;
    for chunk in [
        "(1, 'a'), (2, 'b')",
        "(3, 'c')",
        "(4, 'd'), (5, 'e'), (6, 'f')",
    ] {
        run(&engine, &format!("INSERT INTO t VALUES {chunk}")).await;
    }
    // Row n of `range` has id n + 100 and a name starting with n.
    run(&engine, "INSERT INTO t SELECT value + 100, concat(CAST(value AS varchar), repeat('x', 300)) FROM range(0, 40000)").await;
    let mut files = std::collections::HashMap::new();
    for file in lines(&run(&engine, "SELECT file_path, record_count FROM \"t$files\"").await) {
        let (path, records) = file.rsplit_once('|').unwrap_or_else(|| panic!("{file}"));
        files.insert(records.to_string(), path.to_string());
    }
    let file = |records: &str| {
        files
            .get(records)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no file of {records} rows in {files:?}"))
    };
    // The writer keeps no order across batches, so the ids at the deleted positions are read
    // back from the file, as an engine deleting by position knows them.
    let (row_groups, big_ids) = ids_in_file_order(file("40000"));
    assert!(row_groups >= 4, "{row_groups} row groups");

    // Ids 2 and 5 in two of the small files. In the big file, whatever the order of its row groups
    // (8,192 rows but one): the first rows of the first and second row groups (first range), and
    // rows of the last two (second range).
    let big_positions = [0, 8192, 30000, 39999];
    let deleted: Vec<i64> = big_positions.iter().map(|&p| big_ids[p]).collect();
    let mut deletes = vec![(file("2"), 1), (file("3"), 1)];
    deletes.extend(big_positions.iter().map(|&p| (file("40000"), p as i64)));
    let catalog = sqe_engine::catalog::sql::SqlCatalog::open("iceberg", dir.path())
        .unwrap_or_else(|e| panic!("{e}"));
    position_deletes::commit_position_deletes(&catalog, "t", &deletes)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        lines(
            &run(
                &engine,
                "SELECT content, record_count FROM \"t$files\" WHERE content = 1"
            )
            .await
        ),
        ["1|6"]
    );

    let plan = lines(&run(&engine, "EXPLAIN SELECT id, name FROM t").await).join("\n");
    assert!(
        plan.contains("IcebergRowIdScan: parts=5, partitions=4, projection=[id, name]"),
        "{plan}"
    );
    assert_remaining_rows(&engine, "name", &deleted).await;
    run(&engine, "ALTER TABLE t RENAME COLUMN name TO label").await;
    assert_remaining_rows(&engine, "label", &deleted).await;

    // A row-level UPDATE rewrites the big file from its rows as the other writer's deletes leave
    // them: the deleted rows stay gone, every other row keeps its place and its name.
    let touched = (100..40100)
        .filter(|id| id % 1000 == 7 && !deleted.contains(id))
        .count();
    let update = "UPDATE t SET label = concat(CAST(id - 100 AS varchar), repeat('x', 300)) \
         WHERE id >= 100 AND id % 1000 = 7";
    assert_eq!(lines(&run(&engine, update).await), [touched.to_string()]);
    assert_remaining_rows(&engine, "label", &deleted).await;

    // DELETE of every row removes the delete file with the data files; its count is the rows the
    // deletes left, and the snapshot before still reads them.
    let before = lines(&run(&engine, "SELECT count(*) FROM t").await);
    assert_eq!(lines(&run(&engine, "DELETE FROM t").await), before);
    assert_eq!(
        lines(&run(&engine, "SELECT count(*) FROM \"t$files\"").await),
        ["0"]
    );
    let summary = "SELECT summary['deleted-data-files'], summary['removed-position-delete-files'], \
         summary['removed-position-deletes'], summary['total-delete-files'], \
         summary['total-position-deletes'], summary['total-records'] \
         FROM \"t$snapshots\" WHERE operation = 'delete' AND summary['removed-position-deletes'] IS NOT NULL";
    assert_eq!(lines(&run(&engine, summary).await), ["4|1|6|0|0|0"]);
    let previous = "SELECT count(*) FROM t FOR VERSION AS OF (SELECT parent_id FROM \"t$snapshots\" \
         WHERE summary['removed-position-deletes'] IS NOT NULL)";
    assert_eq!(lines(&run(&engine, previous).await), before);
}

/// The rows left by the deletes of the test above (`deleted`: the big file's deleted ids), read
/// with the name column called `name`.
/// Equality delete files another engine (Flink, Spark streaming) wrote: SQE's reads drop the rows
/// they match in the data files written before them, and not rows written after. SQE does not
/// change rows of files such deletes apply to (it cannot number their rows): refused, saying so;
/// removing whole files still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equality_deletes_of_another_writer_are_applied() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    run(&engine, "CREATE TABLE t (id bigint, name varchar)").await;
    run(&engine, "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')").await;
    run(
        &engine,
        "INSERT INTO t VALUES (4, 'd'), (5, 'e'), (2, 'bb')",
    )
    .await;
    let catalog = sqe_engine::catalog::sql::SqlCatalog::open("iceberg", dir.path())
        .unwrap_or_else(|e| panic!("{e}"));
    position_deletes::commit_equality_deletes(&catalog, "t", "id", &[2, 5, 9])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    run(&engine, "INSERT INTO t VALUES (5, 'again')").await;
    assert_eq!(
        lines(&run(&engine, "SELECT id, name FROM t ORDER BY id").await),
        ["1|a", "3|c", "4|d", "5|again"]
    );
    assert_eq!(lines(&run(&engine, "SELECT count(*) FROM t").await), ["4"]);
    let session = Session::new(Principal::new("test"), engine.default_catalog(), "default");
    let refused = match engine.execute(&session, "DELETE FROM t WHERE id = 3").await {
        Ok(_) => panic!("a row-level DELETE over equality deletes was not refused"),
        Err(e) => e,
    };
    assert!(
        refused.message().contains("equality delete file")
            && refused.message().contains("cannot be changed"),
        "{refused}"
    );
    assert_eq!(lines(&run(&engine, "DELETE FROM t").await), ["4"]);
    assert_eq!(lines(&run(&engine, "SELECT count(*) FROM t").await), ["0"]);
}

async fn assert_remaining_rows(engine: &Engine, name: &str, deleted: &[i64]) {
    let small = format!("SELECT id, {name} FROM t WHERE id < 100 ORDER BY id");
    assert_eq!(
        lines(&run(engine, &small).await),
        ["1|a", "3|c", "4|d", "6|f"]
    );
    // 100 + ... + 40099 = 803,980,000.
    let big_sum = 803_980_000 - deleted.iter().sum::<i64>();
    assert_eq!(
        lines(&run(engine, "SELECT count(*), sum(id) FROM t WHERE id >= 100").await),
        [format!("39996|{big_sum}")]
    );
    assert_eq!(
        lines(&run(engine, "SELECT count(*), sum(id) FROM t WHERE id > 2").await),
        [format!("39999|{}", big_sum + 3 + 4 + 6)]
    );
    // Delete files make the manifests' row counts an upper bound: count(*) reads the rows.
    assert_eq!(
        lines(&run(engine, "SELECT count(*) FROM t").await),
        ["40000"]
    );
    let ids: Vec<String> = deleted.iter().map(i64::to_string).collect();
    let gone = format!("SELECT id FROM t WHERE id IN (2, 5, {})", ids.join(", "));
    assert_eq!(lines(&run(engine, &gone).await), Vec::<String>::new());
    // Every row still has its own name: no row of a range is shifted onto another.
    let shifted = format!(
        "SELECT count(*) FROM t WHERE id >= 100 AND {name} <> concat(CAST(id - 100 AS varchar), repeat('x', 300))"
    );
    assert_eq!(lines(&run(engine, &shifted).await), ["0"]);
}

/// A Parquet file's row group count and its `id` column (the first) in file order.
fn ids_in_file_order(path: &str) -> (usize, Vec<i64>) {
    use arrow::array::AsArray;
    use parquet::arrow::ProjectionMask;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap_or_else(|e| panic!("{e}"));
    let row_groups = builder.metadata().num_row_groups();
    let id_only = ProjectionMask::leaves(builder.parquet_schema(), [0]);
    let mut ids = Vec::new();
    let reader = builder
        .with_projection(id_only)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    for batch in reader {
        let batch = batch.unwrap_or_else(|e| panic!("{e}"));
        let column = batch
            .column(0)
            .as_primitive::<arrow::datatypes::Int64Type>();
        ids.extend(column.values().iter().copied());
    }
    (row_groups, ids)
}

/// A statement that needs more memory than the engine allows fails with DataFusion's "Resources
/// exhausted" (naming what ran out), and the engine serves the next statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_over_the_memory_limit_fails_alone() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(
        &dir,
        EngineConfig {
            memory_limit: Some(12 * 1024 * 1024),
            ..EngineConfig::default()
        },
    );
    let session = Session::new(Principal::new("test"), "iceberg", "default");
    // A hash join builds on a million rows: far over 4 MB.
    let join =
        "SELECT count(*) FROM range(0, 1000000) a JOIN range(0, 1000000) b ON a.value = b.value";
    let outcome = match engine.execute(&session, join).await {
        Ok(result) => result.batches.try_collect::<Vec<_>>().await.map(|_| ()),
        Err(e) => Err(e),
    };
    let error = outcome.err().unwrap_or_else(|| panic!("{join} succeeded"));
    assert!(error.to_string().contains("Resources exhausted"), "{error}");
    assert_eq!(lines(&run(&engine, "SELECT 1 + 1").await), ["2"]);
}

/// The planner gets each column's range and null count from the manifests (the files' lower and
/// upper bounds), so a join with a small dimension is not estimated at the dimension's size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_carry_column_bounds_from_the_manifests() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(
        &dir,
        EngineConfig {
            options: vec![("datafusion.explain.show_statistics".into(), "true".into())],
            ..EngineConfig::default()
        },
    );
    run(&engine, "CREATE TABLE f (k bigint, name varchar)").await;
    run(&engine, "INSERT INTO f VALUES (3, 'c'), (5, NULL)").await;
    let plan = lines(&run(&engine, "EXPLAIN SELECT k, name FROM f").await).join("\n");
    assert!(
        plan.contains("(Col[0]: Min=Inexact(Int64(3)) Max=Inexact(Int64(5)) Null=Inexact(0)"),
        "{plan}"
    );
    // The manifests read for that plan are kept (the catalog's cache); the next snapshot's are
    // its own, so the bounds move with the data.
    run(&engine, "INSERT INTO f VALUES (1, 'a')").await;
    let plan = lines(&run(&engine, "EXPLAIN SELECT k, name FROM f").await).join("\n");
    assert!(
        plan.contains("(Col[0]: Min=Inexact(Int64(1)) Max=Inexact(Int64(5)) Null=Inexact(0)")
            && plan.contains(
                "(Col[1]: Min=Inexact(Utf8View(\"a\")) Max=Inexact(Utf8View(\"c\")) Null=Inexact(1)"
            ),
        "{plan}"
    );
}

/// A write of many rows is written by a writer per partition of its plan, at once: each writes
/// files of its own. Partitions with fewer rows than a row group share one file, so a small write
/// stays one file. (Each side of a UNION ALL is a partition.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_writes_are_written_by_several_writers_and_small_ones_by_one() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    let files = |table: &'static str| {
        let engine = &engine;
        async move {
            let sql = format!("SELECT record_count FROM \"{table}$files\" ORDER BY record_count");
            lines(&run(engine, &sql).await)
        }
    };
    run(
        &engine,
        "CREATE TABLE small AS SELECT id FROM generate_series(1, 20000) AS g(id) \
         UNION ALL SELECT id FROM generate_series(20001, 40000) AS g(id)",
    )
    .await;
    assert_eq!(files("small").await, vec!["40000"]);
    run(
        &engine,
        "CREATE TABLE large AS SELECT id FROM generate_series(1, 300000) AS g(id) \
         UNION ALL SELECT id FROM generate_series(300001, 600000) AS g(id)",
    )
    .await;
    let large = files("large").await;
    let counts: Vec<u64> = large.iter().map(|c| c.parse().unwrap_or(0)).collect();
    assert_eq!(counts.len(), 2, "{large:?}");
    assert!(counts.iter().all(|c| *c >= 128 * 1024), "{large:?}");
    assert_eq!(
        lines(
            &run(
                &engine,
                "SELECT count(*), count(DISTINCT id), sum(id) FROM large"
            )
            .await
        ),
        vec!["600000|600000|180000300000"]
    );
}

/// The writer gives a column a dictionary only where it pays: a column with more than one distinct
/// value in eight rows (here `id` and `note`) is written plain, the repetitive ones (`flag`, `day`)
/// with a dictionary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_repetitive_columns_get_a_dictionary() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    run(
        &engine,
        "CREATE TABLE w AS SELECT id, CAST(id % 3 AS varchar) AS flag, \
         DATE '2026-01-01' + CAST(id % 50 AS int) AS day, 'note ' || CAST(id AS varchar) AS note \
         FROM generate_series(1, 20000) AS g(id)",
    )
    .await;
    let files = lines(&run(&engine, "SELECT file_path FROM \"w$files\"").await);
    assert_eq!(files.len(), 1, "{files:?}");
    let file = std::fs::File::open(files[0].trim_start_matches("file://"))
        .unwrap_or_else(|e| panic!("{e}"));
    let reader =
        parquet::file::reader::SerializedFileReader::new(file).unwrap_or_else(|e| panic!("{e}"));
    let metadata = parquet::file::reader::FileReader::metadata(&reader);
    let group = metadata.row_group(0);
    let dictionary: Vec<(String, bool)> = group
        .columns()
        .iter()
        .map(|c| {
            (
                c.column_path().string(),
                c.dictionary_page_offset().is_some(),
            )
        })
        .collect();
    assert_eq!(
        dictionary,
        [
            ("id".to_string(), false),
            ("flag".to_string(), true),
            ("day".to_string(), true),
            ("note".to_string(), false)
        ]
    );
    assert_eq!(
        lines(
            &run(
                &engine,
                "SELECT count(*), count(DISTINCT flag), min(day), max(note) FROM w"
            )
            .await
        ),
        ["20000|3|2026-01-01|note 9999"]
    );
}

/// A hash join's dynamic filter drops the probe side's rows at the scan: only the 20 fact rows
/// whose keys the filtered dimension holds reach the join and the aggregate. Joins that must keep
/// every row (the preserved side of an outer join) get no such filter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_filters_drop_rows_at_the_scan() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    create_fact(&engine).await;
    create_dim(&engine).await;
    let join = "SELECT count(*), sum(f.v) FROM fact f JOIN dim d ON f.k = d.k WHERE d.tag = 'x'";
    assert_eq!(lines(&run(&engine, join).await), ["20|42000"]);
    let plan = lines(&run(&engine, &format!("EXPLAIN ANALYZE {join}")).await).join("\n");
    let filter = plan
        .lines()
        .find(|l| l.contains("DynamicFilterExec: "))
        .unwrap_or_else(|| panic!("no DynamicFilterExec in {plan}"));
    assert!(filter.contains("output_rows=20,"), "{filter}");

    // A key that many fact rows share: the aggregate below the join sees only the kept keys.
    let grouped = "SELECT f.k, sum(f.v) FROM fact f WHERE f.k IN (SELECT k FROM dim WHERE tag = 'x') \
                   AND f.k <= 300 GROUP BY f.k ORDER BY f.k";
    assert_eq!(
        lines(&run(&engine, grouped).await),
        ["100|200", "200|400", "300|600"]
    );
    let outer =
        "SELECT count(*), count(d.k) FROM fact f LEFT JOIN dim d ON f.k = d.k AND d.tag = 'x'";
    assert_eq!(lines(&run(&engine, outer).await), ["200000|20"]);
}

/// A join's build side is not the side SQE estimates much the larger, its estimates following all
/// the keys of the joins below: two tables of 5,000 rows matched on two keys (the second with ten
/// values) give one row per row, not the 500 DataFusion's own estimate takes from the last key, so
/// they are the build side against a third table of 200,000 rows. The answer is the same either
/// way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_sides_follow_every_key_of_the_joins_below() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    for sql in [
        "CREATE TABLE orders_t AS SELECT id AS ok1, id % 10 AS ok2 FROM generate_series(1, 5000) AS g(id)",
        "CREATE TABLE lines_t AS SELECT id AS lk1, id % 10 AS lk2 FROM generate_series(1, 5000) AS g(id)",
        "CREATE TABLE big_t AS SELECT id % 5000 + 1 AS bk, id AS w FROM generate_series(1, 200000) AS g(id)",
    ] {
        run(&engine, sql).await;
    }
    let join = "SELECT count(*), sum(b.w) FROM orders_t o JOIN lines_t l ON o.ok1 = l.lk1 \
                AND o.ok2 = l.lk2 JOIN big_t b ON b.bk = o.ok1";
    // The top join's line: which side's key comes first is the build side.
    let top = |plan: String| {
        plan.lines()
            .find(|l| l.contains("HashJoinExec") && l.contains("bk@"))
            .map(|l| l.split("on=[(").nth(1).unwrap_or_default().to_string())
            .unwrap_or_else(|| panic!("no join on bk in {plan}"))
    };
    assert_eq!(lines(&run(&engine, join).await), ["200000|20000100000"]);
    let plan = explain(&engine, join).await;
    assert!(top(plan.clone()).starts_with("ok1@"), "{plan}");

    let datafusion = open_in(
        &dir,
        EngineConfig {
            options: vec![("sqe.optimizer.join_sides".into(), "false".into())],
            ..EngineConfig::default()
        },
    );
    assert_eq!(lines(&run(&datafusion, join).await), ["200000|20000100000"]);
    let plan = explain(&datafusion, join).await;
    assert!(top(plan.clone()).starts_with("bk@"), "{plan}");
}

/// `x IN (SELECT … rank() …)` over a GROUP BY of a small table's strings builds the semi join's hash
/// table from the subquery's few rows, not from the 200,000 rows it filters (TPC-DS q70): the
/// strings of a table of at most a thousand rows are counted as at most its rows, and a window
/// keeps its input's rows. DataFusion's own choice builds it from the large side. The answer is
/// the same either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semi_join_on_a_ranked_subquery_builds_on_the_subquery() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    for sql in [
        "CREATE TABLE shop AS SELECT id, 'state ' || CAST(id % 3 AS varchar) AS state \
         FROM generate_series(1, 12) AS g(id)",
        "CREATE TABLE sale AS SELECT id % 12 + 1 AS shop_id, id % 100 + id % 7 AS amount \
         FROM generate_series(1, 200000) AS g(id)",
    ] {
        run(&engine, sql).await;
    }
    let mut by_state = [0u64; 3];
    for id in 1..=200_000u64 {
        by_state[((id % 12 + 1) % 3) as usize] += id % 100 + id % 7;
    }
    let best = (0..3).max_by_key(|&s| by_state[s]).unwrap_or_default();
    let (mut rows, mut total) = (0u64, 0u64);
    for id in 1..=200_000u64 {
        if (id % 12 + 1) % 3 == best as u64 {
            rows += 1;
            total += id % 100 + id % 7;
        }
    }
    let expected = [format!("{rows}|{total}")];
    let sql = "SELECT count(*), sum(s.amount) FROM sale s JOIN shop p ON s.shop_id = p.id \
               WHERE p.state IN (SELECT state FROM (SELECT p2.state, \
               rank() OVER (ORDER BY sum(s2.amount) DESC) AS r FROM sale s2 \
               JOIN shop p2 ON s2.shop_id = p2.id GROUP BY p2.state) WHERE r <= 1)";
    let semi = |plan: &str| -> String {
        plan.lines()
            .find(|l| l.contains("HashJoinExec") && l.contains("Semi"))
            .map(|l| l.split("join_type=").nth(1).unwrap_or_default().to_string())
            .unwrap_or_else(|| panic!("no semi join in {plan}"))
    };
    assert_eq!(lines(&run(&engine, sql).await), expected);
    let plan = explain(&engine, sql).await;
    assert!(semi(&plan).starts_with("RightSemi"), "{plan}");

    let datafusion = open_in(
        &dir,
        EngineConfig {
            options: vec![("sqe.optimizer.join_sides".into(), "false".into())],
            ..EngineConfig::default()
        },
    );
    assert_eq!(lines(&run(&datafusion, sql).await), expected);
    let plan = explain(&datafusion, sql).await;
    assert!(semi(&plan).starts_with("LeftSemi"), "{plan}");
}

/// A partitioned join's filter (a CASE over the key's hash, with a short IN list or a hash table
/// per partition) drops the same rows at the scan, and runs after the query's own filter on that
/// scan. The bitmap of the build side's keys rules out most rows before the join's own filter
/// looks at them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_join_filters_run_after_the_static_filter() {
    for (membership, largest_list) in [("IN (SET)", "150"), ("hash_lookup", "0")] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let optimizer =
            |name: &str, value: &str| (format!("datafusion.optimizer.{name}"), value.into());
        let partitioned = EngineConfig {
            target_partitions: Some(4),
            options: vec![
                optimizer("hash_join_single_partition_threshold", "0"),
                optimizer("hash_join_single_partition_threshold_rows", "0"),
                optimizer(
                    "hash_join_inlist_pushdown_max_distinct_values",
                    largest_list,
                ),
            ],
            ..EngineConfig::default()
        };
        let engine = open_in(&dir, partitioned);
        create_fact(&engine).await;
        create_dim(&engine).await;
        let join = "SELECT count(*), sum(f.v) FROM fact f JOIN dim d ON f.k = d.k \
                    WHERE d.tag = 'x' AND f.v > 1000";
        assert_eq!(lines(&run(&engine, join).await), ["15|39000"]);
        let plan = lines(&run(&engine, &format!("EXPLAIN ANALYZE {join}")).await).join("\n");
        assert!(plan.contains("mode=Partitioned"), "{plan}");
        let mut steps = plan
            .lines()
            .skip_while(|l| !l.contains("DynamicFilterExec: "));
        let filter = steps
            .next()
            .unwrap_or_else(|| panic!("no DynamicFilterExec in {plan}"));
        assert!(filter.contains("CASE hash_repartition"), "{filter}");
        assert!(filter.contains(membership), "{filter}");
        assert!(filter.contains("output_rows=15,"), "{filter}");
        assert!(filter.contains("key_bitmaps=1,"), "{filter}");
        // Of the 199.5 K rows the static filter keeps, 15 join: the bitmap of the 20 keys (one
        // integer key, 100 to 2000) is exact, and drops every other row itself.
        assert_eq!(metric(filter, "rows_pruned_by_keys"), 199_500.0, "{filter}");
        assert_eq!(metric(filter, "rows_pruned"), 199_500.0, "{filter}");
        let build = plan
            .lines()
            .find(|l| l.contains("BuildKeysExec: keys=[k@0]"))
            .unwrap_or_else(|| panic!("no BuildKeysExec in {plan}"));
        assert_eq!(metric(build, "keys_recorded"), 20.0, "{build}");
        let below = steps.next().unwrap_or_default();
        assert!(below.contains("FilterExec: v@1 > 1000"), "{below}");
        assert!(below.contains("output_rows=199.5 K,"), "{below}");
    }
}

/// A metric's value in an EXPLAIN ANALYZE line (`1.5 K` is 1500).
fn metric(line: &str, name: &str) -> f64 {
    let text = line
        .split(&format!("{name}="))
        .nth(1)
        .and_then(|rest| rest.split([',', ']']).next())
        .unwrap_or_else(|| panic!("no {name} in {line}"));
    let (number, scale) = match text.split_once(' ') {
        Some((n, "K")) => (n, 1e3),
        Some((n, "M")) => (n, 1e6),
        _ => (text, 1.0),
    };
    number
        .parse::<f64>()
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        * scale
}

/// A join inside a recursive query's step: DataFusion resets the plan before each round, which
/// takes the row filters and the build keys' bitmap out of it (their state would be a past
/// round's), and every level of the walk is found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_in_a_recursive_query_finds_every_level() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    // A chain 1 -> 2 -> ... -> 50000: each round's single key is a new one.
    run(
        &engine,
        "CREATE TABLE edges AS SELECT id AS src, id + 1 AS dst FROM generate_series(1, 50000) AS g(id)",
    )
    .await;
    let walk = "WITH RECURSIVE w(node, depth) AS (SELECT 1, 0 UNION ALL \
                SELECT e.dst, w.depth + 1 FROM w JOIN edges e ON e.src = w.node WHERE w.depth < 20) \
                SELECT count(*), max(node), sum(node) FROM w";
    assert_eq!(lines(&run(&engine, walk).await), ["21|21|231"]);
}

/// `IN (SELECT k … GROUP BY k HAVING …)` is a semi join whose built keys filter the outer tables'
/// scans: DataFusion 54 hands a semi join's probe side the dynamic filter an inner join gets (SQE
/// had a rule turning such semi joins into inner joins for this, until 53). Against a key that
/// repeats, the answer counts each outer row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semi_joins_filter_the_outer_scans() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    run(
        &engine,
        "CREATE TABLE items AS SELECT id % 50000 AS k, id AS q FROM generate_series(1, 200000) AS g(id)",
    )
    .await;
    run(
        &engine,
        "CREATE TABLE orders AS SELECT id AS k, id % 7 AS c FROM generate_series(0, 49999) AS g(id)",
    )
    .await;
    // Each key has four items, q summing to 4k + 300000 (500000 for key 0).
    let unique = "SELECT o.k, o.c, count(*) FROM orders o JOIN items i ON o.k = i.k \
                  WHERE o.k IN (SELECT k FROM items GROUP BY k HAVING sum(q) > 499960) \
                  GROUP BY o.k, o.c ORDER BY o.k";
    let expected: Vec<String> = std::iter::once(0)
        .chain(49991..50000)
        .map(|k| format!("{k}|{}|4", k % 7))
        .collect();
    assert_eq!(lines(&run(&engine, unique).await), expected);
    let plan = lines(&run(&engine, &format!("EXPLAIN ANALYZE {unique}")).await).join("\n");
    assert!(plan.contains("Semi"), "{plan}");
    let kept: Vec<&str> = plan
        .lines()
        .filter(|l| l.contains("DynamicFilterExec: "))
        .filter_map(|l| l.split("output_rows=").nth(1)?.split(',').next())
        .collect();
    assert!(kept.contains(&"10"), "orders: {plan}");
    assert!(kept.contains(&"40"), "items: {plan}");

    let repeated =
        "SELECT count(*), sum(k) FROM orders WHERE k IN (SELECT k FROM items WHERE k > 49990)";
    assert_eq!(lines(&run(&engine, repeated).await), ["9|449955"]);
    let plan = lines(&run(&engine, &format!("EXPLAIN {repeated}")).await).join("\n");
    assert!(plan.contains("Semi"), "{plan}");
}

/// A CTE referenced twice is aggregated once, and both references read that one result; with a
/// volatile function in it, each reference computes its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cte_used_twice_is_computed_once() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    create_fact(&engine).await;
    let twice = "WITH r AS (SELECT k % 10 AS g, sum(v) AS s FROM fact GROUP BY k % 10) \
                 SELECT g, s FROM r WHERE s = (SELECT max(s) FROM r)";
    assert_eq!(lines(&run(&engine, twice).await), ["0|4000200000"]);
    let plan = lines(&run(&engine, &format!("EXPLAIN ANALYZE {twice}")).await).join("\n");
    let shared = plan
        .matches("SharedExec: computed once for 2 copies")
        .count();
    assert_eq!(shared, 2, "{plan}");
    let scanned: Vec<&str> = plan
        .lines()
        .filter(|l| l.contains("DataSourceExec: ") && l.contains("output_rows=200.0 K,"))
        .collect();
    assert_eq!(scanned.len(), 1, "{plan}");

    let volatile = "WITH r AS (SELECT k % 10 AS g, sum(v * random()) AS s FROM fact GROUP BY k % 10) \
                    SELECT count(*) FROM r WHERE s <= (SELECT max(s) FROM r)";
    let plan = lines(&run(&engine, &format!("EXPLAIN {volatile}")).await).join("\n");
    assert!(!plan.contains("SharedExec"), "{plan}");
}

/// The plan `EXPLAIN` gives for `sql`, as one text.
async fn explain(engine: &Engine, sql: &str) -> String {
    lines(&run(engine, &format!("EXPLAIN {sql}")).await).join("\n")
}

/// An engine over `dir` with SQE's shared computations switched off.
fn without_sharing(dir: &tempfile::TempDir) -> Engine {
    open_in(
        dir,
        EngineConfig {
            options: vec![("sqe.optimizer.share_ctes".into(), "false".into())],
            ..EngineConfig::default()
        },
    )
}

/// A CTE whose references filter it differently is computed once, over the rows some reference
/// wants (the OR of their filters, pushed to the scan); each reference still gets its own rows. A
/// reference without a filter shares the whole result; a CTE not ending in an aggregate, or with a
/// volatile function, is computed per reference; `sqe.optimizer.share_ctes = false` turns it off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cte_filtered_apart_by_its_references_is_computed_once() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    create_fact(&engine).await;
    let three = "WITH t AS (SELECT k % 10 AS g, k % 7 AS y, sum(v) AS s, count(*) AS n FROM fact \
                 GROUP BY k % 10, k % 7) \
                 SELECT a.g, a.s, b.s, c.n FROM t a JOIN t b ON a.g = b.g JOIN t c ON a.g = c.g \
                 WHERE a.y = 1 AND b.y = 2 AND c.y = 1 AND a.g < 3 ORDER BY a.g";
    // fact: k from 1 to 200000, v = 2k.
    let of = |g: u64, y: u64| (1..=200_000u64).filter(move |k| k % 10 == g && k % 7 == y);
    let expected: Vec<String> = (0..3)
        .map(|g| {
            let a: u64 = of(g, 1).map(|k| 2 * k).sum();
            let b: u64 = of(g, 2).map(|k| 2 * k).sum();
            format!("{g}|{a}|{b}|{}", of(g, 1).count())
        })
        .collect();
    assert_eq!(lines(&run(&engine, three).await), expected);
    let plan = lines(&run(&engine, &format!("EXPLAIN ANALYZE {three}")).await).join("\n");
    let shared = plan
        .matches("SharedExec: computed once for 3 copies")
        .count();
    assert_eq!(shared, 3, "{plan}");
    let scans: Vec<&str> = plan
        .lines()
        .filter(|l| l.contains("DataSourceExec: ") && l.contains("output_rows=200.0 K,"))
        .collect();
    assert_eq!(scans.len(), 1, "{plan}");
    let logical = explain(&engine, three).await;
    assert!(
        logical.contains("SharedCte: computed once for 3 references"),
        "{logical}"
    );
    assert!(
        logical.contains("fact.k % Int64(7) = Int64(1)")
            && logical.contains("fact.k % Int64(7) = Int64(2)")
            && logical.contains(" OR "),
        "the references' filters, ORed, go into the scan: {logical}"
    );

    // One reference reads every row: nothing is pushed, both read one result.
    let whole = "WITH t AS (SELECT k % 7 AS y, count(*) AS n FROM fact GROUP BY k % 7) \
                 SELECT a.n, b.n FROM (SELECT sum(n) AS n FROM t) a, (SELECT n FROM t WHERE y = 3) b";
    let y3 = of(0, 3).count() + (1..10).map(|g| of(g, 3).count()).sum::<usize>();
    assert_eq!(lines(&run(&engine, whole).await), [format!("200000|{y3}")]);
    let plan = explain(&engine, whole).await;
    assert_eq!(plan.matches("SharedCte").count(), 2, "{plan}");
    assert!(!plan.contains(" OR "), "{plan}");

    // Rows, not an aggregate: each reference computes its own.
    let rows = "WITH t AS (SELECT k, v FROM fact WHERE k <= 10) \
                SELECT count(*), sum(a.v + b.v) FROM t a JOIN t b ON a.k = b.k + 1";
    let pairs: u64 = (2..=10u64).map(|k| 2 * k + 2 * (k - 1)).sum();
    assert_eq!(lines(&run(&engine, rows).await), [format!("9|{pairs}")]);
    let plan = explain(&engine, rows).await;
    assert!(!plan.contains("Shared"), "{plan}");
    let volatile = "WITH t AS (SELECT k % 7 AS y, sum(v * random()) AS s FROM fact GROUP BY k % 7) \
                    SELECT count(*) FROM t a JOIN t b ON a.y = b.y AND a.s >= 0 AND b.s >= 0";
    assert_eq!(lines(&run(&engine, volatile).await), ["7"]);
    let plan = explain(&engine, volatile).await;
    assert!(!plan.contains("Shared"), "{plan}");

    let off = without_sharing(&dir);
    assert_eq!(lines(&run(&off, three).await), expected);
    let plan = explain(&off, three).await;
    assert!(!plan.contains("SharedCte"), "{plan}");
}

/// Aggregates without GROUP BY over one table, each with its own filter, read it once: one aggregate
/// computes them all, each over its own rows (none: count 0, max NULL). A volatile filter keeps its
/// own scan (so does an argument that could fail: `shared_computations_keep_apart_what_differs`);
/// with `sqe.optimizer.share_ctes = false` each reads the table again, with the same rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregates_over_one_table_with_their_own_filters_read_it_once() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    create_fact(&engine).await;
    let three = "SELECT * FROM \
                 (SELECT count(*) AS n, sum(v) AS s, count(DISTINCT k) AS d FROM fact WHERE k <= 1000) a, \
                 (SELECT count(*) AS n, sum(v) FILTER (WHERE k < 199500) AS s FROM fact WHERE k > 199000) b, \
                 (SELECT count(*) AS n, max(v) AS m FROM fact WHERE k < 0) c";
    // fact: k from 1 to 200000, v = 2k.
    let low: u64 = (1..=1000u64).map(|k| 2 * k).sum();
    let high: u64 = (199_001..199_500u64).map(|k| 2 * k).sum();
    let expected = [format!("1000|{low}|1000|1000|{high}|0|")];
    assert_eq!(lines(&run(&engine, three).await), expected);
    let plan = lines(&run(&engine, &format!("EXPLAIN ANALYZE {three}")).await).join("\n");
    assert_eq!(
        plan.matches("SharedExec: computed once for 3 copies")
            .count(),
        3,
        "{plan}"
    );
    let scans = plan
        .lines()
        .filter(|l| l.contains("DataSourceExec: ") && !l.contains("metrics=[]"))
        .count();
    assert_eq!(scans, 1, "one scan runs: {plan}");

    let volatile = "SELECT * FROM (SELECT count(*) FROM fact WHERE random() < 2) x, \
                    (SELECT count(*) FROM fact WHERE k < 5) y";
    assert_eq!(lines(&run(&engine, volatile).await), ["200000|4"]);
    let plan = explain(&engine, volatile).await;
    assert!(!plan.contains("Shared"), "{plan}");

    let off = without_sharing(&dir);
    assert_eq!(lines(&run(&off, three).await), expected);
    let plan = explain(&off, three).await;
    assert!(!plan.contains("Shared"), "{plan}");
}

/// What looks alike but is not stays apart: scans of one name over other rows (a table function's
/// arguments), a reference some rule changed alone (`ON 1 = 0`), an aggregate whose argument fails
/// on rows another one's WHERE keeps, ordered aggregates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_computations_keep_apart_what_differs() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    create_fact(&engine).await;
    let series = "SELECT a.n, b.n FROM (SELECT count(*) AS n FROM generate_series(1, 10)) a, \
                  (SELECT count(*) AS n FROM generate_series(1, 1000)) b";
    assert_eq!(lines(&run(&engine, series).await), ["10|1000"]);
    let grouped = "SELECT a.n, b.n FROM \
                   (SELECT count(*) AS n FROM generate_series(1, 10) GROUP BY 1 = 1) a, \
                   (SELECT count(*) AS n FROM generate_series(1, 1000) GROUP BY 1 = 1) b";
    assert_eq!(lines(&run(&engine, grouped).await), ["10|1000"]);

    let never = "WITH t AS (SELECT k % 7 AS y, count(*) AS c FROM fact GROUP BY k % 7) \
                 SELECT count(*), count(b.c) FROM t a LEFT JOIN t b ON a.y = b.y AND 1 = 0";
    assert_eq!(lines(&run(&engine, never).await), ["7|0"]);

    run(
        &engine,
        "CREATE TABLE zeros AS SELECT id - 1 AS k FROM generate_series(1, 100) AS g(id)",
    )
    .await;
    let divide = "SELECT * FROM \
                  (SELECT count(*) FILTER (WHERE 100 / k > 10) AS c FROM zeros WHERE k <> 0) a, \
                  (SELECT count(*) AS z FROM zeros WHERE k = 0) b";
    assert_eq!(lines(&run(&engine, divide).await), ["9|1"]);
    let ordered = "SELECT * FROM \
                   (SELECT array_agg(k ORDER BY k DESC) FROM fact WHERE k <= 3) a, \
                   (SELECT array_agg(k ORDER BY v) FROM fact WHERE k > 199998) b";
    assert_eq!(
        lines(&run(&engine, ordered).await),
        ["[3, 2, 1]|[199999, 200000]"]
    );
}

/// GROUPING SETS, CUBE and ROLLUP aggregate the rows once, by every grouping column, and each set
/// from a finer set already computed: the same rows as DataFusion's own plan
/// (`sqe.optimizer.grouping_sets = false`), NULLs in the data kept apart from a set's NULLs by
/// GROUPING(), aggregate FILTERs applied to the rows. DISTINCT aggregates and repeated sets keep
/// DataFusion's plan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouping_sets_are_aggregated_from_finer_sets() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    run(
        &engine,
        "CREATE TABLE cube AS SELECT id % 3 AS a, id % 5 AS b, \
         CASE WHEN id % 11 = 0 THEN NULL ELSE id % 7 END AS c, id * 2 AS v \
         FROM generate_series(1, 200000) AS g(id)",
    )
    .await;
    let rollup = "SELECT a, b, c, sum(v), count(*), GROUPING(a, b, c) FROM cube \
                  GROUP BY ROLLUP (a, b, c)";
    // The same rows counted here: each set keyed by its columns and its GROUPING() bits.
    let mut sums: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for id in 1..=200_000u64 {
        let c = if id % 11 == 0 {
            String::new()
        } else {
            (id % 7).to_string()
        };
        let (a, b) = ((id % 3).to_string(), (id % 5).to_string());
        for key in [
            format!("{a}|{b}|{c}|0"),
            format!("{a}|{b}||1"),
            format!("{a}|||3"),
            "|||7".to_string(),
        ] {
            let e = sums.entry(key).or_default();
            e.0 += 2 * id;
            e.1 += 1;
        }
    }
    let mut expected: Vec<String> = sums
        .iter()
        .map(|(key, (sum, n))| {
            let (cols, grouping) = key.rsplit_once('|').unwrap_or_else(|| panic!("{key}"));
            format!("{cols}|{sum}|{n}|{grouping}")
        })
        .collect();
    expected.sort();
    assert_eq!(sorted(run(&engine, rollup).await), expected);
    let plan = explain(&engine, rollup).await;
    assert!(
        plan.contains(
            "GroupingSetsExec: finest (a, b, c), (a, b) from (a, b, c), (a) from (a, b), \
             () from (a)"
        ),
        "{plan}"
    );

    let off = open_in(
        &dir,
        EngineConfig {
            options: vec![("sqe.optimizer.grouping_sets".into(), "false".into())],
            ..EngineConfig::default()
        },
    );
    let alike = [
        "SELECT a, b, c, sum(v), count(*), GROUPING(a, b, c) FROM cube GROUP BY ROLLUP (a, b, c)",
        "SELECT a, b, avg(v), min(v), max(v), count(c), sum(v) FILTER (WHERE c = 3), \
         GROUPING(a, b) FROM cube GROUP BY CUBE (a, b)",
        "SELECT a, b, c, count(*), GROUPING(a, b, c) FROM cube GROUP BY GROUPING SETS ((a), (b), (c))",
        "SELECT a, c, count(DISTINCT b), sum(v) FROM cube GROUP BY ROLLUP (a, c)",
        "SELECT a, count(*) FROM cube GROUP BY GROUPING SETS ((a), (a), ())",
        "SELECT a % 2, b + 1, sum(v) FROM cube WHERE v > 1000 GROUP BY ROLLUP (a % 2, b + 1)",
        // One partition may get no rows: the empty set still counts 0 there.
        "SELECT a, count(*), sum(v) FROM cube WHERE v < 100 GROUP BY ROLLUP (a)",
    ];
    for sql in alike {
        let ours = sorted(run(&engine, sql).await);
        assert_eq!(ours, sorted(run(&off, sql).await), "{sql}");
        assert!(ours.len() >= 4, "{sql}: {ours:?}");
        assert!(!explain(&off, sql).await.contains("GroupingSetsExec"));
    }
    let plan = explain(&engine, alike[2]).await;
    assert!(
        plan.contains("GroupingSetsExec: finest (a, b, c) (not a set), (a) from (a, b, c)"),
        "{plan}"
    );
    let none = "SELECT a, count(*), sum(v) FROM cube WHERE v < 0 GROUP BY ROLLUP (a)";
    assert_eq!(lines(&run(&engine, none).await), ["|0|"]);
    assert!(explain(&engine, none).await.contains("GroupingSetsExec"));
    for kept in [alike[3], alike[4]] {
        let plan = explain(&engine, kept).await;
        assert!(!plan.contains("GroupingSetsExec"), "{kept}: {plan}");
    }

    // A finest level the memory pool will not hold: its rows go out once per set. One partition
    // keeps DataFusion's aggregate the pool's only consumer that can spill: with two, one may hold
    // the pool while the other needs room to sort its spill, and the query fails.
    let small = open_in(
        &dir,
        EngineConfig {
            memory_limit: Some(16 << 20),
            options: vec![("datafusion.execution.target_partitions".into(), "1".into())],
            ..EngineConfig::default()
        },
    );
    let wide = "SELECT v % 100000, a, sum(v), count(*) FROM cube GROUP BY ROLLUP (v % 100000, a)";
    let ours = sorted(run(&small, wide).await);
    assert_eq!(ours.len(), 1 + 50_000 + 150_000);
    assert_eq!(ours, sorted(run(&off, wide).await));
    let plan = lines(&run(&small, &format!("EXPLAIN ANALYZE {wide}")).await).join("\n");
    assert!(
        plan.contains("GroupingSetsExec") && !plan.contains("sets_unmerged=0"),
        "{plan}"
    );
    let plan = lines(&run(&engine, &format!("EXPLAIN ANALYZE {wide}")).await).join("\n");
    assert!(plan.contains("sets_unmerged=0"), "{plan}");
}

/// A UNION ALL of aggregates over one join, each by fewer columns (subtotals spelled out, as
/// DuckDB words TPC-DS q27), computes the join once: one GROUPING SETS aggregate whose rows take
/// the columns of their branch. The same rows as each branch on its own, the grand total's row
/// over no rows included; branches by the same columns, or over other inputs, stay branches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_union_of_aggregates_over_one_input_is_one_grouping_sets_aggregate() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    run(
        &engine,
        "CREATE TABLE sale AS SELECT id % 3 AS a, id % 2 AS b, id AS x FROM generate_series(1, 1000) AS g(id)",
    )
    .await;
    run(
        &engine,
        "CREATE TABLE kept AS SELECT id AS a FROM generate_series(0, 2) AS g(id)",
    )
    .await;
    let subtotals = |filter: &str| {
        format!(
            "WITH r AS (SELECT s.a, s.b, s.x FROM sale s JOIN kept k ON s.a = k.a {filter}) \
             SELECT a, b, 0 AS g, sum(x) AS s, count(*) AS n FROM r GROUP BY a, b \
             UNION ALL SELECT a, NULL, 1, sum(x), count(*) FROM r GROUP BY a \
             UNION ALL SELECT NULL, NULL, 2, sum(x), count(*) FROM r"
        )
    };
    let mut expected = Vec::new();
    let sum = |keep: &dyn Fn(u64) -> bool| {
        let ids = (1..=1000u64).filter(|&i| keep(i));
        let (s, n) = ids.fold((0, 0), |(s, n), i| (s + i, n + 1));
        format!("{s}|{n}")
    };
    for a in 0..3 {
        for b in 0..2 {
            expected.push(format!("{a}|{b}|0|{}", sum(&|i| i % 3 == a && i % 2 == b)));
        }
        expected.push(format!("{a}||1|{}", sum(&|i| i % 3 == a)));
    }
    expected.push(format!("||2|{}", sum(&|_| true)));
    expected.sort();
    let all = subtotals("");
    assert_eq!(sorted(run(&engine, &all).await), expected);
    let plan = explain(&engine, &all).await;
    assert!(plan.contains("GROUPING SETS"), "{plan}");
    assert_eq!(plan.matches("TableScan: sale").count(), 1, "{plan}");
    let none = subtotals("WHERE s.x < 0");
    assert_eq!(lines(&run(&engine, &none).await), ["||2||0"]);

    let off = open_in(
        &dir,
        EngineConfig {
            options: vec![("sqe.optimizer.grouping_sets".into(), "false".into())],
            ..EngineConfig::default()
        },
    );
    assert_eq!(sorted(run(&off, &all).await), expected);
    assert_eq!(
        explain(&off, &all).await.matches("TableScan: sale").count(),
        3
    );
    let apart = [
        // Two branches by the same column.
        "SELECT a, sum(x) FROM sale GROUP BY a UNION ALL SELECT a, max(x) FROM sale GROUP BY a",
        // Over two inputs.
        "SELECT a, sum(x) FROM sale GROUP BY a UNION ALL SELECT NULL, sum(x) FROM sale WHERE b = 1",
    ];
    for sql in apart {
        assert_eq!(
            sorted(run(&engine, sql).await),
            sorted(run(&off, sql).await)
        );
        let plan = explain(&engine, sql).await;
        assert!(!plan.contains("GROUPING SETS"), "{sql}: {plan}");
    }
}

/// The files an EXPLAINed scan reads (each range of a small file is the whole file).
async fn files_read(engine: &Engine, sql: &str) -> usize {
    let plan = lines(&run(engine, &format!("EXPLAIN {sql}")).await).join("\n");
    plan.lines()
        .filter(|l| l.contains("DataSourceExec") || l.contains("IcebergScan"))
        .map(|l| l.matches(".parquet").count())
        .sum()
}

/// Filters become SQE's own Iceberg predicate: each kind prunes the files that cannot hold a
/// matching row, and a filter that cannot be expressed (or only in part) is still applied to the
/// rows, so no answer changes. Four files, one INSERT each, with disjoint ranges of every column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushed_filters_prune_files_and_every_filter_still_applies() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    run(
        &engine,
        "CREATE TABLE t (i int, s varchar, d date, ts timestamp, m decimal(10, 2), f double, b boolean)",
    )
    .await;
    for rows in [
        "(1, 'apple', DATE '2024-01-01', TIMESTAMP '2024-01-01 10:00:00', 1.50, 0.5, true), \
         (2, 'apricot', DATE '2024-01-02', TIMESTAMP '2024-01-02 10:00:00', 2.50, 1.5, true)",
        "(10, 'banana', DATE '2024-02-01', TIMESTAMP '2024-02-01 10:00:00', 10.00, 1.0, false), \
         (11, 'blueberry', DATE '2024-02-02', TIMESTAMP '2024-02-02 10:00:00', 11.00, 2.0, false)",
        "(20, 'cherry', DATE '2024-03-01', TIMESTAMP '2024-03-01 10:00:00', 20.00, 20.5, NULL), \
         (NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
        "(30, 'date', DATE '2024-04-01', TIMESTAMP '2024-04-01 10:00:00', 30.00, 30.5, true)",
    ] {
        run(&engine, &format!("INSERT INTO t VALUES {rows}")).await;
    }
    // (filter, files read, the ids it keeps)
    let cases: &[(&str, usize, &[&str])] = &[
        ("i = 10", 1, &["10"]),
        ("i > 15", 2, &["20", "30"]),
        ("15 < i", 2, &["20", "30"]),
        ("i IN (1, 30)", 2, &["1", "30"]),
        ("i BETWEEN 10 AND 20", 2, &["10", "11", "20"]),
        ("NOT (i < 20)", 2, &["20", "30"]),
        ("i IS NULL", 1, &[""]),
        ("i = 1 OR s = 'date'", 2, &["1", "30"]),
        ("s LIKE 'b%'", 1, &["10", "11"]),
        ("s NOT LIKE 'b%'", 3, &["1", "2", "20", "30"]),
        ("d >= DATE '2024-03-01'", 2, &["20", "30"]),
        ("ts < TIMESTAMP '2024-02-01 00:00:00'", 1, &["1", "2"]),
        // A string literal the planner casts.
        ("i = '10'", 1, &["10"]),
        ("b", 2, &["1", "2", "30"]),
        // Only one side of an AND is expressible: it prunes, the other still filters.
        ("i > 15 AND length(s) = 4", 2, &["30"]),
        // Not expressible, or not wholly: every file is read and the filter still applies.
        ("s LIKE '%rr%'", 4, &["11", "20"]),
        ("i = 1 OR length(s) = 6", 4, &["1", "10", "20"]),
        (
            "NOT (i > 15 AND length(s) = 4)",
            4,
            &["1", "2", "10", "11", "20"],
        ),
        // A literal of another type than the column's: the column is cast, and its bounds with
        // it (1 and 2 are below 2.5). A NULL in a list.
        ("i > 2.5", 3, &["10", "11", "20", "30"]),
        ("i IN (1, NULL)", 1, &["1"]),
        // `NOT IN` a list with a NULL is never TRUE: the planner makes it `i != 1 AND NULL`, no file.
        ("i NOT IN (1, NULL)", 0, &[]),
        // Floating point prunes by the bounds of the files known to hold no NaN (see below), and
        // decimals by theirs.
        ("f > 5.0", 2, &["20", "30"]),
        ("m > 15", 2, &["20", "30"]),
    ];
    for (filter, files, ids) in cases {
        let sql = format!("SELECT i FROM t WHERE {filter} ORDER BY i");
        assert_eq!(lines(&run(&engine, &sql).await), *ids, "{filter}");
        assert_eq!(
            files_read(&engine, &sql).await,
            *files,
            "files read for {filter}"
        );
    }
    // A comparison with NULL keeps no row.
    let sql = "SELECT i FROM t WHERE i = NULL";
    assert!(lines(&run(&engine, sql).await).is_empty());
}

/// Iceberg's bounds of a floating-point column leave NaN out, and DataFusion orders NaN above every
/// number: a file that holds a NaN is read whatever its bounds say, one known to hold none is
/// pruned by them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_holding_nan_are_not_pruned_by_their_bounds() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    run(&engine, "CREATE TABLE t (i int, f double)").await;
    run(
        &engine,
        "INSERT INTO t VALUES (1, DOUBLE '5.0'), (2, nan())",
    )
    .await;
    run(&engine, "INSERT INTO t VALUES (3, DOUBLE '5.0')").await;
    // Both files' bounds are [5, 5]: each filter reads the first file only.
    for sql in [
        "SELECT i FROM t WHERE f <> DOUBLE '5.0'",
        "SELECT i FROM t WHERE f > DOUBLE '6.0'",
        "SELECT i FROM t WHERE f < DOUBLE '4.0'",
    ] {
        assert_eq!(files_read(&engine, sql).await, 1, "{sql}");
    }
    assert_eq!(
        files_read(&engine, "SELECT i FROM t WHERE f = DOUBLE '5.0'").await,
        2
    );
}

/// Parquet's bounds of a floating-point column leave NaN out, and DataFusion 54.1 takes them for
/// every value: it answered `max(f)` from them, read a column whose bounds are equal as that one
/// value, and skipped row groups holding the NaN a filter keeps. Each query here, over an Iceberg
/// table and over a Parquet file, gave a wrong answer before SQE stopped all three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nan_is_read_whatever_parquet_bounds_say() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    run(&engine, "CREATE TABLE t (i int, f double)").await;
    run(
        &engine,
        "INSERT INTO t VALUES (1, DOUBLE '5.0'), (2, nan())",
    )
    .await;
    let file = dir.path().join("t.parquet");
    let file = file.to_string_lossy();
    run(&engine, &format!("COPY (SELECT * FROM t) TO '{file}'")).await;
    for from in ["t".to_string(), format!("'{file}'")] {
        let rows = |sql: String| {
            let engine = &engine;
            async move { lines(&run(engine, &sql).await) }
        };
        let all = rows(format!("SELECT i, f FROM {from} ORDER BY i")).await;
        assert_eq!(all, ["1|5.0", "2|NaN"], "{from}");
        let max = rows(format!("SELECT max(f), min(f) FROM {from}")).await;
        assert_eq!(max, ["NaN|5.0"], "{from}");
        for filter in [
            "f <> DOUBLE '5.0'",
            "f > DOUBLE '6.0'",
            "f IS NOT NULL AND i > 1",
        ] {
            let sql = format!("SELECT i FROM {from} WHERE {filter}");
            assert_eq!(rows(sql).await, ["2"], "{from}: {filter}");
        }
        let top = rows(format!("SELECT i FROM {from} ORDER BY f DESC LIMIT 1")).await;
        assert_eq!(top, ["2"], "{from}");
    }
}

/// `sum(x + c)` computed as `sum(x) + c * count(x)` gives the sums the rows give: NULLs left out,
/// a group of NULLs and no rows at all NULL, `c + x` and `x - c` alike, other aggregates beside
/// them untouched; with the rule switched off the plan keeps its sums and the answers are the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shifted_sums_answer_as_the_rows_do() {
    let rows = "(SELECT g, CAST(x AS integer) AS x \
                FROM (VALUES (1, 10), (1, NULL), (2, NULL), (3, 5), (3, 7)) AS v(g, x)) AS t";
    let grouped = format!(
        "SELECT g, sum(x), sum(x + 1), sum(2 + x), sum(x - 3), max(x + 1), count(*) \
         FROM {rows} GROUP BY g ORDER BY g"
    );
    let nothing = format!("SELECT sum(x + 1), count(x) FROM {rows} WHERE g > 5");
    for rule in ["true", "false"] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let config = EngineConfig {
            options: vec![("sqe.optimizer.shifted_sums".into(), rule.into())],
            ..EngineConfig::default()
        };
        let engine = open_in(&dir, config);
        assert_eq!(
            lines(&run(&engine, &grouped).await),
            ["1|10|11|12|7|11|2", "2||||||1", "3|12|14|16|6|8|2"],
            "rule {rule}"
        );
        assert_eq!(lines(&run(&engine, &nothing).await), ["|0"], "rule {rule}");
        let rollup =
            format!("SELECT g, sum(x + 1), count(*) FROM {rows} GROUP BY ROLLUP (g) ORDER BY g");
        assert_eq!(
            lines(&run(&engine, &rollup).await),
            ["1|11|2", "2||1", "3|14|2", "|25|5"],
            "rule {rule}"
        );
        let plan = lines(&run(&engine, &format!("EXPLAIN {grouped}")).await).join("\n");
        assert_eq!(plan.contains("count(t.x)"), rule == "true", "{plan}");
    }
}

/// A filter on a nested column leaves the files to iceberg-rust's planning and the rows to the
/// filter: DataFusion's pruning would compare the column's element type, which carries Iceberg's
/// field ids, with a literal's, which does not (a panic in DataFusion 54.1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_on_nested_columns_keep_every_file_and_their_rows() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    run(&engine, "CREATE TABLE o (id int, tags array(varchar))").await;
    run(&engine, "INSERT INTO o VALUES (1, ARRAY['a', 'b'])").await;
    run(&engine, "INSERT INTO o VALUES (2, ARRAY['c'])").await;
    let sql = "SELECT id FROM o WHERE tags = ARRAY['a', 'b']";
    assert_eq!(lines(&run(&engine, sql).await), ["1"]);
    assert_eq!(
        lines(
            &run(
                &engine,
                "SELECT id FROM o WHERE id = 2 AND cardinality(tags) = 1"
            )
            .await
        ),
        ["2"]
    );
}

/// Every function of Trino's function list (tests/fixtures/trino_functions.txt, the groups issue
/// 14 sets aside left out) is in `SHOW FUNCTIONS`. The special forms are checked with a query
/// each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trino_function_coverage() {
    let engine = Engine::in_memory().unwrap_or_else(|e| panic!("{e}"));
    let listed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/trino_functions.txt"
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let wanted: Vec<&str> = listed
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let shown = run(&engine, "SHOW FUNCTIONS").await;
    let mut names = std::collections::HashSet::new();
    for batch in &shown {
        let column = batch
            .column_by_name("Function")
            .unwrap_or_else(|| panic!("SHOW FUNCTIONS has no Function column"));
        let column = arrow::array::AsArray::as_string::<i32>(column);
        names.extend(column.iter().flatten().map(str::to_string));
    }
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|n| !names.contains(*n))
        .collect();
    let present = wanted.len() - missing.len();
    println!(
        "Trino function coverage: {present} of {} ({:.0}%); missing: {}",
        wanted.len(),
        100.0 * present as f64 / wanted.len() as f64,
        missing.join(", ")
    );
    assert!(
        missing.is_empty(),
        "Trino's functions missing from SHOW FUNCTIONS: {}",
        missing.join(", ")
    );

    let like = run(&engine, "SHOW FUNCTIONS LIKE 'date%'").await;
    assert!(lines(&like).iter().any(|l| l.starts_with("date_add|")));
    // One row per signature, in Trino's type names; a position taking any type is `T`.
    for (pattern, expected) in [
        (
            "word_stem",
            vec![
                "word_stem|varchar|varchar|scalar|true|",
                "word_stem|varchar|varchar, varchar|scalar|true|",
            ],
        ),
        (
            "spooky_hash_v2_64",
            vec!["spooky_hash_v2_64|varbinary|varbinary|scalar|true|"],
        ),
        ("collect", vec!["collect|array(T)|T|aggregate|true|"]),
        ("typeof", vec!["typeof|varchar|T|scalar|true|"]),
        // Typed from a constant argument (a zone, an offset): shown with a sample one.
        (
            "from_unixtime",
            vec![
                "from_unixtime|timestamp(3) with time zone|double|scalar|true|",
                "from_unixtime|timestamp(3) with time zone|double, bigint, bigint|scalar|true|",
                "from_unixtime|timestamp(3) with time zone|double, varchar|scalar|true|",
            ],
        ),
        // Trino's documented signature, where probing shows none (lambdas, forms planned as
        // expressions).
        (
            "transform",
            vec![
                "transform|array(U)|array(T), function(T,U)|scalar|true|transforms the values of an array",
            ],
        ),
        (
            "listagg",
            vec!["listagg|varchar|varchar, varchar|aggregate|true|"],
        ),
    ] {
        let shown = run(&engine, &format!("SHOW FUNCTIONS LIKE '{pattern}'")).await;
        assert_eq!(lines(&shown), expected, "SHOW FUNCTIONS LIKE '{pattern}'");
    }
    // Every function of Trino's list shows its types.
    let untyped: Vec<String> = lines(&shown)
        .into_iter()
        .filter(|l| {
            let mut cells = l.split('|');
            let name = cells.next().unwrap_or_default();
            wanted.contains(&name) && cells.next() == Some("")
        })
        .collect();
    assert!(
        untyped.is_empty(),
        "Trino's functions shown without types: {untyped:?}"
    );
    for probe in [
        "SELECT CAST('1' AS integer), try_cast('x' AS integer)",
        "SELECT extract(year FROM DATE '2020-01-01')",
        "SELECT if(true, 1, 2), coalesce(NULL, 1), nullif(1, 2)",
        "SELECT current_date, current_time, current_timestamp, current_user, localtime, localtimestamp",
    ] {
        run(&engine, probe).await;
    }
}

/// A view is kept in the catalog as an Iceberg view (format version 1, its SQL as written in the
/// `trino` dialect): another process on the warehouse reads it, and SHOW CREATE VIEW gives it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_are_kept_as_iceberg_views() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let first = open_in(&dir, EngineConfig::default());
    run(
        &first,
        "CREATE TABLE t AS SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS v(id, name)",
    )
    .await;
    run(
        &first,
        "CREATE VIEW named COMMENT 'it''s a view' SECURITY INVOKER AS SELECT upper(name) AS big FROM t WHERE id > 1",
    )
    .await;
    drop(first);

    let second = open_in(&dir, EngineConfig::default());
    assert_eq!(
        lines(&run(&second, "SELECT big FROM named").await),
        vec!["B"]
    );
    assert_eq!(
        lines(&run(&second, "SHOW CREATE VIEW named").await),
        vec![
            "CREATE VIEW iceberg.default.named COMMENT 'it''s a view' SECURITY INVOKER AS\nSELECT upper(name) AS big FROM t WHERE id > 1"
        ]
    );
    let folder = dir.path().join("default").join("named").join("metadata");
    let files: Vec<_> = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .map(|e| e.unwrap_or_else(|e| panic!("{e}")).path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(json["format-version"], 1);
    let version = &json["versions"][0];
    assert_eq!(
        version["representations"],
        serde_json::json!([{ "type": "sql", "sql": "SELECT upper(name) AS big FROM t WHERE id > 1", "dialect": "trino" }])
    );
    assert_eq!(version["default-catalog"], "iceberg");
    assert_eq!(version["default-namespace"], serde_json::json!(["default"]));
    assert_eq!(json["properties"]["comment"], "it's a view");
    assert_eq!(json["properties"]["owner"], "test");
    assert_eq!(
        json["schemas"][0]["fields"][0]["name"],
        serde_json::Value::from("big")
    );

    // Dropped, its folder goes with it.
    run(&second, "DROP VIEW named").await;
    assert!(!dir.path().join("default").join("named").exists());
}

/// An aggregate over a join by the text columns of one table (TPC-DS q04's customer) sums the other
/// tables' rows by their keys first, then joins that table: the same rows as joining first, with
/// keys that repeat in the text table (its rows share the sums), keys it lacks and NULL keys. Not
/// applied where joining first drops rows sooner (a filtered text table), or where the functions
/// do not add up from partial results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aggregate_by_text_columns_sums_before_joining_their_table() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = open_in(&dir, EngineConfig::default());
    run(
        &engine,
        "CREATE TABLE sale AS SELECT CASE WHEN id % 97 = 0 THEN NULL ELSE id % 7 END AS person_id, \
         id % 5 AS day_id, CAST(id AS decimal(10, 2)) AS amount, \
         CASE WHEN id % 11 = 0 THEN NULL ELSE id % 13 END AS qty FROM generate_series(1, 2000) AS g(id)",
    )
    .await;
    // Key 3 twice with other names, key 4 twice alike, keys 5 and 6 absent, key 9 without sales.
    run(
        &engine,
        "CREATE TABLE person AS SELECT * FROM (VALUES (0, 'ann', 'oslo'), (1, 'bob', 'rome'), \
         (2, 'cy', 'rome'), (3, 'di', 'oslo'), (3, 'ed', 'oslo'), (4, 'fay', 'lima'), \
         (4, 'fay', 'lima'), (9, 'gus', 'lima')) AS p(id, name, city)",
    )
    .await;
    run(
        &engine,
        "CREATE TABLE day AS SELECT id, 2000 + id % 2 AS year, \
         CASE WHEN id % 2 = 0 THEN 'even' ELSE 'odd' END AS label FROM generate_series(0, 4) AS g(id)",
    )
    .await;
    let people: [(u64, &str, &str); 8] = [
        (0, "ann", "oslo"),
        (1, "bob", "rome"),
        (2, "cy", "rome"),
        (3, "di", "oslo"),
        (3, "ed", "oslo"),
        (4, "fay", "lima"),
        (4, "fay", "lima"),
        (9, "gus", "lima"),
    ];
    // (name, city, year) -> (sum of amounts, count of qty, count(*), min qty, max amount)
    type Totals = (u64, u64, u64, Option<u64>, u64);
    let mut groups: std::collections::BTreeMap<(&str, &str, u64), Totals> = Default::default();
    for i in 1..=2000u64 {
        if i % 97 == 0 {
            continue;
        }
        let qty = (i % 11 != 0).then_some(i % 13);
        for (_, name, city) in people.iter().filter(|p| p.0 == i % 7) {
            let g = groups
                .entry((*name, *city, 2000 + (i % 5) % 2))
                .or_insert((0, 0, 0, None, 0));
            g.0 += i;
            g.1 += u64::from(qty.is_some());
            g.2 += 1;
            g.3 = match (g.3, qty) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            g.4 = g.4.max(i);
        }
    }
    let mut expected: Vec<String> = groups
        .iter()
        .map(|((name, city, year), (s, n, all, min, max))| {
            let min = min.map(|m| m.to_string()).unwrap_or_default();
            format!("{name}|{city}|{year}|{s}.00|{n}|{all}|{min}|{max}.00")
        })
        .collect();
    expected.sort();
    let select = "SELECT p.name, p.city, d.year, sum(s.amount), count(s.qty), count(*), \
                  min(s.qty), max(s.amount)";
    let group = "GROUP BY p.name, p.city, d.year";
    let forms = [
        format!(
            "{select} FROM person p, sale s, day d \
             WHERE p.id = s.person_id AND s.day_id = d.id {group}"
        ),
        format!(
            "{select} FROM day d JOIN sale s ON s.day_id = d.id \
             JOIN person p ON s.person_id = p.id {group}"
        ),
    ];
    for sql in &forms {
        assert_eq!(sorted(run(&engine, sql).await), expected, "{sql}");
        let plan = explain(&engine, sql).await;
        assert!(plan.contains("__sqe_eager_0"), "{sql}: {plan}");
    }

    let off = open_in(
        &dir,
        EngineConfig {
            options: vec![("sqe.optimizer.eager_aggregation".into(), "false".into())],
            ..EngineConfig::default()
        },
    );
    assert_eq!(sorted(run(&off, &forms[0]).await), expected);
    assert!(!explain(&off, &forms[0]).await.contains("__sqe_eager_"));
    let from = "FROM person p, sale s, day d WHERE p.id = s.person_id AND s.day_id = d.id";
    let alone = [
        // The text table is filtered: joining it first drops rows sooner.
        format!("{select} {from} AND p.city = 'oslo' {group}"),
        // A function of the text table's columns.
        format!("SELECT p.city, d.year, max(p.name), sum(s.amount) {from} GROUP BY p.city, d.year"),
        // Functions that do not add up from partial results.
        format!("SELECT p.city, avg(s.qty), count(DISTINCT s.qty) {from} GROUP BY p.city"),
        // By a column of the table the functions read (nearly one group per row).
        format!("SELECT p.city, s.day_id, sum(s.amount) {from} GROUP BY p.city, s.day_id"),
        // The rest groups by text too.
        format!("SELECT p.city, d.label, sum(s.amount) {from} GROUP BY p.city, d.label"),
        // An outer join.
        "SELECT p.city, sum(s.amount) FROM sale s LEFT JOIN person p ON p.id = s.person_id \
         GROUP BY p.city"
            .to_string(),
    ];
    for sql in &alone {
        assert_eq!(
            sorted(run(&engine, sql).await),
            sorted(run(&off, sql).await),
            "{sql}"
        );
        let plan = explain(&engine, sql).await;
        assert!(!plan.contains("__sqe_eager_"), "{sql}: {plan}");
    }
}

/// Running sums, counts, minima and maxima (a frame from the partition's start to the current row)
/// are computed in one pass: by ROWS, by RANGE (rows that tie on the ORDER BY share the value of the
/// last of them) and without PARTITION BY, over batches of seven rows, so partitions and runs of
/// ties cross batches. NULL partition keys are one partition, NULL values are skipped. The answers
/// are computed here; a bigint sum that overflows fails with Trino's message; a FILTER clause and
/// the switch off leave DataFusion's window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_windows_carry_their_values_across_batches() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let small_batches = |rule: &str| EngineConfig {
        options: vec![
            ("datafusion.execution.batch_size".into(), "7".into()),
            ("sqe.optimizer.running_windows".into(), rule.into()),
        ],
        ..EngineConfig::default()
    };
    let engine = open_in(&dir, small_batches("true"));
    run(
        &engine,
        "CREATE TABLE w AS SELECT id, CASE WHEN id % 17 = 0 THEN NULL ELSE id % 4 END AS g, \
         id % 9 AS d, CASE WHEN id % 5 = 0 THEN NULL ELSE id * 3 - 250 END AS x, \
         CAST(id * 7 % 101 AS decimal(10, 2)) AS amount, \
         date_add('day', id * 13 % 30, DATE '2020-01-01') AS day \
         FROM generate_series(1, 200) AS g(id)",
    )
    .await;
    // (id, g, d, x, amount, day offset)
    type Row = (i64, Option<i64>, i64, Option<i64>, i64, i64);
    /// Whether the first row is in the second one's frame.
    type InFrame = fn(&Row, &Row) -> bool;
    let rows: Vec<Row> = (1..=200)
        .map(|id| {
            let g = (id % 17 != 0).then_some(id % 4);
            let x = (id % 5 != 0).then_some(id * 3 - 250);
            (id, g, id % 9, x, id * 7 % 101, id * 13 % 30)
        })
        .collect();
    let day = |offset: i64| {
        let date = chrono::NaiveDate::from_ymd_opt(2020, 1, 1).unwrap_or_else(|| panic!("date"));
        (date + chrono::Duration::days(offset)).to_string()
    };
    // Each row's running values over the rows `before` it holds for.
    let expected = |before: InFrame| {
        let mut out: Vec<String> = rows
            .iter()
            .map(|r| {
                let frame: Vec<&Row> = rows.iter().filter(|o| before(o, r)).collect();
                let xs: Vec<i64> = frame.iter().filter_map(|o| o.3).collect();
                let sum = if xs.is_empty() {
                    String::new()
                } else {
                    xs.iter().sum::<i64>().to_string()
                };
                let max = frame
                    .iter()
                    .map(|o| o.4)
                    .max()
                    .unwrap_or_else(|| panic!("a frame has its row"));
                let min_day = frame
                    .iter()
                    .map(|o| o.5)
                    .min()
                    .unwrap_or_else(|| panic!("a frame has its row"));
                let amounts: i64 = frame.iter().map(|o| o.4).sum();
                format!(
                    "{}|{sum}|{}|{}|{max}.00|{}|{amounts}.00",
                    r.0,
                    xs.len(),
                    frame.len(),
                    day(min_day)
                )
            })
            .collect();
        out.sort();
        out
    };
    let functions = "sum(x) OVER w, count(x) OVER w, count(*) OVER w, max(amount) OVER w, \
                     min(day) OVER w, sum(amount) OVER w";
    let by_rows = format!(
        "SELECT id, {functions} FROM w WINDOW w AS (PARTITION BY g ORDER BY d, id \
         ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    );
    let by_range = format!("SELECT id, {functions} FROM w WINDOW w AS (PARTITION BY g ORDER BY d)");
    let whole = format!("SELECT id, {functions} FROM w WINDOW w AS (ORDER BY d DESC)");
    let cases: [(&str, InFrame); 3] = [
        (&by_rows, |o, r| o.1 == r.1 && (o.2, o.0) <= (r.2, r.0)),
        (&by_range, |o, r| o.1 == r.1 && o.2 <= r.2),
        (&whole, |o, r| o.2 >= r.2),
    ];
    let off = open_in(&dir, small_batches("false"));
    for (sql, before) in &cases {
        let want = expected(*before);
        assert_eq!(sorted(run(&engine, sql).await), want, "{sql}");
        assert!(
            explain(&engine, sql).await.contains("RunningWindowExec"),
            "{sql}"
        );
        assert_eq!(sorted(run(&off, sql).await), want, "{sql}: switched off");
        assert!(
            !explain(&off, sql).await.contains("RunningWindowExec"),
            "{sql}"
        );
    }

    let overflow = "SELECT sum(x) OVER (ORDER BY i ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) \
                    FROM (VALUES (1, 9223372036854775807), (2, 1)) t(i, x)";
    let session = session("test", &engine);
    let failed = match engine.execute(&session, overflow).await {
        Ok(result) => result
            .batches
            .try_collect::<Vec<_>>()
            .await
            .err()
            .map(|e| e.to_string()),
        Err(e) => Some(e.to_string()),
    };
    let message = failed.unwrap_or_else(|| panic!("{overflow}: no error"));
    assert!(
        message.contains("bigint addition overflow: 9223372036854775807 + 1"),
        "{message}"
    );
    // Ties are added up first, then to the running sum, which never leaves bigint here.
    let ties = "SELECT d, sum(x) OVER (ORDER BY d) FROM (VALUES (1, 10), \
                (2, 9223372036854775802), (2, -10)) t(d, x)";
    assert_eq!(
        sorted(run(&engine, ties).await),
        ["1|10", "2|9223372036854775802", "2|9223372036854775802"]
    );
    assert!(explain(&engine, ties).await.contains("RunningWindowExec"));

    // A FILTER clause stays DataFusion's (and is applied).
    let filtered =
        "SELECT id, count(*) FILTER (WHERE x > 0) OVER (ORDER BY id) FROM w WHERE id <= 90";
    let want: Vec<String> = {
        let mut kept = 0;
        let mut out: Vec<String> = rows[..90]
            .iter()
            .map(|r| {
                kept += usize::from(r.3.is_some_and(|x| x > 0));
                format!("{}|{kept}", r.0)
            })
            .collect();
        out.sort();
        out
    };
    assert_eq!(sorted(run(&engine, filtered).await), want);
    assert!(
        !explain(&engine, filtered)
            .await
            .contains("RunningWindowExec")
    );
}

/// Expiring snapshots and removing orphan files leave the table's folder holding exactly what
/// its live snapshot refers to: files planted by writes that died go, young ones only once older
/// than the retention, and the rows stay. The server's minimum retention is enforced; a rollback
/// goes back to an ancestor only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_leaves_the_live_files_only() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let strict = open_in(&dir, EngineConfig::default());
    let engine = open_in(
        &dir,
        EngineConfig {
            maintenance_min_retention: Some(std::time::Duration::ZERO),
            ..EngineConfig::default()
        },
    );
    run(&engine, "CREATE TABLE t (id bigint, v varchar)").await;
    for id in 1..=4 {
        run(&engine, &format!("INSERT INTO t VALUES ({id}, 'v{id}')")).await;
    }
    run(&engine, "DELETE FROM t WHERE id = 2").await;
    let first = lines(
        &run(
            &engine,
            "SELECT snapshot_id FROM \"t$snapshots\" ORDER BY committed_at LIMIT 1",
        )
        .await,
    );

    // Rollback: to an ancestor, then not forward again.
    run(
        &engine,
        &format!("ALTER TABLE t EXECUTE rollback_to_snapshot({})", first[0]),
    )
    .await;
    assert_eq!(lines(&run(&engine, "SELECT id FROM t").await), ["1"]);
    let head = lines(
        &run(
            &engine,
            "SELECT snapshot_id FROM \"t$snapshots\" ORDER BY committed_at DESC LIMIT 1",
        )
        .await,
    );
    let session = session("test", &engine);
    let forward = format!("ALTER TABLE t EXECUTE rollback_to_snapshot({})", head[0]);
    let e = engine
        .execute(&session, &forward)
        .await
        .err()
        .unwrap_or_else(|| panic!("{forward} went through"));
    assert_eq!(
        e.message(),
        format!(
            "snapshot {} is not an ancestor of the current snapshot of 'iceberg.default.t'",
            head[0]
        )
    );
    for id in [5, 6] {
        run(&engine, &format!("INSERT INTO t VALUES ({id}, 'v{id}')")).await;
    }

    // Files a killed write left behind, in both folders and deeper.
    let folder = dir.path().join("default").join("t");
    let planted = [
        folder.join("data").join("dead-write-00000.parquet"),
        folder.join("data").join("p=1").join("dead.parquet"),
        folder.join("metadata").join("dead-m0.avro"),
        // A metadata file a killed commit wrote part-way.
        folder.join("metadata").join("00099-dead.metadata.json"),
    ];
    for path in &planted {
        std::fs::create_dir_all(path.parent().unwrap_or(&folder)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(path, b"left behind").unwrap_or_else(|e| panic!("{e}"));
    }

    // The server's minimum: a shorter retention is refused, and so nothing is removed.
    for (sql, retention) in [
        (
            "ALTER TABLE t EXECUTE expire_snapshots(retention_threshold => '1d')",
            "1.00d",
        ),
        (
            "ALTER TABLE t EXECUTE remove_orphan_files(retention_threshold => '36h')",
            "1.50d",
        ),
    ] {
        let e = strict
            .execute(&session, sql)
            .await
            .err()
            .unwrap_or_else(|| panic!("{sql} went through"));
        assert_eq!(
            e.message(),
            format!(
                "retention {retention} is shorter than the minimum retention the server allows (7.00d; [engine] maintenance_min_retention)"
            )
        );
    }
    // Files younger than the retention stay.
    let young = lines(
        &run(
            &engine,
            "ALTER TABLE t EXECUTE remove_orphan_files(retention_threshold => '1h')",
        )
        .await,
    );
    assert!(
        young.contains(&"deleted_files_count|0".to_string()),
        "{young:?}"
    );
    assert!(planted.iter().all(|p| p.exists()));

    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    run(
        &engine,
        "ALTER TABLE t EXECUTE expire_snapshots(retention_threshold => '0s')",
    )
    .await;
    let removed = lines(
        &run(
            &engine,
            "ALTER TABLE t EXECUTE remove_orphan_files(retention_threshold => '0s')",
        )
        .await,
    );
    assert!(
        removed.contains(&"deleted_files_count|4".to_string()),
        "{removed:?}"
    );
    assert!(planted.iter().all(|p| !p.exists()));

    // What is left: the live data files, the live manifests and manifest list, metadata files.
    let listed = |sub: &str| -> std::collections::BTreeSet<String> {
        let mut out = std::collections::BTreeSet::new();
        let mut folders = vec![folder.join(sub)];
        while let Some(f) = folders.pop() {
            for entry in std::fs::read_dir(&f)
                .unwrap_or_else(|e| panic!("{e}"))
                .flatten()
            {
                if entry.path().is_dir() {
                    folders.push(entry.path());
                } else {
                    out.insert(entry.path().display().to_string());
                }
            }
        }
        out
    };
    let set = |rows: Vec<String>| rows.into_iter().collect::<std::collections::BTreeSet<_>>();
    assert_eq!(
        listed("data"),
        set(lines(
            &run(&engine, "SELECT file_path FROM \"t$files\"").await
        ))
    );
    let avro: std::collections::BTreeSet<String> = listed("metadata")
        .into_iter()
        .filter(|p| p.ends_with(".avro"))
        .collect();
    let mut live = set(lines(
        &run(&engine, "SELECT path FROM \"t$manifests\"").await,
    ));
    live.extend(lines(
        &run(&engine, "SELECT manifest_list FROM \"t$snapshots\"").await,
    ));
    assert_eq!(avro, live);
    assert_eq!(
        lines(&run(&engine, "SELECT id, v FROM t ORDER BY id").await),
        ["1|v1", "5|v5", "6|v6"]
    );
    assert_eq!(
        lines(&run(&engine, "SELECT count(*) FROM \"t$snapshots\"").await),
        ["1"]
    );
}

/// Two engines on one warehouse: one inserts and deletes rows while the other compacts and
/// expires, again and again. A maintenance commit that loses the race is decided again on the new
/// head (or fails saying it was overtaken), so no row is lost or doubled: the table ends with
/// exactly the rows the writer left, in SQE's reading of every file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_racing_writes_loses_no_row() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = EngineConfig {
        catalogs: vec![("iceberg".into(), dir.path().to_path_buf())],
        maintenance_min_retention: Some(std::time::Duration::ZERO),
        ..EngineConfig::default()
    };
    let writer = Arc::new(Engine::open(config.clone()).unwrap_or_else(|e| panic!("{e}")));
    let keeper = Arc::new(Engine::open(config).unwrap_or_else(|e| panic!("{e}")));
    run(&writer, "CREATE TABLE t (k bigint) WITH (\"commit.retry.num-retries\" = '50', \"commit.retry.min-wait-ms\" = '5', \"commit.retry.max-wait-ms\" = '50', \"write.delete.mode\" = 'merge-on-read')").await;
    let writes = {
        let writer = writer.clone();
        tokio::spawn(async move {
            for n in 0..12 {
                run(
                    &writer,
                    &format!("INSERT INTO t VALUES ({n}), ({})", n + 100),
                )
                .await;
                if n % 3 == 2 {
                    run(&writer, &format!("DELETE FROM t WHERE k = {}", n + 100)).await;
                }
            }
        })
    };
    let upkeep = {
        let keeper = keeper.clone();
        tokio::spawn(async move {
            let session = session("keeper", &keeper);
            let mut overtaken = 0;
            for _ in 0..6 {
                for sql in [
                    "ALTER TABLE t EXECUTE optimize",
                    "ALTER TABLE t EXECUTE expire_snapshots(retention_threshold => '0s')",
                ] {
                    match keeper.execute(&session, sql).await {
                        Ok(result) => {
                            let _: Vec<_> = result.batches.try_collect().await.unwrap_or_default();
                        }
                        Err(e) if e.code() == ErrorCode::Conflict => overtaken += 1,
                        Err(e) => panic!("{sql}: {e}"),
                    }
                }
            }
            overtaken
        })
    };
    writes.await.unwrap_or_else(|e| panic!("{e}"));
    upkeep.await.unwrap_or_else(|e| panic!("{e}"));
    run(&keeper, "ALTER TABLE t EXECUTE optimize").await;
    let mut expected: Vec<String> = (0..12)
        .map(|n| n.to_string())
        .chain(
            (0..12)
                .filter(|n| n % 3 != 2)
                .map(|n| (n + 100).to_string()),
        )
        .collect();
    expected.sort();
    assert_eq!(sorted(run(&writer, "SELECT k FROM t").await), expected);
    assert_eq!(
        lines(
            &run(
                &writer,
                "SELECT count(*) FROM \"t$files\" WHERE content = 1"
            )
            .await
        ),
        ["0"]
    );
}
