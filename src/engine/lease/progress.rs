//! A command's progress: tableq hands it a file (`TABLEQ_PROGRESS`) to append lines
//! to; at each renewal the last line is the lease's `:progress`.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// How much of the file's end is read for its last line.
const TAIL: u64 = 4096;

/// A progress file of tableq's own, removed when dropped.
#[derive(Debug)]
pub struct ProgressFile {
    path: PathBuf,
}

impl ProgressFile {
    /// Creates an empty progress file for `lease_id`, readable by its owner only.
    pub fn create(lease_id: &str) -> std::io::Result<ProgressFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = std::env::temp_dir().join(format!("tableq-progress-{lease_id}"));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        Ok(ProgressFile { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last non-empty line written so far, if any.
    pub fn last_line(&self) -> Option<String> {
        let mut file = std::fs::File::open(&self.path).ok()?;
        let length = file.metadata().ok()?.len();
        file.seek(SeekFrom::Start(length.saturating_sub(TAIL)))
            .ok()?;
        let mut tail = Vec::new();
        file.read_to_end(&mut tail).ok()?;
        let text = String::from_utf8_lossy(&tail);
        text.lines()
            .map(str::trim)
            .rfind(|line| !line.is_empty())
            .map(str::to_string)
    }
}

impl Drop for ProgressFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_last_line_written() {
        let file = ProgressFile::create(&format!("unit-{}", fastrand::u64(..))).unwrap();
        assert_eq!(file.last_line(), None);
        std::fs::write(file.path(), "10%\n55%\n\n").unwrap();
        assert_eq!(file.last_line().as_deref(), Some("55%"));
        let path = file.path().to_path_buf();
        drop(file);
        assert!(!path.exists());
    }
}
