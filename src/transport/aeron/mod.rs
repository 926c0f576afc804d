//! `aeron`: Aeron through rusteron (the Aeron C client and media driver, built from source by
//! cargo and linked into msgperf). Each case's set-up starts a media driver as a process of
//! its own (`driver.rs`), in a private directory, measured and watched as a role like a
//! broker. Messages go over IPC (`aeron:ipc`, the default: the log buffers are shared memory
//! the driver maps) or UDP on loopback (`--opt channel=udp`, through the driver's sender and
//! receiver). A channel is two streams, one per direction: each end has an exclusive
//! publication and a subscription. A topic is one publication that every subscriber reads (the
//! driver's own fan-out). Readers poll, spinning or yielding between polls (`--opt wait`).
//! Cargo feature `aeron`.

mod driver;
mod floor;

use super::{
    as_it_is, dir_of, into_buffer, next_within, private_dir, Capabilities, ChannelSpec,
    DeliveryMap, DirGuard, Endpoint, Exchange, Floor, Opening, OptionSpec, Options, Place,
    Rendezvous, Setup, SetupPlan, Side, Take, Transport, TransportError,
};
use crate::deadline::Deadline;
use crate::delivery::{Delivery, Reliability, Setting};
use crate::transport::{EndpointResult, OpenResult};
use rusteron_client as rc;
use std::ffi::CString;
use std::path::Path;
use std::time::Duration;

pub struct Aeron;

/// The stream id of topic `t`; a channel's two streams are numbered below it.
const TOPICS: i32 = 1 << 20;

impl Transport for Aeron {
    fn name(&self) -> &'static str {
        "aeron"
    }
    fn about(&self) -> &'static str {
        "Aeron (rusteron: the C client and media driver): IPC or UDP streams, the driver started per case (feature `aeron`)"
    }
    fn note(&self) -> Option<&'static str> {
        Some("aeron: a media driver per case, measured as a role; readers poll (--opt wait)")
    }
    fn options(&self) -> &'static [OptionSpec] {
        &[
            OptionSpec {
                key: "channel",
                default: "ipc",
                about: "aeron:ipc (log buffers in shared memory) or aeron:udp on loopback (through the driver's sender and receiver)",
                values: &["ipc", "udp"],
                check: None,
            },
            OptionSpec {
                key: "wait",
                default: "spin-yield",
                about: "how a reader waits between polls: spin, or spin-yield (yield the CPU after each empty poll)",
                values: &["spin", "spin-yield"],
                check: None,
            },
            OptionSpec {
                key: "reliable",
                default: "true",
                about: "over UDP, false: a lost packet is not sent again, its gap is filled (what --delivery best-effort sets)",
                values: &["true", "false"],
                check: None,
            },
            OptionSpec {
                key: "threading",
                default: "shared",
                about: "the media driver's threading mode: one thread for everything, the network in one more, or a thread per agent",
                values: &["shared", "shared-network", "dedicated"],
                check: None,
            },
            OptionSpec {
                key: "driver-idle",
                default: "backoff",
                about: "the media driver's idle strategy: spin, then yield, then park (backoff); busy-spin; yield; sleep",
                values: &["backoff", "busy-spin", "yield", "sleep"],
                check: None,
            },
        ]
    }
    fn capabilities(&self, options: &Options) -> Capabilities {
        Capabilities {
            reliable: options.get("reliable").is_none_or(|r| r == "true"),
            // An eighth of a term.
            max_message_bytes: driver::TERM / 8,
            cross_process: true,
            native_fan_out: 1024,
            reads_in_place: true,
            exchange: Exchange::Both,
            ..Capabilities::default()
        }
    }

    fn map_delivery(&self, d: &Delivery, options: &Options) -> Result<DeliveryMap, String> {
        let udp = options.get("channel").is_some_and(|c| c == "udp");
        let given = options.get("reliable").map(String::as_str);
        let lossy = match (d.reliability, given) {
            (_, Some("false")) if !udp => return Err("--opt reliable=false is Aeron's over UDP: add --opt channel=udp, or drop it (aeron:ipc never loses a message)".into()),
            (Some(Reliability::Reliable), Some("false")) => return Err("--delivery reliable, but --opt reliable=false was given: drop one of them".into()),
            (Some(Reliability::BestEffort), Some("true")) => return Err("--delivery best-effort is Aeron's reliable=false, but --opt reliable=true was given: drop one of them".into()),
            (Some(Reliability::BestEffort), _) => udp,
            (_, g) => g == Some("false"),
        };
        let mut with = options.clone();
        with.insert("reliable".into(), (!lossy).to_string());
        let mut m = as_it_is(self.name(), &self.capabilities(&with), d)?;
        if lossy && given.is_none() {
            m.options.insert("reliable".into(), "false".into());
        }
        if lossy {
            m.settings[0] = Setting::new(
                "reliability",
                "reliable=false",
                "over UDP a lost packet is not sent again; its gap is filled and counted as lost",
            );
        }
        m.settings.insert(
            0,
            Setting::new(
                "flow control",
                "publication limit",
                "a publication a term window ahead of its slowest subscriber is back-pressured: the writer waits",
            ),
        );
        Ok(m)
    }

    fn setup(&self, plan: &SetupPlan, spec: &ChannelSpec) -> Result<Setup, TransportError> {
        let dir = DirGuard(private_dir()?);
        let driver = driver::MediaDriver::start(
            &dir.0.join("aeron"),
            &spec.options,
            plan.cpu,
            spec.timeout,
        )?;
        let service = driver.service();
        let place = Place::Dir(driver.dir.display().to_string());
        // The driver stops before its directory goes.
        Ok(Setup::new(Rendezvous::new(self.name(), place), (driver, dir)).with_service(service))
    }

    fn open(&self, _: &Rendezvous, side: Side, spec: &ChannelSpec) -> OpenResult {
        // Over UDP a binding end picks the ports its channel or topic meets on.
        let ports = match side {
            Side::Accept(_) if udp(spec) => Some(format!("{},{}", free_port()?, free_port()?)),
            Side::Publish { .. } if udp(spec) => Some(free_port()?.to_string()),
            _ => None,
        };
        Ok(Box::new(AeronOpening { side, ports }))
    }

    fn floor(&self) -> Option<&'static dyn Floor> {
        Some(&floor::AeronFloor)
    }

    fn service_main(&self, args: &[String]) -> Result<(), TransportError> {
        driver::run(args)
    }
}

fn udp(spec: &ChannelSpec) -> bool {
    spec.option("channel") == Some("udp")
}

/// A UDP port free now on loopback, for the driver to bind.
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::UdpSocket::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn aeron_error(what: impl Into<String>, e: rc::AeronCError) -> TransportError {
    TransportError::middleware("aeron", what, format!("{e:?}"))
}

/// A client of the media driver in `dir`, started.
pub(super) fn client(dir: &Path) -> Result<(rc::AeronContext, rc::Aeron), TransportError> {
    let at = CString::new(dir.display().to_string())
        .map_err(|e| TransportError::Unsupported(e.to_string()))?;
    let context = rc::AeronContext::new().map_err(|e| aeron_error("a client context", e))?;
    context
        .set_dir(&at)
        .map_err(|e| aeron_error("a client context", e))?;
    // Aeron's default handler exits the process (a driver gone, say): the role's next call
    // fails instead, naming the cause, which this handler prints first.
    context
        .set_error_handler(Some(|code: i32, msg: &str| {
            eprintln!("aeron client: error {code}: {msg}")
        }))
        .map_err(|e| aeron_error("a client context", e))?;
    let client = rc::Aeron::new(&context)
        .map_err(|e| aeron_error(format!("connecting to the driver in {}", dir.display()), e))?;
    client
        .start()
        .map_err(|e| aeron_error(format!("connecting to the driver in {}", dir.display()), e))?;
    Ok((context, client))
}

/// A channel URI: IPC, or UDP to `port` on loopback.
fn uri(port: Option<u16>, best_effort: bool) -> CString {
    let text = match port {
        None => "aeron:ipc".to_string(),
        Some(p) if best_effort => format!("aeron:udp?endpoint=127.0.0.1:{p}|reliable=false"),
        Some(p) => format!("aeron:udp?endpoint=127.0.0.1:{p}"),
    };
    CString::new(text).expect("no NUL in a URI")
}

/// What an end publishes and subscribes to: (stream id, UDP port) for each.
type Streams = (Option<(i32, Option<u16>)>, Option<(i32, Option<u16>)>);

/// The streams of `side`: a channel's are numbered by channel, even for what its connecting
/// end writes and odd for what its accepting end writes; over UDP each goes to the port of the
/// end that reads it (`ports`, which the binding end picked).
fn streams(side: Side, ports: &[u16]) -> Streams {
    let port = |i: usize| ports.get(i).copied();
    match side {
        Side::Accept(n) => {
            let (up, down) = (2 * n as i32, 2 * n as i32 + 1);
            (Some((down, port(1))), Some((up, port(0))))
        }
        Side::Connect(n) => {
            let (up, down) = (2 * n as i32, 2 * n as i32 + 1);
            (Some((up, port(0))), Some((down, port(1))))
        }
        Side::Publish { topic, .. } => (Some((TOPICS + topic as i32, port(0))), None),
        Side::Subscribe { topic, .. } => (None, Some((TOPICS + topic as i32, port(0)))),
    }
}

struct AeronOpening {
    side: Side,
    /// The ports this binding end picked (UDP), as reported.
    ports: Option<String>,
}

impl Opening for AeronOpening {
    fn address(&self) -> Option<String> {
        self.ports.clone()
    }

    fn finish(self: Box<Self>, at: &Rendezvous, spec: &ChannelSpec) -> EndpointResult {
        let timeout = spec.timeout;
        let ports: Vec<u16> = match (&self.ports, udp(spec)) {
            (_, false) => Vec::new(),
            (Some(p), true) => parse_ports(p)?,
            (None, true) => parse_ports(at.bound_at(self.side)?)?,
        };
        let best_effort = spec.option("reliable") == Some("false");
        let (context, client) = client(&dir_of(at)?)?;
        let (publishes, subscribes) = streams(self.side, &ports);
        let publication = match publishes {
            Some((stream, port)) => Some(
                client
                    .async_add_exclusive_publication(&uri(port, best_effort), stream)
                    .and_then(|p| p.poll_blocking(timeout))
                    .map_err(|e| aeron_error(format!("adding publication {stream}"), e))?,
            ),
            None => None,
        };
        let subscription = match subscribes {
            Some((stream, port)) => Some(
                client
                    .async_add_subscription(
                        &uri(port, best_effort),
                        stream,
                        rc::Handlers::NONE,
                        rc::Handlers::NONE,
                    )
                    .and_then(|s| s.poll_blocking(timeout))
                    .map_err(|e| aeron_error(format!("adding subscription {stream}"), e))?,
            ),
            None => None,
        };
        // Open once each publication has a subscriber and each subscription an image of its
        // peer's publication: nothing written is then lost to the joining.
        let deadline = Deadline::after(timeout);
        while !(publication.as_ref().is_none_or(|p| p.is_connected())
            && subscription.as_ref().is_none_or(|s| s.is_connected()))
        {
            if deadline.expired() {
                return Err(TransportError::Timeout(timeout));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(Box::new(AeronEnd {
            publication,
            subscription,
            assembler: rc::AeronFragmentClosureAssembler::new()
                .map_err(|e| aeron_error("a fragment assembler", e))?,
            timeout,
            spin: spec.option("wait") == Some("spin"),
            _client: client,
            _context: context,
        }))
    }
}

fn parse_ports(text: &str) -> Result<Vec<u16>, TransportError> {
    text.split(',')
        .map(|p| p.parse::<u16>())
        .collect::<Result<_, _>>()
        .map_err(|_| TransportError::Corrupt(format!("aeron: `{text}` is not a list of ports")))
}

struct AeronEnd {
    publication: Option<rc::AeronExclusivePublication>,
    subscription: Option<rc::AeronSubscription>,
    /// Whole messages out of fragments (a message longer than the MTU comes in several).
    assembler: rc::AeronFragmentClosureAssembler,
    timeout: Duration,
    /// Spin between empty polls, else yield.
    spin: bool,
    // Dropped after the publication and subscription.
    _client: rc::Aeron,
    _context: rc::AeronContext,
}

// SAFETY: rusteron's handles count their references with `Rc`, so they are not `Send`. An
// end owns every handle of its client (context, client, publication, subscription, assembler)
// and nothing else holds a clone: the end moves to another thread whole, and only one thread
// uses it at a time (the Aeron C client is safe to call from any one thread).
#[allow(unsafe_code)]
unsafe impl Send for AeronEnd {}

/// Where a poll hands its message: a take (a copy out, for `recv`), or the reader's own read
/// in place (`recv_with`), called straight from Aeron's callback: one call fewer a message, a
/// few nanoseconds of a message that lasts twenty.
enum Hand<'t, 'a> {
    Take(&'t mut Take<'a>),
    Read(&'t mut dyn FnMut(&[u8])),
    /// Each message there now, until the read returns false (`recv_each`).
    Each(&'t mut dyn FnMut(&[u8]) -> bool),
}

/// What a poll handed over: where to, and the length it took or why it failed (apart, not as
/// one `Result`: a result as large as an error is copied out of the callback and back, which
/// stalls a read that lasts a few nanoseconds).
struct Got<'t, 'a> {
    hand: Hand<'t, 'a>,
    /// The length taken (a take, a read) or how many messages were handed (each).
    took: Option<usize>,
    failed: Option<TransportError>,
    /// Each: the read takes more.
    more: bool,
}

fn on_message(got: &mut Got, msg: &[u8], _: rc::AeronHeader) {
    if let Hand::Each(read) = &mut got.hand {
        // One fragment a poll: a poll ends at most one message, so `more` is asked in time.
        got.more = read(msg);
        got.took = Some(got.took.map_or(1, |n| n + 1));
        return;
    }
    if got.took.is_some() {
        return;
    }
    match &mut got.hand {
        Hand::Each(_) => {}
        Hand::Read(read) => {
            read(msg);
            got.took = Some(msg.len());
        }
        Hand::Take(take) => match take(msg) {
            Ok(n) => got.took = Some(n),
            Err(e) => {
                got.took = Some(0);
                got.failed = Some(e);
            }
        },
    }
}

/// Polls between clock reads: a deadline is checked this often.
const POLLS_PER_CHECK: u32 = 256;

impl AeronEnd {
    fn idle(&self) {
        if self.spin {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }

    /// The next message, handed over where Aeron keeps it (each message there then, for
    /// [`Hand::Each`]), waiting at most `timeout` (zero: one poll).
    #[inline(always)]
    fn next(&mut self, hand: Hand, timeout: Duration) -> Result<Option<usize>, TransportError> {
        let Some(sub) = &self.subscription else {
            return Err(TransportError::Unsupported(
                "aeron: this end only writes (a topic's publisher)".into(),
            ));
        };
        let mut got = Got {
            hand,
            took: None,
            failed: None,
            more: true,
        };
        let mut deadline: Option<Deadline> = None;
        let mut polls = 0u32;
        loop {
            // One fragment at a time, so that at most one message ends per poll.
            let fragments = self
                .assembler
                .poll(sub, &mut got, on_message, 1)
                .map_err(|e| aeron_error("a poll", e))?;
            if let Some(n) = got.took {
                // Each: on while the read takes more and a poll finds more.
                if matches!(got.hand, Hand::Each(_)) && got.more && fragments > 0 {
                    continue;
                }
                return match got.failed.take() {
                    None => Ok(Some(n)),
                    Some(e) => Err(e),
                };
            }
            // A fragment of a longer message: the rest is in the log already, poll on. Only
            // a poll that found nothing waits, as Aeron's idle strategies do.
            if fragments > 0 {
                continue;
            }
            if timeout.is_zero() {
                return Ok(None);
            }
            polls += 1;
            if polls.is_multiple_of(POLLS_PER_CHECK)
                && deadline
                    .get_or_insert_with(|| Deadline::after(timeout))
                    .expired()
            {
                return Err(TransportError::Timeout(timeout));
            }
            self.idle();
        }
    }
}

impl Endpoint for AeronEnd {
    fn send(&mut self, msg: &[u8]) -> Result<(), TransportError> {
        let Some(p) = &self.publication else {
            return Err(TransportError::Unsupported(
                "aeron: a subscriber only reads".into(),
            ));
        };
        let mut deadline: Option<Deadline> = None;
        let mut tries = 0u32;
        loop {
            match p.offer(msg) {
                Ok(_) => return Ok(()),
                Err(rc::AeronOfferError::BackPressured | rc::AeronOfferError::AdminAction) => {}
                // Its subscriber went away (it was there when the channel opened).
                Err(rc::AeronOfferError::NotConnected | rc::AeronOfferError::Closed) => {
                    return Err(TransportError::PeerClosed)
                }
                Err(e) => {
                    return Err(TransportError::middleware(
                        "aeron",
                        "an offer",
                        format!("{e:?}"),
                    ))
                }
            }
            tries += 1;
            if tries.is_multiple_of(POLLS_PER_CHECK)
                && deadline
                    .get_or_insert_with(|| Deadline::after(self.timeout))
                    .expired()
            {
                return Err(TransportError::Timeout(self.timeout));
            }
            self.idle();
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, TransportError> {
        next_within(self.timeout, |t| {
            self.next(Hand::Take(&mut into_buffer(&mut *buf)), t)
        })
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, TransportError> {
        self.next(Hand::Take(&mut into_buffer(buf)), Duration::ZERO)
    }

    fn recv_with(&mut self, read: &mut dyn FnMut(&[u8])) -> Result<usize, TransportError> {
        next_within(self.timeout, |t| self.next(Hand::Read(&mut *read), t))
    }

    fn recv_each(&mut self, read: &mut dyn FnMut(&[u8]) -> bool) -> Result<usize, TransportError> {
        next_within(self.timeout, |t| self.next(Hand::Each(&mut *read), t))
    }
}
