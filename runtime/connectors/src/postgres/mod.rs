//! Operator output into a PostgreSQL table, exactly once.
//!
//! Each epoch is **one transaction** that first claims the epoch in a
//! progress table — `INSERT (query_id, sink_name, epoch) … ON CONFLICT DO
//! NOTHING` — and then writes the rows. A claim that inserts nothing means
//! an earlier attempt of this epoch committed (the run crashed after the
//! table had the rows but before `commits/N`), so the replay writes nothing.
//! The claim holds the primary-key row lock, so even two runs of the same
//! checkpoint at once cannot both write an epoch.
//!
//! In real-time mode each part of an epoch is such a transaction, claimed in
//! `<progress_table>_parts` by `(query_id, sink_name, epoch, part)`: a
//! replayed part that committed before the crash is skipped the same way.
//!
//! A worker that takes a partition over fences the writer before it: each
//! transaction checks the owner generation it took (the `owner` module), so a late
//! write from a worker that lost the partition is refused.
//!
//! Large epochs go through binary `COPY`, small ones through a prepared
//! `INSERT` per row (see [`WriteMethod`]). A server that is down, restarting
//! or out of connections is waited out with backoff and jitter — the engine
//! does not write `commits/N` until this sink returns, so nothing is lost —
//! and a write PostgreSQL refuses (a constraint, a type) fails the epoch
//! with the column and constraint it named.

mod cells;
pub mod config;
mod errors;
mod owner;
pub mod table;
pub mod tls;

use anyhow::{anyhow, bail, Context, Result};
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use cells::{Cell, ColumnReader};
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::config::Host;
use postgres::types::{ToSql, Type};
use postgres::{Client, Transaction};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};
use table::{quote_ident, ColumnPlan, TableName};
use tls::{Connector, PgTls};
use weir_core::backoff::Backoff;
use weir_core::sink::Fenced;

pub use config::PostgresSinkConfig;
pub use errors::is_transient;

/// Rows from which `auto` switches from per-row INSERT to COPY. Measured
/// (`benches/postgres.rs`, loopback): one row is ~2x faster as an INSERT,
/// two rows already cost the same, and from ten rows COPY is 2x and more
/// faster; a PostgreSQL further away only makes per-row round trips dearer.
pub const DEFAULT_COPY_THRESHOLD: usize = 2;

/// How an epoch's rows are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteMethod {
    /// `copy` for epochs of at least `copy_threshold` rows, else `insert`.
    #[default]
    Auto,
    /// Binary `COPY … FROM STDIN`: one stream per epoch.
    Copy,
    /// A prepared `INSERT` per row: one round trip per row.
    Insert,
}

/// Settings of the PostgreSQL sink (see `SinkConfig::Postgres`).
#[derive(Debug, Clone)]
pub struct PostgresSinkSettings {
    /// Connection string, URL or `key=value` form, already taken from
    /// `url_env` if the pipeline named a variable.
    pub url: String,
    pub table: TableName,
    /// Where `(query_id, sink_name, epoch)` of written epochs are recorded.
    pub progress_table: TableName,
    pub sink_name: String,
    /// Create `table` from the first output's columns if it is missing.
    pub create_table: bool,
    pub write_method: WriteMethod,
    /// Rows from which `auto` uses COPY.
    pub copy_threshold: usize,
    /// How long start-up waits for the server before giving up.
    pub timeout: Duration,
    /// The checkpoint's query id: the key of this query's epochs.
    pub query_id: String,
    /// Shown in `pg_stat_activity` unless the URL sets `application_name`.
    pub application_name: String,
}

/// Name of the progress table unless the pipeline names another.
pub const DEFAULT_PROGRESS_TABLE: &str = "weir_sink_progress";

/// How long start-up waits for the server unless the pipeline says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

impl PostgresSinkSettings {
    /// The defaults of the pipeline file for writing to `table` (the
    /// progress table beside it, `sink_name` = the table's name); callers
    /// override single fields.
    pub fn new(url: &str, table: TableName, query_id: &str) -> Self {
        PostgresSinkSettings {
            url: url.into(),
            progress_table: TableName {
                schema: table.schema.clone(),
                table: DEFAULT_PROGRESS_TABLE.into(),
            },
            sink_name: table.table.clone(),
            table,
            create_table: true,
            write_method: WriteMethod::Auto,
            copy_threshold: DEFAULT_COPY_THRESHOLD,
            timeout: DEFAULT_TIMEOUT,
            query_id: query_id.into(),
            application_name: "weir".into(),
        }
    }
}

/// Parses a connection string and fills in what a long-running writer
/// needs: a connect timeout, keepalives and an application name. Its TLS
/// parameters ([`tls`]) are checked and set the client's `sslmode`; to
/// connect, [`endpoint`] also makes the TLS connector.
pub fn connection_config(url: &str, timeout: Duration, app: &str) -> Result<postgres::Config> {
    let (rest, tls) = PgTls::split(url)?;
    config_of(&rest, &tls, timeout, app)
}

/// [`connection_config`] and how to connect: with TLS as the string's
/// `sslmode`, `sslrootcert`, `sslcert` and `sslkey` ask (their files read
/// now, so a missing one fails the start).
pub fn endpoint(url: &str, timeout: Duration, app: &str) -> Result<(postgres::Config, Connector)> {
    let (rest, tls) = PgTls::split(url)?;
    Ok((config_of(&rest, &tls, timeout, app)?, tls.connector()?))
}

/// The client library's config of `rest` (the string without its TLS
/// parameters).
fn config_of(rest: &str, tls: &PgTls, timeout: Duration, app: &str) -> Result<postgres::Config> {
    let mut cfg: postgres::Config = rest
        .parse()
        .map_err(|e| anyhow!("not a PostgreSQL connection string ({e}); write e.g. postgresql://user:password@127.0.0.1:5432/fraud"))?;
    cfg.ssl_mode(tls.client_mode());
    if cfg.get_hosts().is_empty() {
        bail!("the connection string names no host; add e.g. @127.0.0.1:5432");
    }
    if cfg.get_connect_timeout().is_none() {
        cfg.connect_timeout(timeout);
    }
    if cfg.get_application_name().is_none() {
        cfg.application_name(app);
    }
    cfg.keepalives(true)
        .keepalives_idle(Duration::from_secs(15));
    Ok(cfg)
}

/// `host:port/database` of a connection, without user or password: what
/// identifies the destination in checkpoint metadata and logs.
pub fn location(cfg: &postgres::Config) -> String {
    let ports = cfg.get_ports();
    let hosts: Vec<String> = cfg
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            match h {
                Host::Tcp(name) => format!("{name}:{port}"),
                Host::Unix(path) => format!("{}:{port}", path.display()),
            }
        })
        .collect();
    let db = cfg.get_dbname().or(cfg.get_user()).unwrap_or("postgres");
    format!("{}/{db}", hosts.join(","))
}

/// What one write attempt ran into.
enum Attempt {
    /// From the server or the connection: maybe transient.
    Db(postgres::Error),
    /// Ours (output that cannot go into this table): never retried.
    Refused(anyhow::Error),
}

impl From<postgres::Error> for Attempt {
    fn from(e: postgres::Error) -> Self {
        Attempt::Db(e)
    }
}

/// What a successful attempt did.
enum Written {
    Rows(WriteMethod),
    /// An earlier attempt of the epoch committed with this many rows.
    AlreadyThere(i64),
    /// No rows: only the owner generation was checked.
    Nothing,
}

/// What one transaction claims before it writes rows: a whole epoch
/// (micro-batch mode, in the progress table) or one part of a real-time
/// epoch (in the progress table's `_parts` companion).
#[derive(Debug, Clone, Copy)]
enum Claim {
    Epoch(i64),
    Part { epoch: i64, part: i32 },
}

/// The PostgreSQL sink.
pub struct PostgresSink {
    s: PostgresSinkSettings,
    config: postgres::Config,
    /// Plaintext or TLS, as the connection string asks.
    connector: Connector,
    location: String,
    client: Option<Client>,
    /// The output schema last checked against the table, and its plan.
    plan: Option<(SchemaRef, Arc<[ColumnPlan]>)>,
    /// Whether the parts progress table is known to exist.
    parts_table_ready: bool,
    /// The owner generation taken by [`Sink::fence`], checked by every
    /// write; `None` for a sink that never fenced (a single process).
    ///
    /// [`Sink::fence`]: weir_core::sink::Sink::fence
    generation: Option<i64>,
}

impl PostgresSink {
    /// Connects — waiting up to `timeout` for a server that is not up yet,
    /// failing at once on a bad password or a missing database — and
    /// creates the progress table if it is missing.
    pub fn new(s: PostgresSinkSettings) -> Result<Self> {
        let (config, connector) = endpoint(&s.url, s.timeout, &s.application_name)?;
        let location = location(&config);
        let mut sink = PostgresSink {
            s,
            config,
            connector,
            location,
            client: None,
            plan: None,
            parts_table_ready: false,
            generation: None,
        };
        let deadline = Instant::now() + sink.s.timeout;
        let mut outage: Option<Backoff> = None;
        loop {
            let e = match sink.connect_and_prepare() {
                Ok(()) => return Ok(sink),
                Err(e) => e,
            };
            if !is_transient(&e) {
                bail!(
                    "PostgreSQL at {} ({}): {}",
                    sink.location,
                    sink.user(),
                    errors::explain(&e)
                );
            }
            let b = outage.get_or_insert_with(Backoff::for_outage);
            if b.should_report(Duration::from_secs(5)) {
                tracing::warn!(server = %sink.location, "PostgreSQL is not reachable yet, retrying: {}", errors::explain(&e));
            }
            if !b.wait_until(deadline) {
                bail!(
                    "PostgreSQL at {} is not reachable: {}; gave up after {:?} (`sink.timeout`)",
                    sink.location,
                    errors::explain(&e),
                    sink.s.timeout
                );
            }
        }
    }

    fn user(&self) -> String {
        format!("user `{}`", self.config.get_user().unwrap_or("?"))
    }

    fn connect_and_prepare(&mut self) -> Result<(), postgres::Error> {
        let mut client = self.connector.connect(&self.config)?;
        if table::oid(&mut client, &self.s.progress_table)?.is_some() {
            self.client = Some(client);
            return Ok(());
        }
        create_if_missing(&mut client, &progress_ddl(&self.s.progress_table, false))?;
        self.client = Some(client);
        Ok(())
    }

    /// The progress table of real-time parts: `<progress_table>_parts`,
    /// keyed by `(query_id, sink_name, epoch, part)`.
    fn parts_table(&self) -> TableName {
        TableName {
            schema: self.s.progress_table.schema.clone(),
            table: format!("{}_parts", self.s.progress_table.table),
        }
    }

    /// Creates the parts progress table on the first real-time write (a
    /// role without CREATE rights needs it created beforehand).
    fn ensure_parts_table(&mut self, client: &mut Client) -> Result<(), postgres::Error> {
        if self.parts_table_ready || table::oid(client, &self.parts_table())?.is_some() {
            self.parts_table_ready = true;
            return Ok(());
        }
        create_if_missing(client, &progress_ddl(&self.parts_table(), true))?;
        self.parts_table_ready = true;
        Ok(())
    }

    /// Claims `claim` in `tx`: `None` if it was claimed (written) before,
    /// else `Some(rows written then)`.
    fn claim(
        &self,
        tx: &mut Transaction<'_>,
        claim: Claim,
        rows: i64,
    ) -> Result<Option<i64>, postgres::Error> {
        let (q, n) = (&self.s.query_id, &self.s.sink_name);
        let (inserted, select) = match claim {
            Claim::Epoch(epoch) => {
                let table = self.s.progress_table.sql();
                let inserted = tx.execute(
                    &format!(
                        "INSERT INTO {table} (query_id, sink_name, epoch, rows) VALUES ($1, $2, $3, $4) \
                         ON CONFLICT (query_id, sink_name, epoch) DO NOTHING"
                    ),
                    &[q, n, &epoch, &rows],
                )?;
                let select = format!(
                    "SELECT rows FROM {table} WHERE query_id = $1 AND sink_name = $2 AND epoch = $3"
                );
                (inserted, (select, epoch, None))
            }
            Claim::Part { epoch, part } => {
                let table = self.parts_table().sql();
                let inserted = tx.execute(
                    &format!(
                        "INSERT INTO {table} (query_id, sink_name, epoch, part, rows) \
                         VALUES ($1, $2, $3, $4, $5) \
                         ON CONFLICT (query_id, sink_name, epoch, part) DO NOTHING"
                    ),
                    &[q, n, &epoch, &part, &rows],
                )?;
                let select = format!(
                    "SELECT rows FROM {table} \
                     WHERE query_id = $1 AND sink_name = $2 AND epoch = $3 AND part = $4"
                );
                (inserted, (select, epoch, Some(part)))
            }
        };
        if inserted == 1 {
            return Ok(None);
        }
        let (sql, epoch, part) = select;
        let row = match part {
            None => tx.query_one(&sql, &[q, n, &epoch])?,
            Some(part) => tx.query_one(&sql, &[q, n, &epoch, &part])?,
        };
        Ok(Some(row.get(0)))
    }

    /// `host:port/database` this sink writes to.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// One attempt on a live connection (reconnecting if there is none).
    fn attempt(
        &mut self,
        claim: Claim,
        batches: &[&RecordBatch],
        rows: i64,
    ) -> Result<Written, Attempt> {
        let mut client = self.take_client()?;
        if matches!(claim, Claim::Part { .. }) {
            if let Err(e) = self.ensure_parts_table(&mut client) {
                self.client = Some(client);
                return Err(e.into());
            }
        }
        let result = self.write_with(&mut client, claim, batches, rows);
        self.client = Some(client);
        result
    }

    fn write_with(
        &mut self,
        client: &mut Client,
        claim: Claim,
        batches: &[&RecordBatch],
        rows: i64,
    ) -> Result<Written, Attempt> {
        let mut planned = Vec::with_capacity(batches.len());
        for batch in batches {
            planned.push((*batch, self.plan_for(client, &batch.schema())?));
        }
        let mut tx = client.transaction()?;
        self.check_owner(&mut tx)?;
        if rows == 0 {
            tx.commit()?;
            return Ok(Written::Nothing);
        }
        if let Some(before) = self.claim(&mut tx, claim, rows)? {
            return Ok(Written::AlreadyThere(before));
        }
        let method = match self.s.write_method {
            WriteMethod::Auto if rows as usize >= self.s.copy_threshold => WriteMethod::Copy,
            WriteMethod::Auto => WriteMethod::Insert,
            m => m,
        };
        // Consecutive batches with the same columns share one COPY/statement.
        for group in planned.chunk_by(|a, b| Arc::ptr_eq(&a.1, &b.1)) {
            let plans = &group[0].1;
            let batches = group.iter().map(|(b, _)| *b);
            match method {
                WriteMethod::Copy => copy_rows(&mut tx, &self.s.table, plans, batches)?,
                _ => insert_rows(&mut tx, &self.s.table, plans, batches)?,
            }
        }
        tx.commit()?;
        Ok(Written::Rows(method))
    }

    /// The open connection, or a new one if there is none or it closed
    /// (the caller puts it back in `self.client`).
    fn take_client(&mut self) -> Result<Client, postgres::Error> {
        match self.client.take() {
            Some(c) if !c.is_closed() => Ok(c),
            _ => self.connector.connect(&self.config),
        }
    }

    /// Refuses the write if another writer took a newer owner generation
    /// since this one fenced.
    fn check_owner(&self, tx: &mut Transaction<'_>) -> Result<(), Attempt> {
        let Some(held) = self.generation else {
            return Ok(());
        };
        let owners = owner::table(&self.s.progress_table);
        let current = owner::current(tx, &owners, &self.s.query_id, &self.s.sink_name)?;
        match current {
            Some(current) if current == held => Ok(()),
            current => Err(Attempt::Refused(anyhow::Error::new(Fenced {
                what: format!("table {} (sink `{}`)", self.s.table, self.s.sink_name),
                held,
                current: current.unwrap_or(0),
            }))),
        }
    }

    /// Takes the next owner generation, creating the owners table if it
    /// is missing.
    fn take_ownership(&mut self) -> Result<i64, postgres::Error> {
        let mut client = self.take_client()?;
        let owners = owner::table(&self.s.progress_table);
        let taken = create_if_missing(&mut client, &owner::ddl(&owners))
            .and_then(|()| owner::take(&mut client, &owners, &self.s.query_id, &self.s.sink_name));
        self.client = Some(client);
        taken
    }

    /// The column plan for an output schema: checked against the table
    /// once (creating the table first if allowed), then reused.
    fn plan_for(
        &mut self,
        client: &mut Client,
        schema: &SchemaRef,
    ) -> Result<Arc<[ColumnPlan]>, Attempt> {
        if let Some((known, plan)) = &self.plan {
            if known == schema {
                return Ok(plan.clone());
            }
        }
        let table = &self.s.table;
        let mut columns = table::columns(client, table)?;
        if columns.is_none() {
            if !self.s.create_table {
                return Err(Attempt::Refused(anyhow!(
                    "table {table} does not exist and `sink.create_table = false`; create it with \
                     the operator's output columns ({})",
                    column_list(schema)
                )));
            }
            let ddl = table::create_sql(table, schema).map_err(Attempt::Refused)?;
            create_if_missing(client, &ddl)?;
            tracing::info!(table = %table, server = %self.location, "created table for the operator's output: {ddl}");
            columns = table::columns(client, table)?;
        }
        let columns = columns.ok_or_else(|| {
            Attempt::Refused(anyhow!(
                "table {table} disappeared right after it was created"
            ))
        })?;
        let plan: Arc<[ColumnPlan]> = table::plan(table, schema, &columns)
            .map_err(Attempt::Refused)?
            .into();
        self.plan = Some((schema.clone(), plan.clone()));
        Ok(plan)
    }
}

fn column_list(schema: &SchemaRef) -> String {
    schema
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), table::type_name(f)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `CREATE TABLE` of a progress table: written epochs, or with `parts`
/// the parts of real-time epochs.
fn progress_ddl(table: &TableName, parts: bool) -> String {
    let (part, key) = if parts {
        ("part integer NOT NULL, ", ", part")
    } else {
        ("", "")
    };
    format!(
        "CREATE TABLE IF NOT EXISTS {} (\
           query_id text NOT NULL, \
           sink_name text NOT NULL, \
           epoch bigint NOT NULL, \
           {part}\
           rows bigint NOT NULL, \
           written_at timestamptz NOT NULL DEFAULT now(), \
           PRIMARY KEY (query_id, sink_name, epoch{key}))",
        table.sql()
    )
}

/// Runs a `CREATE … IF NOT EXISTS`; losing a creation race to another
/// writer counts as success. `IF NOT EXISTS` does not hold under
/// concurrency: PostgreSQL reports the loser as a unique violation in its
/// catalog (23505), a duplicate table (42P07) or a duplicate row type
/// (42710, "type … already exists"; seen with two tasks creating the
/// output table at once).
fn create_if_missing(client: &mut Client, ddl: &str) -> Result<(), postgres::Error> {
    match client.batch_execute(ddl) {
        Err(e)
            if matches!(
                e.code().map(|c| c.code()),
                Some("23505" | "42P07" | "42710")
            ) =>
        {
            Ok(())
        }
        other => other,
    }
}

fn column_names(plans: &[ColumnPlan]) -> String {
    plans
        .iter()
        .map(|p| quote_ident(&p.name))
        .collect::<Vec<_>>()
        .join(", ")
}

fn types(plans: &[ColumnPlan]) -> Vec<Type> {
    plans.iter().map(|p| p.pg_type.clone()).collect()
}

/// Calls `row` with the cells of every row of `batches`.
fn for_each_row<'a>(
    plans: &'a [ColumnPlan],
    batches: impl Iterator<Item = &'a RecordBatch>,
    mut row: impl FnMut(&[Cell<'a>]) -> Result<(), Attempt>,
) -> Result<(), Attempt> {
    let mut cells = Vec::with_capacity(plans.len());
    for batch in batches {
        let readers = ColumnReader::for_batch(batch, plans).map_err(Attempt::Refused)?;
        for i in 0..batch.num_rows() {
            cells.clear();
            for r in &readers {
                cells.push(r.cell(i).map_err(Attempt::Refused)?);
            }
            row(&cells)?;
        }
    }
    Ok(())
}

fn copy_rows<'a>(
    tx: &mut Transaction<'_>,
    table: &TableName,
    plans: &'a [ColumnPlan],
    batches: impl Iterator<Item = &'a RecordBatch>,
) -> Result<(), Attempt> {
    let sql = format!(
        "COPY {} ({}) FROM STDIN (FORMAT binary)",
        table.sql(),
        column_names(plans)
    );
    let mut writer = BinaryCopyInWriter::new(tx.copy_in(&sql)?, &types(plans));
    for_each_row(plans, batches, |cells| Ok(writer.write_raw(cells)?))?;
    writer.finish()?;
    Ok(())
}

fn insert_rows<'a>(
    tx: &mut Transaction<'_>,
    table: &TableName,
    plans: &'a [ColumnPlan],
    batches: impl Iterator<Item = &'a RecordBatch>,
) -> Result<(), Attempt> {
    let params: Vec<String> = (1..=plans.len()).map(|i| format!("${i}")).collect();
    let sql = format!(
        "INSERT INTO {} ({}) VALUES ({})",
        table.sql(),
        column_names(plans),
        params.join(", ")
    );
    let statement = tx.prepare_typed(&sql, &types(plans))?;
    for_each_row(plans, batches, |cells| {
        let refs: Vec<&(dyn ToSql + Sync)> = cells.iter().map(|c| c as _).collect();
        tx.execute(&statement, &refs)?;
        Ok(())
    })
}

impl weir_core::sink::Sink for PostgresSink {
    fn write_epoch(&mut self, epoch: u64, batches: &[RecordBatch]) -> Result<()> {
        let key = i64::try_from(epoch).context("epoch number beyond bigint")?;
        self.write_claimed(epoch, Claim::Epoch(key), batches)
    }

    fn write_part(&mut self, epoch: u64, part: u32, batches: &[RecordBatch]) -> Result<()> {
        let claim = Claim::Part {
            epoch: i64::try_from(epoch).context("epoch number beyond bigint")?,
            part: i32::try_from(part).context("part number beyond integer")?,
        };
        self.write_claimed(epoch, claim, batches)
    }

    fn fence(&mut self) -> Result<()> {
        let generation = self.take_ownership().map_err(|e| {
            anyhow!(
                "PostgreSQL at {}: taking ownership of table {}: {}",
                self.location,
                self.s.table,
                errors::explain(&e)
            )
        })?;
        tracing::info!(
            table = %self.s.table,
            sink = %self.s.sink_name,
            generation,
            "took ownership of the sink's output; earlier owners' writes are refused"
        );
        self.generation = Some(generation);
        Ok(())
    }
}

impl PostgresSink {
    /// Writes `batches` in one transaction that first claims `claim`;
    /// waits out outages, fails on what the server refuses.
    fn write_claimed(&mut self, epoch: u64, claim: Claim, batches: &[RecordBatch]) -> Result<()> {
        let batches = batches
            .iter()
            .filter(|b| b.num_rows() > 0)
            .map(table::nested_as_json)
            .collect::<Result<Vec<_>>>()?;
        let batches: Vec<&RecordBatch> = batches.iter().collect();
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        // An epoch without output writes nothing, but a fenced writer must
        // still hear that it lost the partition before it commits.
        if rows == 0 && self.generation.is_none() {
            return Ok(());
        }
        let started = Instant::now();
        let mut outage: Option<Backoff> = None;
        loop {
            let e = match self.attempt(claim, &batches, rows as i64) {
                Ok(written) => {
                    if let Some(b) = outage {
                        tracing::info!(epoch, server = %self.location, "PostgreSQL is back after {:.1}s; epoch written", b.elapsed().as_secs_f64());
                    }
                    match written {
                        Written::Rows(method) => tracing::debug!(
                            epoch, rows, table = %self.s.table, ?method,
                            "epoch written in {:?}", started.elapsed()
                        ),
                        Written::AlreadyThere(before) if before == rows as i64 => tracing::info!(
                            epoch, table = %self.s.table,
                            "epoch already in the table (written before a restart); not writing it again"
                        ),
                        Written::Nothing => {}
                        Written::AlreadyThere(before) => tracing::warn!(
                            epoch, table = %self.s.table,
                            "epoch already in the table with {before} rows, but this replay produced {rows}; \
                             keeping what was written (is the operator deterministic?)"
                        ),
                    }
                    return Ok(());
                }
                Err(Attempt::Refused(e)) => {
                    self.plan = None;
                    return Err(e.context(format!("table {}", self.s.table)));
                }
                Err(Attempt::Db(e)) => e,
            };
            self.client = None;
            if !is_transient(&e) {
                self.plan = None;
                bail!(
                    "PostgreSQL at {} refused epoch {epoch} for table {}: {}",
                    self.location,
                    self.s.table,
                    errors::explain(&e)
                );
            }
            let b = outage.get_or_insert_with(Backoff::for_outage);
            if b.should_report(Duration::from_secs(10)) {
                tracing::warn!(
                    epoch,
                    server = %self.location,
                    "waiting for PostgreSQL ({:.1}s so far, {} attempts): {}; the epoch is not \
                     committed until the table has it, nothing is lost",
                    b.elapsed().as_secs_f64(),
                    b.attempts() + 1,
                    errors::explain(&e)
                );
            }
            b.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_hides_credentials() {
        let cfg = connection_config(
            "postgresql://alice:s3cret@db.example:6543/fraud",
            Duration::from_secs(3),
            "weir",
        )
        .unwrap();
        assert_eq!(location(&cfg), "db.example:6543/fraud");
        assert_eq!(cfg.get_connect_timeout(), Some(&Duration::from_secs(3)));
        assert_eq!(cfg.get_application_name(), Some("weir"));
        let cfg = connection_config("host=10.0.0.1 user=bob", Duration::from_secs(1), "w").unwrap();
        assert_eq!(location(&cfg), "10.0.0.1:5432/bob");
    }

    #[test]
    fn bad_connection_strings_are_explained() {
        let err = |url| {
            format!(
                "{:#}",
                connection_config(url, Duration::from_secs(1), "w").unwrap_err()
            )
        };
        assert!(err("postgres://u@h/db?sslmode=verify-full").contains("sslrootcert"));
        assert!(err("postgres://u@h/db?sslmode=sometimes").contains("verify-full"));
        assert!(err("postgresql://u@h:notaport/db").contains("not a PostgreSQL connection string"));
        assert!(err("dbname=fraud").contains("no host"));
    }
}
