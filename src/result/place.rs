//! Where roles run across hosts, as asked: a host's launcher (`--host NAME=LAUNCHER` or
//! `NAME=netns[:rate=R]`) and the name of the runner's own host in `--place`.

/// The name of the runner's own host in `--place`.
pub const LOCAL: &str = "local";

/// How a host is reached, as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// The words before the far program.
    Command(Vec<String>),
    /// A namespace msgperf makes, and its link's conditions.
    Netns(Link),
}

/// What a namespace host's link does to traffic, both ways (`netns:rate=100mbit`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Link {
    /// A token bucket's rate each way, bits/s; none: as fast as the bridge goes.
    pub rate_bits: Option<u64>,
}

impl Link {
    /// `rate=100mbit`, keys separated by commas (`kbit`, `mbit`, `gbit`: decimal, as `tc`).
    fn parse(name: &str, text: &str) -> Result<Link, String> {
        let mut link = Link::default();
        for kv in text.split(',').map(str::trim).filter(|kv| !kv.is_empty()) {
            let bad = || {
                format!(
                    "--host {name}=netns:{text}: `{kv}` is not a link setting: write rate=N with kbit, mbit or gbit (e.g. netns:rate=100mbit)"
                )
            };
            match kv.split_once('=') {
                Some(("rate", v)) => link.rate_bits = Some(bits_per_s(v).ok_or_else(bad)?),
                _ => return Err(bad()),
            }
        }
        Ok(link)
    }

    /// As the run records it: `, 100 Mbit/s`.
    pub fn describe(&self) -> String {
        self.rate_bits
            .map(|r| format!(", {} Mbit/s each way", r as f64 / 1e6))
            .unwrap_or_default()
    }
}

/// `100mbit` as bits/s; bytes (`MB`, `mbps`) are refused, not bent.
fn bits_per_s(v: &str) -> Option<u64> {
    let v = v.trim().to_ascii_lowercase();
    let (number, scale) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .iter()
        .find_map(|(unit, scale)| v.strip_suffix(unit).map(|n| (n.to_string(), *scale)))?;
    let bits = number.trim().parse::<f64>().ok()? * scale;
    (bits >= 8e3 && bits.is_finite()).then_some(bits as u64)
}

impl Launcher {
    /// `netns[:LINK]`, or a command prefix split as a shell would (quotes kept together).
    pub fn parse(name: &str, value: &str) -> Result<Launcher, String> {
        check_name(name)?;
        let value = value.trim();
        if value == "netns" {
            return Ok(Launcher::Netns(Link::default()));
        }
        if let Some(link) = value.strip_prefix("netns:") {
            return Ok(Launcher::Netns(Link::parse(name, link)?));
        }
        match shlex::split(value) {
            Some(words) if !words.is_empty() => Ok(Launcher::Command(words)),
            _ => Err(format!(
                "--host {name}={value}: not a command (unbalanced quotes, or empty): write e.g. --host {name}='ssh -T user@10.0.0.2', or --host {name}=netns"
            )),
        }
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 16
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && name != LOCAL;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "--host {name}=...: a host's name is 1 to 16 letters, digits or `-`, and not `{LOCAL}` (the runner's own): e.g. --host b=netns"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launchers_are_split_as_a_shell_would() {
        assert_eq!(
            Launcher::parse("b", "ssh -T -o 'ProxyCommand=nc %h 22' u@h").unwrap(),
            Launcher::Command(vec![
                "ssh".into(),
                "-T".into(),
                "-o".into(),
                "ProxyCommand=nc %h 22".into(),
                "u@h".into()
            ])
        );
        assert_eq!(
            Launcher::parse("c", " netns ").unwrap(),
            Launcher::Netns(Link::default())
        );
        assert_eq!(
            Launcher::parse("c", "netns:rate=100mbit").unwrap(),
            Launcher::Netns(Link {
                rate_bits: Some(100_000_000)
            })
        );
        for (name, value) in [
            ("b", "netns:rate=100MB"),
            ("b", "netns:rate=fast"),
            ("b", "netns:loss=1%"),
            ("b", "netns:rate=1bit"),
            ("b", "ssh 'x"),
            ("b", "  "),
            ("local", "netns"),
            ("a b", "x"),
        ] {
            let e = Launcher::parse(name, value).unwrap_err();
            assert!(e.starts_with(&format!("--host {name}=")), "{e}");
        }
    }
}
