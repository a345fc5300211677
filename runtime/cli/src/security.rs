//! `weir token new` and `weir audit` / `weir checkpoint audit`: making
//! admin API tokens and reading who changed what.

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use weir_admin::tokens::{self, Scope};
use weir_engine::versions::registry::Event;

/// `weir token new`: prints a new token once; with `file`, adds its
/// digest to the tokens file (created readable by its owner only), which
/// a running admin API takes up within a second.
pub(crate) fn new_token(name: &str, scope: Scope, file: Option<&Path>) -> Result<()> {
    tokens::check_name(name).map_err(anyhow::Error::msg)?;
    let token = tokens::new_token()?;
    let entry = tokens::entry(name, scope, &token);
    match file {
        None => {
            println!("{token}");
            eprintln!(
                "the token is printed once, above; only its digest is kept. Add this entry to \
                 the file `admin.tokens_file` names:\n\n{entry}"
            );
        }
        Some(path) => {
            append_entry(path, name, &entry)?;
            println!("{token}");
            eprintln!(
                "token `{name}` (scope {}) added to {}; a running admin API accepts it within \
                 a second. The token is printed once, above; only its digest is kept.",
                scope.as_str(),
                path.display()
            );
        }
    }
    Ok(())
}

/// Appends `entry` to the tokens file, refusing a name it already has;
/// the file is checked whole before it replaces the old one (a running
/// API must never be handed a file it refuses: it would keep the tokens
/// it has, revocations included).
fn append_entry(path: &Path, name: &str, entry: &str) -> Result<()> {
    let (existing, mode, owner) = match std::fs::read_to_string(path) {
        Ok(text) => {
            use std::os::unix::fs::MetadataExt;
            let meta =
                std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
            (text, meta.mode() & 0o777, Some((meta.uid(), meta.gid())))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), 0o600, None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let origin = path.display().to_string();
    if tokens::check_text(&existing, &origin)?
        .iter()
        .any(|n| n == name)
    {
        bail!(
            "{origin} already has a token named `{name}`: remove its entry first (that revokes \
             it), or choose another name"
        );
    }
    let mut text = existing;
    if !text.is_empty() && !text.ends_with("\n\n") {
        text.push_str(if text.ends_with('\n') { "\n" } else { "\n\n" });
    }
    text.push_str(entry);
    tokens::check_text(&text, &origin)?;
    write_replacing(path, text.as_bytes(), mode, owner)
}

/// Writes `bytes` to `path` through a new temporary file with `mode` and
/// `owner` (those of the file it replaces; never a file that was there,
/// so no symlink is followed), renamed into place, so a running API
/// never reads half a file.
fn write_replacing(path: &Path, bytes: &[u8], mode: u32, owner: Option<(u32, u32)>) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    if let Some((uid, gid)) = owner {
        // Only root can give a file away; anyone else already owns it.
        let _ = std::os::unix::fs::fchown(&f, Some(uid), Some(gid));
    }
    let written = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.with_context(|| format!("replacing {}", path.display()))
}

/// Prints the audit trail: a table, or JSON.
pub(crate) fn print_audit(events: &[Event], json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(events)?);
        return Ok(());
    }
    println!(
        "{:>5}  {:<20}  {:<21}  {:>7}  {:<19}  {:<14}  {:<21}  note",
        "seq", "when (UTC)", "action", "version", "component", "by", "client"
    );
    for e in events {
        let when = crate::commands::utc_seconds(e.at_ms);
        let by = e.by.as_ref().map_or("", |a| a.name.as_str());
        let client =
            e.by.as_ref()
                .and_then(|a| a.client.as_deref())
                .unwrap_or("");
        let mut note = e.note.clone().unwrap_or_default();
        if let (Some(n), Some(d)) = (e.replaced, e.replaced_digest) {
            let replaced = format!("replaced version {n} ({})", d.short());
            note = if note.is_empty() {
                replaced
            } else {
                format!("{replaced}; {note}")
            };
        }
        println!(
            "{:>5}  {:<20}  {:<21}  {:>7}  {:<19}  {:<14}  {:<21}  {note}",
            e.seq,
            when,
            e.action,
            e.version,
            e.digest.map(|d| d.short()).unwrap_or_default(),
            by,
            client,
        );
    }
    Ok(())
}

/// `weir checkpoint audit DIR`: the whole trail of a checkpoint, read
/// from its files (no running pipeline needed).
pub(crate) fn checkpoint_audit(dir: PathBuf, json: bool) -> Result<()> {
    if !dir.is_dir() {
        bail!("{} is not a checkpoint directory", dir.display());
    }
    print_audit(&weir_engine::versions::registry::audit_trail(&dir)?, json)
}
