//! A thin layer over Cyclone DDS's C API (the raw bindings of `cyclors`): a participant per
//! process and domain, topics of msgperf's one IDL type, writers, and readers that wait in a
//! waitset or on a listener. The adapter and its floor both use it, so they differ only in
//! what msgperf adds.

use crate::deadline::Deadline;
use crate::transport::HostAddresses;
use cyclors::*;
use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::mem::{offset_of, MaybeUninit};
use std::ptr::null_mut;
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Duration;

/// msgperf's message type, laid out as `idlc` generates it from
///
/// ```idl
/// @final struct Message {
///   unsigned long long seq;    // this writer's count of writes
///   long long stamp;           // CLOCK_MONOTONIC at the write, in ns
///   sequence<octet> payload;   // msgperf's whole message
/// };
/// ```
///
/// Cyclone serializes it (XCDR1) from the descriptor below: its opcodes are the ones `idlc`
/// writes for this IDL.
#[repr(C)]
struct Message {
    seq: u64,
    stamp: i64,
    payload: OctetSeq,
}

/// `dds_sequence_octet`.
#[repr(C)]
struct OctetSeq {
    maximum: u32,
    length: u32,
    buffer: *mut u8,
    /// Whether Cyclone frees `buffer` (never: the bytes are the caller's or a loan).
    release: bool,
}

// The opcodes of dds_opcodes.h (a stable ABI: descriptors are compiled into applications).
const OP_RTS: u32 = 0;
const OP_ADR: u32 = 0x01 << 24;
const TYPE_8BY: u32 = 0x04 << 16;
const TYPE_SEQ: u32 = 0x07 << 16;
const SUBTYPE_1BY: u32 = 0x01 << 8;
const FLAG_SGN: u32 = 1 << 2;

static OPS: [u32; 7] = [
    OP_ADR | TYPE_8BY,
    offset_of!(Message, seq) as u32,
    OP_ADR | TYPE_8BY | FLAG_SGN,
    offset_of!(Message, stamp) as u32,
    OP_ADR | TYPE_SEQ | SUBTYPE_1BY,
    offset_of!(Message, payload) as u32,
    OP_RTS,
];

/// The name peers match types by.
pub const TYPE_NAME: &CStr = c"msgperf::Message";

struct Descriptor(dds_topic_descriptor_t);
// SAFETY: it points only at statics and is never written after it is made.
unsafe impl Send for Descriptor {}
unsafe impl Sync for Descriptor {}

fn descriptor() -> &'static dds_topic_descriptor_t {
    static D: OnceLock<Descriptor> = OnceLock::new();
    &D.get_or_init(|| {
        // SAFETY: a plain C struct; every field a zero is valid for is set below or stays zero
        // (no keys, no XTypes type information).
        let mut d: dds_topic_descriptor_t = unsafe { std::mem::zeroed() };
        d.m_size = std::mem::size_of::<Message>() as u32;
        d.m_align = std::mem::align_of::<Message>() as u32;
        d.m_typename = TYPE_NAME.as_ptr();
        d.m_nops = OPS.len() as u32;
        d.m_ops = OPS.as_ptr();
        d.m_meta = c"".as_ptr();
        Descriptor(d)
    })
    .0
}

/// A failed Cyclone call: what was asked, and Cyclone's return code.
#[derive(Debug)]
pub struct DdsError {
    pub what: String,
    pub code: i32,
}

/// DDS_RETCODE_TIMEOUT.
pub const TIMEOUT: i32 = -10;

impl std::fmt::Display for DdsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // SAFETY: dds_strretcode returns a static string for any code.
        let text = unsafe { CStr::from_ptr(dds_strretcode(self.code)) };
        write!(f, "Cyclone DDS: {}: {}", self.what, text.to_string_lossy())
    }
}

fn check(rc: i32, what: impl FnOnce() -> String) -> Result<i32, DdsError> {
    if rc < 0 {
        Err(DdsError {
            what: what(),
            code: rc,
        })
    } else {
        Ok(rc)
    }
}

/// The configuration every msgperf domain runs with: no multicast, unicast discovery, and a
/// tag that only this case's peers share (participants with another tag, other cases or
/// programs, are never matched). On one host: loopback only, the participants of this host.
/// Across hosts: the interface of this host's address, and every host's address as a peer.
/// A participant that stops answering (a stopped or killed role) is dropped after `lease`, so
/// that a reliable writer no longer waits for its acknowledgements: half the case's timeout
/// (1 s to DDS's default 10 s), announced five times a lease.
pub fn config(tag: &str, hosts: Option<&HostAddresses>, timeout: Duration) -> String {
    let lease = (timeout / 2).clamp(Duration::from_secs(1), Duration::from_secs(10));
    let (lease_ms, spdp_ms) = (lease.as_millis(), lease.as_millis() / 5);
    let (interface, peers) = match hosts {
        None => ("name=\"lo\"".to_string(), vec!["127.0.0.1".to_string()]),
        Some(h) => (format!("address=\"{}\"", h.own), h.all.clone()),
    };
    let peers: String = peers
        .iter()
        .map(|p| format!("<Peer address=\"{p}\"/>"))
        .collect();
    format!(
        "<CycloneDDS><Domain id=\"any\"><General><Interfaces><NetworkInterface {interface}/></Interfaces>\
         <AllowMulticast>false</AllowMulticast></General><Discovery><Tag>{tag}</Tag>\
         <ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>60</MaxAutoParticipantIndex>\
         <Peers>{peers}</Peers><LeaseDuration>{lease_ms} ms</LeaseDuration>\
         <SPDPInterval>{spdp_ms} ms</SPDPInterval></Discovery>\
         <Tracing><Verbosity>none</Verbosity></Tracing></Domain></CycloneDDS>"
    )
}

/// This process's participant in a domain; the domain and everything in it go when the last
/// user drops it.
pub struct Participant {
    domain: dds_entity_t,
    entity: dds_entity_t,
    id: u32,
}

/// The participants of this process, by domain id: one per domain, shared by every end.
fn participants() -> &'static Mutex<HashMap<u32, Weak<Participant>>> {
    static P: OnceLock<Mutex<HashMap<u32, Weak<Participant>>>> = OnceLock::new();
    P.get_or_init(Default::default)
}

/// Whether this process has a domain `id` now.
pub fn in_use(id: u32) -> bool {
    participants()
        .lock()
        .unwrap()
        .get(&id)
        .is_some_and(|p| p.strong_count() > 0)
}

impl Participant {
    /// Joins domain `id` with `config` (see [`config`]), making it in this process if needed.
    pub fn join(id: u32, config: &str) -> Result<Arc<Participant>, DdsError> {
        let mut all = participants().lock().unwrap();
        if let Some(p) = all.get(&id).and_then(Weak::upgrade) {
            return Ok(p);
        }
        let xml = CString::new(config).map_err(|_| DdsError {
            what: "a configuration with a NUL byte".into(),
            code: -1,
        })?;
        // SAFETY: a valid C string; the domain handle is deleted in Drop.
        let domain = check(unsafe { dds_create_domain(id, xml.as_ptr()) }, || {
            format!("creating domain {id}")
        })?;
        // SAFETY: the domain exists; no QoS, no listener.
        let entity = match check(
            unsafe { dds_create_participant(id, std::ptr::null(), std::ptr::null()) },
            || format!("a participant in domain {id}"),
        ) {
            Ok(e) => e,
            Err(e) => {
                unsafe { dds_delete(domain) };
                return Err(e);
            }
        };
        let p = Arc::new(Participant { domain, entity, id });
        all.insert(id, Arc::downgrade(&p));
        Ok(p)
    }
}

impl Drop for Participant {
    fn drop(&mut self) {
        // SAFETY: handles this value owns; deleting the domain deletes what is left in it.
        unsafe {
            dds_delete(self.entity);
            dds_delete(self.domain);
        }
        let mut all = participants().lock().unwrap();
        if all.get(&self.id).is_some_and(|w| w.strong_count() == 0) {
            all.remove(&self.id);
        }
    }
}

/// The QoS of a writer and its readers.
#[derive(Clone, Copy, Debug)]
pub struct Qos {
    pub reliable: bool,
    /// None: keep all; Some(n): keep the last n.
    pub keep_last: Option<u32>,
    /// How long a reliable writer waits for room before failing with a timeout.
    pub max_blocking: Duration,
    /// Writer batching (Cyclone's own QoS): samples gather in a packet that goes out when it
    /// is full or the writer is flushed.
    pub batching: bool,
}

impl Qos {
    fn make(&self) -> *mut dds_qos_t {
        // SAFETY: a fresh QoS object, set with values Cyclone accepts; freed by the caller.
        unsafe {
            let q = dds_create_qos();
            let blocking = self.max_blocking.as_nanos().min(i64::MAX as u128) as i64;
            if self.reliable {
                dds_qset_reliability(q, dds_reliability_kind_DDS_RELIABILITY_RELIABLE, blocking);
            } else {
                dds_qset_reliability(q, dds_reliability_kind_DDS_RELIABILITY_BEST_EFFORT, 0);
            }
            match self.keep_last {
                None => dds_qset_history(q, dds_history_kind_DDS_HISTORY_KEEP_ALL, 0),
                Some(n) => dds_qset_history(q, dds_history_kind_DDS_HISTORY_KEEP_LAST, n as i32),
            }
            dds_qset_durability(q, dds_durability_kind_DDS_DURABILITY_VOLATILE);
            q
        }
    }
}

/// A topic of msgperf's type and the reader or writer made on it.
struct Entity {
    /// Outlives the topic and entity made in it (dropped after them).
    _participant: Arc<Participant>,
    topic: dds_entity_t,
    entity: dds_entity_t,
}

impl Entity {
    fn make(
        participant: &Arc<Participant>,
        name: &str,
        qos: &Qos,
        writer: bool,
        listener: *mut dds_listener_t,
    ) -> Result<Entity, DdsError> {
        let cname = CString::new(name).map_err(|_| DdsError {
            what: format!("topic name {name:?}"),
            code: -1,
        })?;
        let q = qos.make();
        // SAFETY: a live participant, a descriptor that lives forever, a C string, a QoS
        // object freed below; the topic and entity are deleted in Drop.
        let made = unsafe {
            check(
                dds_create_topic(
                    participant.entity,
                    descriptor(),
                    cname.as_ptr(),
                    q,
                    std::ptr::null(),
                ),
                || format!("topic {name}"),
            )
            .and_then(|topic| {
                let e = if writer {
                    // A writer's policy only (ddsperf sets it the same way on its data writer).
                    dds_qset_writer_batching(q, qos.batching);
                    dds_create_writer(participant.entity, topic, q, std::ptr::null())
                } else {
                    dds_create_reader(participant.entity, topic, q, listener)
                };
                match check(e, || {
                    format!("a {} on {name}", if writer { "writer" } else { "reader" })
                }) {
                    Ok(entity) => Ok((topic, entity)),
                    Err(err) => {
                        dds_delete(topic);
                        Err(err)
                    }
                }
            })
        };
        unsafe { dds_delete_qos(q) };
        let (topic, entity) = made?;
        Ok(Entity {
            _participant: participant.clone(),
            topic,
            entity,
        })
    }
}

impl Drop for Entity {
    fn drop(&mut self) {
        // SAFETY: handles this value owns (the participant outlives them: it is held here).
        unsafe {
            if self.entity > 0 {
                dds_delete(self.entity);
            }
            dds_delete(self.topic);
        }
    }
}

pub struct Writer {
    e: Entity,
    seq: u64,
}

impl Writer {
    pub fn new(participant: &Arc<Participant>, topic: &str, qos: &Qos) -> Result<Self, DdsError> {
        Ok(Writer {
            e: Entity::make(participant, topic, qos, true, null_mut())?,
            seq: 0,
        })
    }

    /// Writes one message; Cyclone serializes it before this returns.
    pub fn write(&mut self, payload: &[u8]) -> Result<(), DdsError> {
        self.seq += 1;
        let m = Message {
            seq: self.seq,
            stamp: crate::sys::monotonic_ns() as i64,
            payload: OctetSeq {
                maximum: payload.len() as u32,
                length: payload.len() as u32,
                // Only read: Cyclone serializes from it and never frees it (`release` false).
                buffer: payload.as_ptr() as *mut u8,
                release: false,
            },
        };
        // SAFETY: a sample of the writer's type that lives across the call.
        let rc = unsafe { dds_write(self.e.entity, (&m as *const Message).cast()) };
        check(rc, || "a write".into()).map(|_| ())
    }

    /// Sends what a batching writer has gathered.
    pub fn flush(&mut self) -> Result<(), DdsError> {
        // SAFETY: a live writer.
        check(unsafe { dds_write_flush(self.e.entity) }, || {
            "a flush".into()
        })
        .map(|_| ())
    }

    /// Readers matched now.
    pub fn matched(&self) -> Result<u32, DdsError> {
        let mut s = MaybeUninit::<dds_publication_matched_status_t>::zeroed();
        // SAFETY: a live writer and a status struct to fill.
        let rc = unsafe { dds_get_publication_matched_status(self.e.entity, s.as_mut_ptr()) };
        check(rc, || "the writer's matched readers".into())?;
        Ok(unsafe { s.assume_init() }.current_count)
    }

    /// Waits until `readers` readers matched, at most until `deadline`.
    pub fn wait_matched(&self, readers: u32, deadline: Deadline) -> Result<(), DdsError> {
        wait_matched(
            &self.e,
            1 << dds_status_id_DDS_PUBLICATION_MATCHED_STATUS_ID,
            deadline,
            &format!("matching {readers} reader(s)"),
            || Ok(self.matched()? >= readers),
        )
    }
}

/// What a listener's callback raises and a reader waits on.
#[derive(Default)]
struct Signal {
    raised: Mutex<bool>,
    cv: Condvar,
}

unsafe extern "C" fn on_data_available(_reader: dds_entity_t, arg: *mut c_void) {
    // SAFETY: `arg` is the reader's boxed Signal, which outlives the reader (see Reader's Drop).
    let s = unsafe { &*(arg as *const Signal) };
    *s.raised.lock().unwrap() = true;
    s.cv.notify_one();
}

/// How a reader waits for data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// A waitset on a read condition (the caller's thread waits inside Cyclone).
    Waitset,
    /// A listener: Cyclone's receive thread calls back, which wakes the waiting reader.
    Listener,
}

pub struct Reader {
    e: Entity,
    waitset: dds_entity_t,
    signal: Option<Box<Signal>>,
}

impl Reader {
    pub fn new(
        participant: &Arc<Participant>,
        topic: &str,
        qos: &Qos,
        wake: Wake,
    ) -> Result<Self, DdsError> {
        let signal = (wake == Wake::Listener).then(|| Box::new(Signal::default()));
        // SAFETY: a listener whose argument is the boxed signal kept in the reader; freed
        // after the reader is created (Cyclone copies it).
        let listener = match &signal {
            Some(s) => unsafe {
                let l = dds_create_listener((&**s as *const Signal as *mut Signal).cast());
                dds_lset_data_available(l, Some(on_data_available));
                l
            },
            None => null_mut(),
        };
        let e = Entity::make(participant, topic, qos, false, listener);
        if !listener.is_null() {
            unsafe { dds_delete_listener(listener) };
        }
        let e = e?;
        let waitset = if signal.is_none() {
            // SAFETY: live entities; the waitset and condition are deleted with the reader's
            // participant or in Drop.
            unsafe {
                let ws = check(dds_create_waitset(participant.entity), || {
                    "a waitset".into()
                })?;
                let cond = check(dds_create_readcondition(e.entity, DDS_ANY_STATE), || {
                    "a read condition".into()
                });
                let attached = cond.and_then(|c| {
                    check(dds_waitset_attach(ws, c, 0), || {
                        "attaching to the waitset".into()
                    })
                });
                if let Err(err) = attached {
                    dds_delete(ws);
                    return Err(err);
                }
                ws
            }
        } else {
            0
        };
        Ok(Reader { e, waitset, signal })
    }

    /// Takes one message into `buf` if one is there: its length, or None. A message longer
    /// than `buf` is taken but not copied: its length is returned all the same.
    pub fn take(&mut self, buf: &mut [u8]) -> Result<Option<usize>, DdsError> {
        loop {
            let mut samples: [*mut c_void; 1] = [null_mut()];
            let mut info = MaybeUninit::<dds_sample_info_t>::zeroed();
            // SAFETY: room for one loaned sample and its info; the loan is returned below.
            let n =
                unsafe { dds_take(self.e.entity, samples.as_mut_ptr(), info.as_mut_ptr(), 1, 1) };
            check(n, || "a take".into())?;
            if n == 0 {
                return Ok(None);
            }
            let info = unsafe { info.assume_init() };
            let got = info.valid_data.then(|| {
                // SAFETY: a valid loaned sample of msgperf's type.
                let m = unsafe { &*(samples[0] as *const Message) };
                let len = m.payload.length as usize;
                if len <= buf.len() {
                    // SAFETY: Cyclone's buffer of `len` bytes, alive until the loan returns.
                    let from = unsafe { std::slice::from_raw_parts(m.payload.buffer, len) };
                    buf[..len].copy_from_slice(from);
                }
                len
            });
            // SAFETY: the loan taken above.
            unsafe { dds_return_loan(self.e.entity, samples.as_mut_ptr(), n) };
            // A sample without data is a writer's unregistration or disposal: skip it.
            if got.is_some() {
                return Ok(got);
            }
        }
    }

    /// Waits until data may be there, at most `timeout`: false if none came.
    pub fn wait(&self, timeout: Duration) -> Result<bool, DdsError> {
        match &self.signal {
            Some(s) => {
                let raised = s.raised.lock().unwrap();
                let (mut raised, _) = s.cv.wait_timeout_while(raised, timeout, |r| !*r).unwrap();
                let got = *raised;
                *raised = false;
                Ok(got)
            }
            None => {
                let ns = timeout.as_nanos().min(i64::MAX as u128) as i64;
                // SAFETY: a live waitset; no attachment list asked for.
                let n = unsafe { dds_waitset_wait(self.waitset, null_mut(), 0, ns) };
                check(n, || "waiting in the waitset".into()).map(|n| n > 0)
            }
        }
    }

    /// Writers matched now.
    pub fn matched(&self) -> Result<u32, DdsError> {
        let mut s = MaybeUninit::<dds_subscription_matched_status_t>::zeroed();
        // SAFETY: a live reader and a status struct to fill.
        let rc = unsafe { dds_get_subscription_matched_status(self.e.entity, s.as_mut_ptr()) };
        check(rc, || "the reader's matched writers".into())?;
        Ok(unsafe { s.assume_init() }.current_count)
    }

    /// Waits until a writer matched, at most until `deadline`.
    pub fn wait_matched(&self, deadline: Deadline) -> Result<(), DdsError> {
        wait_matched(
            &self.e,
            1 << dds_status_id_DDS_SUBSCRIPTION_MATCHED_STATUS_ID,
            deadline,
            "matching a writer",
            || Ok(self.matched()? >= 1),
        )
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if self.waitset != 0 {
            // SAFETY: the waitset this reader made.
            unsafe { dds_delete(self.waitset) };
        }
        // The reader (and its listener) must be gone before the signal it points at.
        // SAFETY: the reader this value owns; Entity's Drop then skips it.
        unsafe { dds_delete(self.e.entity) };
        self.e.entity = 0;
    }
}

/// Waits until `enough` holds, at most until `deadline`, in a waitset on the entity's `status`
/// (publication or subscription matched) alone. Cyclone wakes the wait when a match comes or
/// goes, and reading the count resets the status, so the wait makes no wake-ups of its own (a
/// loop polling every millisecond made hundreds under load, which a test counting a role's
/// wake-ups took for exchanges).
fn wait_matched(
    e: &Entity,
    status: u32,
    deadline: Deadline,
    what: &str,
    enough: impl Fn() -> Result<bool, DdsError>,
) -> Result<(), DdsError> {
    /// The waitset, and the entity's status mask to put back, on every way out.
    struct Watch {
        waitset: dds_entity_t,
        entity: dds_entity_t,
        mask: u32,
    }
    impl Drop for Watch {
        fn drop(&mut self) {
            // SAFETY: the waitset made below (deleting it detaches the entity), and the live
            // entity whose mask it had.
            unsafe {
                dds_delete(self.waitset);
                dds_set_status_mask(self.entity, self.mask);
            }
        }
    }
    let mut mask = 0u32;
    // SAFETY: a live entity and a mask to fill.
    check(unsafe { dds_get_status_mask(e.entity, &mut mask) }, || {
        format!("{what}: the status mask")
    })?;
    // SAFETY: the live participant that holds the entity.
    let waitset = check(unsafe { dds_create_waitset(e._participant.entity) }, || {
        format!("{what}: a waitset")
    })?;
    let watch = Watch {
        waitset,
        entity: e.entity,
        mask,
    };
    // Only the matched status triggers the waitset: data that comes in meanwhile (a peer
    // matched first and wrote) would otherwise keep it triggered.
    // SAFETY: live entity and waitset.
    check(unsafe { dds_set_status_mask(e.entity, status) }, || {
        format!("{what}: the status mask")
    })?;
    check(
        unsafe { dds_waitset_attach(watch.waitset, e.entity, 0) },
        || format!("{what}: attaching to a waitset"),
    )?;
    loop {
        if enough()? {
            return Ok(());
        }
        let left = deadline.remaining();
        if left.is_zero() {
            return Err(DdsError {
                what: format!("{what}: timed out"),
                code: TIMEOUT,
            });
        }
        let ns = left.as_nanos().min(i64::MAX as u128) as i64;
        // SAFETY: a live waitset; no attachment list asked for.
        check(
            unsafe { dds_waitset_wait(watch.waitset, null_mut(), 0, ns) },
            || format!("{what}: waiting in a waitset"),
        )?;
    }
}
