//! Durable file writes. Every file the checkpoint or a sink commits goes
//! through here: write a temp file, fsync it, rename it into place, fsync the
//! directory. A crash leaves either the old state or the new, never a torn file.
//! Caches skip the fsyncs ([`write_atomic_unsynced`]): never torn, maybe lost.

use anyhow::{Context, Result};
use std::fs::{self, File};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Numbers the temp files of [`write_atomic`] within the process.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` atomically and durably.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_via_temp(path, bytes, Durability::Synced)
}

/// Writes `bytes` to `path` atomically but without an fsync: readers see the
/// old file or the new one, never a torn one, but a crash may lose the write.
/// For caches, whose entries can be made again, where an fsync per entry
/// would cost more than the entry saves.
pub fn write_atomic_unsynced(path: &Path, bytes: &[u8]) -> Result<()> {
    write_via_temp(path, bytes, Durability::Unsynced)
}

/// Whether a write waits for the disk.
#[derive(Clone, Copy, PartialEq)]
enum Durability {
    Synced,
    Unsynced,
}

/// Writes a temp file beside `path` and renames it into place.
fn write_via_temp(path: &Path, bytes: &[u8], durability: Durability) -> Result<()> {
    let dir = path
        .parent()
        .map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        })
        .with_context(|| format!("{} has no parent directory", path.display()))?;
    let name = path
        .file_name()
        .with_context(|| format!("{} has no file name", path.display()))?;
    // Unique per writer, not just per process: two threads writing the same
    // path (two uploads of one component) must not share a temp file.
    let tmp = dir.join(format!(
        ".{}.tmp-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        NEXT_TEMP.fetch_add(1, Ordering::Relaxed)
    ));
    let synced = durability == Durability::Synced;
    let result = (|| -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        if synced {
            f.sync_all()?;
        }
        fs::rename(&tmp, path)?;
        if synced {
            sync_dir(dir)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.with_context(|| format!("writing {}", path.display()))
}

/// Makes a rename or create inside `dir` durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates `dir` (and parents) and makes its entry durable in its parent.
pub fn create_dir_durable(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    if let Some(parent) = dir.parent() {
        // A relative single-component path has the empty path as parent.
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        sync_dir(parent).with_context(|| format!("syncing {}", parent.display()))?;
    }
    Ok(())
}

/// Removes temp files that `write_atomic` left behind when the process died
/// mid-write (`.<name>.tmp-<pid>-<n>`), so they do not pile up across crashes.
pub fn remove_stale_temps(dir: &Path) -> Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') && name.contains(".tmp-") {
            let _ = fs::remove_file(entry.path());
        }
    }
    Ok(())
}

/// Bytes available to this process on the filesystem holding `path`
/// (`statvfs`), if it can tell.
#[allow(unsafe_code)] // a libc call with no safe wrapper in std
pub fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a valid NUL-terminated path and `st` is written by
    // statvfs before it is read (checked by the return value).
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs succeeded, so it filled `st`.
    let st = unsafe { st.assume_init() };
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// `path` with `.` components dropped and `..` applied lexically, so one
/// place has one spelling (`./in/../input` → `input`).
pub fn normalize(path: &Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut out = std::path::PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_gives_one_spelling() {
        assert_eq!(normalize(Path::new("./in/../input")), Path::new("input"));
        assert_eq!(normalize(Path::new("/a/./b/")), Path::new("/a/b"));
    }

    #[test]
    fn concurrent_writers_of_one_path_do_not_collide() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blob");
        std::thread::scope(|s| {
            for i in 0..16u8 {
                let path = &path;
                s.spawn(move || write_atomic(path, &vec![i; 1 << 16]).unwrap());
            }
        });
        let bytes = fs::read(&path).unwrap();
        assert!(bytes.iter().all(|&b| b == bytes[0]), "a torn file");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "temp files left behind");
    }
}
