//! Where roles run across hosts, as asked: a host's launcher (`--host NAME=LAUNCHER` or
//! `NAME=netns`) and the name of the runner's own host in `--place`.

/// The name of the runner's own host in `--place`.
pub const LOCAL: &str = "local";

/// How a host is reached, as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// The words before the far program.
    Command(Vec<String>),
    /// A namespace msgperf makes.
    Netns,
}

impl Launcher {
    /// `netns`, or a command prefix split as a shell would (quotes kept together).
    pub fn parse(name: &str, value: &str) -> Result<Launcher, String> {
        check_name(name)?;
        if value.trim() == "netns" {
            return Ok(Launcher::Netns);
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
        assert_eq!(Launcher::parse("c", " netns ").unwrap(), Launcher::Netns);
        for (name, value) in [
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
