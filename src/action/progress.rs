//! The seam through which a kind reports an item's progress, for lease mode's
//! `:progress`: a [`Progress`] per run, which a kind that can report progress is
//! handed (`Job::progress`) and tells what it hears, its own way, in its own folder
//! — [`Progress::report`], or [`Progress::hear`] for a line in the `progress: …`
//! form programs write. A program may also append lines to the run's own file
//! ([`Progress::path`], when the kind tells it of it). The last said, either way,
//! is the progress.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use crate::lock::lock;

/// How much of the file's end is read for its last line, and the longest line a
/// kind need look at.
pub const TAIL: usize = 4096;
/// What a line that reports progress starts with.
const PREFIX: &str = "progress:";

/// One run's progress: a file of tableq's own (removed when dropped), and the last
/// progress its kind reported.
#[derive(Debug)]
pub struct Progress {
    path: PathBuf,
    heard: Mutex<Option<(SystemTime, String)>>,
}

impl Progress {
    /// Creates an empty progress file named after `token`, for its owner only.
    pub fn create(token: &str) -> std::io::Result<Progress> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = std::env::temp_dir().join(format!("tableq-progress-{token}"));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        Ok(Progress {
            path,
            heard: Mutex::new(None),
        })
    }

    /// The run's file, for a program told of it (a command's `TABLEQ_PROGRESS`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The progress reported last, by either way; `None` before any.
    pub fn last(&self) -> Option<String> {
        let heard = self.lock().clone();
        let written = self.last_written();
        match (heard, written) {
            (Some((at, line)), Some((modified, _))) if at >= modified => Some(line),
            (_, Some((_, line))) => Some(line),
            (heard, None) => heard.map(|(_, line)| line),
        }
    }

    /// The file's last non-empty line, and when the file was last written.
    fn last_written(&self) -> Option<(SystemTime, String)> {
        let mut file = std::fs::File::open(&self.path).ok()?;
        let metadata = file.metadata().ok()?;
        let start = metadata.len().saturating_sub(TAIL as u64);
        file.seek(SeekFrom::Start(start)).ok()?;
        let mut tail = Vec::new();
        file.read_to_end(&mut tail).ok()?;
        let line = String::from_utf8_lossy(&tail)
            .lines()
            .map(str::trim)
            .rfind(|line| !line.is_empty())?
            .to_string();
        Some((metadata.modified().ok()?, line))
    }

    /// Notes a line a program wrote, if it reports progress (`progress: 40%`).
    pub fn hear(&self, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        if let Some(rest) = line.trim().strip_prefix(PREFIX) {
            self.report(rest);
        }
    }

    /// Notes progress the kind heard its own way.
    pub fn report(&self, progress: &str) {
        *self.lock() = Some((SystemTime::now(), progress.trim().to_string()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(SystemTime, String)>> {
        lock(&self.heard)
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress() -> Progress {
        Progress::create(&format!("unit-{}", fastrand::u64(..))).unwrap()
    }

    #[test]
    fn reads_the_last_line_written_and_removes_the_file() {
        let progress = progress();
        assert_eq!(progress.last(), None);
        std::fs::write(progress.path(), "10%\n55%\n\n").unwrap();
        assert_eq!(progress.last().as_deref(), Some("55%"));
        let path = progress.path().to_path_buf();
        drop(progress);
        assert!(!path.exists());
    }

    #[test]
    fn hears_progress_lines_and_reports() {
        let progress = progress();
        progress.hear(b"starting");
        assert_eq!(progress.last(), None);
        progress.hear(b"progress:  90% ");
        assert_eq!(progress.last().as_deref(), Some("90%"));
        progress.report("3 of 4");
        assert_eq!(progress.last().as_deref(), Some("3 of 4"));
    }
}
