//! Leaf: msgperf's delivery vocabulary, shared by every transport (which maps it onto its own
//! settings, or refuses what it cannot do), recorded in every result.

use serde::{Deserialize, Serialize};

/// Whether a lost message is a failure.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Reliability {
    /// Nothing may be lost: a slow reader pushes back, and any loss fails the case.
    Reliable,
    /// The writer never waits for a slow reader where the transport can drop; losses are
    /// counted per reader.
    BestEffort,
}

/// Which messages a reader gets.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum History {
    /// Every message, in order (`--history fifo`).
    #[default]
    KeepAll,
    /// Only the newest N; older unread ones are overwritten (counted). `--history latest` is 1.
    KeepLast(u32),
}

/// What a reader that joins late gets.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Durability {
    /// Only what is sent after it joined (every transport msgperf runs).
    #[default]
    Volatile,
}

/// What a case asks of delivery.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub struct Delivery {
    /// None: as the transport is (a reliable one is checked strictly, others count losses).
    pub reliability: Option<Reliability>,
    pub history: History,
    pub durability: Durability,
}

/// One line of a transport's delivery mapping: a setting of the transport and why it has that
/// value (recorded in every result, shown with `--details`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Setting {
    /// The transport's own setting, e.g. `--opt full` or `retransmission`.
    pub setting: String,
    pub value: String,
    /// Which part of the delivery asked for it, and what it does.
    pub because: String,
}

impl Setting {
    pub fn new(setting: &str, value: &str, because: &str) -> Self {
        Setting {
            setting: setting.into(),
            value: value.into(),
            because: because.into(),
        }
    }

    /// A setting that is on or off, with what each means.
    pub fn on_off(setting: &str, on: bool, if_on: &str, if_off: &str) -> Self {
        let (value, because) = if on { ("on", if_on) } else { ("off", if_off) };
        Setting::new(setting, value, because)
    }
}
