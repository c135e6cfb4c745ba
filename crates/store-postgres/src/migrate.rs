//! Versioned schema migrations, embedded in the program.
//!
//! Guarantees: migrations run in order, each in its own transaction with the version recorded
//! in `dsh_schema_migrations`, under a transaction-level advisory lock taken before anything
//! else, the migrations table's creation included (two processes starting on a fresh database
//! do not race); a database with a version newer than this program knows is refused, never
//! written.

use tokio_postgres::Client;

use crate::error::StoreError;

/// The migrations, in version order: `(version, SQL)`.
const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("migrations/0001_sessions.sql")),
    (
        2,
        include_str!("migrations/0002_events_without_foreign_key.sql"),
    ),
];

/// The newest schema version this program knows.
pub const SCHEMA_VERSION: i32 = 2;

/// The advisory lock key that serializes migrations (`dsh` in ASCII).
const LOCK_KEY: i64 = 0x0064_7368;

fn db(context: &'static str) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
    move |source| StoreError::Db { context, source }
}

/// Brings the database's schema to [`SCHEMA_VERSION`].
///
/// Every step, the migrations table's creation included, runs in a transaction that first
/// takes the advisory lock: two processes creating the table at once would otherwise both
/// insert its type into the catalog, and one would fail on the catalog's unique index.
pub(crate) async fn migrate(client: &mut Client) -> Result<(), StoreError> {
    // A database already at this version is only read: a role that may read and write the
    // tables but not create any (the usual grant to a fleet) uses it as it is.
    let made: bool = client
        .query_one(
            "SELECT to_regclass('dsh_schema_migrations') IS NOT NULL",
            &[],
        )
        .await
        .map_err(db("read the schema version"))?
        .get(0);
    if made {
        let newest: Option<i32> = client
            .query_one("SELECT max(version) FROM dsh_schema_migrations", &[])
            .await
            .map_err(db("read the schema version"))?
            .get(0);
        match newest {
            Some(v) if v == SCHEMA_VERSION => return Ok(()),
            Some(v) if v > SCHEMA_VERSION => {
                return Err(StoreError::SchemaTooNew {
                    found: v,
                    known: SCHEMA_VERSION,
                });
            }
            _ => {}
        }
    }
    let tx = client.transaction().await.map_err(db("migrate"))?;
    lock(&tx).await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS dsh_schema_migrations (
             version integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .await
    .map_err(db("create the migrations table"))?;
    tx.commit()
        .await
        .map_err(db("create the migrations table"))?;
    for (version, sql) in MIGRATIONS {
        let tx = client.transaction().await.map_err(db("migrate"))?;
        lock(&tx).await?;
        let newest: Option<i32> = tx
            .query_one("SELECT max(version) FROM dsh_schema_migrations", &[])
            .await
            .map_err(db("read the schema version"))?
            .get(0);
        let newest = newest.unwrap_or(0);
        if newest > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found: newest,
                known: SCHEMA_VERSION,
            });
        }
        if newest >= *version {
            continue;
        }
        tx.batch_execute(sql)
            .await
            .map_err(db("apply a migration"))?;
        tx.execute(
            "INSERT INTO dsh_schema_migrations (version) VALUES ($1)",
            &[version],
        )
        .await
        .map_err(db("record a migration"))?;
        tx.commit().await.map_err(db("commit a migration"))?;
    }
    Ok(())
}

/// Takes the migration lock for the rest of `tx`.
async fn lock(tx: &tokio_postgres::Transaction<'_>) -> Result<(), StoreError> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
        .await
        .map_err(db("lock for migration"))?;
    Ok(())
}
