//! Exporters: each file format results are written in is one file here and one line in
//! [`REGISTRY`]. An exporter renders a whole run into the files it names; where they are
//! written, and how safely, is the caller's (`cli`).

mod csv;
mod hgrm;
mod hlog;
pub mod html;
mod json;
mod md;

use crate::result::RunResult;
use std::path::{Path, PathBuf};

/// A file format results can be exported in (`--export NAME=PATH`): a name, a line saying
/// what it holds, and what it writes.
pub struct Format {
    pub name: &'static str,
    pub about: &'static str,
    pub writes: Writes,
}

/// Files by path (or by name in a directory), each with its bytes.
pub type Files<P> = Result<Vec<(P, Vec<u8>)>, ExportError>;

/// Why a format could not render a run: what it was making, and its library's own error.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {what}: {cause}")]
pub struct ExportError {
    what: String,
    #[source]
    cause: Box<dyn std::error::Error + Send + Sync>,
}

impl ExportError {
    pub fn new(
        what: impl Into<String>,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        ExportError {
            what: what.into(),
            cause: cause.into(),
        }
    }
}

/// What a format writes for `--export NAME=PATH`.
pub enum Writes {
    /// One file, PATH.
    File(fn(&RunResult) -> Result<Vec<u8>, ExportError>),
    /// PATH, and files beside it: their paths from PATH, and the bytes of each path.
    WithBeside(
        fn(&Path) -> Vec<PathBuf>,
        fn(&RunResult, &Path) -> Files<PathBuf>,
    ),
    /// Files in the directory PATH, by name.
    Directory(fn(&RunResult) -> Files<String>),
}

impl Format {
    /// PATH names a directory to fill, not a file.
    pub fn directory(&self) -> bool {
        matches!(self.writes, Writes::Directory(_))
    }

    /// The files it writes beside `path` (checked before a run starts).
    pub fn beside(&self, path: &Path) -> Vec<PathBuf> {
        match self.writes {
            Writes::WithBeside(beside, _) => beside(path),
            _ => Vec::new(),
        }
    }

    /// The run rendered: each file it writes and its bytes.
    pub fn render(&self, run: &RunResult, path: &Path) -> Files<PathBuf> {
        match self.writes {
            Writes::File(render) => Ok(vec![(path.to_path_buf(), render(run)?)]),
            Writes::WithBeside(_, render) => render(run, path),
            Writes::Directory(render) => Ok(render(run)?
                .into_iter()
                .map(|(name, bytes)| (path.join(name), bytes))
                .collect()),
        }
    }
}

/// Every format, in the order `--help` lists them.
pub static REGISTRY: &[&Format] = &[
    &json::FORMAT,
    &csv::FORMAT,
    &md::FORMAT,
    &hlog::FORMAT,
    &hgrm::FORMAT,
    &html::FORMAT,
];

/// The format called `name`, or a sentence naming those there are.
pub fn find(name: &str) -> Result<&'static Format, String> {
    REGISTRY
        .iter()
        .copied()
        .find(|f| f.name == name)
        .ok_or_else(|| {
            format!(
                "no export format `{name}`: give one of {}",
                REGISTRY
                    .iter()
                    .map(|f| f.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// A role's name where a name may hold no space (`subscriber-2`).
pub(crate) fn role_slug(id: &crate::result::RoleId) -> String {
    id.to_string().replace(' ', "-")
}

/// A case's name for files and tags: its key, and its repetition where it was repeated.
pub(crate) fn case_slug(run: &RunResult, c: &crate::result::CaseResult) -> String {
    if run.repeat > 1 {
        format!("{}/run{}", c.key, c.repetition)
    } else {
        c.key.clone()
    }
}
