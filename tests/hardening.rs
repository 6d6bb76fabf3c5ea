//! What a server's engine must withstand from any signed-in user, checked on the engine itself
//! (the client tests in tests/clients repeat the attacks over the wire): statements too long or too
//! deep, files outside what the server allows, another user's queries in the registry, and a broken
//! file on disk, whose details stay out of the answer. And, through Flight SQL and Trino HTTP served
//! on ports of their own, how much one user can make the server keep (`mod kept`).

use futures::TryStreamExt;
use sqe_engine::{Engine, EngineConfig, FileAccess, FileRules};
use sqe_sessions::{ErrorCode, Principal, QueryService, Session, SqeError};

fn engine_in(dir: &std::path::Path, config: EngineConfig) -> Engine {
    Engine::open(EngineConfig {
        catalogs: vec![("iceberg".into(), dir.to_path_buf())],
        ..config
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// An engine that denies what it does not grant, administered by the role `sqe_admin`.
fn governed_engine(dir: &std::path::Path) -> Engine {
    engine_in(
        dir,
        EngineConfig {
            admin_roles: vec!["sqe_admin".into()],
            access_default: sqe_engine::AccessDefault::Deny,
            ..EngineConfig::default()
        },
    )
}

fn session(engine: &Engine, user: &str, roles: &[&str]) -> Session {
    let mut principal = Principal::new(user);
    principal.roles = roles.iter().map(|r| r.to_string()).collect();
    Session::new(principal, engine.default_catalog(), "default")
}

/// The rows of `sql` run as `session`, each as `a|b|…`, or its error.
async fn rows(engine: &Engine, session: &Session, sql: &str) -> Result<Vec<String>, SqeError> {
    let result = engine.execute(session, sql).await?;
    let batches: Vec<arrow::array::RecordBatch> = result.batches.try_collect().await?;
    let mut out = Vec::new();
    for b in &batches {
        for row in 0..b.num_rows() {
            let cells: Vec<String> = b
                .columns()
                .iter()
                .map(|c| {
                    if c.is_null(row) {
                        "NULL".to_string()
                    } else {
                        arrow::util::display::array_value_to_string(c, row)
                            .unwrap_or_else(|e| panic!("{e}"))
                    }
                })
                .collect();
            out.push(cells.join("|"));
        }
    }
    Ok(out)
}

async fn ok(engine: &Engine, session: &Session, sql: &str) -> Vec<String> {
    rows(engine, session, sql)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", &sql[..sql.len().min(80)]))
}

async fn refused(engine: &Engine, session: &Session, sql: &str) -> SqeError {
    match rows(engine, session, sql).await {
        Ok(r) => panic!("expected an error from {sql}, got {r:?}"),
        Err(e) => e,
    }
}

fn sum_of_ones(terms: usize) -> String {
    format!("SELECT {}", vec!["1"; terms].join("+"))
}

/// Sums, AND chains and unions as long as a generator writes them: what the engine admits it
/// answers exactly, what it does not it refuses with a clear error, and it serves on. The rows are
/// computed on runtime threads with the stack SQE's binaries give them.
#[test]
fn long_and_deep_statements_get_an_answer_or_a_clear_error() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(sqe_engine::WORKER_STACK)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    runtime.block_on(deep_statements());
}

async fn deep_statements() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = engine_in(dir.path(), EngineConfig::default());
    let s = session(&engine, "alice", &[]);

    assert_eq!(ok(&engine, &s, &sum_of_ones(900)).await, vec!["900"]);
    let deep = refused(&engine, &s, &sum_of_ones(20_000)).await;
    assert_eq!(
        (deep.code(), deep.message()),
        (
            ErrorCode::InvalidInput,
            "expression nests more than 1000 deep (a sum or an AND/OR chain of that many terms); split it, or use IN (…) for a long list of alternatives"
        )
    );

    let union = |branches: i64| {
        let branches = (1..=branches)
            .map(|i| format!("SELECT {i} AS n"))
            .collect::<Vec<_>>()
            .join(" UNION ALL ");
        format!("SELECT count(*), sum(n) FROM ({branches}) u")
    };
    assert_eq!(ok(&engine, &s, &union(1001)).await, vec!["1001|501501"]);
    let wide = refused(&engine, &s, &union(1002)).await;
    assert_eq!(
        (wide.code(), wide.message()),
        (
            ErrorCode::InvalidInput,
            "query has 1001 set operations (UNION, INTERSECT, EXCEPT); SQE plans at most 1000; for many rows of constants use one VALUES list"
        )
    );

    // Expressions over columns are computed on the runtime's threads, not the planning stack.
    ok(
        &engine,
        &s,
        "CREATE TABLE t AS SELECT value AS k FROM range(1, 101)",
    )
    .await;
    let chain = vec!["k"; 900].join(" + ");
    let ors = (0..900)
        .map(|i| format!("k = {i}"))
        .collect::<Vec<_>>()
        .join(" OR ");
    assert_eq!(
        ok(
            &engine,
            &s,
            &format!("SELECT sum({chain}) FROM t WHERE {ors}")
        )
        .await,
        vec![(900 * (1..900).filter(|k| *k <= 100).sum::<i64>()).to_string()]
    );

    let long = format!("SELECT '{}'", "x".repeat(2_000_000));
    let e = refused(&engine, &s, &long).await;
    assert_eq!(
        e.message(),
        "statement is 2000009 bytes long, more than the 1000000 bytes SQE accepts"
    );
    assert_eq!(ok(&engine, &s, "SELECT 1").await, vec!["1"]);
}

/// Each user reads their own statements in `system.runtime.queries`; of others' they see that
/// they exist, not who ran them nor their text; an admin reads all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_shows_each_user_their_own_queries() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = engine_in(
        dir.path(),
        EngineConfig {
            admin_roles: vec!["sqe_admin".into()],
            ..EngineConfig::default()
        },
    );
    let (alice, bob, admin) = (
        session(&engine, "alice", &[]),
        session(&engine, "bob", &["analyst"]),
        session(&engine, "ada", &["sqe_admin"]),
    );
    ok(&engine, &alice, "SELECT 'alice secret' AS s").await;
    ok(&engine, &bob, "SELECT 'bob plain' AS s").await;
    let read =
        "SELECT state, \"user\", query FROM system.runtime.queries ORDER BY created, query_id";
    assert_eq!(
        ok(&engine, &bob, read).await,
        vec![
            "FINISHED|NULL|NULL".to_string(),
            "FINISHED|bob|SELECT 'bob plain' AS s".to_string(),
            format!("RUNNING|bob|{read}"),
        ]
    );
    assert_eq!(
        ok(&engine, &admin, read).await,
        vec![
            "FINISHED|alice|SELECT 'alice secret' AS s".to_string(),
            "FINISHED|bob|SELECT 'bob plain' AS s".to_string(),
            format!("FINISHED|bob|{read}"),
            format!("RUNNING|ada|{read}"),
        ]
    );
}

/// On a server the file functions and COPY reach only what `[files]` allows, never a warehouse;
/// embedded, everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_functions_reach_only_what_the_server_allows() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (warehouse, shared) = (dir.path().join("warehouse"), dir.path().join("shared"));
    std::fs::create_dir_all(&shared).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(shared.join("x.csv"), "a,b\n1,one\n2,two\n").unwrap_or_else(|e| panic!("{e}"));
    let server = engine_in(
        &warehouse,
        EngineConfig {
            files: FileAccess::Restricted(FileRules {
                allowed_local_prefixes: vec![shared.clone()],
                ..FileRules::default()
            }),
            ..EngineConfig::default()
        },
    );
    let s = session(&server, "alice", &[]);
    let csv = format!(
        "SELECT a, b FROM read_csv('{}/x.csv') ORDER BY a",
        shared.display()
    );
    assert_eq!(ok(&server, &s, &csv).await, vec!["1|one", "2|two"]);

    let passwd = refused(&server, &s, "SELECT * FROM read_csv('/etc/passwd')").await;
    assert_eq!(
        (passwd.code(), passwd.message()),
        (
            ErrorCode::PermissionDenied,
            "reading local path '/etc/passwd' is not allowed on this server (add a directory that holds it to [files] allowed_local_prefixes, or set [files] allow_local_paths = true)"
        )
    );
    // A missing file outside the allowed directories answers as an existing one does.
    let missing = refused(&server, &s, "SELECT * FROM '/etc/no-such-file.csv'").await;
    assert_eq!(missing.code(), ErrorCode::PermissionDenied);
    let climb = format!(
        "SELECT * FROM read_csv('{}/../warehouse/catalog.db')",
        shared.display()
    );
    let e = refused(&server, &s, &climb).await;
    assert_eq!(e.code(), ErrorCode::PermissionDenied);
    assert!(
        e.message().ends_with(
            "is not allowed: it is inside a catalog's warehouse, whose files belong to its tables"
        ),
        "{}",
        e.message()
    );
    let copy = refused(&server, &s, "COPY (SELECT 1) TO '/tmp/sqe-x.parquet'").await;
    assert_eq!(
        copy.message(),
        "writing local path '/tmp/sqe-x.parquet' is not allowed on this server (add a directory that holds it to [files] allowed_local_prefixes, or set [files] allow_local_paths = true)"
    );
    let located = refused(
        &server,
        &s,
        &format!(
            "CREATE TABLE elsewhere (a int) WITH (location = '{}/default/t')",
            warehouse.display()
        ),
    )
    .await;
    assert_eq!(located.code(), ErrorCode::PermissionDenied);
    let url = refused(
        &server,
        &s,
        "SELECT * FROM read_csv('http://127.0.0.1:9/x.csv')",
    )
    .await;
    assert_eq!(
        url.message(),
        "reading 'http://127.0.0.1:9/x.csv' is not allowed on this server: URLs are off (set [files] allow_http = true to read them)"
    );

    // Embedded, the same statements reach the files.
    let embedded = engine_in(&dir.path().join("embedded"), EngineConfig::default());
    let e = session(&embedded, "me", &[]);
    let out = dir.path().join("out.parquet");
    ok(
        &embedded,
        &e,
        &format!("COPY (SELECT 7 AS n) TO '{}'", out.display()),
    )
    .await;
    assert_eq!(
        ok(&embedded, &e, &format!("SELECT n FROM '{}'", out.display())).await,
        vec!["7"]
    );
}

/// A data file cut short on disk is the server's fault: the caller is told an id to quote, not
/// the file's path or the reader's complaint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_file_is_an_internal_error_with_an_id() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = engine_in(dir.path(), EngineConfig::default());
    let s = session(&engine, "alice", &[]);
    ok(
        &engine,
        &s,
        "CREATE TABLE t AS SELECT value AS k FROM range(0, 10000)",
    )
    .await;
    let data = dir.path().join("default/t/data");
    let file = std::fs::read_dir(&data)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "parquet"))
        .unwrap_or_else(|| panic!("no data file in {}", data.display()));
    let bytes = std::fs::read(&file).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap_or_else(|e| panic!("{e}"));

    let e = refused(&engine, &s, "SELECT sum(k) FROM t").await;
    assert_eq!(e.code(), ErrorCode::Internal);
    let id = e
        .message()
        .strip_prefix("internal error ")
        .and_then(|m| m.strip_suffix("; the log has the details"))
        .unwrap_or_else(|| panic!("{}", e.message()));
    assert_eq!(id.len(), 12, "{}", e.message());
    assert_eq!(ok(&engine, &s, "SELECT 1").await, vec!["1"]);
}

/// `ATTACH` mounts a catalog for one session: its tables join the server's, `SHOW CATALOGS` lists
/// it, `DETACH` ends it. Another session, another user, or a session presenting the first one's id
/// under another name, never sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attached_catalogs_belong_to_their_session() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = engine_in(&dir.path().join("warehouse"), EngineConfig::default());
    let other = dir.path().join("other");
    let alice = session(&engine, "alice", &[]);
    ok(
        &engine,
        &alice,
        "CREATE TABLE names (id BIGINT, name VARCHAR)",
    )
    .await;
    ok(
        &engine,
        &alice,
        "INSERT INTO names VALUES (1, 'one'), (2, 'two')",
    )
    .await;

    let attach = format!("ATTACH '{}' AS Side", other.display());
    ok(&engine, &alice, &attach).await;
    ok(
        &engine,
        &alice,
        "CREATE TABLE side.default.extra (id BIGINT, more VARCHAR)",
    )
    .await;
    ok(
        &engine,
        &alice,
        "INSERT INTO side.default.extra VALUES (2, 'b'), (3, 'c')",
    )
    .await;
    assert_eq!(
        ok(
            &engine,
            &alice,
            "SELECT n.id, n.name, e.more FROM names n JOIN side.default.extra e ON n.id = e.id"
        )
        .await,
        vec!["2|two|b"]
    );
    assert_eq!(
        ok(&engine, &alice, "SHOW CATALOGS").await,
        vec!["iceberg", "side", "system"]
    );
    ok(
        &engine,
        &alice,
        &format!("ATTACH IF NOT EXISTS '{}' AS side", other.display()),
    )
    .await;
    let twice = refused(&engine, &alice, &attach).await;
    assert_eq!(
        (twice.code(), twice.message()),
        (
            ErrorCode::AlreadyExists,
            "catalog 'side' is already attached"
        )
    );

    // Another session of the same user, another user, and bob holding alice's session id.
    let later = session(&engine, "alice", &[]);
    let mut bob = session(&engine, "bob", &[]);
    // Alice's statistics of her attached table; nobody else gets them.
    assert_eq!(
        ok(&engine, &alice, "SHOW STATS FOR side.default.extra")
            .await
            .last(),
        Some(&"NULL|NULL|NULL|NULL|2.0|NULL|NULL".to_string())
    );
    for s in [&later, &bob] {
        let e = refused(&engine, s, "SELECT * FROM side.default.extra").await;
        assert!(
            e.message().contains("side.default.extra"),
            "{}",
            e.message()
        );
        let e = refused(&engine, s, "SHOW STATS FOR side.default.extra").await;
        assert!(
            e.message().contains("side.default.extra"),
            "{}",
            e.message()
        );
        assert_eq!(
            ok(&engine, s, "SHOW CATALOGS").await,
            vec!["iceberg", "system"]
        );
    }
    bob.id = alice.id.clone();
    assert_eq!(
        ok(&engine, &bob, "SHOW CATALOGS").await,
        vec!["iceberg", "system"]
    );
    let detach = refused(&engine, &bob, "DETACH side").await;
    assert_eq!(detach.code(), ErrorCode::NotFound);
    let taken = refused(
        &engine,
        &bob,
        &format!("ATTACH '{}' AS mine", dir.path().join("b").display()),
    )
    .await;
    assert_eq!(taken.code(), ErrorCode::PermissionDenied);

    // The server's own catalogs cannot be shadowed or detached.
    let shadow = refused(
        &engine,
        &alice,
        &format!("ATTACH '{}' AS iceberg", other.display()),
    )
    .await;
    assert_eq!(shadow.code(), ErrorCode::AlreadyExists);
    let own = refused(&engine, &alice, "DETACH iceberg").await;
    assert_eq!(own.code(), ErrorCode::PermissionDenied);

    ok(&engine, &alice, "DETACH DATABASE side").await;
    ok(&engine, &alice, "DETACH IF EXISTS side").await;
    let gone = refused(&engine, &alice, "SELECT * FROM side.default.extra").await;
    assert!(
        gone.message().contains("side.default.extra"),
        "{}",
        gone.message()
    );
    // The warehouse stays, with its table: attached again, it is all there.
    ok(&engine, &alice, &attach).await;
    assert_eq!(
        ok(&engine, &alice, "SELECT count(*) FROM side.default.extra").await,
        vec!["2"]
    );
}

/// Bad ATTACH statements get an error naming the problem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_attach_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = engine_in(&dir.path().join("warehouse"), EngineConfig::default());
    let s = session(&engine, "alice", &[]);
    let cases = [
        (
            "ATTACH",
            "syntax error: expected the catalog's location as a string at the end of the statement",
        ),
        (
            "ATTACH '/tmp/x' AS x (TYPE mysql)",
            "unknown catalog TYPE 'mysql' (known: sqlite, rest, iceberg, jdbc, postgres, hms, hive)",
        ),
        (
            "ATTACH 'https://cat.example/api' AS x (TOKEN 't')",
            "unknown option token for a Rest catalog (known: TYPE, PREFIX, WAREHOUSE, AUTH, SECRET)",
        ),
        (
            "ATTACH 'https://cat.example/api' AS x (SECRET s)",
            "secret 's' does not exist",
        ),
        (
            "ATTACH 'postgresql://u@127.0.0.1:1/db' AS x",
            "a jdbc catalog needs WAREHOUSE, the local directory its new tables go to",
        ),
        (
            "ATTACH 'gs://bucket/w' AS x",
            "cannot tell what kind of catalog 'gs://bucket/w' is: give its TYPE",
        ),
        (
            "ATTACH 'http://cat.example/api' AS x (AUTH 'token')",
            "AUTH 'token' is not known here (known: passthrough, none)",
        ),
        ("DETACH nothing", "catalog 'nothing' is not attached"),
    ];
    for (sql, message) in cases {
        let e = refused(&engine, &s, sql).await;
        assert_eq!(e.message(), message, "{sql}");
    }
    let mut many = Vec::new();
    for i in 0..17 {
        many.push(
            rows(
                &engine,
                &s,
                &format!(
                    "ATTACH '{}' AS w{i}",
                    dir.path().join(format!("w{i}")).display()
                ),
            )
            .await,
        );
    }
    assert!(many[..16].iter().all(|r| r.is_ok()));
    let e = many[16]
        .as_ref()
        .err()
        .map(|e| (e.code(), e.message().to_string()));
    assert_eq!(
        e,
        Some((
            ErrorCode::ResourceExhausted,
            "a session may hold at most 16 attached catalogs; DETACH one first".to_string()
        ))
    );
}

/// On a server, ATTACH reaches only what `[files]` allows: a warehouse under an allowed directory,
/// a catalog URI under `allowed_catalog_uris` (otherwise any user could make the server call any
/// address).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_attaches_only_what_it_allows() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let shared = dir.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap_or_else(|e| panic!("{e}"));
    let server = engine_in(
        &dir.path().join("warehouse"),
        EngineConfig {
            files: FileAccess::Restricted(FileRules {
                allowed_local_prefixes: vec![shared.clone()],
                allowed_catalog_uris: vec!["http://127.0.0.1:9/".into()],
                ..FileRules::default()
            }),
            ..EngineConfig::default()
        },
    );
    let s = session(&server, "alice", &[]);
    ok(
        &server,
        &s,
        &format!("ATTACH '{}/mine' AS mine", shared.display()),
    )
    .await;
    ok(&server, &s, "CREATE TABLE mine.default.t (id BIGINT)").await;
    let local = refused(&server, &s, "ATTACH '/tmp/elsewhere' AS x").await;
    assert_eq!(local.code(), ErrorCode::PermissionDenied);
    assert!(
        local.message().contains("allowed_local_prefixes"),
        "{}",
        local.message()
    );
    let inside = refused(
        &server,
        &s,
        &format!("ATTACH '{}' AS x", dir.path().join("warehouse").display()),
    )
    .await;
    assert_eq!(inside.code(), ErrorCode::PermissionDenied);
    let remote = refused(&server, &s, "ATTACH 'http://169.254.169.254/latest' AS x").await;
    assert_eq!(
        (remote.code(), remote.message()),
        (
            ErrorCode::PermissionDenied,
            "attaching the catalog at 'http://169.254.169.254/latest' is not allowed on this server (add its prefix to [files] allowed_catalog_uris)"
        )
    );
    let pg = refused(
        &server,
        &s,
        "ATTACH 'postgresql://u@10.0.0.1/db' AS x (WAREHOUSE '/tmp/w')",
    )
    .await;
    assert_eq!(pg.code(), ErrorCode::PermissionDenied);
    ok(
        &server,
        &s,
        "ATTACH 'http://127.0.0.1:9/api' AS allowed (AUTH none)",
    )
    .await;
    let port = refused(&server, &s, "ATTACH 'http://127.0.0.1:90/api' AS x").await;
    assert_eq!(port.code(), ErrorCode::PermissionDenied);
    // The trino protocol keeps no session between statements.
    let mut trino = session(&server, "alice", &[]);
    trino.protocol = "trino";
    let e = refused(
        &server,
        &trino,
        &format!("ATTACH '{}/t' AS t", shared.display()),
    )
    .await;
    assert_eq!(e.code(), ErrorCode::Unsupported);
}

/// A catalog names the files of its tables, and on a server a user may bring a catalog of their own
/// (ATTACH): its rows and metadata can point a table at the files of the server's warehouse. Such
/// files are refused for reading and for deleting, and the server's table stays whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_catalog_cannot_reach_the_servers_files() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let shared = dir.path().join("shared");
    let warehouse = dir.path().join("warehouse");
    std::fs::create_dir_all(&shared).unwrap_or_else(|e| panic!("{e}"));
    let server = engine_in(
        &warehouse,
        EngineConfig {
            files: FileAccess::Restricted(FileRules {
                allowed_local_prefixes: vec![shared.clone()],
                ..FileRules::default()
            }),
            ..EngineConfig::default()
        },
    );
    let admin = session(&server, "admin", &[]);
    ok(
        &server,
        &admin,
        "CREATE TABLE iceberg.default.secret (id BIGINT, pin VARCHAR)",
    )
    .await;
    ok(
        &server,
        &admin,
        "INSERT INTO iceberg.default.secret VALUES (1, '1234')",
    )
    .await;
    let s = session(&server, "mallory", &[]);
    let mine = shared.join("mine");
    ok(&server, &s, &format!("ATTACH '{}' AS mine", mine.display())).await;
    ok(
        &server,
        &s,
        "CREATE TABLE mine.default.t (id BIGINT, pin VARCHAR)",
    )
    .await;
    ok(&server, &s, "INSERT INTO mine.default.t VALUES (2, '0000')").await;

    let db = |path: &std::path::Path| {
        rusqlite::Connection::open(path.join("catalog.db")).unwrap_or_else(|e| panic!("{e}"))
    };
    let point_at = |location: &str| {
        db(&mine)
            .execute(
                "UPDATE iceberg_tables SET metadata_location = ?1 WHERE table_name = 't'",
                [location],
            )
            .unwrap_or_else(|e| panic!("{e}"));
    };
    let secret: String = db(&warehouse)
        .query_row(
            "SELECT metadata_location FROM iceberg_tables WHERE table_name = 'secret'",
            [],
            |r| r.get(0),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let inside = "which is inside another catalog's warehouse";

    // The catalog row names the server's own metadata file.
    point_at(&secret);
    for sql in ["SELECT * FROM mine.default.t", "DROP TABLE mine.default.t"] {
        let e = refused(&server, &s, sql).await;
        assert_eq!(
            (e.code(), e.message()),
            (
                ErrorCode::PermissionDenied,
                format!("catalog 'mine': the catalog names the file '{secret}', {inside}").as_str()
            ),
            "{sql}"
        );
    }

    // A metadata file of the user's own, whose snapshot is the server table's.
    let path = secret.strip_prefix("file://").unwrap_or(&secret);
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{e}"));
    let mut metadata: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    let copy = mine.join("copy.metadata.json");
    std::fs::write(&copy, metadata.to_string()).unwrap_or_else(|e| panic!("{e}"));
    point_at(&copy.display().to_string());
    let e = refused(&server, &s, "SELECT * FROM mine.default.t").await;
    assert_eq!(e.code(), ErrorCode::PermissionDenied, "{}", e.message());
    assert!(e.message().ends_with(inside), "{}", e.message());

    // No snapshot, and a location that climbs out of the user's warehouse into the server's:
    // dropping the table removes nothing there.
    let climb = format!("{}/../../warehouse/default/secret", mine.display());
    metadata["location"] = climb.into();
    metadata["current-snapshot-id"] = serde_json::Value::from(-1);
    for key in ["snapshots", "snapshot-log", "metadata-log"] {
        metadata[key] = serde_json::json!([]);
    }
    metadata["refs"] = serde_json::json!({});
    let empty = mine.join("empty.metadata.json");
    std::fs::write(&empty, metadata.to_string()).unwrap_or_else(|e| panic!("{e}"));
    point_at(&empty.display().to_string());
    ok(&server, &s, "DROP TABLE mine.default.t").await;

    assert_eq!(
        ok(&server, &admin, "SELECT * FROM iceberg.default.secret").await,
        ["1|1234"]
    );
}

/// A secret is its session's own, is listed by name and type only, and its values reach no result,
/// error or registry row, not even an admin's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_belong_to_their_session_and_never_show_their_values() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = engine_in(
        &dir.path().join("warehouse"),
        EngineConfig {
            admin_roles: vec!["admin".into()],
            ..EngineConfig::default()
        },
    );
    let alice = session(&engine, "alice", &[]);
    ok(
        &engine,
        &alice,
        "CREATE SECRET lake_token (TYPE bearer, TOKEN 'tok-1234567890')",
    )
    .await;
    ok(&engine, &alice, "CREATE SECRET s3cred (TYPE s3, KEY_ID 'AKIAEXAMPLE', SECRET 'very-secret-value', URL_STYLE 'path')").await;
    assert_eq!(
        ok(&engine, &alice, "SHOW SECRETS").await,
        vec!["lake_token|bearer|session", "s3cred|s3|session"]
    );
    let twice = refused(
        &engine,
        &alice,
        "CREATE SECRET lake_token (TYPE bearer, TOKEN 'other-token')",
    )
    .await;
    assert_eq!(
        (twice.code(), twice.message()),
        (
            ErrorCode::AlreadyExists,
            "secret 'lake_token' already exists"
        )
    );
    ok(
        &engine,
        &alice,
        "CREATE SECRET IF NOT EXISTS lake_token (TYPE bearer, TOKEN 'other-token')",
    )
    .await;
    ok(
        &engine,
        &alice,
        "CREATE OR REPLACE SECRET lake_token (TYPE bearer, TOKEN 'tok-1234567890')",
    )
    .await;

    // Bad statements are refused without quoting what they held.
    let cases = [
        (
            "CREATE SECRET x (TYPE bearer, TOKEN 'tok-1234567890'",
            "syntax error in CREATE SECRET: expected CREATE SECRET name (TYPE t, KEY 'value', …)",
        ),
        (
            "CREATE SECRET x (TYPE bearer, PASSWORD 'tok-1234567890')",
            "unknown key password for a bearer secret (known: TOKEN)",
        ),
        (
            "CREATE SECRET x (TYPE s3, REGION 'eu')",
            "a s3 secret needs KEY_ID",
        ),
        (
            "CREATE SECRET x (TYPE gcs, TOKEN 'tok-1234567890')",
            "unknown secret TYPE 'gcs' (known: bearer, s3)",
        ),
        (
            "CREATE PERSISTENT SECRET x (TYPE bearer, TOKEN 'tok-1234567890')",
            "persistent secrets need a key to seal them with: set SQE_SECRETS_KEY for the shell, or [secrets] key_env on a server",
        ),
    ];
    for (sql, message) in cases {
        assert_eq!(
            refused(&engine, &alice, sql).await.message(),
            message,
            "{sql}"
        );
    }

    // Another user, and another user presenting alice's session id, neither see nor use them.
    let mut bob = session(&engine, "bob", &[]);
    assert!(ok(&engine, &bob, "SHOW SECRETS").await.is_empty());
    bob.id = alice.id.clone();
    assert!(ok(&engine, &bob, "SHOW SECRETS").await.is_empty());
    let used = refused(
        &engine,
        &bob,
        "ATTACH 'http://127.0.0.1:9/api' AS c (SECRET lake_token)",
    )
    .await;
    assert_eq!(
        (used.code(), used.message()),
        (ErrorCode::NotFound, "secret 'lake_token' does not exist")
    );
    assert_eq!(
        refused(&engine, &bob, "DROP SECRET lake_token")
            .await
            .code(),
        ErrorCode::NotFound
    );

    // Alice attaches with them; a bearer secret and AUTH together are refused.
    ok(
        &engine,
        &alice,
        "ATTACH 'http://127.0.0.1:9/api' AS c (SECRET lake_token)",
    )
    .await;
    ok(
        &engine,
        &alice,
        "ATTACH 'http://127.0.0.1:9/api' AS d (SECRET s3cred, AUTH none)",
    )
    .await;
    let both = refused(
        &engine,
        &alice,
        "ATTACH 'http://127.0.0.1:9/api' AS e (SECRET lake_token, AUTH none)",
    )
    .await;
    assert_eq!(both.message(), "give AUTH or a bearer SECRET, not both");

    // The registry, read by alice and by an admin, holds no value.
    let admin = session(&engine, "root", &["admin"]);
    for reader in [&alice, &admin] {
        let rows = ok(
            &engine,
            reader,
            "SELECT query, error_message FROM system.runtime.queries",
        )
        .await;
        let all = rows.join("\n");
        for value in [
            "tok-1234567890",
            "very-secret-value",
            "other-token",
            "AKIAEXAMPLE",
        ] {
            assert!(!all.contains(value), "{value} in:\n{all}");
        }
        assert!(
            all.contains("CREATE SECRET … (values not recorded)"),
            "{all}"
        );
    }

    ok(&engine, &alice, "DROP SECRET lake_token").await;
    ok(&engine, &alice, "DROP SECRET IF EXISTS lake_token").await;
    let gone = refused(&engine, &alice, "DROP SECRET lake_token").await;
    assert_eq!(gone.message(), "secret 'lake_token' does not exist");
    assert_eq!(
        ok(&engine, &alice, "SHOW SECRETS").await,
        vec!["s3cred|s3|session"]
    );
}

/// The file functions reach S3 with the session's own secret: each session's requests carry its
/// own access key and never another session's. (A local stand-in for S3 records the key of every
/// request and answers each with 404.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_session_reads_s3_with_its_own_secret() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
                    match socket.read(&mut byte).await {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let text = String::from_utf8_lossy(&head).to_lowercase();
                let key = text
                    .split("credential=")
                    .nth(1)
                    .and_then(|rest| rest.split('/').next())
                    .unwrap_or("unsigned")
                    .to_string();
                record.lock().unwrap_or_else(|p| p.into_inner()).push(key);
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    )
                    .await;
            });
        }
    });

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = engine_in(
        dir.path(),
        EngineConfig {
            files: FileAccess::Restricted(FileRules {
                allowed_object_prefixes: vec!["s3://shared/".into()],
                ..FileRules::default()
            }),
            ..EngineConfig::default()
        },
    );
    let secret = |user: &str| {
        format!(
            "CREATE SECRET mine (TYPE s3, KEY_ID '{user}-key', SECRET '{user}-secret', REGION 'us-east-1', ENDPOINT 'http://127.0.0.1:{port}', URL_STYLE 'path')"
        )
    };
    let read = "SELECT * FROM read_parquet('s3://shared/data/x.parquet')";
    for user in ["alice", "bob", "alice"] {
        let s = session(&server, user, &[]);
        ok(&server, &s, &secret(user)).await;
        seen.lock().unwrap_or_else(|p| p.into_inner()).clear();
        let e = refused(&server, &s, read).await;
        assert!(!e.message().contains("-secret"), "{}", e.message());
        let keys = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert!(!keys.is_empty(), "{user}'s read reached the store");
        assert!(
            keys.iter().all(|k| *k == format!("{user}-key")),
            "{user}'s requests carried {keys:?}"
        );
    }
    // Outside the allowed prefix, nothing is requested at all.
    let s = session(&server, "alice", &[]);
    ok(&server, &s, &secret("alice")).await;
    seen.lock().unwrap_or_else(|p| p.into_inner()).clear();
    let e = refused(
        &server,
        &s,
        "SELECT * FROM read_parquet('s3://private/x.parquet')",
    )
    .await;
    assert_eq!(e.code(), ErrorCode::PermissionDenied, "{}", e.message());
    assert!(seen.lock().unwrap_or_else(|p| p.into_inner()).is_empty());
}

/// A persistent secret is its user's across sessions and restarts, sealed on disk, and nobody
/// else's: another user neither lists it, uses it, drops it nor overwrites it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_secrets_belong_to_their_user() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = dir.path().join("secrets.json");
    let open = || {
        engine_in(
            &dir.path().join("warehouse"),
            EngineConfig {
                files: FileAccess::Restricted(FileRules::default()),
                persistent_secrets: Some(sqe_engine::PersistentSecrets {
                    path: store.clone(),
                    passphrase: "a passphrase long enough for tests".into(),
                }),
                ..EngineConfig::default()
            },
        )
    };
    let server = open();
    let alice = session(&server, "alice", &[]);
    ok(
        &server,
        &alice,
        "CREATE PERSISTENT SECRET lake (TYPE s3, KEY_ID 'AKIAALICE', SECRET 'alice-s3-secret-value')",
    )
    .await;
    let text = std::fs::read_to_string(&store).unwrap_or_else(|e| panic!("{e}"));
    assert!(!text.contains("AKIAALICE") && !text.contains("alice-s3-secret-value"));

    // A later session of alice, on a restarted engine, has it.
    drop(server);
    let server = open();
    let later = session(&server, "alice", &[]);
    assert_eq!(
        ok(&server, &later, "SHOW SECRETS").await,
        ["lake|s3|persistent"]
    );
    let again = refused(
        &server,
        &later,
        "CREATE PERSISTENT SECRET lake (TYPE bearer, TOKEN 't')",
    )
    .await;
    assert_eq!(again.code(), ErrorCode::AlreadyExists);

    // bob: not listed, not usable, not droppable; his own of the same name is his.
    let bob = session(&server, "bob", &[]);
    assert!(ok(&server, &bob, "SHOW SECRETS").await.is_empty());
    let used = refused(
        &server,
        &bob,
        "ATTACH 'http://127.0.0.1:9/' AS x (TYPE rest, SECRET lake)",
    )
    .await;
    assert!(
        matches!(
            used.code(),
            ErrorCode::NotFound | ErrorCode::PermissionDenied
        ),
        "{used:?}"
    );
    let dropped = refused(&server, &bob, "DROP SECRET lake").await;
    assert_eq!(dropped.code(), ErrorCode::NotFound);
    ok(
        &server,
        &bob,
        "CREATE PERSISTENT SECRET lake (TYPE bearer, TOKEN 'bob-token-value')",
    )
    .await;
    assert_eq!(
        ok(&server, &bob, "SHOW SECRETS").await,
        ["lake|bearer|persistent"]
    );
    assert_eq!(
        ok(&server, &later, "SHOW SECRETS").await,
        ["lake|s3|persistent"]
    );

    // alice drops hers; bob's stays.
    ok(&server, &later, "DROP SECRET lake").await;
    assert!(ok(&server, &later, "SHOW SECRETS").await.is_empty());
    assert_eq!(
        ok(&server, &bob, "SHOW SECRETS").await,
        ["lake|bearer|persistent"]
    );

    // Without a key, persistent secrets are refused, saying what to set.
    let plain = engine_in(&dir.path().join("w2"), EngineConfig::default());
    let s = session(&plain, "alice", &[]);
    let e = refused(
        &plain,
        &s,
        "CREATE PERSISTENT SECRET x (TYPE bearer, TOKEN 't')",
    )
    .await;
    assert_eq!(e.code(), ErrorCode::Unsupported);
    assert!(e.message().contains("SQE_SECRETS_KEY"), "{}", e.message());
}

/// A schema or table name is a folder of the warehouse: a name that would climb out or reach into
/// another folder is refused, and dropping a table removes its own folder only, whatever its name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_stay_in_their_folder() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let warehouse = dir.path().join("warehouse");
    let server = engine_in(
        &warehouse,
        EngineConfig {
            files: FileAccess::Restricted(FileRules::default()),
            ..EngineConfig::default()
        },
    );
    let s = session(&server, "mallory", &[]);
    ok(&server, &s, "CREATE TABLE keep (id BIGINT)").await;
    ok(&server, &s, "INSERT INTO keep VALUES (1)").await;
    ok(&server, &s, "CREATE SCHEMA metadata").await;
    ok(&server, &s, "CREATE TABLE metadata.t (id BIGINT)").await;
    ok(&server, &s, "INSERT INTO metadata.t VALUES (2)").await;
    for (sql, name) in [
        ("CREATE TABLE \"..\" (id BIGINT)", "table name '..'"),
        ("CREATE TABLE \".\" (id BIGINT)", "table name '.'"),
        ("CREATE TABLE \"a/b\" (id BIGINT)", "table name 'a/b'"),
        (
            "CREATE TABLE \"../x\" AS SELECT 1 AS id",
            "table name '../x'",
        ),
        ("CREATE SCHEMA \"..\"", "schema name '..'"),
        ("ALTER TABLE keep RENAME TO \"..\"", "table name '..'"),
    ] {
        let e = refused(&server, &s, sql).await;
        assert_eq!(e.code(), ErrorCode::InvalidInput, "{sql}: {}", e.message());
        assert!(e.message().contains(name), "{sql}: {}", e.message());
    }

    // A table called `..` from before (or from another program): dropping it leaves the
    // warehouse whole.
    ok(&server, &s, "CREATE TABLE dotdot (id BIGINT)").await;
    rusqlite::Connection::open(warehouse.join("catalog.db"))
        .and_then(|c| {
            c.execute(
                "UPDATE iceberg_tables SET table_name = '..' WHERE table_name = 'dotdot'",
                [],
            )
        })
        .unwrap_or_else(|e| panic!("{e}"));
    ok(&server, &s, "DROP TABLE default.\"..\"").await;
    assert_eq!(ok(&server, &s, "SELECT * FROM keep").await, ["1"]);
    assert_eq!(ok(&server, &s, "SELECT * FROM metadata.t").await, ["2"]);
    assert!(warehouse.join("catalog.db").is_file());
}

/// A view runs with its reader's rights: it cannot lend one session's catalog to another. A view
/// broken by another program (bad metadata, a statement too deep, a cycle, views nested past the
/// limit) gets a clear error and the engine goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_run_with_their_readers_rights_and_broken_views_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let warehouse = dir.path().join("warehouse");
    let engine = engine_in(&warehouse, EngineConfig::default());
    let alice = session(&engine, "alice", &[]);
    let bob = session(&engine, "bob", &[]);
    let attach = format!("ATTACH '{}' AS side", dir.path().join("side").display());
    ok(&engine, &alice, &attach).await;
    ok(
        &engine,
        &alice,
        "CREATE TABLE side.default.secret AS SELECT 42 AS answer",
    )
    .await;
    ok(
        &engine,
        &alice,
        "CREATE VIEW peek AS SELECT answer FROM side.default.secret",
    )
    .await;
    assert_eq!(ok(&engine, &alice, "SELECT * FROM peek").await, vec!["42"]);
    let e = refused(&engine, &bob, "SELECT * FROM peek").await;
    assert!(
        e.message()
            .starts_with("view 'iceberg.default.peek' cannot be read: ")
            && e.message().contains("side"),
        "{}",
        e.message()
    );
    assert_ne!(e.code(), ErrorCode::Internal);

    // Views nest 32 deep, no deeper.
    ok(&engine, &bob, "CREATE VIEW v0 AS SELECT 1 AS n").await;
    for i in 1..32 {
        ok(
            &engine,
            &bob,
            &format!("CREATE VIEW v{i} AS SELECT n + 1 AS n FROM v{}", i - 1),
        )
        .await;
    }
    assert_eq!(ok(&engine, &bob, "SELECT n FROM v31").await, vec!["32"]);
    let deep = refused(&engine, &bob, "CREATE VIEW v32 AS SELECT n FROM v31").await;
    assert_eq!(
        deep.message(),
        "view 'iceberg.default.v0' is nested more than 32 views deep"
    );

    // Another program rewrites a view's metadata: a statement too deep, a cycle, then garbage.
    let metadata = |view: &str| -> std::path::PathBuf {
        let dir = warehouse.join("default").join(view).join("metadata");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap_or_else(|e| panic!("{e}")).path())
            .collect();
        files.sort();
        files
            .pop()
            .unwrap_or_else(|| panic!("no metadata in {}", dir.display()))
    };
    let rewrite_sql = |view: &str, sql: &str| {
        let path = metadata(view);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        let mut json: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        for version in json["versions"].as_array_mut().into_iter().flatten() {
            version["representations"][0]["sql"] = serde_json::Value::from(sql);
        }
        std::fs::write(&path, json.to_string()).unwrap_or_else(|e| panic!("{e}"));
    };
    let nested = format!(
        "SELECT {}1{} AS n",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    rewrite_sql("v0", &nested);
    let e = refused(&engine, &bob, "SELECT * FROM v3").await;
    assert!(
        e.message().contains("view 'iceberg.default.v0'"),
        "{}",
        e.message()
    );
    assert_ne!(e.code(), ErrorCode::Internal);
    rewrite_sql("v0", "SELECT n FROM v2");
    let e = refused(&engine, &bob, "SELECT * FROM v1").await;
    assert!(
        e.message().contains(
            "view 'iceberg.default.v1' refers to itself: iceberg.default.v1 → iceberg.default.v0 → iceberg.default.v2 → iceberg.default.v1"
        ),
        "{}",
        e.message()
    );
    // Garbage is the server's fault, as a broken table file is: an internal error with an id.
    std::fs::write(metadata("v0"), "{ not json").unwrap_or_else(|e| panic!("{e}"));
    let e = refused(&engine, &bob, "SELECT * FROM v0").await;
    assert_eq!(e.code(), ErrorCode::Internal, "{}", e.message());
    assert!(!e.message().contains("metadata"), "{}", e.message());
    assert_eq!(ok(&engine, &bob, "SELECT 1").await, vec!["1"]);
    // A broken view can still be dropped, and its name used again.
    ok(&engine, &bob, "DROP VIEW v0").await;
    ok(&engine, &bob, "CREATE VIEW v0 AS SELECT 7 AS n").await;
    assert_eq!(ok(&engine, &bob, "SELECT n FROM v1").await, vec!["8"]);
}

/// Who may read, write, drop and grant on a server that denies what it does not grant: the owner
/// of a table decides who reads it, a table nobody granted a user is absent for them (the same
/// error as a table that does not exist, and not listed), a DENY wins over a role's grant, and a
/// dropped table's privileges do not pass to a new table of its name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn privileges_decide_who_reads_writes_and_drops() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = governed_engine(dir.path());
    let ada = session(&engine, "ada", &["sqe_admin"]);
    let alice = session(&engine, "alice", &[]);
    let bob = session(&engine, "bob", &[]);
    let carol = session(&engine, "carol", &[]);
    let code = |e: &SqeError| (e.code(), e.message().to_string());

    // Making tables in a schema is granted, like everything else.
    let e = refused(
        &engine,
        &alice,
        "CREATE TABLE t AS SELECT 1 AS id, 'a' AS name",
    )
    .await;
    assert_eq!(
        code(&e),
        (
            ErrorCode::PermissionDenied,
            "Access Denied: Cannot create tables in schema iceberg.default".into()
        )
    );
    ok(
        &engine,
        &ada,
        "GRANT CREATE ON SCHEMA default TO USER alice",
    )
    .await;
    ok(
        &engine,
        &alice,
        "CREATE TABLE t AS SELECT 1 AS id, 'a' AS name",
    )
    .await;
    ok(&engine, &alice, "INSERT INTO t VALUES (2, 'b')").await;
    assert_eq!(
        ok(&engine, &alice, "SELECT id, name FROM t ORDER BY id").await,
        ["1|a", "2|b"]
    );

    // To bob, alice's table does not exist: not in a query, a listing, a write, a drop or a grant.
    let absent = |sql: &'static str, message: &'static str| {
        let (engine, bob) = (&engine, &bob);
        async move {
            let e = refused(engine, bob, sql).await;
            assert_eq!(
                code(&e),
                (ErrorCode::NotFound, message.to_string()),
                "{sql}"
            );
        }
    };
    absent("SELECT * FROM t", "table 'iceberg.default.t' not found").await;
    absent(
        "SELECT * FROM nope",
        "table 'iceberg.default.nope' not found",
    )
    .await;
    absent(
        "SELECT count(*) FROM (SELECT id FROM t) x",
        "table 'iceberg.default.t' not found",
    )
    .await;
    absent(
        "SELECT 1 WHERE EXISTS (SELECT 1 FROM t)",
        "table 'iceberg.default.t' not found",
    )
    .await;
    absent(
        "SELECT * FROM \"t$snapshots\"",
        "table 'iceberg.default.t$snapshots' not found",
    )
    .await;
    absent(
        "SELECT * FROM t FOR VERSION AS OF 1",
        "table 'iceberg.default.t' does not exist",
    )
    .await;
    absent(
        "INSERT INTO t VALUES (3, 'c')",
        "table 'iceberg.default.t' does not exist",
    )
    .await;
    absent("DROP TABLE t", "table 'iceberg.default.t' does not exist").await;
    absent(
        "ALTER TABLE t ADD COLUMN x int",
        "table 'iceberg.default.t' does not exist",
    )
    .await;
    absent(
        "GRANT SELECT ON TABLE t TO USER bob",
        "table 'iceberg.default.t' does not exist",
    )
    .await;
    absent("SELECT zzzz FROM t", "table 'iceberg.default.t' not found").await;
    absent(
        "EXPLAIN INSERT INTO t SELECT 1, 'x'",
        "table 'iceberg.default.t' not found",
    )
    .await;
    absent("DESCRIBE t", "table 'iceberg.default.t' does not exist").await;
    absent(
        "SHOW COLUMNS FROM t",
        "table 'iceberg.default.t' does not exist",
    )
    .await;
    absent(
        "SHOW CREATE TABLE t",
        "table 'iceberg.default.t' does not exist",
    )
    .await;
    absent(
        "COPY (SELECT * FROM t) TO '/tmp/sqe-never-written.csv'",
        "table 'iceberg.default.t' not found",
    )
    .await;
    assert!(ok(&engine, &bob, "SHOW TABLES").await.is_empty());
    assert_eq!(ok(&engine, &alice, "SHOW TABLES").await, ["t"]);
    let listings = [
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'default'",
        "SELECT DISTINCT table_name FROM information_schema.columns WHERE table_schema = 'default'",
        "SELECT table_name FROM system.jdbc.tables WHERE table_schem = 'default'",
        "SELECT DISTINCT table_name FROM system.jdbc.columns WHERE table_schem = 'default'",
    ];
    for sql in listings {
        assert!(ok(&engine, &bob, sql).await.is_empty(), "{sql}");
        assert_eq!(ok(&engine, &alice, sql).await, ["t"], "{sql}");
    }
    ok(&engine, &bob, "DROP TABLE IF EXISTS t").await;

    // Granted SELECT, bob reads and nothing more; granting on is the owner's.
    ok(&engine, &alice, "GRANT SELECT ON TABLE t TO USER bob").await;
    assert_eq!(
        ok(&engine, &bob, "SELECT id FROM t ORDER BY id").await,
        ["1", "2"]
    );
    assert_eq!(ok(&engine, &bob, "SHOW TABLES").await, ["t"]);
    for sql in listings {
        assert_eq!(ok(&engine, &bob, sql).await, ["t"], "{sql}");
    }
    let denied = |sql: &'static str, message: &'static str| {
        let (engine, bob) = (&engine, &bob);
        async move {
            let e = refused(engine, bob, sql).await;
            assert_eq!(
                code(&e),
                (ErrorCode::PermissionDenied, message.to_string()),
                "{sql}"
            );
        }
    };
    denied(
        "INSERT INTO t VALUES (3, 'c')",
        "Access Denied: Cannot insert into table iceberg.default.t",
    )
    .await;
    denied(
        "DROP TABLE t",
        "Access Denied: Cannot drop table iceberg.default.t",
    )
    .await;
    denied(
        "GRANT SELECT ON TABLE t TO USER carol",
        "Access Denied: Cannot grant privileges on iceberg.default.t",
    )
    .await;
    denied(
        "CREATE TABLE u AS SELECT * FROM t",
        "Access Denied: Cannot create tables in schema iceberg.default",
    )
    .await;
    denied(
        "CREATE ROLE r",
        "Access Denied: only an admin manages roles",
    )
    .await;

    // A grant WITH GRANT OPTION does not outlive a DENY.
    ok(
        &engine,
        &alice,
        "GRANT SELECT ON TABLE t TO USER bob WITH GRANT OPTION",
    )
    .await;
    ok(&engine, &bob, "GRANT SELECT ON TABLE t TO USER carol").await;
    assert_eq!(ok(&engine, &carol, "SELECT count(*) FROM t").await, ["2"]);
    ok(&engine, &alice, "REVOKE SELECT ON TABLE t FROM USER carol").await;
    ok(&engine, &alice, "DENY SELECT ON TABLE t TO USER bob").await;
    denied(
        "GRANT SELECT ON TABLE t TO USER carol",
        "Access Denied: Cannot grant privileges on iceberg.default.t",
    )
    .await;
    denied(
        "SELECT * FROM t",
        "Access Denied: Cannot select from table iceberg.default.t",
    )
    .await;
    ok(&engine, &alice, "REVOKE SELECT ON TABLE t FROM USER bob").await;
    ok(&engine, &alice, "GRANT SELECT ON TABLE t TO USER bob").await;

    // ALTER is granted like the rest (the parser knows it as nothing: SQE reads it), and does not
    // reach masks, which stay the owner's.
    denied(
        "ALTER TABLE t ADD COLUMN note varchar",
        "Access Denied: Cannot alter table iceberg.default.t",
    )
    .await;
    ok(
        &engine,
        &alice,
        "GRANT ALTER, INSERT ON TABLE t TO USER bob",
    )
    .await;
    ok(&engine, &bob, "ALTER TABLE t ADD COLUMN note varchar").await;
    ok(&engine, &bob, "ALTER TABLE t DROP COLUMN note").await;
    denied(
        "ALTER TABLE t ALTER COLUMN name SET MASK NULL FOR USER carol",
        "Access Denied: only the owner of iceberg.default.t or an admin may do this",
    )
    .await;
    assert_eq!(
        ok(&engine, &ada, "SHOW GRANTS ON TABLE t").await,
        [
            "bob|USER|iceberg|default|t|GRANT ALTER|NO",
            "bob|USER|iceberg|default|t|GRANT INSERT|NO",
            "bob|USER|iceberg|default|t|GRANT SELECT|NO",
        ]
    );
    ok(&engine, &alice, "DENY ALTER ON TABLE t TO USER bob").await;
    denied(
        "ALTER TABLE t ADD COLUMN note varchar",
        "Access Denied: Cannot alter table iceberg.default.t",
    )
    .await;
    ok(
        &engine,
        &alice,
        "REVOKE ALTER, INSERT ON TABLE t FROM USER bob",
    )
    .await;

    // A role granted the schema reads every table in it; a DENY to one user wins over it.
    ok(&engine, &ada, "CREATE ROLE analyst").await;
    ok(&engine, &ada, "GRANT ROLE analyst TO USER carol").await;
    ok(
        &engine,
        &ada,
        "GRANT SELECT ON SCHEMA default TO ROLE analyst",
    )
    .await;
    assert_eq!(ok(&engine, &carol, "SELECT count(*) FROM t").await, ["2"]);
    assert_eq!(
        ok(
            &engine,
            &carol,
            "SELECT is_role_in_session('analyst'), is_role_in_session('sqe_admin'), cardinality(current_roles())"
        )
        .await,
        ["true|false|1"]
    );
    ok(&engine, &alice, "DENY SELECT ON TABLE t TO USER carol").await;
    let e = refused(&engine, &carol, "SELECT count(*) FROM t").await;
    assert_eq!(
        code(&e),
        (
            ErrorCode::PermissionDenied,
            "Access Denied: Cannot select from table iceberg.default.t".into()
        )
    );
    assert_eq!(
        ok(&engine, &ada, "SHOW GRANTS ON TABLE t").await,
        [
            "bob|USER|iceberg|default|t|GRANT SELECT|NO",
            "carol|USER|iceberg|default|t|DENY SELECT|NO",
        ]
    );

    // A renamed table keeps its owner and privileges under its new name only.
    ok(&engine, &alice, "ALTER TABLE t RENAME TO t2").await;
    absent("SELECT * FROM t", "table 'iceberg.default.t' not found").await;
    assert_eq!(ok(&engine, &bob, "SELECT count(*) FROM t2").await, ["2"]);
    ok(&engine, &alice, "ALTER TABLE t2 RENAME TO t").await;

    // Dropping a schema drops only what the caller may drop.
    ok(&engine, &ada, "GRANT DROP ON SCHEMA default TO USER bob").await;
    ok(&engine, &alice, "DENY DROP ON TABLE t TO USER bob").await;
    denied(
        "DROP SCHEMA default CASCADE",
        "Access Denied: Cannot drop schema iceberg.default: it holds tables or views you may not drop",
    )
    .await;
    ok(&engine, &ada, "REVOKE DROP ON SCHEMA default FROM USER bob").await;

    // REVOKE takes it back; a table dropped and made again starts with no grants.
    ok(&engine, &alice, "REVOKE SELECT ON TABLE t FROM USER bob").await;
    absent("SELECT * FROM t", "table 'iceberg.default.t' not found").await;
    ok(&engine, &alice, "GRANT SELECT ON TABLE t TO USER bob").await;
    ok(&engine, &alice, "DROP TABLE t").await;
    ok(&engine, &alice, "CREATE TABLE t AS SELECT 7 AS id").await;
    absent("SELECT * FROM t", "table 'iceberg.default.t' not found").await;
    assert_eq!(ok(&engine, &carol, "SELECT id FROM t").await, ["7"]);
    ok(&engine, &ada, "REVOKE ROLE analyst FROM USER carol").await;
    let e = refused(&engine, &carol, "SELECT id FROM t").await;
    assert_eq!(code(&e).0, ErrorCode::NotFound);
}

/// Bad GRANTs are refused with the reason, and change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_grants_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = governed_engine(dir.path());
    let ada = session(&engine, "ada", &["sqe_admin"]);
    ok(&engine, &ada, "CREATE TABLE t AS SELECT 1 AS id").await;
    let long = "x".repeat(300);
    let cases = [
        (
            "GRANT SELECT ON TABLE nope TO USER bob".to_string(),
            ErrorCode::NotFound,
            "table 'iceberg.default.nope' does not exist".to_string(),
        ),
        (
            "GRANT SELECT ON SCHEMA nope TO USER bob".to_string(),
            ErrorCode::NotFound,
            "schema 'iceberg.nope' does not exist".to_string(),
        ),
        (
            format!("GRANT SELECT ON TABLE t TO USER {long}"),
            ErrorCode::InvalidInput,
            format!("'{long}' is not a valid user name"),
        ),
        (
            "GRANT INSERT (id) ON TABLE t TO USER bob".to_string(),
            ErrorCode::Unsupported,
            "only SELECT is granted on columns".to_string(),
        ),
        (
            "GRANT ROLE nope TO USER bob".to_string(),
            ErrorCode::NotFound,
            "role 'nope' does not exist".to_string(),
        ),
        (
            "DROP ROLE nope".to_string(),
            ErrorCode::NotFound,
            "role 'nope' does not exist".to_string(),
        ),
        (
            "SHOW GRANTS ON t".to_string(),
            ErrorCode::InvalidInput,
            "expected SHOW GRANTS [ON TABLE t | ON SCHEMA s]".to_string(),
        ),
    ];
    for (sql, expected_code, message) in cases {
        let e = refused(&engine, &ada, &sql).await;
        assert_eq!(
            (e.code(), e.message()),
            (expected_code, message.as_str()),
            "{sql}"
        );
    }
    assert!(ok(&engine, &ada, "SHOW GRANTS").await.is_empty());
    ok(&engine, &ada, "CREATE ROLE r").await;
    let e = refused(&engine, &ada, "CREATE ROLE r").await;
    assert_eq!(e.message(), "role 'r' already exists");
    ok(&engine, &ada, "CREATE ROLE IF NOT EXISTS r").await;
    ok(&engine, &ada, "DROP ROLE r").await;
    ok(&engine, &ada, "DROP ROLE IF EXISTS r").await;
}

/// The embedded default: no admin roles and allow by default make everyone an admin, as before;
/// the session functions answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_engine_allows_everything() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = engine_in(dir.path(), EngineConfig::default());
    let alice = session(&engine, "alice", &["dev"]);
    let bob = session(&engine, "bob", &[]);
    ok(&engine, &alice, "CREATE TABLE t AS SELECT 1 AS id").await;
    assert_eq!(ok(&engine, &bob, "SELECT id FROM t").await, ["1"]);
    assert_eq!(
        ok(
            &engine,
            &alice,
            "SELECT current_catalog, current_schema(), current_roles(), is_role_in_session('dev')"
        )
        .await,
        ["iceberg|default|[dev]|true"]
    );
    ok(&engine, &bob, "DROP TABLE t").await;
}

/// A row filter holds wherever its table is read: queries, filters on the hidden rows' values,
/// subqueries, CTEs and self-joins, UNION, GROUP BY, views, CTAS (the copy holds the filtered rows),
/// time travel; metadata tables are refused to the callers it names; a caller's own WHERE can
/// never pass for it; only the owner sees and changes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_filters_hold_wherever_the_table_is_read() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = governed_engine(dir.path());
    let ada = session(&engine, "ada", &["sqe_admin"]);
    let alice = session(&engine, "alice", &[]);
    let bob = session(&engine, "bob", &[]);
    let carol = session(&engine, "carol", &[]);
    ok(
        &engine,
        &ada,
        "GRANT CREATE ON SCHEMA default TO USER alice",
    )
    .await;
    ok(
        &engine,
        &alice,
        "CREATE TABLE sales AS SELECT * FROM (VALUES (1, 'eu', 'bob'), (2, 'us', 'bob'), \
         (3, 'eu', 'carol'), (4, 'us', 'carol')) AS v(id, region, seller)",
    )
    .await;
    ok(&engine, &ada, "CREATE ROLE analyst").await;
    ok(&engine, &ada, "GRANT ROLE analyst TO USER carol").await;
    ok(&engine, &alice, "GRANT SELECT ON TABLE sales TO USER bob").await;
    ok(
        &engine,
        &alice,
        "GRANT SELECT ON TABLE sales TO ROLE analyst",
    )
    .await;
    ok(
        &engine,
        &alice,
        "CREATE ROW FILTER eu ON sales USING (region = 'eu') FOR USER bob",
    )
    .await;
    ok(
        &engine,
        &alice,
        "CREATE ROW FILTER own ON sales USING (seller = current_user) FOR ROLE analyst",
    )
    .await;

    let cases = [
        ("SELECT id FROM sales ORDER BY id", vec!["1", "3"]),
        ("SELECT count(*) FROM sales WHERE region = 'us'", vec!["0"]),
        ("SELECT (SELECT count(*) FROM sales)", vec!["2"]),
        (
            "SELECT count(*) FROM (VALUES (2), (4)) v(x) WHERE EXISTS (SELECT 1 FROM sales WHERE id = x)",
            vec!["0"],
        ),
        (
            "WITH s AS (SELECT * FROM sales) SELECT count(*) FROM s a JOIN s b ON a.id = b.id",
            vec!["2"],
        ),
        (
            "SELECT id FROM sales UNION ALL SELECT id FROM iceberg.default.sales ORDER BY id",
            vec!["1", "1", "3", "3"],
        ),
        (
            "SELECT region, count(*) FROM sales GROUP BY region",
            vec!["eu|2"],
        ),
    ];
    for (sql, expected) in &cases {
        assert_eq!(&ok(&engine, &bob, sql).await, expected, "{sql}");
    }
    // The statement's own conditions never run on a hidden row: this cast fails on every 'us'
    // row, which bob's filter hides, and on none he may see.
    let oracle = "SELECT id FROM sales WHERE CAST(CASE WHEN region = 'us' THEN 'x' ELSE '1' END AS INTEGER) = 1 ORDER BY id";
    assert_eq!(ok(&engine, &bob, oracle).await, ["1", "3"]);
    assert!(
        refused(&engine, &alice, oracle)
            .await
            .message()
            .contains("'x'")
    );
    assert_eq!(
        ok(&engine, &carol, "SELECT id FROM sales ORDER BY id").await,
        ["3", "4"]
    );
    // Nor do expressions the optimizer would like to run below the filter, on a table of many
    // batches: the hidden row's region would fail this cast and print itself.
    ok(
        &engine,
        &alice,
        "CREATE TABLE big AS SELECT id, CASE WHEN id = 7 THEN 'secret-7' ELSE 'eu' END AS region, \
         id % 100 AS amount FROM generate_series(1, 50000) AS g(id)",
    )
    .await;
    ok(&engine, &alice, "GRANT SELECT ON TABLE big TO USER bob").await;
    ok(
        &engine,
        &alice,
        "CREATE ROW FILTER eu ON big USING (region = 'eu') FOR USER bob",
    )
    .await;
    for sql in [
        "SELECT max(region), max(k) > 0 FROM (SELECT region, \
         CAST(CASE WHEN region = 'eu' THEN '1' ELSE region END AS INT) + id + amount AS k FROM big)",
        "SELECT max(region), count(q) > 0 FROM (SELECT region, \
         id / CASE WHEN region = 'eu' THEN 1 ELSE 0 END AS q FROM big)",
    ] {
        assert_eq!(ok(&engine, &bob, sql).await, ["eu|true"], "{sql}");
    }
    // A repeated expression the optimizer would compute once, below the filter.
    let twice = "SELECT count(*) FROM big WHERE CAST(CASE WHEN id = 7 THEN region ELSE '1' END AS INT) \
        + CAST(CASE WHEN id = 7 THEN region ELSE '1' END AS INT) > 0";
    assert_eq!(ok(&engine, &bob, twice).await, ["49999"]);
    assert!(
        refused(&engine, &alice, twice)
            .await
            .message()
            .contains("secret-7")
    );
    let e = refused(
        &engine,
        &alice,
        "SELECT max(region), max(k) FROM (SELECT region, \
         CAST(CASE WHEN region = 'eu' THEN '1' ELSE region END AS INT) + id + amount AS k FROM big)",
    )
    .await;
    assert!(e.message().contains("secret-7"), "{}", e.message());
    for who in [&ada, &alice] {
        assert_eq!(ok(&engine, who, "SELECT count(*) FROM sales").await, ["4"]);
    }

    // A view reads the table through the filter of whoever reads the view.
    ok(
        &engine,
        &alice,
        "CREATE VIEW sales_view AS SELECT id, region FROM sales",
    )
    .await;
    ok(
        &engine,
        &alice,
        "GRANT SELECT ON TABLE sales_view TO USER bob",
    )
    .await;
    assert_eq!(
        ok(&engine, &bob, "SELECT id FROM sales_view ORDER BY id").await,
        ["1", "3"]
    );

    // A copy holds only what its maker could read.
    ok(&engine, &ada, "GRANT CREATE ON SCHEMA default TO USER bob").await;
    ok(&engine, &bob, "CREATE TABLE mine AS SELECT * FROM sales").await;
    assert_eq!(ok(&engine, &bob, "SELECT count(*) FROM mine").await, ["2"]);

    // What cannot be filtered yet is refused to the callers a filter names.
    let e = refused(&engine, &bob, "SELECT * FROM \"sales$files\"").await;
    assert_eq!(
        (e.code(), e.message()),
        (
            ErrorCode::PermissionDenied,
            "Access Denied: Cannot select from table iceberg.default.sales$files: a row filter or column mask on iceberg.default.sales applies to you"
        )
    );
    // An older snapshot is filtered as the current one is.
    let snapshot = ok(
        &engine,
        &alice,
        "SELECT snapshot_id FROM \"sales$snapshots\" LIMIT 1",
    )
    .await;
    assert_eq!(
        ok(
            &engine,
            &bob,
            &format!(
                "SELECT id FROM sales FOR VERSION AS OF {} ORDER BY id",
                snapshot[0]
            ),
        )
        .await,
        ["1", "3"]
    );
    // A filter that cannot be applied to an older snapshot (its column came later) refuses the
    // read without showing the filter's text to the caller it restricts.
    ok(&engine, &alice, "ALTER TABLE sales ADD COLUMN tier varchar").await;
    ok(
        &engine,
        &alice,
        "CREATE ROW FILTER tiers ON sales USING (coalesce(tier, 'x') <> 'secret-tier') FOR USER bob",
    )
    .await;
    let e = refused(
        &engine,
        &bob,
        &format!(
            "SELECT count(*) FROM sales FOR VERSION AS OF {}",
            snapshot[0]
        ),
    )
    .await;
    assert_eq!(
        (e.code(), e.message()),
        (
            ErrorCode::PermissionDenied,
            "Access Denied: a row filter on iceberg.default.sales applies to you and cannot be applied here (its owner may look into the server's log)"
        )
    );
    ok(&engine, &alice, "DROP ROW FILTER tiers ON sales").await;

    // Statistics and plans describe the rows before the filter.
    for (sql, what) in [
        ("SHOW STATS FOR sales", "SHOW STATS"),
        ("EXPLAIN SELECT * FROM sales", "EXPLAIN"),
        ("EXPLAIN ANALYZE SELECT * FROM sales", "EXPLAIN"),
    ] {
        let e = refused(&engine, &bob, sql).await;
        assert_eq!(
            (e.code(), e.message().to_string()),
            (
                ErrorCode::PermissionDenied,
                format!(
                    "Access Denied: {what} is not available on a table with a row filter or column mask that applies to you"
                )
            ),
            "{sql}"
        );
    }
    assert_eq!(
        ok(&engine, &alice, "EXPLAIN SELECT * FROM sales")
            .await
            .len(),
        2
    );

    // Only the owner (or an admin) sees and changes the filters.
    for sql in ["SHOW ROW FILTERS ON sales", "DROP ROW FILTER eu ON sales"] {
        let e = refused(&engine, &bob, sql).await;
        assert_eq!(
            (e.code(), e.message()),
            (
                ErrorCode::PermissionDenied,
                "Access Denied: only the owner of iceberg.default.sales or an admin may do this"
            ),
            "{sql}"
        );
    }
    let filters = ok(&engine, &alice, "SHOW ROW FILTERS ON sales").await;
    assert_eq!(
        filters
            .iter()
            .map(|r| r.split('|').take(3).collect::<Vec<_>>().join("|"))
            .collect::<Vec<_>>(),
        ["eu|USER|bob", "own|ROLE|analyst"]
    );
    let e = refused(
        &engine,
        &alice,
        "CREATE ROW FILTER bad ON sales USING (nope = 1) FOR USER bob",
    )
    .await;
    assert_eq!(e.code(), ErrorCode::InvalidInput);
    assert!(
        e.message()
            .starts_with("row filter (nope = 1) on iceberg.default.sales: "),
        "{}",
        e.message()
    );
    let e = refused(
        &engine,
        &alice,
        "CREATE ROW FILTER eu ON sales USING region = 'eu' FOR USER bob",
    )
    .await;
    assert!(e.message().starts_with("syntax error: "), "{}", e.message());
    // Names past 255 characters and conditions past 4000 are refused before anything is stored.
    for sql in [
        format!(
            "CREATE ROW FILTER x ON sales USING (region = '{}') FOR USER bob",
            "e".repeat(4000)
        ),
        format!(
            "CREATE ROW FILTER x ON sales USING (region = 'eu') FOR USER {}",
            "b".repeat(256)
        ),
        format!(
            "CREATE ROW FILTER {} ON sales USING (region = 'eu') FOR USER bob",
            "n".repeat(256)
        ),
    ] {
        let e = refused(&engine, &alice, &sql).await;
        assert_eq!(
            (e.code(), e.message()),
            (
                ErrorCode::InvalidInput,
                "a row filter's name and grantee are at most 255 characters, its condition 4000"
            )
        );
    }
    let e = refused(
        &engine,
        &alice,
        "CREATE ROW FILTER eu ON sales USING (region = 'eu') FOR USER bob",
    )
    .await;
    assert_eq!(
        e.message(),
        "row filter 'eu' on iceberg.default.sales already exists"
    );
    ok(&engine, &alice, "DROP ROW FILTER eu ON sales").await;
    assert_eq!(ok(&engine, &bob, "SELECT count(*) FROM sales").await, ["4"]);
    ok(&engine, &alice, "DROP ROW FILTER IF EXISTS eu ON sales").await;

    // A filter named in upper case is for the user as GRANT names them; it follows a rename,
    // and a table made again under a dropped one's name does not inherit it.
    ok(
        &engine,
        &alice,
        "CREATE ROW FILTER Eu ON sales USING (region = 'eu') FOR USER Bob",
    )
    .await;
    assert_eq!(ok(&engine, &bob, "SELECT count(*) FROM sales").await, ["2"]);
    ok(&engine, &alice, "ALTER TABLE sales RENAME TO sales2").await;
    assert_eq!(
        ok(&engine, &bob, "SELECT count(*) FROM sales2").await,
        ["2"]
    );
    ok(&engine, &alice, "DROP TABLE sales2").await;
    ok(
        &engine,
        &alice,
        "CREATE TABLE sales2 AS SELECT 1 AS id, 'us' AS region",
    )
    .await;
    ok(&engine, &alice, "GRANT SELECT ON TABLE sales2 TO USER bob").await;
    assert_eq!(
        ok(&engine, &bob, "SELECT count(*) FROM sales2").await,
        ["1"]
    );
}

/// A column mask holds wherever its table is read: the caller sees, filters, groups, joins and
/// copies only the masked values (a condition on the raw value matches nothing), older snapshots
/// included; each mask of the vocabulary keeps its column's type; a renamed column stays masked and
/// a column dropped and added again does not; only the owner sets them.
/// DELETE, UPDATE and MERGE as a governed caller: privileges decide who may; a row filter limits
/// the rows changed to those the caller sees (a MERGE matches only those); a condition on a masked
/// column compares the masked value, and an UPDATE keeps the raw values of the columns it does not
/// set. A huge or malformed MERGE is refused cleanly (or answered) and the engine serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_level_changes_hold_to_privileges_filters_and_masks() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = governed_engine(dir.path());
    let ada = session(&engine, "ada", &["sqe_admin"]);
    let alice = session(&engine, "alice", &[]);
    let bob = session(&engine, "bob", &[]);
    ok(
        &engine,
        &ada,
        "GRANT CREATE ON SCHEMA default TO USER alice",
    )
    .await;
    ok(
        &engine,
        &alice,
        "CREATE TABLE pay AS SELECT * FROM (VALUES (1, 'eu', 100), (2, 'us', 200), (3, 'eu', 300), (4, 'us', 400)) AS v(id, region, salary)",
    )
    .await;
    ok(&engine, &alice, "GRANT SELECT ON TABLE pay TO USER bob").await;
    for sql in [
        "DELETE FROM pay WHERE id = 1",
        "UPDATE pay SET salary = 0",
        "MERGE INTO pay USING (VALUES (1)) AS v(id) ON pay.id = v.id WHEN MATCHED THEN DELETE",
        "MERGE INTO pay USING (VALUES (9)) AS v(id) ON pay.id = v.id WHEN NOT MATCHED THEN INSERT VALUES (9, 'eu', 9)",
        "INSERT OVERWRITE pay VALUES (9, 'eu', 9)",
    ] {
        let e = refused(&engine, &bob, sql).await;
        assert_eq!(e.code(), ErrorCode::PermissionDenied, "{sql}: {e}");
    }
    for privilege in ["DELETE", "UPDATE", "INSERT"] {
        ok(
            &engine,
            &alice,
            &format!("GRANT {privilege} ON TABLE pay TO USER bob"),
        )
        .await;
    }
    ok(
        &engine,
        &alice,
        "CREATE ROW FILTER eu ON pay USING (region = 'eu') FOR USER bob",
    )
    .await;
    ok(
        &engine,
        &alice,
        "ALTER TABLE pay ALTER COLUMN salary SET MASK NULL FOR USER bob",
    )
    .await;
    // The salary he reads is NULL: a condition on it is true of no row.
    assert_eq!(
        ok(&engine, &bob, "DELETE FROM pay WHERE salary > 0").await,
        ["0"]
    );
    // His rows only, and their salaries as they were.
    assert_eq!(
        ok(&engine, &bob, "UPDATE pay SET id = id + 10").await,
        ["2"]
    );
    assert_eq!(
        ok(
            &engine,
            &alice,
            "SELECT id, region, salary FROM pay ORDER BY id"
        )
        .await,
        ["2|us|200", "4|us|400", "11|eu|100", "13|eu|300"]
    );
    // Row 2 is hidden from him: his MERGE does not match it, and inserts a row of its own.
    assert_eq!(
        ok(
            &engine,
            &bob,
            "MERGE INTO pay USING (VALUES (11, 'eu'), (2, 'eu')) AS v(id, region) ON pay.id = v.id \
             WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT (id, region) VALUES (v.id, v.region)",
        )
        .await,
        ["2"]
    );
    assert_eq!(
        ok(
            &engine,
            &alice,
            "SELECT id, region, salary FROM pay ORDER BY id, region"
        )
        .await,
        ["2|eu|NULL", "2|us|200", "4|us|400", "13|eu|300"]
    );
    // Replacing partitions (every row of this unpartitioned table) would remove rows he cannot
    // see: refused, however he asks.
    for sql in [
        "TRUNCATE TABLE pay",
        "INSERT OVERWRITE pay VALUES (9, 'eu', 9)",
    ] {
        let e = refused(&engine, &bob, sql).await;
        assert_eq!(e.code(), ErrorCode::PermissionDenied, "{sql}: {e}");
    }
    let mut overwriting = bob.clone();
    overwriting.properties.insert(
        "insert_existing_partitions_behavior".into(),
        "OVERWRITE".into(),
    );
    let e = refused(&engine, &overwriting, "INSERT INTO pay VALUES (9, 'eu', 9)").await;
    assert!(e.message().contains("Cannot overwrite table"), "{e}");
    assert_eq!(ok(&engine, &bob, "DELETE FROM pay").await, ["2"]);
    assert_eq!(
        ok(&engine, &alice, "SELECT id FROM pay ORDER BY id").await,
        ["2", "4"]
    );

    // Malformed and huge MERGEs: a clear error (or an answer), and the engine serves on.
    for (sql, message) in [
        (
            "MERGE INTO pay USING pay AS s ON 1 = 1 WHEN MATCHED THEN DELETE",
            "One MERGE target table row matched more than one source row",
        ),
        (
            "MERGE INTO nope USING pay ON 1 = 1 WHEN MATCHED THEN DELETE",
            "nope",
        ),
        (
            "MERGE INTO pay USING (VALUES (1)) AS v(id) ON pay.id = v.id WHEN NOT MATCHED THEN INSERT (id) VALUES (1, 2)",
            "MERGE's INSERT names 1 columns but gives 2 values",
        ),
        (
            "MERGE INTO pay USING (VALUES (1)) AS v(id) ON pay.id = v.id WHEN MATCHED THEN UPDATE SET nope = 1",
            "column 'nope' cannot be resolved",
        ),
        (
            "MERGE INTO pay USING (VALUES (1)) AS v(id) ON pay.id = v.id",
            "",
        ),
    ] {
        let e = refused(&engine, &alice, sql).await;
        assert!(e.message().contains(message), "{sql}: {e}");
        assert_ne!(e.code(), ErrorCode::Internal, "{sql}: {e}");
    }
    // A set-returning value would give a row two new versions; a volatile condition could pick
    // one clause for the action and another for a value.
    let e = refused(
        &engine,
        &alice,
        "UPDATE pay SET id = unnest(make_array(1, 2))",
    )
    .await;
    assert!(e.message().contains("set-returning"), "{e}");
    let e = refused(
        &engine,
        &alice,
        "MERGE INTO pay USING (VALUES (4)) AS v(id) ON pay.id = v.id WHEN MATCHED AND random() < 0.5 THEN DELETE",
    )
    .await;
    assert!(e.message().contains("must not be volatile"), "{e}");
    let clauses: Vec<String> = (0..1000)
        .map(|i| format!("WHEN MATCHED AND v.id = {i} THEN DELETE"))
        .collect();
    let huge = format!(
        "MERGE INTO pay USING (VALUES (4)) AS v(id) ON pay.id = v.id {}",
        clauses.join(" ")
    );
    match rows(&engine, &alice, &huge).await {
        Ok(answer) => assert_eq!(answer, ["1"]),
        Err(e) => assert_ne!(e.code(), ErrorCode::Internal, "{e}"),
    }
    assert_eq!(
        ok(&engine, &alice, "SELECT count(*) FROM pay").await.len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_masks_hide_values_wherever_the_table_is_read() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = governed_engine(dir.path());
    let ada = session(&engine, "ada", &["sqe_admin"]);
    let alice = session(&engine, "alice", &[]);
    let bob = session(&engine, "bob", &[]);
    let carol = session(&engine, "carol", &[]);
    ok(
        &engine,
        &ada,
        "GRANT CREATE ON SCHEMA default TO USER alice",
    )
    .await;
    ok(&engine, &ada, "GRANT CREATE ON SCHEMA default TO USER bob").await;
    ok(
        &engine,
        &alice,
        "CREATE TABLE people AS SELECT * FROM (VALUES \
         (1, 'Ada', '4111-1111-1111-1234', DATE '1990-05-17', 123456), \
         (2, 'Bob', '5500-0000-0000-0004', DATE '1985-11-02', 98765)) AS v(id, name, card, born, salary)",
    )
    .await;
    ok(&engine, &ada, "CREATE ROLE support").await;
    ok(&engine, &ada, "GRANT ROLE support TO USER carol").await;
    ok(&engine, &alice, "GRANT SELECT ON TABLE people TO USER bob").await;
    ok(
        &engine,
        &alice,
        "GRANT SELECT ON TABLE people TO ROLE support",
    )
    .await;
    for sql in [
        "ALTER TABLE people ALTER COLUMN name SET MASK REDACT 'hidden' FOR USER bob",
        "ALTER TABLE people ALTER COLUMN salary SET MASK USING (salary - salary % 1000) FOR USER bob",
        "ALTER TABLE people ALTER COLUMN card SET MASK SHOW LAST 4 FOR ROLE support",
        "ALTER TABLE people ALTER COLUMN born SET MASK TRUNCATE TO YEAR FOR ROLE support",
        "ALTER TABLE people ALTER COLUMN name SET MASK HASH FOR ROLE support",
        "ALTER TABLE people ALTER COLUMN id SET MASK NULL FOR ROLE support",
        // The user's own mask wins over their role's.
        "ALTER TABLE people ALTER COLUMN card SET MASK NULL FOR USER carol",
        "ALTER TABLE people ALTER COLUMN card DROP MASK FOR USER carol",
    ] {
        ok(&engine, &alice, sql).await;
    }

    let cases = [
        (
            "SELECT id, name, salary FROM people ORDER BY id",
            vec!["1|hidden|123000", "2|hidden|98000"],
        ),
        ("SELECT count(*) FROM people WHERE name = 'Ada'", vec!["0"]),
        (
            "SELECT count(*) FROM people WHERE name = 'hidden'",
            vec!["2"],
        ),
        (
            "SELECT count(*) FROM people WHERE salary = 123456",
            vec!["0"],
        ),
        (
            "SELECT name, count(*) FROM people GROUP BY name",
            vec!["hidden|2"],
        ),
        (
            "SELECT count(*) FROM people a JOIN people b ON a.name = b.name",
            vec!["4"],
        ),
        (
            "WITH p AS (SELECT name FROM people) SELECT DISTINCT name FROM p",
            vec!["hidden"],
        ),
        ("SELECT (SELECT max(name) FROM people)", vec!["hidden"]),
        (
            "SELECT count(*) FROM (VALUES ('Ada')) v(x) WHERE EXISTS (SELECT 1 FROM people WHERE name = x)",
            vec!["0"],
        ),
        (
            "SELECT name FROM people WHERE id = 1 UNION ALL SELECT name FROM iceberg.default.people WHERE id = 2",
            vec!["hidden", "hidden"],
        ),
        ("SELECT max(length(name)) FROM people", vec!["6"]),
    ];
    for (sql, expected) in &cases {
        assert_eq!(&ok(&engine, &bob, sql).await, expected, "{sql}");
    }
    let carol_sees = ok(
        &engine,
        &carol,
        "SELECT id, card, born, length(name), name = (SELECT name FROM people WHERE born < DATE '1986-01-01') FROM people ORDER BY card",
    )
    .await;
    assert_eq!(
        carol_sees,
        [
            "NULL|xxxx-xxxx-xxxx-0004|1985-01-01|64|true",
            "NULL|xxxx-xxxx-xxxx-1234|1990-01-01|64|false"
        ]
    );
    // Hashes are stable: equal values hash alike, and count apart.
    assert_eq!(
        ok(&engine, &carol, "SELECT count(DISTINCT name) FROM people").await,
        ["2"]
    );
    // Each column hashes with a key of its own: a table of guesses carol masks with HASH for
    // herself is no dictionary of people.name's hashes.
    ok(
        &engine,
        &ada,
        "GRANT CREATE ON SCHEMA default TO USER carol",
    )
    .await;
    ok(
        &engine,
        &carol,
        "CREATE TABLE guesses AS SELECT x, x AS plain FROM (VALUES ('Ada'), ('Bob'), ('Zed')) v(x)",
    )
    .await;
    ok(
        &engine,
        &carol,
        "ALTER TABLE guesses ALTER COLUMN x SET MASK HASH FOR USER carol",
    )
    .await;
    assert_eq!(
        ok(&engine, &carol, "SELECT count(DISTINCT x) FROM guesses").await,
        ["3"]
    );
    assert_eq!(
        ok(
            &engine,
            &carol,
            "SELECT count(*) FROM people p JOIN guesses g ON p.name = g.x"
        )
        .await,
        ["0"]
    );
    assert_eq!(
        ok(
            &engine,
            &alice,
            "SELECT name, salary FROM people ORDER BY id"
        )
        .await,
        ["Ada|123456", "Bob|98765"]
    );

    // A copy holds what its maker could see; so does an older snapshot.
    ok(&engine, &bob, "CREATE TABLE bobs AS SELECT * FROM people").await;
    assert_eq!(
        ok(&engine, &bob, "SELECT DISTINCT name FROM bobs").await,
        ["hidden"]
    );
    let snapshot = ok(
        &engine,
        &alice,
        "SELECT snapshot_id FROM \"people$snapshots\" LIMIT 1",
    )
    .await;
    assert_eq!(
        ok(
            &engine,
            &bob,
            &format!(
                "SELECT DISTINCT name FROM people FOR VERSION AS OF {}",
                snapshot[0]
            ),
        )
        .await,
        ["hidden"]
    );
    for sql in ["SELECT * FROM \"people$files\"", "SHOW STATS FOR people"] {
        let e = refused(&engine, &bob, sql).await;
        assert_eq!(
            e.code(),
            ErrorCode::PermissionDenied,
            "{sql}: {}",
            e.message()
        );
    }
    let e = refused(&engine, &bob, "SELECT sqe_column_mask(name) FROM people").await;
    assert_eq!(e.code(), ErrorCode::InvalidInput, "{}", e.message());

    // Masks follow the column's field id.
    ok(
        &engine,
        &alice,
        "ALTER TABLE people RENAME COLUMN name TO full_name",
    )
    .await;
    assert_eq!(
        ok(&engine, &bob, "SELECT DISTINCT full_name FROM people").await,
        ["hidden"]
    );
    ok(&engine, &alice, "ALTER TABLE people DROP COLUMN salary").await;
    ok(
        &engine,
        &alice,
        "ALTER TABLE people ADD COLUMN salary bigint",
    )
    .await;
    ok(
        &engine,
        &alice,
        "INSERT INTO people VALUES (3, 'Cy', '1', DATE '2000-01-01', 5555)",
    )
    .await;
    assert_eq!(
        ok(&engine, &bob, "SELECT salary FROM people WHERE id = 3").await,
        ["5555"]
    );
    assert_eq!(
        ok(&engine, &alice, "SHOW MASKS ON people").await,
        [
            "born|TRUNCATE TO YEAR|ROLE|support",
            "card|SHOW LAST 4|ROLE|support",
            "full_name|HASH|ROLE|support",
            "full_name|REDACT 'hidden'|USER|bob",
            "id|NULL|ROLE|support",
        ]
    );

    // A NULL mask on a required column: what reads it knows it may be NULL now.
    ok(
        &engine,
        &alice,
        "CREATE TABLE required (id bigint NOT NULL, v varchar)",
    )
    .await;
    ok(
        &engine,
        &alice,
        "INSERT INTO required VALUES (1, 'a'), (2, 'b')",
    )
    .await;
    ok(
        &engine,
        &alice,
        "GRANT SELECT ON TABLE required TO USER bob",
    )
    .await;
    ok(
        &engine,
        &alice,
        "ALTER TABLE required ALTER COLUMN id SET MASK NULL FOR USER bob",
    )
    .await;
    assert_eq!(
        ok(
            &engine,
            &bob,
            "SELECT count(*) FROM required WHERE id IS NULL"
        )
        .await,
        ["2"]
    );

    // Only the owner (or an admin) sets and shows masks; a mask must keep the column's type.
    for sql in [
        "SHOW MASKS ON people",
        "ALTER TABLE people ALTER COLUMN card DROP MASK",
    ] {
        let e = refused(&engine, &bob, sql).await;
        assert_eq!(
            (e.code(), e.message()),
            (
                ErrorCode::PermissionDenied,
                "Access Denied: only the owner of iceberg.default.people or an admin may do this"
            ),
            "{sql}"
        );
    }
    for (sql, code, message) in [
        (
            "ALTER TABLE people ALTER COLUMN born SET MASK REDACT FOR USER bob",
            ErrorCode::InvalidInput,
            "mask REDACT 'xxxx' does not fit column 'born' of type Date32",
        ),
        (
            "ALTER TABLE people ALTER COLUMN nope SET MASK NULL FOR USER bob",
            ErrorCode::NotFound,
            "column 'nope' does not exist in table iceberg.default.people",
        ),
        (
            "ALTER TABLE people ALTER COLUMN card SET MASK USING (nope) FOR USER bob",
            ErrorCode::InvalidInput,
            "mask USING (nope) on iceberg.default.people: ",
        ),
        (
            "ALTER TABLE people ALTER COLUMN card SET MASK SHOW MIDDLE 4 FOR USER bob",
            ErrorCode::InvalidInput,
            "syntax error: ",
        ),
        (
            "ALTER TABLE people ALTER COLUMN card DROP MASK FOR USER nobody",
            ErrorCode::NotFound,
            "column 'card' of iceberg.default.people has no such mask",
        ),
        (
            &format!(
                "ALTER TABLE people ALTER COLUMN card SET MASK USING ('{}') FOR USER bob",
                "x".repeat(4000)
            ),
            ErrorCode::InvalidInput,
            "a mask's expression is at most 4000 characters",
        ),
        (
            &format!(
                "ALTER TABLE people ALTER COLUMN card SET MASK REDACT '{}' FOR USER bob",
                "x".repeat(256)
            ),
            ErrorCode::InvalidInput,
            "a REDACT text is at most 255 characters",
        ),
        (
            &format!(
                "ALTER TABLE people ALTER COLUMN card SET MASK NULL FOR USER {}",
                "b".repeat(256)
            ),
            ErrorCode::InvalidInput,
            "a grantee's name is 1 to 255 characters",
        ),
    ] {
        let e = refused(&engine, &alice, sql).await;
        assert_eq!(e.code(), code, "{sql}: {}", e.message());
        assert!(e.message().starts_with(message), "{sql}: {}", e.message());
    }
}

/// The governance matrix (tests/fixtures/governance.json), embedded, each persona as themselves:
/// the same exact rows the client tests get over Trino HTTP and Flight SQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_governance_matrix_holds_embedded() {
    let matrix: serde_json::Value = serde_json::from_str(include_str!("fixtures/governance.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = governed_engine(dir.path());
    let personas: Vec<(String, Session)> = matrix["personas"]
        .as_object()
        .unwrap_or_else(|| panic!("personas"))
        .iter()
        .map(|(name, roles)| {
            let roles: Vec<&str> = roles
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r.as_str())
                .collect();
            (name.clone(), session(&engine, name, &roles))
        })
        .collect();
    let admin = &personas[0].1;
    for sql in matrix["setup"].as_array().into_iter().flatten() {
        ok(&engine, admin, sql.as_str().unwrap_or_default()).await;
    }
    let first_snapshot = ok(
        &engine,
        admin,
        "SELECT snapshot_id FROM gov.\"customers$snapshots\" ORDER BY committed_at LIMIT 1",
    )
    .await;
    let files = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for case in matrix["cases"].as_array().into_iter().flatten() {
        let name = case["name"].as_str().unwrap_or_default();
        for (persona, session) in &personas {
            let statements: Vec<String> = case["sql"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| {
                    s.as_str()
                        .unwrap_or_default()
                        .replace("{tag}", &format!("embedded_{persona}"))
                        .replace("{dir}", &files.path().display().to_string())
                        .replace("{first_snapshot}", &first_snapshot[0])
                })
                .collect();
            let mut got = Ok(Vec::new());
            for sql in &statements {
                got = rows(&engine, session, sql).await;
                if got.is_err() {
                    break;
                }
            }
            let expected = &case[persona.as_str()];
            match (expected.get("error").and_then(|e| e.as_str()), got) {
                (Some(text), Err(e)) => assert!(
                    e.message().contains(text),
                    "{name} as {persona}: {} does not hold {text}",
                    e.message()
                ),
                (None, Ok(rows)) => {
                    let want: Vec<&str> = expected
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|r| r.as_str())
                        .collect();
                    assert_eq!(rows, want, "{name} as {persona}");
                }
                (_, got) => panic!("{name} as {persona}: expected {expected}, got {got:?}"),
            }
        }
    }
    // Each statement's decisions are in the query registry, for the admins to read.
    let decisions = "SELECT \"user\", decisions FROM system.runtime.queries \
        WHERE query LIKE 'SELECT id, region, amount FROM gov.orders%' ORDER BY \"user\"";
    assert_eq!(
        ok(&engine, admin, decisions).await,
        [
            "ada|NULL",
            "bob|allow SELECT on iceberg.gov.orders; row filter on iceberg.gov.orders: region = 'eu'",
            "carol|allow SELECT on iceberg.gov.orders",
            "dave|deny SELECT on iceberg.gov.orders"
        ]
    );
    let masked = "SELECT decisions FROM system.runtime.queries \
        WHERE \"user\" = 'carol' AND query LIKE 'SELECT id, name, email, phone, born FROM gov.customers%'";
    assert_eq!(
        ok(&engine, admin, masked).await,
        ["allow SELECT on iceberg.gov.customers; \
          mask USING (regexp_replace(email, '^[^@]*', '***')) on iceberg.gov.customers.email; \
          mask SHOW LAST 2 on iceberg.gov.customers.phone"]
    );
    let carol = &personas[2].1;
    assert_eq!(ok(&engine, carol, masked).await, ["NULL"]);
}

/// SELECT on columns: a caller granted some columns sees the table and reads only those, in any
/// part of a statement (`count(*)` reads none); a column DENY takes one column from a reader; the
/// grants follow a renamed column and not a column dropped and added again; only who may grant
/// SELECT on the table grants it on its columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_privileges_limit_the_columns_a_caller_reads() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = governed_engine(dir.path());
    let ada = session(&engine, "ada", &["sqe_admin"]);
    let alice = session(&engine, "alice", &[]);
    let bob = session(&engine, "bob", &[]);
    let carol = session(&engine, "carol", &[]);
    let dave = session(&engine, "dave", &[]);
    ok(
        &engine,
        &ada,
        "GRANT CREATE ON SCHEMA default TO USER alice",
    )
    .await;
    ok(
        &engine,
        &alice,
        "CREATE TABLE staff AS SELECT * FROM (VALUES (1, 'Ada', 100), (2, 'Bo', 200)) AS v(id, name, salary)",
    )
    .await;
    ok(
        &engine,
        &alice,
        "GRANT SELECT (id, name) ON TABLE staff TO USER bob",
    )
    .await;
    ok(&engine, &alice, "GRANT SELECT ON TABLE staff TO USER carol").await;
    ok(
        &engine,
        &alice,
        "DENY SELECT (salary) ON TABLE staff TO USER carol",
    )
    .await;

    for who in [&bob, &carol] {
        assert_eq!(
            ok(&engine, who, "SELECT id, name FROM staff ORDER BY id").await,
            ["1|Ada", "2|Bo"]
        );
        assert_eq!(ok(&engine, who, "SELECT count(*) FROM staff").await, ["2"]);
        assert_eq!(ok(&engine, who, "SHOW TABLES").await, ["staff"]);
        assert!(
            ok(&engine, who, "SELECT id, name FROM staff LIMIT 0")
                .await
                .is_empty()
        );
        assert_eq!(
            ok(&engine, who, "SELECT name FROM staff s WHERE EXISTS (SELECT 1 FROM staff t WHERE t.id = s.id + 1)").await,
            ["Ada"]
        );
        for sql in [
            "SELECT * FROM staff",
            "SELECT salary FROM staff",
            "SELECT id FROM staff WHERE salary > 150",
            "SELECT name FROM staff ORDER BY salary",
            "SELECT sum(salary) FROM staff",
            "SELECT id FROM staff s WHERE EXISTS (SELECT 1 FROM staff t WHERE t.salary = s.id * 100)",
            "CREATE TABLE copy AS SELECT * FROM staff",
            // No rows, but the columns' names and types.
            "SELECT * FROM staff LIMIT 0",
            "SELECT salary FROM staff WHERE false",
        ] {
            let e = refused(&engine, who, sql).await;
            assert_eq!(
                (e.code(), e.message()),
                (
                    ErrorCode::PermissionDenied,
                    "Access Denied: Cannot select from columns [salary] in table iceberg.default.staff"
                ),
                "{sql}"
            );
        }
    }
    let e = refused(&engine, &dave, "SELECT id FROM staff").await;
    assert_eq!(e.code(), ErrorCode::NotFound, "{}", e.message());

    // Listings and DESCRIBE show a reader by columns only the columns they may read.
    let listings = [
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'staff' ORDER BY ordinal_position",
        "SELECT column_name FROM system.jdbc.columns WHERE table_name = 'staff' ORDER BY ordinal_position",
        "DESCRIBE staff",
        "SHOW COLUMNS FROM staff",
    ];
    let first = |rows: Vec<String>| -> Vec<String> {
        rows.iter()
            .map(|r| r.split('|').next().unwrap_or_default().to_string())
            .collect()
    };
    for sql in listings {
        assert_eq!(
            first(ok(&engine, &alice, sql).await),
            ["id", "name", "salary"],
            "{sql}"
        );
        for who in [&bob, &carol] {
            assert_eq!(first(ok(&engine, who, sql).await), ["id", "name"], "{sql}");
        }
    }
    for sql in &listings[..2] {
        assert!(ok(&engine, &dave, sql).await.is_empty(), "{sql}");
    }
    let create = ok(&engine, &bob, "SHOW CREATE TABLE staff")
        .await
        .join("\n");
    assert!(
        create.contains("name") && !create.contains("salary"),
        "{create}"
    );
    // The files' column bounds would show the other columns: refused to a reader by columns.
    let e = refused(&engine, &bob, "SELECT count(*) FROM \"staff$files\"").await;
    assert_eq!(
        (e.code(), e.message()),
        (
            ErrorCode::PermissionDenied,
            "Access Denied: Cannot select from table iceberg.default.staff$files: you may read only some columns of iceberg.default.staff"
        )
    );

    // Grants follow the field id.
    ok(
        &engine,
        &alice,
        "GRANT SELECT (salary) ON TABLE staff TO USER bob",
    )
    .await;
    assert_eq!(
        ok(&engine, &bob, "SELECT sum(salary) FROM staff").await,
        ["300"]
    );
    ok(
        &engine,
        &alice,
        "ALTER TABLE staff RENAME COLUMN name TO full_name",
    )
    .await;
    assert_eq!(
        ok(&engine, &bob, "SELECT full_name FROM staff ORDER BY id").await,
        ["Ada", "Bo"]
    );
    ok(&engine, &alice, "ALTER TABLE staff DROP COLUMN salary").await;
    ok(
        &engine,
        &alice,
        "ALTER TABLE staff ADD COLUMN salary bigint",
    )
    .await;
    let e = refused(&engine, &bob, "SELECT salary FROM staff").await;
    assert_eq!(
        e.message(),
        "Access Denied: Cannot select from columns [salary] in table iceberg.default.staff"
    );
    assert_eq!(
        ok(&engine, &carol, "SELECT count(salary) FROM staff").await,
        ["0"]
    );
    ok(
        &engine,
        &alice,
        "REVOKE SELECT (id) ON TABLE staff FROM USER bob",
    )
    .await;
    let e = refused(&engine, &bob, "SELECT id, full_name FROM staff").await;
    assert_eq!(
        e.message(),
        "Access Denied: Cannot select from columns [id] in table iceberg.default.staff"
    );

    for (who, sql, code, message) in [
        (
            &bob,
            "GRANT SELECT (full_name) ON TABLE staff TO USER dave",
            ErrorCode::PermissionDenied,
            "Access Denied: Cannot grant privileges on iceberg.default.staff",
        ),
        (
            &dave,
            "GRANT SELECT (full_name) ON TABLE staff TO USER dave",
            ErrorCode::NotFound,
            "table 'iceberg.default.staff' does not exist",
        ),
        (
            &alice,
            "GRANT SELECT (nope) ON TABLE staff TO USER bob",
            ErrorCode::NotFound,
            "column 'nope' does not exist in table iceberg.default.staff",
        ),
        (
            &alice,
            "GRANT SELECT (id), INSERT ON TABLE staff TO USER bob",
            ErrorCode::Unsupported,
            "SELECT on columns is granted on its own: GRANT SELECT (a, b) ON TABLE t TO …",
        ),
        (
            &alice,
            "GRANT SELECT (id) ON SCHEMA default TO USER bob",
            ErrorCode::Unsupported,
            "SELECT on columns is granted ON TABLE name",
        ),
        (
            &alice,
            "GRANT SELECT (id) ON TABLE staff TO USER bob WITH GRANT OPTION",
            ErrorCode::Unsupported,
            "privileges on columns are granted without GRANT OPTION",
        ),
    ] {
        let e = refused(&engine, who, sql).await;
        assert_eq!((e.code(), e.message()), (code, message), "{sql}");
    }
}

/// Tags: an admin gives a tag masks, a table's owner tags columns, and every tagged column is
/// masked for the callers the tag's masks name (a column's own mask wins; a tag's mask that does
/// not fit a column's type shows NULL); tags follow the column's field id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_bring_their_masks_to_every_tagged_column() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = governed_engine(dir.path());
    let ada = session(&engine, "ada", &["sqe_admin"]);
    let alice = session(&engine, "alice", &[]);
    let bob = session(&engine, "bob", &[]);
    let carol = session(&engine, "carol", &["support"]);
    ok(
        &engine,
        &ada,
        "GRANT CREATE ON SCHEMA default TO USER alice",
    )
    .await;
    for sql in [
        "CREATE TABLE t1 AS SELECT 1 AS id, 'ada@example.com' AS email, DATE '1990-05-17' AS born",
        "CREATE TABLE t2 AS SELECT 2 AS id, 'bo@example.com' AS email",
        "GRANT SELECT ON TABLE t1 TO ROLE support",
        "GRANT SELECT ON TABLE t2 TO ROLE support",
        "GRANT SELECT ON TABLE t1 TO USER bob",
        "ALTER TABLE t1 ALTER COLUMN email SET TAG pii",
        "ALTER TABLE t1 ALTER COLUMN born SET TAG pii",
        "ALTER TABLE t2 ALTER COLUMN email SET TAG pii",
    ] {
        ok(&engine, &alice, sql).await;
    }
    ok(
        &engine,
        &ada,
        "ALTER TAG pii SET MASK SHOW FIRST 1 FOR ROLE support",
    )
    .await;
    assert_eq!(
        ok(&engine, &carol, "SELECT id, email, born FROM t1").await,
        ["1|axx@xxxxxxx.xxx|NULL"]
    );
    assert_eq!(
        ok(&engine, &carol, "SELECT email FROM t2").await,
        ["bx@xxxxxxx.xxx"]
    );
    assert_eq!(
        ok(&engine, &bob, "SELECT email, born FROM t1").await,
        ["ada@example.com|1990-05-17"]
    );
    ok(
        &engine,
        &alice,
        "ALTER TABLE t2 ALTER COLUMN email SET MASK REDACT FOR ROLE support",
    )
    .await;
    assert_eq!(ok(&engine, &carol, "SELECT email FROM t2").await, ["xxxx"]);
    ok(
        &engine,
        &alice,
        "ALTER TABLE t1 RENAME COLUMN email TO mail",
    )
    .await;
    assert_eq!(
        ok(&engine, &carol, "SELECT mail FROM t1").await,
        ["axx@xxxxxxx.xxx"]
    );
    assert_eq!(
        ok(&engine, &alice, "SHOW TAGS ON t1").await,
        ["born|pii", "mail|pii"]
    );
    assert_eq!(
        ok(&engine, &alice, "SHOW MASKS ON t1").await,
        [
            "born|SHOW FIRST 1 (tag pii)|ROLE|support",
            "mail|SHOW FIRST 1 (tag pii)|ROLE|support"
        ]
    );
    ok(
        &engine,
        &alice,
        "ALTER TABLE t1 ALTER COLUMN mail UNSET TAG pii",
    )
    .await;
    assert_eq!(
        ok(&engine, &carol, "SELECT mail FROM t1").await,
        ["ada@example.com"]
    );
    ok(&engine, &ada, "ALTER TAG pii DROP MASK").await;
    assert_eq!(
        ok(&engine, &carol, "SELECT born FROM t1").await,
        ["1990-05-17"]
    );

    for (who, sql, code, message) in [
        (
            &alice,
            "ALTER TAG pii SET MASK NULL FOR ROLE support",
            ErrorCode::PermissionDenied,
            "Access Denied: only an admin sets a tag's masks",
        ),
        (
            &bob,
            "ALTER TABLE t1 ALTER COLUMN born SET TAG pii",
            ErrorCode::PermissionDenied,
            "Access Denied: only the owner of iceberg.default.t1 or an admin may do this",
        ),
        (
            &ada,
            "ALTER TAG pii SET MASK USING (upper(email)) FOR ROLE support",
            ErrorCode::Unsupported,
            "a tag's mask is one of NULL, REDACT, HASH, SHOW FIRST, SHOW LAST and TRUNCATE TO (an expression names one table's columns)",
        ),
        (
            &ada,
            "ALTER TAG pii DROP MASK FOR ROLE nobody",
            ErrorCode::NotFound,
            "tag 'pii' has no such mask",
        ),
        (
            &ada,
            &format!(
                "ALTER TAG {} SET MASK NULL FOR ROLE support",
                "t".repeat(256)
            ),
            ErrorCode::InvalidInput,
            "a tag's name is 1 to 255 characters",
        ),
        (
            &alice,
            &format!(
                "ALTER TABLE t1 ALTER COLUMN born SET TAG {}",
                "t".repeat(256)
            ),
            ErrorCode::InvalidInput,
            "a tag's name is 1 to 255 characters",
        ),
    ] {
        let e = refused(&engine, who, sql).await;
        assert_eq!((e.code(), e.message()), (code, message), "{sql}");
    }
}

/// Ranger's policy download for a Hive service, as its admin server serves it: select for bob and
/// the group `support`, a row filter for bob, masks on `seller` (upper case for bob, NULL for
/// `support`).
fn ranger_download(version: i64, region: &str) -> String {
    serde_json::json!({
        "serviceName": "hive",
        "serviceId": 1,
        "policyVersion": version,
        "policies": [
            {
                "id": 1, "name": "read default", "isEnabled": true, "policyType": 0,
                "resources": {
                    "database": {"values": ["default"], "isExcludes": false},
                    "table": {"values": ["*"], "isExcludes": false},
                    "column": {"values": ["*"], "isExcludes": false}
                },
                "policyItems": [
                    {"accesses": [{"type": "select", "isAllowed": true}], "users": ["bob"], "groups": ["support"]}
                ],
                "denyPolicyItems": [],
                "allowExceptions": [],
                "denyExceptions": []
            },
            {
                "id": 2, "name": "bob's region", "isEnabled": true, "policyType": 2,
                "resources": {
                    "database": {"values": ["default"]},
                    "table": {"values": ["sales"]}
                },
                "rowFilterPolicyItems": [
                    {"accesses": [{"type": "select", "isAllowed": true}], "users": ["bob"],
                     "rowFilterInfo": {"filterExpr": format!("region = '{region}'")}}
                ]
            },
            {
                "id": 3, "name": "sellers", "isEnabled": true, "policyType": 1,
                "resources": {
                    "database": {"values": ["default"]},
                    "table": {"values": ["sal*"]},
                    "column": {"values": ["seller"]}
                },
                "dataMaskPolicyItems": [
                    {"accesses": [{"type": "select", "isAllowed": true}], "users": ["bob"],
                     "dataMaskInfo": {"dataMaskType": "CUSTOM", "valueExpr": "upper({col})"}},
                    {"accesses": [{"type": "select", "isAllowed": true}], "groups": ["support"],
                     "dataMaskInfo": {"dataMaskType": "MASK_NULL"}}
                ]
            },
            {
                "id": 4, "name": "secret is carol's", "isEnabled": true, "policyType": 0,
                "isDenyAllElse": true,
                "resources": {
                    "database": {"values": ["default"]},
                    "table": {"values": ["secret"]},
                    "column": {"values": ["*"]}
                },
                "policyItems": [
                    {"accesses": [{"type": "select", "isAllowed": true}], "users": ["carol"]}
                ]
            },
            {
                "id": 5, "name": "a function, no database", "isEnabled": true, "policyType": 0,
                "resources": {
                    "database": {"values": ["*"]},
                    "udf": {"values": ["my_udf"]}
                },
                "policyItems": [
                    {"accesses": [{"type": "create", "isAllowed": true}], "groups": ["public"]}
                ]
            }
        ]
    })
    .to_string()
}

/// `[access] engine = "ranger"`: Ranger's policies decide who reads what, filter rows and mask
/// columns; a change to them takes effect within the refresh interval; when the download fails the
/// last policies hold until the grace period has passed, then every statement on the catalog is
/// refused until a download works again. (A fixture serves Ranger's download format: no Ranger
/// server runs here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranger_policies_decide_and_fail_closed_past_their_grace() {
    use axum::response::IntoResponse;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    type Served = Arc<Mutex<Option<(i64, String)>>>;
    let served: Served = Arc::new(Mutex::new(Some((1, ranger_download(1, "eu")))));
    let route = {
        let served = served.clone();
        move |query: axum::extract::Query<HashMap<String, String>>| {
            let served = served.clone();
            async move {
                let current = served.lock().unwrap_or_else(|p| p.into_inner()).clone();
                match current {
                    None => axum::http::StatusCode::SERVICE_UNAVAILABLE.into_response(),
                    // Past the 64 MB cap, sent without a length: 65 chunks of 1 MB.
                    Some((_, body)) if body == "endless" => {
                        let chunk = axum::body::Bytes::from(vec![b' '; 1 << 20]);
                        let chunks = (0..65).map(move |_| Ok::<_, std::io::Error>(chunk.clone()));
                        axum::body::Body::from_stream(futures::stream::iter(chunks)).into_response()
                    }
                    Some((version, _))
                        if query.get("lastKnownVersion") == Some(&version.to_string()) =>
                    {
                        axum::http::StatusCode::NOT_MODIFIED.into_response()
                    }
                    Some((_, body)) => body.into_response(),
                }
            }
        }
    };
    let app = axum::Router::new().route(
        "/service/plugins/policies/download/hive",
        axum::routing::get(route),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let address = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = engine_in(
        dir.path(),
        EngineConfig {
            admin_roles: vec!["sqe_admin".into()],
            access_default: sqe_engine::AccessDefault::Deny,
            ranger: Some(sqe_engine::RangerConfig {
                policy_url: format!("http://{address}/service/plugins/policies/download/hive"),
                catalogs: vec!["iceberg".into()],
                refresh: std::time::Duration::from_millis(200),
                grace: std::time::Duration::from_secs(2),
                basic: None,
            }),
            ..EngineConfig::default()
        },
    );
    let ada = session(&engine, "ada", &["sqe_admin"]);
    let alice = session(&engine, "alice", &[]);
    let bob = session(&engine, "bob", &[]);
    let carol = session(&engine, "carol", &["support"]);
    ok(
        &engine,
        &ada,
        "CREATE TABLE sales AS SELECT * FROM (VALUES (1, 'eu', 'bob'), (2, 'us', 'bob'), \
         (3, 'eu', 'carol'), (4, 'us', 'carol')) AS v(id, region, vendor)",
    )
    .await;
    let first = ok(&engine, &ada, "SELECT snapshot_id FROM \"sales$snapshots\"").await;
    ok(
        &engine,
        &ada,
        "ALTER TABLE sales RENAME COLUMN vendor TO seller",
    )
    .await;
    ok(&engine, &ada, "CREATE TABLE secret AS SELECT 42 AS answer").await;
    let read = "SELECT id, seller FROM sales ORDER BY id";
    // Waits (up to 10 s) for `who` to get `want` from `sql`.
    async fn eventually(engine: &Engine, who: &Session, sql: &str, want: &[&str]) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let got = rows(engine, who, sql).await;
            if got.as_ref().is_ok_and(|r| r == want) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{sql}: still {got:?}, not {want:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    eventually(&engine, &bob, read, &["1|BOB", "3|CAROL"]).await;
    assert_eq!(
        ok(&engine, &carol, read).await,
        ["1|NULL", "2|NULL", "3|NULL", "4|NULL"]
    );
    assert_eq!(
        ok(&engine, &ada, read).await,
        ["1|bob", "2|bob", "3|carol", "4|carol"]
    );
    let e = refused(&engine, &alice, read).await;
    assert_eq!(
        (e.code(), e.message()),
        (
            ErrorCode::NotFound,
            "table 'iceberg.default.sales' not found"
        )
    );
    assert!(ok(&engine, &alice, "SHOW TABLES").await.is_empty());
    let e = refused(&engine, &bob, "INSERT INTO sales VALUES (5, 'eu', 'bob')").await;
    assert_eq!(
        (e.code(), e.message()),
        (
            ErrorCode::PermissionDenied,
            "Access Denied: Cannot insert into table iceberg.default.sales"
        )
    );
    // Masks follow the column, not its name in an older snapshot; metadata tables of a masked
    // table are refused.
    assert_eq!(
        ok(
            &engine,
            &carol,
            &format!(
                "SELECT vendor FROM sales FOR VERSION AS OF {} ORDER BY id",
                first[0]
            )
        )
        .await,
        ["NULL", "NULL", "NULL", "NULL"]
    );
    let e = refused(&engine, &carol, "SELECT * FROM \"sales$partitions\"").await;
    assert_eq!(e.code(), ErrorCode::PermissionDenied, "{}", e.message());
    // isDenyAllElse: the table is carol's alone, whatever the broader policy says.
    assert_eq!(
        ok(&engine, &carol, "SELECT answer FROM secret").await,
        ["42"]
    );
    let e = refused(&engine, &bob, "SELECT answer FROM secret").await;
    assert_eq!(e.code(), ErrorCode::NotFound, "{}", e.message());
    // A policy on a function grants nothing on databases.
    let e = refused(&engine, &alice, "CREATE SCHEMA mine").await;
    assert_eq!(e.code(), ErrorCode::PermissionDenied, "{}", e.message());
    // SQE keeps no policies of its own for a catalog Ranger governs.
    let e = refused(&engine, &ada, "GRANT SELECT ON TABLE sales TO USER alice").await;
    assert_eq!(e.code(), ErrorCode::Unsupported, "{}", e.message());

    // A change takes effect within the refresh interval.
    *served.lock().unwrap_or_else(|p| p.into_inner()) = Some((2, ranger_download(2, "us")));
    eventually(&engine, &bob, read, &["2|BOB", "4|CAROL"]).await;

    // The download failing: the last policies hold for the grace period, then nothing does.
    *served.lock().unwrap_or_else(|p| p.into_inner()) = None;
    assert_eq!(ok(&engine, &bob, read).await, ["2|BOB", "4|CAROL"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let e = loop {
        match rows(&engine, &bob, read).await {
            Err(e) => break e,
            Ok(_) => {
                assert!(std::time::Instant::now() < deadline, "still served");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(
        (e.code(), e.message()),
        (
            ErrorCode::PermissionDenied,
            "Access Denied: the Ranger policies are unavailable (download answered 503 Service Unavailable)"
        )
    );
    *served.lock().unwrap_or_else(|p| p.into_inner()) = Some((3, ranger_download(3, "eu")));
    eventually(&engine, &bob, read, &["1|BOB", "3|CAROL"]).await;

    // A download past 64 MB is a failed one: never read whole, and past the grace nothing holds.
    *served.lock().unwrap_or_else(|p| p.into_inner()) = Some((4, "endless".to_string()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let e = loop {
        match rows(&engine, &bob, read).await {
            Err(e) => break e,
            Ok(got) => {
                assert_eq!(got, ["1|BOB", "3|CAROL"]);
                assert!(std::time::Instant::now() < deadline, "still served");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(
        (e.code(), e.message()),
        (
            ErrorCode::PermissionDenied,
            "Access Denied: the Ranger policies are unavailable (the download is larger than 67108864 bytes)"
        )
    );
}

/// `ON CATALOG`: a privilege on the whole catalog covers every schema and table in it; a DENY on
/// the catalog wins over a table's GRANT; only an admin grants on a catalog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_grants_cover_every_schema_and_table() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = governed_engine(dir.path());
    let ada = session(&engine, "ada", &["sqe_admin"]);
    let bob = session(&engine, "bob", &[]);
    let carol = session(&engine, "carol", &[]);
    ok(&engine, &ada, "CREATE SCHEMA other").await;
    ok(&engine, &ada, "CREATE TABLE t AS SELECT 1 AS x").await;
    ok(&engine, &ada, "CREATE TABLE other.u AS SELECT 2 AS y").await;
    let e = refused(&engine, &bob, "SELECT x FROM t").await;
    assert_eq!(e.code(), ErrorCode::NotFound, "{}", e.message());

    ok(&engine, &ada, "GRANT SELECT ON CATALOG iceberg TO USER bob").await;
    assert_eq!(ok(&engine, &bob, "SELECT x FROM t").await, ["1"]);
    assert_eq!(ok(&engine, &bob, "SELECT y FROM other.u").await, ["2"]);
    let e = refused(&engine, &bob, "INSERT INTO t VALUES (3)").await;
    assert_eq!(
        e.message(),
        "Access Denied: Cannot insert into table iceberg.default.t"
    );
    assert_eq!(
        ok(&engine, &bob, "SHOW GRANTS").await,
        ["bob|USER|iceberg|||GRANT SELECT|NO"]
    );

    ok(&engine, &ada, "GRANT SELECT ON TABLE t TO USER carol").await;
    ok(
        &engine,
        &ada,
        "DENY SELECT ON CATALOG iceberg TO USER carol",
    )
    .await;
    let e = refused(&engine, &carol, "SELECT x FROM t").await;
    assert_eq!(
        e.message(),
        "Access Denied: Cannot select from table iceberg.default.t"
    );

    ok(
        &engine,
        &ada,
        "REVOKE SELECT ON CATALOG iceberg FROM USER bob",
    )
    .await;
    let e = refused(&engine, &bob, "SELECT x FROM t").await;
    assert_eq!(e.code(), ErrorCode::NotFound, "{}", e.message());

    for (who, sql, code, message) in [
        (
            &bob,
            "GRANT SELECT ON CATALOG iceberg TO USER carol",
            ErrorCode::PermissionDenied,
            "Access Denied: Cannot grant privileges on iceberg",
        ),
        (
            &ada,
            "GRANT SELECT ON CATALOG nope TO USER carol",
            ErrorCode::NotFound,
            "catalog 'nope' does not exist",
        ),
    ] {
        let e = refused(&engine, who, sql).await;
        assert_eq!((e.code(), e.message()), (code, message), "{sql}");
    }
}

/// A statement SQE reads by its first words before parsing cannot be made to split inside a
/// character: `SHOW;` followed by Unicode spaces is no `SHOW STATS`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_words_with_odd_spaces_are_a_syntax_error() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = governed_engine(dir.path());
    let ada = session(&engine, "ada", &["sqe_admin"]);
    for sql in [
        "SHOW;\u{85}\u{2003}STATS FOR t",
        "SHOW;\u{2003}GRANTS",
        "SHOW;\u{3000}FUNCTIONS",
    ] {
        let e = refused(&engine, &ada, sql).await;
        assert_eq!(e.code(), ErrorCode::InvalidInput, "{sql}: {}", e.message());
        assert!(
            e.message().starts_with("syntax error: "),
            "{sql}: {}",
            e.message()
        );
    }
}

/// What one user can make a server keep, over the protocols as the gateway serves them: each
/// request runs as the user its `x-test-user` header names (where the gateway's authentication
/// layer would have put the signed-in principal).
mod kept {
    use std::sync::Arc;

    use arrow_flight::decode::FlightRecordBatchStream;
    use arrow_flight::error::FlightError;
    use arrow_flight::flight_service_client::FlightServiceClient;
    use arrow_flight::sql::{
        ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
        ActionCreatePreparedStatementResult, Any, CommandPreparedStatementQuery,
        CommandStatementQuery, ProstMessageExt,
    };
    use arrow_flight::{Action, FlightDescriptor, FlightInfo};
    use futures::TryStreamExt;
    use prost::Message;
    use sqe_engine::EngineConfig;
    use sqe_flight_sql::{FlightSqlConfig, SqeFlightSql};
    use sqe_sessions::Principal;
    use sqe_trino::{TrinoConfig, TrinoService};
    use tonic::transport::Channel;
    use tonic::{Code, Status};

    const USER_HEADER: &str = "x-test-user";

    async fn as_named_user(
        mut request: axum::extract::Request,
        next: axum::middleware::Next,
    ) -> axum::response::Response {
        let user = request
            .headers()
            .get(USER_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if let Some(user) = user {
            request.extensions_mut().insert(Principal::new(user));
        }
        next.run(request).await
    }

    /// Serves `router` on a port of its own until the test ends; its address.
    async fn serve(router: axum::Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let router = router.layer(axum::middleware::from_fn(as_named_user));
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        addr.to_string()
    }

    /// A Flight SQL client calling as `user`.
    struct FlightUser {
        client: FlightServiceClient<Channel>,
        user: &'static str,
    }

    impl FlightUser {
        async fn connect(addr: &str, user: &'static str) -> Self {
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
                .unwrap_or_else(|e| panic!("{e}"))
                .connect()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            Self {
                client: FlightServiceClient::new(channel),
                user,
            }
        }

        fn request<T>(&self, body: T) -> tonic::Request<T> {
            let mut request = tonic::Request::new(body);
            let user = self.user.parse().unwrap_or_else(|e| panic!("{e}"));
            request.metadata_mut().insert(USER_HEADER, user);
            request
        }

        async fn act(&mut self, kind: &str, body: Vec<u8>) -> Result<Vec<Vec<u8>>, Status> {
            let action = self.request(Action::new(kind, body));
            let results = self.client.do_action(action).await?.into_inner();
            let results: Vec<arrow_flight::Result> = results.try_collect().await?;
            Ok(results.into_iter().map(|r| r.body.to_vec()).collect())
        }

        async fn prepare(&mut self, sql: &str) -> Result<Vec<u8>, Status> {
            let command = ActionCreatePreparedStatementRequest {
                query: sql.to_string(),
                transaction_id: None,
            };
            let answers = self
                .act("CreatePreparedStatement", command.as_any().encode_to_vec())
                .await?;
            let created: Option<ActionCreatePreparedStatementResult> = answers
                .first()
                .and_then(|body| Any::decode(body.as_slice()).ok())
                .and_then(|any| any.unpack().ok().flatten());
            let created = created.unwrap_or_else(|| panic!("no prepared statement in {answers:?}"));
            Ok(created.prepared_statement_handle.to_vec())
        }

        async fn close(&mut self, handle: Vec<u8>) {
            let command = ActionClosePreparedStatementRequest {
                prepared_statement_handle: handle.into(),
            };
            let closed = self
                .act("ClosePreparedStatement", command.as_any().encode_to_vec())
                .await;
            assert_eq!(plain(closed), Ok(Vec::new()));
        }

        async fn info(&mut self, command: impl ProstMessageExt) -> Result<FlightInfo, Status> {
            let descriptor = FlightDescriptor::new_cmd(command.as_any().encode_to_vec());
            let request = self.request(descriptor);
            Ok(self.client.get_flight_info(request).await?.into_inner())
        }

        /// The first column of a result's rows, as text.
        async fn fetch(&mut self, info: FlightInfo) -> Vec<String> {
            let ticket = info
                .endpoint
                .first()
                .and_then(|e| e.ticket.clone())
                .unwrap_or_else(|| panic!("no ticket in {info:?}"));
            let request = self.request(ticket);
            let data = self
                .client
                .do_get(request)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .into_inner()
                .map_err(|e| FlightError::Tonic(Box::new(e)));
            let batches: Vec<arrow::array::RecordBatch> =
                FlightRecordBatchStream::new_from_flight_data(data)
                    .try_collect()
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
            let mut values = Vec::new();
            for batch in &batches {
                for row in 0..batch.num_rows() {
                    values.push(
                        arrow::util::display::array_value_to_string(batch.column(0), row)
                            .unwrap_or_else(|e| panic!("{e}")),
                    );
                }
            }
            values
        }

        async fn run_prepared(&mut self, handle: &[u8]) -> Vec<String> {
            let command = CommandPreparedStatementQuery {
                prepared_statement_handle: handle.to_vec().into(),
            };
            let info = self.info(command).await.unwrap_or_else(|e| panic!("{e}"));
            self.fetch(info).await
        }
    }

    fn statement(sql: &str) -> CommandStatementQuery {
        CommandStatementQuery {
            query: sql.to_string(),
            transaction_id: None,
        }
    }

    /// A call's answer, its error as code and message (a `Status` compares with nothing).
    fn plain<T>(result: Result<T, Status>) -> Result<T, (Code, String)> {
        result.map_err(|status| (status.code(), status.message().to_string()))
    }

    fn refusal(result: Result<impl std::fmt::Debug, Status>) -> (Code, String) {
        match result {
            Ok(got) => panic!("expected a refusal, got {got:?}"),
            Err(status) => (status.code(), status.message().to_string()),
        }
    }

    /// `SELECT 1` padded with a comment to exactly `bytes` bytes.
    fn select_one_of(bytes: usize) -> String {
        let head = "SELECT 1 AS one --";
        format!("{head}{}", "x".repeat(bytes - head.len()))
    }

    const PREPARED_RELEASE: &str = "close one (ClosePreparedStatement), or wait until one has been unused for [server] prepared_statement_idle_secs";

    /// A statement longer than SQE runs is refused when it is prepared, and kept nowhere; bob's
    /// prepared statements are capped in number and in bytes, results he does not fetch and
    /// sessions in number, each refusal naming the cap and its setting; alice, beside him, goes on
    /// preparing and running; and a refused statement never ran.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn flight_sql_keeps_only_so_much_for_one_user() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let engine = Arc::new(super::engine_in(dir.path(), EngineConfig::default()));
        let flight = SqeFlightSql::new(
            engine.clone(),
            FlightSqlConfig {
                max_prepared_per_user: 3,
                max_prepared_bytes_per_user: 2_500_000,
                max_results_per_user: 2,
                max_sessions_per_user: 1,
                ..FlightSqlConfig::new(engine.default_catalog())
            },
        );
        let routes = tonic::service::Routes::new(sqe_flight_sql::server(flight));
        let addr = serve(routes.into_axum_router()).await;
        let mut bob = FlightUser::connect(&addr, "bob").await;
        let mut alice = FlightUser::connect(&addr, "alice").await;

        // 15 MB: within gRPC's message limit, past the statement limit.
        let huge = select_one_of(15_000_000);
        assert_eq!(
            refusal(bob.prepare(&huge).await),
            (
                Code::InvalidArgument,
                "statement is 15000000 bytes long, more than the 1000000 bytes SQE accepts"
                    .to_string()
            )
        );
        // The longest statement SQE runs is prepared, and runs.
        let big = bob
            .prepare(&select_one_of(1_000_000))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(bob.run_prepared(&big).await, vec!["1"]);
        let _second = bob
            .prepare(&select_one_of(1_000_000))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            refusal(bob.prepare(&select_one_of(1_000_000)).await),
            (
                Code::ResourceExhausted,
                format!(
                    "bob's Flight SQL prepared statements hold 2000000 bytes, and 1000000 more would take them past the 2500000 bytes one user's may hold ([server] max_prepared_statement_bytes_per_user): {PREPARED_RELEASE}"
                )
            )
        );
        let small = bob
            .prepare("SELECT 2")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            refusal(bob.prepare("SELECT 3").await),
            (
                Code::ResourceExhausted,
                format!(
                    "bob holds 3 Flight SQL prepared statements, the most one user may ([server] max_prepared_statements_per_user): {PREPARED_RELEASE}"
                )
            )
        );
        // Alice is not held by bob's caps.
        let hers = alice
            .prepare("SELECT 1 AS one")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(alice.run_prepared(&hers).await, vec!["1"]);
        // What bob closes he may use again.
        bob.close(big).await;
        let third = bob
            .prepare("SELECT 3")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(bob.run_prepared(&third).await, vec!["3"]);
        assert_eq!(bob.run_prepared(&small).await, vec!["2"]);

        // Results he does not fetch: two, and a third is refused before it runs.
        let first = bob
            .info(statement("SELECT 10"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let _unread = bob
            .info(statement("SELECT 11"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            refusal(bob.info(statement("CREATE SCHEMA bob_refused")).await),
            (
                Code::ResourceExhausted,
                "bob holds 2 Flight SQL results not yet fetched, the most one user may ([server] max_flight_results_per_user): fetch (DoGet) or cancel one first".to_string()
            )
        );
        assert_eq!(
            alice
                .info(statement("SELECT 12"))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Ok(())
        );
        assert_eq!(bob.fetch(first).await, vec!["10"]);
        let schemas = super::ok(
            &engine,
            &super::session(&engine, "alice", &[]),
            "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'bob%'",
        )
        .await;
        assert_eq!(schemas, Vec::<String>::new(), "the refused statement ran");

        // Sessions: one, and a second is refused; alice opens her own.
        assert_eq!(
            plain(bob.act("SetSessionOptions", Vec::new()).await),
            Ok(vec![Vec::new()])
        );
        assert_eq!(
            refusal(bob.act("SetSessionOptions", Vec::new()).await),
            (
                Code::ResourceExhausted,
                "bob holds 1 Flight SQL sessions, the most one user may ([server] max_flight_sessions_per_user): close one (CloseSession), or wait until one has been unused for an hour".to_string()
            )
        );
        assert_eq!(
            plain(alice.act("SetSessionOptions", Vec::new()).await),
            Ok(vec![Vec::new()])
        );
    }

    /// Bob's queries whose last page he has not read are capped, and one past the cap is refused
    /// before it runs; alice's run beside them; a PREPARE longer than SQE runs is refused.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn trino_keeps_only_so_many_queries_for_one_user() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let engine = Arc::new(super::engine_in(dir.path(), EngineConfig::default()));
        let trino = TrinoService::new(
            engine.clone(),
            TrinoConfig {
                max_queries_per_user: 2,
                ..TrinoConfig::new(engine.default_catalog())
            },
        );
        let base = format!("http://{}", serve(sqe_trino::router(trino)).await);
        let http = reqwest::Client::new();
        let post = |user: &'static str, sql: String| {
            let request = http
                .post(format!("{base}/v1/statement"))
                .header("X-Trino-User", user)
                .body(sql);
            async move {
                let response = request.send().await.unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(response.status(), reqwest::StatusCode::OK);
                response
                    .json::<serde_json::Value>()
                    .await
                    .unwrap_or_else(|e| panic!("{e}"))
            }
        };
        let error = |body: &serde_json::Value| {
            (
                body["error"]["errorName"].as_str().map(str::to_string),
                body["error"]["message"].as_str().map(str::to_string),
            )
        };
        let read_to_end = |mut body: serde_json::Value| {
            let http = http.clone();
            async move {
                let mut rows = Vec::new();
                while let Some(next) = body["nextUri"].as_str().map(str::to_string) {
                    if let Some(data) = body["data"].as_array() {
                        rows.extend(data.iter().cloned());
                    }
                    body = http
                        .get(next)
                        .header("X-Trino-User", "bob")
                        .send()
                        .await
                        .unwrap_or_else(|e| panic!("{e}"))
                        .json()
                        .await
                        .unwrap_or_else(|e| panic!("{e}"));
                }
                if let Some(data) = body["data"].as_array() {
                    rows.extend(data.iter().cloned());
                }
                (rows, body)
            }
        };

        let first = post("bob", "SELECT 1".into()).await;
        let _second = post("bob", "SELECT 2".into()).await;
        let refused = post("bob", "CREATE SCHEMA bob_refused".into()).await;
        assert_eq!(
            error(&refused),
            (
                Some("GENERIC_INSUFFICIENT_RESOURCES".to_string()),
                Some("bob holds 2 Trino queries whose last page is unread, the most one user may ([server] max_trino_queries_per_user): read one to its end or cancel it, or wait until one has been unpolled for [server] client_timeout_secs".to_string())
            )
        );
        assert!(refused.get("nextUri").is_none(), "{refused}");
        // Alice is not held by bob's cap.
        let hers = post("alice", "SELECT 42".into()).await;
        assert_eq!(hers["error"], serde_json::Value::Null, "{hers}");
        // Reading one to its end makes room.
        let (rows, _) = read_to_end(first).await;
        assert_eq!(rows, vec![serde_json::json!([1])]);
        let again = post("bob", "SELECT 3".into()).await;
        assert_eq!(error(&again), (None, None));
        let schemas = super::ok(
            &engine,
            &super::session(&engine, "alice", &[]),
            "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'bob%'",
        )
        .await;
        assert_eq!(schemas, Vec::<String>::new(), "the refused statement ran");

        // PREPARE: the server keeps the statement until its answer is read; what could never run
        // is refused there.
        let long = post(
            "alice",
            format!("PREPARE st FROM {}", select_one_of(1_000_001)),
        )
        .await;
        assert_eq!(
            error(&long),
            (
                Some("GENERIC_USER_ERROR".to_string()),
                Some(
                    "statement is 1000001 bytes long, more than the 1000000 bytes SQE accepts"
                        .to_string()
                )
            )
        );
    }
}

/// Table maintenance deletes files, so it is checked as an attacker would try it: another user
/// without ALTER on the table (for its branches and tags too), a table made to share another's
/// folder (or the warehouse's), a table whose metadata names another table's data file, and
/// malformed arguments. Nothing outside
/// the table's own files goes, and the other tables read as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_deletes_only_its_own_tables_files() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = engine_in(
        dir.path(),
        EngineConfig {
            admin_roles: vec!["sqe_admin".into()],
            access_default: sqe_engine::AccessDefault::Deny,
            maintenance_min_retention: Some(std::time::Duration::ZERO),
            ..EngineConfig::default()
        },
    );
    let ada = session(&engine, "ada", &["sqe_admin"]);
    let alice = session(&engine, "alice", &[]);
    let bob = session(&engine, "bob", &[]);
    for user in ["alice", "bob"] {
        let grant = format!("GRANT CREATE ON SCHEMA default TO USER {user}");
        ok(&engine, &ada, &grant).await;
    }
    ok(&engine, &alice, "CREATE TABLE a (id bigint)").await;
    for id in 1..=3 {
        ok(&engine, &alice, &format!("INSERT INTO a VALUES ({id})")).await;
    }
    ok(&engine, &alice, "GRANT SELECT ON a TO USER bob").await;

    // Bob reads alice's table but may not maintain it, in either spelling, nor set or drop its
    // branches and tags; alice may, and bob reads them.
    ok(&engine, &alice, "ALTER TABLE a CREATE TAG v1").await;
    for sql in [
        "ALTER TABLE a EXECUTE optimize",
        "ALTER TABLE a EXECUTE expire_snapshots(retention_threshold => '0s')",
        "ALTER TABLE a EXECUTE remove_orphan_files(retention_threshold => '0s')",
        "CALL iceberg.system.expire_snapshots(table => 'default.a')",
        "ALTER TABLE a EXECUTE drop_extended_stats",
        "ALTER TABLE a CREATE BRANCH b",
        "ALTER TABLE a DROP TAG v1",
        "ALTER TABLE a CREATE OR REPLACE TAG v1",
        "ALTER TABLE a ADD COLUMN id.x integer",
        "ALTER TABLE a ALTER COLUMN id COMMENT 'mine now'",
        "COMMENT ON COLUMN a.id IS 'mine now'",
        "COMMENT ON TABLE a IS 'mine now'",
        "ALTER TABLE a WRITE ORDERED BY id DESC",
        "ALTER TABLE a WRITE UNORDERED",
    ] {
        let e = refused(&engine, &bob, sql).await;
        assert_eq!(
            (e.code(), e.message()),
            (
                ErrorCode::PermissionDenied,
                "Access Denied: Cannot alter table iceberg.default.a"
            ),
            "{sql}"
        );
    }
    assert_eq!(
        ok(&engine, &alice, "SELECT count(*) FROM \"a$files\"").await,
        ["3"]
    );
    assert_eq!(
        ok(
            &engine,
            &bob,
            "SELECT count(*) FROM a FOR VERSION AS OF 'v1'"
        )
        .await,
        ["3"]
    );
    // Nor write to its branches: a branch is the table's, and so are its privileges.
    ok(&engine, &alice, "ALTER TABLE a CREATE BRANCH dev").await;
    for (sql, denied) in [
        ("INSERT INTO a.branch_dev VALUES (9)", "insert into"),
        ("INSERT OVERWRITE a.branch_dev VALUES (9)", "insert into"),
        ("DELETE FROM a.branch_dev WHERE id = 1", "delete from"),
        ("TRUNCATE TABLE a.branch_dev", "delete from"),
        ("UPDATE a.branch_dev SET id = 9", "update"),
        (
            "MERGE INTO a.branch_dev t USING (VALUES (1)) s (id) ON t.id = s.id WHEN MATCHED THEN DELETE",
            "delete from",
        ),
    ] {
        let e = refused(&engine, &bob, sql).await;
        assert_eq!(
            (e.code(), e.message()),
            (
                ErrorCode::PermissionDenied,
                format!("Access Denied: Cannot {denied} table iceberg.default.a").as_str()
            ),
            "{sql}"
        );
    }
    assert_eq!(
        ok(
            &engine,
            &alice,
            "SELECT count(*) FROM a FOR VERSION AS OF 'dev'"
        )
        .await,
        ["3"]
    );
    // A field path of thousands of steps, and a type nested thousands deep: refused by name.
    let path = format!("ALTER TABLE a ADD COLUMN {}z integer", "r.".repeat(5_000));
    let e = refused(&engine, &alice, &path).await;
    assert_eq!(e.message(), "column 'r' does not exist");
    for (depth, message) in [
        (5_000, "the statement nests brackets more than 1000 deep"),
        (
            40,
            "a column's type nests row, array and map more than 32 deep",
        ),
    ] {
        let row = |name: &str| {
            format!(
                "{name} {}integer{}",
                "row(f ".repeat(depth),
                ")".repeat(depth)
            )
        };
        for sql in [
            format!("ALTER TABLE a ADD COLUMN {}", row("z")),
            format!("CREATE TABLE deep ({})", row("c")),
        ] {
            let e = refused(&engine, &alice, &sql).await;
            assert_eq!((e.code(), e.message()), (ErrorCode::InvalidInput, message));
        }
    }
    let long = format!("ALTER TABLE a CREATE BRANCH {}", "x".repeat(10_000));
    let e = refused(&engine, &alice, &long).await;
    assert_eq!(e.message(), "a branch's name is 1 to 255 characters");
    let e = refused(
        &engine,
        &alice,
        "ALTER TABLE a CREATE TAG t RETAIN 999999999999999 DAYS",
    )
    .await;
    assert_eq!(e.message(), "a retention of 999999999999999 is too long");
    let long = format!(
        "ALTER TABLE a WRITE ORDERED BY {}",
        vec!["id"; 10_000].join(", ")
    );
    let e = refused(&engine, &alice, &long).await;
    assert_eq!(e.message(), "sorted_by names column 'id' more than once");

    // A table of bob's in alice's folder, and one in the warehouse's own: removing their orphans
    // would remove alice's files, so it is refused before anything goes.
    let folder = dir.path().join("default").join("a");
    for (name, location) in [("b", folder.clone()), ("w", dir.path().to_path_buf())] {
        let create = format!(
            "CREATE TABLE {name} (id bigint) WITH (location = '{}')",
            location.display()
        );
        ok(&engine, &bob, &create).await;
        ok(&engine, &bob, &format!("INSERT INTO {name} VALUES (9)")).await;
        let sql =
            format!("ALTER TABLE {name} EXECUTE remove_orphan_files(retention_threshold => '0s')");
        let e = refused(&engine, &bob, &sql).await;
        assert_eq!(e.code(), ErrorCode::InvalidInput, "{e}");
        assert!(
            e.message()
                .contains("remove_orphan_files does not run where tables share a folder"),
            "{e}"
        );
    }
    assert_eq!(
        ok(&engine, &alice, "SELECT id FROM a ORDER BY id").await,
        ["1", "2", "3"]
    );

    // A table whose metadata names alice's data file (as a hostile writer could make it): when
    // the file leaves bob's table and its snapshots expire, the file stays, outside bob's folder.
    ok(&engine, &bob, "CREATE TABLE h (id bigint)").await;
    ok(&engine, &bob, "INSERT INTO h VALUES (7)").await;
    let alices = ok(&engine, &alice, "SELECT file_path, record_count, file_size_in_bytes FROM \"a$files\" ORDER BY file_path LIMIT 1").await;
    let parts: Vec<&str> = alices[0].split('|').collect();
    let catalog = sqe_engine::catalog::sql::SqlCatalog::open("iceberg", dir.path())
        .unwrap_or_else(|e| panic!("{e}"));
    {
        use iceberg::Catalog;
        use iceberg::transaction::{ApplyTransactionAction, Transaction};
        let ident =
            iceberg::TableIdent::from_strs(["default", "h"]).unwrap_or_else(|e| panic!("{e}"));
        let table = catalog
            .load_table(&ident)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let file = iceberg::spec::DataFileBuilder::default()
            .content(iceberg::spec::DataContentType::Data)
            .file_path(parts[0].to_string())
            .file_format(iceberg::spec::DataFileFormat::Parquet)
            .record_count(parts[1].parse().unwrap_or_else(|e| panic!("{e}")))
            .file_size_in_bytes(parts[2].parse().unwrap_or_else(|e| panic!("{e}")))
            .partition_spec_id(0)
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let tx = Transaction::new(&table);
        let tx = tx
            .fast_append()
            .add_data_files(vec![file])
            .apply(tx)
            .unwrap_or_else(|e| panic!("{e}"));
        tx.commit(&catalog).await.unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(
        ok(&engine, &bob, "SELECT id FROM h ORDER BY id").await,
        ["1", "7"]
    );
    ok(&engine, &bob, "DELETE FROM h").await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let expired = ok(
        &engine,
        &bob,
        "ALTER TABLE h EXECUTE expire_snapshots(retention_threshold => '0s')",
    )
    .await;
    assert!(
        expired.contains(&"deleted_data_files_count|1".to_string()),
        "{expired:?}"
    );
    assert!(std::path::Path::new(parts[0]).exists());
    assert_eq!(
        ok(&engine, &alice, "SELECT id FROM a ORDER BY id").await,
        ["1", "2", "3"]
    );

    // Malformed arguments get an answer naming the problem.
    for (sql, message) in [
        (
            "ALTER TABLE h EXECUTE optimize(file_size_threshold => '99999999999999999999TB')",
            "'99999999999999999999TB' is not a data size: a number and a unit (B, kB, MB, GB, TB), such as '128MB'",
        ),
        (
            "ALTER TABLE h EXECUTE expire_snapshots(retention_threshold => 7)",
            "'7' is not a duration: a number and a unit (ns, us, ms, s, m, h, d), such as '7d'",
        ),
        (
            "ALTER TABLE h EXECUTE rollback_to_snapshot('x')",
            "argument snapshot_id is an integer, not 'x'",
        ),
        (
            "ALTER TABLE h EXECUTE expire_snapshots(retain_last => 0)",
            "argument retain_last is at least 1",
        ),
        (
            "CALL system.expire_snapshots(table => 42)",
            "the table argument is a string such as 'schema.table', not 42",
        ),
    ] {
        let e = refused(&engine, &bob, sql).await;
        assert_eq!(e.message(), message, "{sql}");
    }
}
