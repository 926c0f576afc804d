//! The source reports as suites: each one `msgperf suite --list` names runs at a small size,
//! prints its table in the report's layout and checks every conclusion it lists; its file
//! prints, and an edited copy runs or is refused in one line. No figure is asserted.

mod support;

use std::time::Duration;
use support::*;

fn suites() -> Vec<String> {
    let out = run(&["suite", "--list"], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn every_suite_runs_small_and_checks_each_conclusion() {
    let _pace = sharing();
    let names = suites();
    assert!(names.contains(&"nml".to_string()), "{names:?}");
    for name in names {
        let file = run(&["suite", &name, "--print"], Duration::from_secs(30));
        let file = text(&file.stdout);
        let conclusions = file
            .lines()
            .filter(|l| l.trim() == "[[conclusion]]")
            .count();
        assert!(conclusions > 0, "{name}: no conclusions");
        let dir = temp_dir();
        let json = dir.path().join("suite.json");
        let html = dir.path().join("suite.html");
        let out = run(
            &[
                "suite",
                &name,
                "--duration",
                "50ms",
                "--no-floor",
                "--json",
                json.to_str().unwrap(),
                "--export",
                &format!("html={}", html.display()),
            ],
            Duration::from_secs(600),
        );
        let printed = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}\n{printed}",
            text(&out.stderr)
        );
        assert!(printed.contains("rerun today"), "{name}: {printed}");
        let checked = printed.split("the report's conclusions, checked:").nth(1);
        let checked = checked.unwrap_or_else(|| panic!("{name}: no conclusions printed"));
        assert_eq!(
            checked.lines().filter(|l| l.starts_with("- \"")).count(),
            conclusions,
            "{name}: {checked}"
        );
        let claims = file
            .lines()
            .filter(|l| l.trim_start().starts_with("{ says = "))
            .count();
        let verdicts = checked
            .lines()
            .filter(|l| {
                let l = l.trim_start();
                l.starts_with("holds: ")
                    || l.starts_with("no longer holds: ")
                    || l.starts_with("not measured: ")
            })
            .count();
        assert_eq!(verdicts, claims, "{name}: {checked}");
        // The same verdicts in the JSON, typed, and the table in the HTML report.
        let saved: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let outcome = &saved["suite"];
        assert_eq!(outcome["name"], name.as_str(), "{name}");
        let typed: Vec<&serde_json::Value> = outcome["conclusions"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| c["claims"].as_array().unwrap())
            .collect();
        assert_eq!(typed.len(), claims, "{name}: {outcome}");
        for c in typed {
            let verdict = c["verdict"].as_str().unwrap();
            let compared = c["compared"].as_array().unwrap();
            assert!(
                ["holds", "no-longer-holds", "not-measured"].contains(&verdict)
                    && (verdict == "not-measured") == compared.is_empty(),
                "{name}: {c}"
            );
            for x in compared {
                let (a, b, ratio) = (
                    x["a_value"].as_f64(),
                    x["b_value"].as_f64(),
                    x["ratio"].as_f64(),
                );
                assert!(
                    matches!((a, b, ratio), (Some(a), Some(b), Some(r)) if b > 0.0 && (a / b - r).abs() <= 1e-9 * r.abs().max(1.0)),
                    "{name}: {x}"
                );
            }
        }
        assert_eq!(
            outcome["rows"].as_array().unwrap().len(),
            printed
                .split("rerun today:")
                .nth(1)
                .and_then(|t| t.split("the report's conclusions").next())
                .unwrap()
                .lines()
                .filter(|l| l
                    .trim_start()
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit()))
                .count(),
            "{name}"
        );
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(
            page.contains(&format!("<h2>Suite {name}:")) && page.contains("checked</h3>"),
            "{name}"
        );
    }
}

#[test]
fn an_edited_suite_runs_from_its_file_and_a_broken_one_is_refused() {
    let dir = temp_dir();
    let text_of =
        |name: &str| text(&run(&["suite", name, "--print"], Duration::from_secs(30)).stdout);
    let broken = dir.path().join("broken.toml");
    std::fs::write(
        &broken,
        text_of("nml").replacen("experiment = \"same-host\"", "experiment = \"nowhere\"", 1),
    )
    .unwrap();
    let out = run(
        &["suite", "--file", broken.to_str().unwrap()],
        Duration::from_secs(30),
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("`nowhere`") && err.lines().count() == 1,
        "{err}"
    );
    let out = run(&["suite", "nosuch"], Duration::from_secs(30));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("suite --list"), "{err}");
}
