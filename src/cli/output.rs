//! Where results are written, safely: a regular file is written whole or not at all (beside it,
//! then renamed over it, so one that vanishes during a run is made again); a FIFO, a character
//! device (`/dev/null`) or `-` (standard output) is written through, never replaced; a symlink is
//! followed to what it names, dangling or not; anything else (a directory) is refused. Every
//! output is checked before the first case runs.

use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Why an output cannot be written: the path, and the OS's own error where there is one.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// Refused before a run: not something a result can be written to.
    #[error("{} is a directory: name a file in it, e.g. {}", .0.display(), .0.join("results.json").display())]
    Directory(PathBuf),
    #[error("{} is neither a regular file nor a FIFO or device: name a file", .0.display())]
    NotAFile(PathBuf),
    /// Refused before a run: a probe file could not be made there.
    #[error("cannot write {}: {cause}; pick a path in a directory you can write", .path.display())]
    Unwritable {
        path: PathBuf,
        #[source]
        cause: std::io::Error,
    },
    /// Writing results failed (a full disk, a directory removed during the run).
    #[error("cannot write {}: {cause}", .path.display())]
    Write {
        path: PathBuf,
        #[source]
        cause: std::io::Error,
    },
}

impl OutputError {
    /// Found before anything ran (a bad option), not while writing results.
    pub fn before_run(&self) -> bool {
        !matches!(self, OutputError::Write { .. })
    }
}

/// What an output path is.
enum Target {
    Stdout,
    /// A regular file (or none yet) at this path: write beside, then rename.
    Regular(PathBuf),
    /// A FIFO or a device: write through.
    Through(PathBuf),
}

fn target(path: &Path) -> Result<Target, OutputError> {
    if path.as_os_str() == "-" {
        return Ok(Target::Stdout);
    }
    // A symlink is followed: what it names is the file the user means, even where that file
    // does not exist yet (a dangling link gets its file made, and stays a link).
    let resolved = match std::fs::canonicalize(path) {
        Ok(p) => p,
        Err(_) => match std::fs::read_link(path) {
            Ok(to) => path.parent().unwrap_or(Path::new(".")).join(to),
            Err(_) => path.to_path_buf(),
        },
    };
    match std::fs::metadata(&resolved) {
        Ok(m) if m.is_file() => Ok(Target::Regular(resolved)),
        Ok(m) if m.file_type().is_fifo() || m.file_type().is_char_device() => {
            Ok(Target::Through(resolved))
        }
        Ok(m) if m.is_dir() => Err(OutputError::Directory(path.to_path_buf())),
        Ok(_) => Err(OutputError::NotAFile(path.to_path_buf())),
        Err(_) => Ok(Target::Regular(resolved)),
    }
}

/// Checks, before anything runs, that `path` can be written: its directory exists and takes a
/// file, or it is something to write through.
pub fn check(path: &Path) -> Result<(), OutputError> {
    match target(path)? {
        Target::Stdout | Target::Through(_) => Ok(()),
        Target::Regular(p) => {
            let probe = partial(&p);
            let r = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&probe);
            let _ = std::fs::remove_file(&probe);
            r.map(|_| ()).map_err(|cause| OutputError::Unwritable {
                path: path.to_path_buf(),
                cause,
            })
        }
    }
}

/// Opens a FIFO or device for writing, waiting (at most 10 s) for a FIFO's reader to come.
fn open_through(p: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let deadline = crate::deadline::Deadline::after(std::time::Duration::from_secs(10));
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(p)
        {
            Ok(f) => {
                // Writes then wait for room, as a plain file's would.
                crate::sys::set_nonblocking(std::os::fd::AsRawFd::as_raw_fd(&f), false)?;
                return Ok(f);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && !deadline.expired() => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                return Err(std::io::Error::other(
                    "no one read the FIFO within 10 s: start its reader first",
                ))
            }
            Err(e) => return Err(e),
        }
    }
}

fn partial(p: &Path) -> PathBuf {
    let mut name = p.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    p.with_file_name(name)
}

/// Whether `path` can be written again and again (after each case): a regular file. A FIFO or
/// standard output gets the whole document once, at the end.
pub fn rewritable(path: &Path) -> bool {
    matches!(target(path), Ok(Target::Regular(_)))
}

/// Writes `bytes` to `path` as [`check`] found it.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    let fail = |cause| OutputError::Write {
        path: path.to_path_buf(),
        cause,
    };
    match target(path)? {
        Target::Stdout => {
            let mut o = std::io::stdout().lock();
            o.write_all(bytes).and_then(|_| o.flush()).map_err(fail)
        }
        Target::Through(p) => open_through(&p)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(fail),
        Target::Regular(p) => {
            let tmp = partial(&p);
            std::fs::write(&tmp, bytes)
                .and_then(|_| std::fs::rename(&tmp, &p))
                .map_err(|e| {
                    let _ = std::fs::remove_file(&tmp);
                    fail(e)
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_or_fifo_is_written_through_and_a_symlink_followed() {
        let dir = tempfile::tempdir().unwrap();
        write(Path::new("/dev/null"), b"x").unwrap();
        assert!(Path::new("/dev/null")
            .metadata()
            .unwrap()
            .file_type()
            .is_char_device());
        let real = dir.path().join("real.json");
        std::fs::write(&real, b"old").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write(&link, b"new").unwrap();
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&real).unwrap(), b"new");
        let refused = check(dir.path()).unwrap_err();
        assert!(refused.before_run() && refused.to_string().contains("is a directory"));
        let refused = check(Path::new("/nonexistent/dir/x.json")).unwrap_err();
        assert!(refused.before_run() && refused.to_string().contains("cannot write"));
    }
}
