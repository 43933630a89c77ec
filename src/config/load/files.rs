//! Which paths are queue files, and reading one. A queue file is a regular file of
//! at most [`MAX_QUEUE_FILE_BYTES`]: a FIFO would hang the loader, `/dev/zero` would
//! be read without end, and a statement of megabytes would only fail later, at the
//! server. A directory stands for the `*.toml` files in it; an entry that cannot be
//! one (a dangling link, a link loop, a FIFO) is reported by name, never skipped.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::diagnostic::Finding;

/// The largest queue file: 1 MiB. Its statements are sent to the server whole.
pub const MAX_QUEUE_FILE_BYTES: u64 = 1024 * 1024;

/// Expands `paths` into queue files: a file stands for itself, a directory for the
/// `*.toml` entries directly inside it, in name order. What cannot be read is a
/// finding naming it.
pub fn queue_files(paths: &[PathBuf], findings: &mut Vec<Finding>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for path in paths {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => files.append(&mut directory(path, findings)),
            Ok(_) => files.push(path.clone()),
            Err(e) => findings.push(Finding::error(path, unreachable(path, &e))),
        }
    }
    files
}

/// The `*.toml` entries of `dir` that are regular files; the others as findings.
fn directory(dir: &Path, findings: &mut Vec<Finding>) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            findings.push(Finding::error(
                dir,
                format!("cannot read the directory: {e}"),
            ));
            return Vec::new();
        }
    };
    let mut named: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    named.sort();
    let before = findings.len();
    let mut found = Vec::new();
    for path in named {
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => found.push(path),
            Ok(meta) => findings.push(Finding::error(&path, not_regular(&meta))),
            Err(e) => findings.push(Finding::error(&path, unreachable(&path, &e))),
        }
    }
    if found.is_empty() && findings.len() == before {
        findings.push(Finding::error(
            dir,
            "the directory holds no *.toml queue files",
        ));
    }
    found
}

/// Reads one queue file: a regular file, at most [`MAX_QUEUE_FILE_BYTES`], UTF-8.
/// Opened without blocking, so a FIFO put in its place is refused, not waited on.
pub fn read_queue_file(file: &Path) -> Result<String, Finding> {
    let cannot =
        |e: std::io::Error| Finding::error(file, format!("cannot read the queue file: {e}"));
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(file);
    let opened: File = match opened {
        Ok(opened) => opened,
        Err(e) => return Err(Finding::error(file, unreachable(file, &e))),
    };
    let meta = opened.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(Finding::error(file, not_regular(&meta)));
    }
    if meta.len() > MAX_QUEUE_FILE_BYTES {
        return Err(Finding::error(file, too_large(meta.len())));
    }
    let mut bytes = Vec::new();
    opened
        .take(MAX_QUEUE_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_QUEUE_FILE_BYTES {
        return Err(Finding::error(file, too_large(bytes.len() as u64)));
    }
    String::from_utf8(bytes).map_err(|e| {
        Finding::error(
            file,
            format!(
                "cannot read the queue file: it is not UTF-8 text (byte {} is not); TOML files are UTF-8",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// Why a queue file is not a regular file, in words.
fn not_regular(meta: &Metadata) -> String {
    let kind = meta.file_type();
    let what = if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    };
    format!(
        "not a queue file: it is {what}; a queue file must be a regular file (of at most 1 MiB)"
    )
}

fn too_large(bytes: u64) -> String {
    format!(
        "the queue file is {bytes} bytes, more than the {MAX_QUEUE_FILE_BYTES} (1 MiB) a queue \
         file may hold: is a statement in it this large? Statements are sent to the server \
         whole; keep large SQL in the database (a view, a stored procedure) and call it"
    )
}

/// Why `path` cannot be reached: a dangling link and a link loop named as such.
fn unreachable(path: &Path, e: &std::io::Error) -> String {
    let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if link && e.kind() == std::io::ErrorKind::NotFound {
        let target = std::fs::read_link(path)
            .map(|t| t.display().to_string())
            .unwrap_or_default();
        return format!("a symbolic link to {target}, which does not exist: no queue file here");
    }
    if e.raw_os_error() == Some(libc::ELOOP) {
        return "a loop of symbolic links: no queue file here".to_string();
    }
    if e.kind() == std::io::ErrorKind::NotFound {
        return "no such file or directory".to_string();
    }
    format!("cannot read the queue file: {e}")
}
