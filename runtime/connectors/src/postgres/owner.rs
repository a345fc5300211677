//! Owner generations: how the sink refuses a writer that lost its partition.
//!
//! A worker that is assigned a partition takes the next generation for the
//! partition's query in `<progress_table>_owners` (one row per
//! `(query_id, sink_name)`). Every epoch's transaction then reads that row
//! `FOR SHARE` before it claims the epoch, and refuses to write when the
//! generation is not the one it took. A worker that was paused past its
//! session timeout, or cut off from the group, and wakes up to write a late
//! epoch, finds a newer generation and stops ([`weir_core::sink::Fenced`]).
//!
//! Taking a generation updates the row, so it waits for an epoch
//! transaction of the old owner that is still open: that epoch is either
//! in the table before the new owner starts (and its replay is skipped by
//! the claim), or refused.

use super::table::TableName;
use postgres::{Client, Transaction};

/// `<progress_table>_owners`.
pub(super) fn table(progress: &TableName) -> TableName {
    TableName {
        schema: progress.schema.clone(),
        table: format!("{}_owners", progress.table),
    }
}

/// `CREATE TABLE` of the owners table.
pub(super) fn ddl(table: &TableName) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (\
           query_id text NOT NULL, \
           sink_name text NOT NULL, \
           generation bigint NOT NULL, \
           taken_at timestamptz NOT NULL DEFAULT now(), \
           PRIMARY KEY (query_id, sink_name))",
        table.sql()
    )
}

/// Takes the next generation of `(query_id, sink_name)` and returns it.
pub(super) fn take(
    client: &mut Client,
    table: &TableName,
    query_id: &str,
    sink_name: &str,
) -> Result<i64, postgres::Error> {
    let t = table.sql();
    let row = client.query_one(
        &format!(
            "INSERT INTO {t} AS o (query_id, sink_name, generation) VALUES ($1, $2, 1) \
             ON CONFLICT (query_id, sink_name) \
             DO UPDATE SET generation = o.generation + 1, taken_at = now() \
             RETURNING generation"
        ),
        &[&query_id, &sink_name],
    )?;
    Ok(row.get(0))
}

/// The current generation of `(query_id, sink_name)`, read `FOR SHARE` in
/// `tx` so that no new owner takes over until `tx` ends.
pub(super) fn current(
    tx: &mut Transaction<'_>,
    table: &TableName,
    query_id: &str,
    sink_name: &str,
) -> Result<Option<i64>, postgres::Error> {
    let row = tx.query_opt(
        &format!(
            "SELECT generation FROM {} WHERE query_id = $1 AND sink_name = $2 FOR SHARE",
            table.sql()
        ),
        &[&query_id, &sink_name],
    )?;
    Ok(row.map(|r| r.get(0)))
}
