//! What can go wrong where roles run: each error names the step and the thing, and keeps the
//! cause (an OS error, a control error, a transport's or middleware client's error) as its
//! source, so the one line a user reads says what really failed.

use super::control::ControlError;
use crate::transport::TransportError;

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// An OS call failed at `what` (a socket, a process, a thread, a signal, a listener).
    #[error("{what}: {cause}")]
    Os {
        what: String,
        #[source]
        cause: std::io::Error,
    },
    /// A thread or process could not start at `what`: the limit on tasks was reached.
    #[error("{what}: {cause}; the limit on processes and threads is reached ({limit}): raise it or run fewer roles")]
    TaskLimit {
        what: String,
        limit: String,
        #[source]
        cause: std::io::Error,
    },
    /// A control channel failed at `what`.
    #[error("{what}: {cause}")]
    Control {
        what: String,
        #[source]
        cause: ControlError,
    },
    /// The transport failed at `what` (its set-up, an end, its floor).
    #[error("{what}: {cause}")]
    Transport {
        what: String,
        #[source]
        cause: TransportError,
    },
    /// An address that cannot be reached or listened at: the sentence names it and the fix.
    #[error("{0}")]
    Address(String),
    /// The other side sent what the control protocol does not allow there.
    #[error("{0}")]
    Protocol(String),
    /// What this side was asked and will not do (a case on another transport, a CPU it may
    /// not use): the sentence names the fix.
    #[error("{0}")]
    Refused(String),
    /// A role, floor side or server failed and said why (its line, as it sent it).
    #[error("{0}")]
    Reported(String),
}

impl ExecError {
    pub fn os(what: impl Into<String>, cause: std::io::Error) -> Self {
        ExecError::Os {
            what: what.into(),
            cause,
        }
    }

    /// Starting a thread or process at `what` failed: where the kernel said the task limit is
    /// reached (EAGAIN), the error names the limits that apply, which the fix raises.
    pub fn start(what: impl Into<String>, cause: std::io::Error) -> Self {
        if cause.raw_os_error() != Some(libc::EAGAIN) {
            return ExecError::os(what, cause);
        }
        ExecError::TaskLimit {
            what: what.into(),
            limit: crate::sys::task_limits(),
            cause,
        }
    }

    pub fn control(what: impl Into<String>, cause: ControlError) -> Self {
        ExecError::Control {
            what: what.into(),
            cause,
        }
    }

    pub fn transport(what: impl Into<String>, cause: TransportError) -> Self {
        ExecError::Transport {
            what: what.into(),
            cause,
        }
    }
}
