//! The tokio runtimes that async clients run on. Most (tonic, async-nats, rumqttc, lapin,
//! rdkafka) share one per process, with one worker thread, made on first use so that it
//! inherits the role's CPU; a role's calls block on it, as a synchronous program using such a
//! client would. redis-rs's subscriptions, and the server of a gRPC stream's reader or
//! responder, run on a [`Local`] runtime of each end's own instead.

use super::TransportError;
use std::future::Future;
use std::time::Duration;

/// This process's runtime.
#[cfg(feature = "_shared_runtime")]
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
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
#[cfg(feature = "_shared_runtime")]
pub fn wait<T>(timeout: Duration, f: impl Future<Output = T>) -> Result<T, TransportError> {
    // The timer is made inside the runtime, which it needs.
    runtime()
        .block_on(async { tokio::time::timeout(timeout, f).await })
        .map_err(|_| TransportError::Timeout(timeout))
}

/// A runtime of one endpoint's own with no thread of its own: its connections' tasks run on
/// the role's thread while the role waits in a call, as a synchronous client's I/O does. A
/// request and its answer then cost no hand-off to a worker thread and back (two wake-ups, and
/// on one CPU two context switches, per call). Between calls nothing reads the sockets: what
/// arrives waits in the kernel, as it would for a synchronous client.
#[cfg(feature = "_local_runtime")]
pub struct Local(tokio::runtime::Runtime);

#[cfg(feature = "_local_runtime")]
impl Local {
    pub fn new() -> std::io::Result<Self> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(Local)
    }

    /// Runs `f` on this runtime from this thread, at most `timeout`.
    pub fn wait<T>(
        &self,
        timeout: Duration,
        f: impl Future<Output = T>,
    ) -> Result<T, TransportError> {
        self.0
            .block_on(async { tokio::time::timeout(timeout, f).await })
            .map_err(|_| TransportError::Timeout(timeout))
    }

    /// This runtime's handle, to make I/O resources and tasks on it (a task runs while the
    /// thread waits on the runtime).
    #[allow(dead_code)] // Only an end that serves on it needs it.
    pub fn handle(&self) -> &tokio::runtime::Handle {
        self.0.handle()
    }

    /// `f`'s output if it is ready once this runtime has taken what its sockets hold now,
    /// without waiting for more.
    pub fn now<T>(&self, f: impl Future<Output = T>) -> Option<T> {
        self.0.block_on(async {
            let mut f = std::pin::pin!(f);
            // A yield lets the runtime poll its sockets without blocking and run the tasks
            // that they wake (a connection's reader), which then wake `f`: two turns suffice.
            for _ in 0..3 {
                let polled = std::future::poll_fn(|cx| std::task::Poll::Ready(f.as_mut().poll(cx)));
                if let std::task::Poll::Ready(v) = polled.await {
                    return Some(v);
                }
                tokio::task::yield_now().await;
            }
            None
        })
    }
}

#[cfg(feature = "_local_runtime")]
impl Local {
    /// Runs `f` on this runtime from this thread with no timer (an end that msgperf watches).
    pub fn block_on<T>(&self, f: impl Future<Output = T>) -> T {
        self.0.block_on(f)
    }
}

/// The runtime an end's connection runs on: its own, which the role's thread runs while it
/// waits in a call (an end that reads after every write, or only reads), or the process's
/// shared one, whose worker thread runs it between calls (an end that may write and then not
/// read for a while: what it wrote must still go out).
#[cfg(all(feature = "_shared_runtime", feature = "_local_runtime"))]
pub enum Driver {
    Own(Local),
    Shared,
}

#[cfg(all(feature = "_shared_runtime", feature = "_local_runtime"))]
impl Driver {
    /// Its own runtime if `own`, else the shared one.
    pub fn new(own: bool) -> std::io::Result<Driver> {
        Ok(if own {
            Driver::Own(Local::new()?)
        } else {
            Driver::Shared
        })
    }

    /// The runtime's handle, to make sockets and tasks on it.
    pub fn handle(&self) -> &tokio::runtime::Handle {
        match self {
            Driver::Own(l) => l.handle(),
            Driver::Shared => runtime().handle(),
        }
    }

    /// Runs `f` from this thread, at most `bound` (None: no timer, for an end that msgperf
    /// watches and ends itself if its peer stops).
    pub fn run<T>(
        &self,
        bound: Option<Duration>,
        f: impl Future<Output = T>,
    ) -> Result<T, TransportError> {
        match (self, bound) {
            (Driver::Own(l), Some(t)) => l.wait(t, f),
            (Driver::Own(l), None) => Ok(l.block_on(f)),
            (Driver::Shared, Some(t)) => wait(t, f),
            (Driver::Shared, None) => Ok(runtime().block_on(f)),
        }
    }

    /// `f`'s output if it is ready now (on its own runtime, once the runtime has taken what
    /// its sockets hold).
    pub fn now<T>(&self, f: impl Future<Output = T>) -> Option<T> {
        match self {
            Driver::Own(l) => l.now(f),
            Driver::Shared => runtime().block_on(async {
                let mut f = std::pin::pin!(f);
                match std::future::poll_fn(|cx| std::task::Poll::Ready(f.as_mut().poll(cx))).await {
                    std::task::Poll::Ready(v) => Some(v),
                    std::task::Poll::Pending => None,
                }
            }),
        }
    }
}
