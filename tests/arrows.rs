//! The rooms and their one-way arrows (see `src/lib.rs`): a room may import only the rooms its
//! arrows reach, plus the leaves. Reads the sources; fails naming the forbidden edge.

use std::collections::BTreeMap;
use std::path::Path;

const LEAVES: &[&str] = &["deadline", "delivery", "histogram", "units", "sys"];

fn allowed() -> BTreeMap<&'static str, &'static [&'static str]> {
    BTreeMap::from([
        ("transport", &[][..]),
        ("codec", &[][..]),
        ("result", &[][..]),
        ("measure", &["result"][..]),
        ("workload", &["transport", "codec", "measure", "result"][..]),
        ("exec", &["workload", "transport", "measure", "result"][..]),
        ("report", &["result"][..]),
        ("plan", &["workload", "transport", "result"][..]),
        (
            "suite",
            &["plan", "workload", "report", "result", "transport"][..],
        ),
        (
            "cli",
            &[
                "plan",
                "exec",
                "report",
                "result",
                "transport",
                "workload",
                "suite",
            ][..],
        ),
    ])
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn rooms_import_only_along_their_arrows() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let rules = allowed();
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut bad = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let room = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        let Some(ok) = rules.get(room.as_str()) else {
            continue;
        };
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, line) in text.lines().enumerate() {
            for part in line.split("crate::").skip(1) {
                let target: String = part
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if target != room
                    && !ok.contains(&target.as_str())
                    && !LEAVES.contains(&target.as_str())
                {
                    bad.push(format!(
                        "{}:{}: `{room}` imports `{target}`",
                        rel.display(),
                        i + 1
                    ));
                }
            }
        }
    }
    assert!(bad.is_empty(), "forbidden imports:\n{}", bad.join("\n"));
}
