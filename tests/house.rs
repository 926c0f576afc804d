//! The house rule: a transport is its folder (or file) and one registry line, a workload its
//! file and one registry line. Nothing else in the code names one, so adding or removing one
//! touches nothing else. Reads the sources; fails naming each place that breaks the rule.
//!
//! - An adapter (a transport behind a Cargo feature of its name) is named nowhere outside its
//!   folder: not in `src`, `tests`, `bench`, `.ci` or `build.rs`. `Cargo.toml` (its feature
//!   and dependency), the README and `docs/` may name it.
//! - A built-in transport or a workload is named nowhere in `src`, `.ci` or `build.rs`
//!   outside its home and its registry line, except in a room's unit tests (`#[cfg(test)]`),
//!   which need a real one to run. Tests (`tests/`, an adapter's own `tests.rs`),
//!   benchmarks (`bench/`, an adapter's own `bench.py`) and suites' files (`src/suite/*.toml`,
//!   scenarios) run msgperf as a user does, so they may name those, as a command line would.
//! - Naming means code that picks it out: a string that is its name, a backquoted name, a
//!   `-t NAME` or `run NAME` command line, a `feature = "NAME"` cfg or a module path. Prose
//!   and comments do not count, nor the few words below that a middleware uses for something
//!   of its own.

use std::collections::BTreeSet;
use std::path::PathBuf;

/// Words that are also names here but mean something of the file's own, and why.
const OWN_WORDS: &[(&str, &str, &str)] = &[
    (
        "src/exec/hosts.rs",
        "burst",
        "a token bucket's burst (`tc ... tbf burst`)",
    ),
    (
        "src/transport/aeron/",
        "udp",
        "Aeron's own UDP media (`--opt channel=udp`)",
    ),
    (
        "src/transport/amqp/",
        "stream",
        "RabbitMQ's stream queues (`--opt queue=stream`)",
    ),
    (
        "src/transport/redis/",
        "pubsub",
        "Redis's PUBLISH/SUBSCRIBE mode (`--opt mode=pubsub`)",
    ),
    (
        "src/transport/zenoh/",
        "tcp",
        "Zenoh's own endpoints (`--opt endpoint=tcp`)",
    ),
    (
        "src/transport/zenoh/",
        "shm",
        "Zenoh's own shared memory (`--opt shm=true`)",
    ),
    (
        "src/transport/zmq/",
        "tcp",
        "ZeroMQ's own endpoints (`--opt endpoint=tcp`)",
    ),
    (
        "src/cli/floor_cmd.rs",
        "stream",
        "the floor's one-way loop, not the workload",
    ),
    (
        "src/workload/pairs.rs",
        "uds",
        "the default transport of pairs on threads",
    ),
    (
        "src/workload/pairs.rs",
        "tokio-mpsc",
        "the channel of pairs on tokio tasks",
    ),
];

struct Name {
    name: String,
    /// Where it lives: a file, or a folder ending in `/`.
    home: String,
    /// Behind a Cargo feature of its own.
    adapter: bool,
}

fn names() -> Vec<Name> {
    let cargo = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let features: BTreeSet<String> = cargo
        .split("[features]")
        .nth(1)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(" = ").map(|(k, _)| k.trim().to_string()))
        .collect();
    let mut out = Vec::new();
    for (module, t) in msgperf::transport::MODULES.iter() {
        let folder = root().join("src/transport").join(module);
        let home = if folder.is_dir() {
            format!("src/transport/{module}/")
        } else {
            format!("src/transport/{module}.rs")
        };
        out.push(Name {
            name: t.name().to_string(),
            home,
            adapter: features.contains(*module),
        });
    }
    // Adapters not built in this build are still adapters: their folders and features say so.
    for f in &features {
        let folder = root().join("src/transport").join(f);
        if folder.is_dir() && !out.iter().any(|n| n.name == f.replace('_', "-")) {
            out.push(Name {
                name: f.replace('_', "-"),
                home: format!("src/transport/{f}/"),
                adapter: true,
            });
        }
    }
    for w in msgperf::workload::REGISTRY {
        let home = format!("src/workload/{}.rs", w.name());
        assert!(
            root().join(&home).is_file(),
            "workload `{}` lives in {home}, named as it is",
            w.name()
        );
        out.push(Name {
            name: w.name().to_string(),
            home,
            adapter: false,
        });
    }
    out
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Source files below `dir` (relative to the root), any kind that runs or builds.
fn files(dir: &str, out: &mut Vec<String>) {
    let p = root().join(dir);
    if p.is_file() {
        out.push(dir.to_string());
        return;
    }
    let Ok(entries) = std::fs::read_dir(&p) else {
        return;
    };
    for e in entries.flatten() {
        let rel = format!("{dir}/{}", e.file_name().to_string_lossy());
        if e.path().is_dir() {
            files(&rel, out);
        } else if !rel.ends_with(".md") && !rel.ends_with(".txt") {
            out.push(rel);
        }
    }
}

/// Whether `line` names `name` in code, by the patterns of its file's kind.
fn names_it(line: &str, name: &str, rust: bool) -> bool {
    let code = match line.trim_start() {
        l if l.starts_with("//") => return false,
        l if !rust && l.starts_with('#') => return false,
        l => l,
    };
    let module = name.replace('-', "_");
    let word = |s: &str, at: usize| {
        let before = s[..at].chars().next_back();
        let after = s[at + name.len()..].chars().next();
        let edge =
            |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'));
        edge(before) && edge(after)
    };
    let quoted = |q: char| {
        code.match_indices(name).any(|(at, _)| {
            word(code, at) && code[..at].ends_with(q) && code[at + name.len()..].starts_with(q)
        })
    };
    let after_flag = code.match_indices(name).any(|(at, _)| {
        let before = code[..at].trim_end_matches([' ', '=']);
        word(code, at)
            && (before.ends_with("-t")
                || before.ends_with("--transport")
                || before.ends_with(" run"))
    });
    quoted('"')
        || quoted('`')
        || (!rust && quoted('\''))
        || after_flag
        || code.contains(&format!("transport::{module}::"))
        || code.contains(&format!("super::{module}::"))
        || code.contains(&format!("workload::{module}::"))
        || code.contains(&format!("feature = \"{name}\""))
}

#[test]
fn a_transport_or_workload_is_named_only_in_its_home_and_its_registry_line() {
    let names = names();
    let mut everywhere = Vec::new();
    for d in ["src", "tests", "bench", ".ci", "build.rs"] {
        files(d, &mut everywhere);
    }
    let mut bad = Vec::new();
    for file in &everywhere {
        let text = std::fs::read_to_string(root().join(file)).unwrap_or_default();
        let rust = file.ends_with(".rs");
        // A transport's own tests and benchmark part (`src/transport/NAME/tests.rs`,
        // `bench.py`) run msgperf as tests/ and bench/ do; a suite's file
        // (`src/suite/NAME.toml`) is scenarios, a user's command lines as data.
        let suite = file.starts_with("src/suite/") && file.ends_with(".toml");
        let user = file.starts_with("tests/")
            || file.starts_with("bench/")
            || file.ends_with("/tests.rs")
            || file.ends_with("/bench.py")
            || suite;
        let registry = ["src/transport/mod.rs", "src/workload/mod.rs"].contains(&file.as_str());
        let mut in_unit_tests = false;
        let mut in_registry = false;
        for (i, line) in text.lines().enumerate() {
            in_unit_tests |= line.trim() == "#[cfg(test)]" && file.starts_with("src/");
            if registry && line.starts_with("registry! {") {
                in_registry = true;
            }
            if in_registry {
                in_registry = line != "}";
                continue;
            }
            for n in &names {
                if file.starts_with(&n.home)
                    || (!n.adapter && (user || in_unit_tests))
                    // A suite names the middlewares it adds where they are built, as a
                    // user's scenario would; the adapter needs nothing from it.
                    || suite
                    || OWN_WORDS
                        .iter()
                        .any(|(p, w, _)| file.starts_with(p) && *w == n.name)
                {
                    continue;
                }
                if names_it(line, &n.name, rust) {
                    bad.push(format!(
                        "{file}:{}: names `{}`: {}",
                        i + 1,
                        n.name,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "these name a transport or workload outside its home (move what they need into it, or \
         ask the registry):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_rule_sees_what_it_is_meant_to_see() {
    for line in [
        r#"if t.name() == "pigeon" {"#,
        r#"let args = ["run", "pingpong", "-t", "pigeon"];"#,
        "msgperf run stream -t pigeon --size 64",
        "#[cfg(feature = \"pigeon\")]",
        "use crate::transport::pigeon::Pigeon;",
        "say `pigeon` here",
    ] {
        assert!(names_it(line, "pigeon", true), "{line}");
    }
    for line in [
        "// a comment on pigeon",
        r#"format!("the pigeon broker")"#,
        "let pigeonesque = 1;",
        "tokio::sync::mpsc::channel(1)",
    ] {
        assert!(
            !names_it(line, "pigeon", true) && !names_it(line, "mpsc", true),
            "{line}"
        );
    }
    assert!(names_it(
        "    for t in ('pigeon', 'crow'):",
        "pigeon",
        false
    ));
    assert!(!names_it("# pigeon", "pigeon", false));
}

/// The name of the transport of a case that moves no message is one in both rooms that know it.
#[test]
fn the_absent_transport_has_one_name() {
    assert_eq!(
        msgperf::transport::NO_CHANNEL.name(),
        msgperf::result::NO_TRANSPORT
    );
}

/// What a workload declares is whole: its metrics fill the slots of its recorder once each,
/// and a parameter key that several workloads take means one thing to all of them.
#[test]
fn every_workload_declares_its_metrics_and_parameters_consistently() {
    for w in msgperf::workload::REGISTRY {
        let mut slots: Vec<usize> = w.metrics().iter().map(|m| m.slot()).collect();
        slots.sort_unstable();
        assert_eq!(
            slots,
            (0..w.metrics().len()).collect::<Vec<_>>(),
            "{}: its metrics' slots are 0..n, once each",
            w.name()
        );
        let keys: BTreeSet<&str> = w.metrics().iter().map(|m| m.key()).collect();
        assert_eq!(keys.len(), w.metrics().len(), "{}: distinct keys", w.name());
        for p in w.params() {
            assert!(
                !p.about.is_empty(),
                "{} --{}: says what it is",
                w.name(),
                p.key
            );
            if let Some(d) = p.default {
                p.check(d)
                    .unwrap_or_else(|e| panic!("{} --{}: its default: {e}", w.name(), p.key));
            }
            for other in msgperf::workload::REGISTRY {
                for q in other.params().iter().filter(|q| q.key == p.key) {
                    assert_eq!(
                        format!("{:?}", p.kind),
                        format!("{:?}", q.kind),
                        "--{} means one thing to {} and {}",
                        p.key,
                        w.name(),
                        other.name()
                    );
                }
            }
        }
    }
}
