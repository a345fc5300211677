//! Which PostgreSQL failures to wait out and which to report. The sink
//! retries only what can pass by itself (the server unreachable, restarting,
//! out of resources, or a transaction aborted by a conflict); everything
//! else — a constraint, a type, a permission — fails the epoch with the
//! column, constraint and detail PostgreSQL gave.

use postgres::error::DbError;

/// Whether trying the same write again later may succeed.
pub fn is_transient(e: &postgres::Error) -> bool {
    if let Some(db) = e.as_db_error() {
        let code = db.code().code();
        return code.starts_with("08") // connection exception
            || code.starts_with("53") // insufficient resources: disk full, too many connections
            || matches!(
                code,
                "57P01" // admin shutdown
                | "57P02" // crash shutdown
                | "57P03" // cannot connect now: starting up or recovering
                | "40001" // serialization failure
                | "40P01" // deadlock detected
            );
    }
    if e.is_closed() {
        return true;
    }
    // Connect and I/O failures carry an io::Error; the library exposes no
    // kind for its connect timeout, only this text.
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    e.to_string().starts_with("timeout waiting for server")
}

/// The error with everything PostgreSQL said about it.
pub fn explain(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => explain_db(db),
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                text.push_str(": ");
                text.push_str(&s.to_string());
                source = s.source();
            }
            text
        }
    }
}

fn explain_db(db: &DbError) -> String {
    let mut text = format!("{} (SQLSTATE {})", db.message(), db.code().code());
    let named = [
        ("column", db.column()),
        ("constraint", db.constraint()),
        ("table", db.table()),
    ];
    for (what, name) in named {
        if let Some(name) = name {
            text.push_str(&format!("; {what} `{name}`"));
        }
    }
    for (what, extra) in [
        ("detail", db.detail()),
        ("hint", db.hint()),
        ("at", db.where_()),
    ] {
        if let Some(extra) = extra {
            text.push_str(&format!("; {what}: {extra}"));
        }
    }
    text
}
