//! Test templates (Mett's test controller, done in TOML): a file that describes a whole run,
//! so a test is repeatable and reviewable. `msgperf run --scenario FILE` runs one; every command
//! line prints its equivalent with `--print-scenario`. Unknown keys and wrong types are errors
//! with the line, the column and what was expected.
//!
//! ```toml
//! workload = "stream"
//! transports = ["uds", "shm"]
//! size = "200..64k*2"      # as --size: a list or a range
//! rate = "100hz,1khz,max"  # as --rate
//! duration = "5s"          # or count = 100000
//! warmup = "200ms"
//! placement = "cross-cpu"  # same-cpu | cross-cpu | any, or pin = [0, 1]
//! pubs = 1                 # pubsub roles: publishers and subscribers
//! subs = 5
//! delivery = "reliable"    # or "best-effort"; history = "fifo" | "latest"
//! [options]                # as --opt
//! wait = "spin,block"
//! [output]
//! json = "results.json"
//! ```

use super::{Delivery, History, RunRequest};
use crate::result::Placement;
use crate::units::{format_duration, parse_duration, parse_rate_list, parse_size_list};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One test, as a file holds it. Field names are the command line's option names.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub workload: String,
    pub transports: Vec<String>,
    #[serde(default = "default_size")]
    pub size: String,
    #[serde(default = "default_rate")]
    pub rate: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    #[serde(default = "default_warmup")]
    pub warmup: String,
    #[serde(default)]
    pub poll: bool,
    #[serde(default)]
    pub confirm: bool,
    #[serde(default)]
    pub checksum: bool,
    #[serde(default)]
    pub threads: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<Vec<usize>>,
    #[serde(default = "default_timeout")]
    pub timeout: String,
    /// Measure the floor and print ratios to it.
    #[serde(default = "yes")]
    pub floor: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<String>,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub pubs: usize,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub subs: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Delivery>,
    #[serde(default, skip_serializing_if = "is_fifo")]
    pub history: History,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_subscriber: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Output::is_empty")]
    pub output: Output,
}

/// Where results go.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Output {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csv: Option<String>,
    #[serde(default)]
    pub details: bool,
}

impl Output {
    fn is_empty(&self) -> bool {
        *self == Output::default()
    }
}

fn default_size() -> String {
    "64".into()
}
fn default_rate() -> String {
    "max".into()
}
fn default_warmup() -> String {
    "200ms".into()
}
fn default_timeout() -> String {
    "10s".into()
}
fn yes() -> bool {
    true
}
fn one() -> usize {
    1
}
fn is_one(n: &usize) -> bool {
    *n == 1
}
fn is_fifo(h: &History) -> bool {
    *h == History::Fifo
}

impl Scenario {
    /// Parses a template; errors carry the line, the column and what was expected.
    pub fn parse(text: &str, origin: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| format!("{origin}: {}", e.to_string().trim_end()))
    }

    pub fn to_toml(&self) -> String {
        format!(
            "# msgperf scenario: run it with `msgperf run --scenario FILE`\n{}",
            toml::to_string(self).expect("scenarios serialize")
        )
    }

    /// The run this template asks for; values are checked as the command line's are.
    pub fn request(&self) -> Result<RunRequest, String> {
        let dur = |what: &str, v: &str| parse_duration(v).map_err(|e| format!("{what}: {e}"));
        Ok(RunRequest {
            workload: self.workload.clone(),
            transports: self.transports.clone(),
            sizes: parse_size_list(&self.size).map_err(|e| format!("size: {e}"))?,
            count: self.count,
            duration: self
                .duration
                .as_deref()
                .map(|d| dur("duration", d))
                .transpose()?,
            warmup: dur("warmup", &self.warmup)?,
            poll: self.poll,
            confirm: self.confirm,
            checksum: self.checksum,
            rates_hz: parse_rate_list(&self.rate).map_err(|e| format!("rate: {e}"))?,
            timeout: dur("timeout", &self.timeout)?,
            placement: self.placement,
            pin: self.pin.clone(),
            threads: self.threads,
            options: self.options.clone(),
            connect: self.connect.clone(),
            pubs: self.pubs,
            subs: self.subs,
            delivery: self.delivery,
            history: self.history,
            slow_subscriber: self
                .slow_subscriber
                .as_deref()
                .map(|d| dur("slow_subscriber", d))
                .transpose()?,
        })
    }

    /// The template of a run request (the raw size and rate texts are kept as given).
    pub fn from_request(
        r: &RunRequest,
        size: &str,
        rate: &str,
        floor: bool,
        output: Output,
    ) -> Self {
        Scenario {
            workload: r.workload.clone(),
            transports: r.transports.clone(),
            size: size.into(),
            rate: rate.into(),
            count: r.count,
            duration: r.duration.map(format_duration),
            warmup: format_duration(r.warmup),
            poll: r.poll,
            confirm: r.confirm,
            checksum: r.checksum,
            threads: r.threads,
            placement: r.placement,
            pin: r.pin.clone(),
            timeout: format_duration(r.timeout),
            floor,
            connect: r.connect.clone(),
            pubs: r.pubs,
            subs: r.subs,
            delivery: r.delivery,
            history: r.history,
            slow_subscriber: r.slow_subscriber.map(format_duration),
            options: r.options.clone(),
            output,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_round_trips_to_the_same_cases() {
        let text = r#"
            workload = "stream"
            transports = ["uds", "tcp"]
            size = "64..4k*4"
            rate = "1khz,max"
            count = 1000
            placement = "any"
            [options]
            nodelay = "true"
        "#;
        let err = Scenario::parse(text, "t.toml")
            .unwrap()
            .request()
            .map(|r| super::super::cases(&r));
        // uds takes no nodelay: the template is checked exactly like a command line.
        assert!(err.unwrap().unwrap_err().contains("takes no --opt"));
        let text = text.replace("[options]\n            nodelay = \"true\"", "");
        let s = Scenario::parse(&text, "t.toml").unwrap();
        let cases = super::super::cases(&s.request().unwrap()).unwrap();
        assert_eq!(cases.len(), 2 * 4 * 2, "2 transports x 4 sizes x 2 rates");
        let again = Scenario::parse(&s.to_toml(), "printed").unwrap();
        assert_eq!(again, s);
        assert_eq!(
            super::super::cases(&again.request().unwrap()).unwrap(),
            cases
        );
    }

    #[test]
    fn a_pubsub_template_keeps_its_roles_and_delivery() {
        let text = r#"
            workload = "pubsub"
            transports = ["shm"]
            size = "200"
            rate = "1khz"
            duration = "2s"
            pubs = 5
            subs = 1
            delivery = "best-effort"
            slow_subscriber = "1ms"
        "#;
        let s = Scenario::parse(text, "p.toml").unwrap();
        let cases = super::super::cases(&s.request().unwrap()).unwrap();
        let c = &cases[0];
        assert_eq!((c.pubs, c.subs), (5, 1));
        assert!(!c.strict, "best-effort");
        assert_eq!(c.options.get("full").map(String::as_str), Some("fail"));
        assert_eq!(c.slow_subscriber, Some(std::time::Duration::from_millis(1)));
        let again = Scenario::parse(&s.to_toml(), "printed").unwrap();
        assert_eq!(again, s);
        assert_eq!(
            super::super::cases(&again.request().unwrap()).unwrap(),
            cases
        );
        let e = Scenario::parse(&text.replace("best-effort", "sometimes"), "p.toml").unwrap_err();
        assert!(e.contains("line 9") && e.contains("reliable"), "{e}");
    }

    #[test]
    fn bad_templates_name_the_line_column_and_what_was_expected() {
        let e = Scenario::parse(
            "workload = \"stream\"\ntransports = [\"uds\"]\ndurration = \"5s\"\n",
            "bad.toml",
        )
        .unwrap_err();
        assert!(
            e.contains("bad.toml") && e.contains("line 3") && e.contains("column 1"),
            "{e}"
        );
        assert!(
            e.contains("durration") && e.contains("duration"),
            "names the key and the expected ones: {e}"
        );
        let e = Scenario::parse("workload = \"stream\"\ntransports = \"uds\"\n", "bad.toml")
            .unwrap_err();
        assert!(e.contains("line 2") && e.contains("sequence"), "{e}");
        let e = Scenario::parse("transports = [\"uds\"]\n", "bad.toml").unwrap_err();
        assert!(e.contains("missing field `workload`"), "{e}");
        let e = Scenario::parse(
            "workload = \"stream\"\ntransports = [\"uds\"]\nplacement = \"everywhere\"\n",
            "bad.toml",
        )
        .unwrap_err();
        assert!(e.contains("line 3") && e.contains("same-cpu"), "{e}");
        let s = Scenario::parse(
            "workload = \"stream\"\ntransports = [\"uds\"]\nduration = \"soon\"\n",
            "ok.toml",
        )
        .unwrap();
        assert!(
            s.request().unwrap_err().contains("duration"),
            "values are checked too"
        );
    }
}
