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

/// A file format results can be exported in (`--export NAME=PATH`).
pub trait Format: Sync {
    /// Its name in `--export`.
    fn name(&self) -> &'static str;
    /// What it holds, one line.
    fn about(&self) -> &'static str;
    /// PATH names a directory to fill (one file per case and role), not a file.
    fn directory(&self) -> bool {
        false
    }
    /// The files it writes for `path` beside `path` itself (checked before a run starts).
    fn beside(&self, _path: &Path) -> Vec<PathBuf> {
        Vec::new()
    }
    /// The run rendered: each file it writes (`path` itself, files beside it, or files in the
    /// directory `path`) and its bytes.
    fn render(&self, run: &RunResult, path: &Path) -> Result<Vec<(PathBuf, Vec<u8>)>, String>;
}

/// Every format, in the order `--help` lists them.
pub static REGISTRY: &[&dyn Format] = &[
    &json::Json,
    &csv::Csv,
    &md::Markdown,
    &hlog::Hlog,
    &hgrm::Hgrm,
    &html::Html,
];

/// The format called `name`, or a sentence naming those there are.
pub fn find(name: &str) -> Result<&'static dyn Format, String> {
    REGISTRY
        .iter()
        .copied()
        .find(|f| f.name() == name)
        .ok_or_else(|| {
            format!(
                "no export format `{name}`: give one of {}",
                REGISTRY
                    .iter()
                    .map(|f| f.name())
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
