//! The tokio runtime that async clients (tonic, async-nats) run on: one per process, with one
//! worker thread, made on first use so that it inherits the role's CPU. A role's calls block
//! on it, as a synchronous program using such a client would.

use super::TransportError;
use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

/// This process's runtime.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("msgperf-async")
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
}

/// Runs `f` on the runtime from this thread, at most `timeout`.
pub fn wait<T>(timeout: Duration, f: impl Future<Output = T>) -> Result<T, TransportError> {
    // The timer is made inside the runtime, which it needs.
    runtime()
        .block_on(async { tokio::time::timeout(timeout, f).await })
        .map_err(|_| TransportError::Timeout(timeout))
}
