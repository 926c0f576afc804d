//! `pubsub`: P publishers and S subscribers (the publish-subscribe report's 1-to-5 and 5-to-1
//! tests). Where the transport has a native fan-out (shm), each publisher writes each message
//! once to a topic that every subscriber reads; elsewhere every publisher-subscriber pair has a
//! channel of its own and a publisher writes a copy of each message to each of its channels in
//! turn. Every publisher-to-subscriber stream is a `stream`'s; a subscriber reads each
//! publisher's on a thread of its own, and its result is the sum of them.

use super::oneway::{read_stream, write_stream, Flow, SLOW_SUBSCRIBER, STAMP_EVERY};
use super::payload::PAYLOAD;
use super::{
    check_common, check_one_way, param, Param, RoleError, RoleRun, RoleSpec, Sent, Topology,
    Workload,
};
use crate::measure::{Metric, Recorder};
use crate::result::{CaseConfig, FanOut, FloorKind, LatencyKind, RoleId, RoleKind};
use crate::transport::{Capabilities, CopyFanOut, Exchange, SetupPlan, Side};

pub struct PubSub;

const PUBLISHER: RoleKind = RoleKind::new("publisher");
const SUBSCRIBER: RoleKind = RoleKind::new("subscriber");

/// Whether a case's publishers use the transport's native fan-out.
fn native(case: &CaseConfig, caps: &Capabilities) -> bool {
    caps.native_fan_out > 0 && case.subs <= caps.native_fan_out
}

impl Workload for PubSub {
    fn name(&self) -> &'static str {
        "pubsub"
    }
    fn about(&self) -> &'static str {
        "P publishers to S subscribers (--pubs, --subs) at --rate: per-subscriber latency, loss and CPU"
    }
    fn params(&self) -> &'static [&'static Param] {
        &[&SLOW_SUBSCRIBER, &STAMP_EVERY, &PAYLOAD]
    }
    fn fans_out(&self) -> bool {
        true
    }
    fn message_size(&self, params: &super::Params) -> Option<Result<usize, String>> {
        super::payload::message_size(params)
    }
    fn metrics(&self) -> &'static [Metric] {
        &Metric::MESSAGES
    }
    fn latency(&self, _: &CaseConfig) -> (LatencyKind, Metric) {
        (LatencyKind::ONE_WAY, Metric::ONE_WAY)
    }
    fn floor_kind(&self, case: &CaseConfig) -> Option<FloorKind> {
        // One publisher to one subscriber is a stream; more roles share the CPUs, which the
        // two-sided floor does not.
        (case.rate_hz.is_none() && case.pubs == 1 && case.subs == 1).then_some(FloorKind::Stream)
    }
    fn check(&self, case: &CaseConfig, caps: &Capabilities) -> Result<(), String> {
        if case.pubs == 0 || case.subs == 0 {
            return Err("--pubs and --subs take 1 or more".into());
        }
        if caps.native_fan_out > 0 && case.subs > caps.native_fan_out {
            return Err(format!(
                "transport `{}`'s fan-out serves up to {} subscribers, not {}: use --opt fan-out=copy, or fewer --subs",
                case.transport, caps.native_fan_out, case.subs
            ));
        }
        if !native(case, caps) {
            check_one_way(case, caps)?;
        }
        check_common(case, caps)
    }
    fn exchange(&self, _: &CaseConfig) -> Exchange {
        // With a copy per subscriber, each channel carries a publisher's messages one way.
        Exchange::OneWay
    }
    fn topology(&self, case: &CaseConfig, caps: &Capabilities) -> Topology {
        let (pubs, subs) = (case.pubs as u32, case.subs as u32);
        let native = native(case, caps);
        let publisher = |p: u32| RoleSpec {
            id: RoleId::nth(PUBLISHER, p as usize),
            ends: if native {
                vec![Side::Publish {
                    topic: p,
                    readers: subs,
                }]
            } else {
                (0..subs).map(|s| Side::Connect(p * subs + s)).collect()
            },
            cpu: case.cpus.0,
            drives: true,
        };
        let subscriber = |s: u32| RoleSpec {
            id: RoleId::nth(SUBSCRIBER, s as usize),
            ends: (0..pubs)
                .map(|p| {
                    if native {
                        Side::Subscribe {
                            topic: p,
                            reader: s,
                        }
                    } else {
                        Side::Accept(p * subs + s)
                    }
                })
                .collect(),
            cpu: case.cpus.1,
            drives: false,
        };
        Topology {
            roles: (0..pubs)
                .map(publisher)
                .chain((0..subs).map(subscriber))
                .collect(),
            setup: if native {
                SetupPlan {
                    topics: vec![subs; pubs as usize],
                    ..SetupPlan::default()
                }
            } else {
                SetupPlan {
                    channels: pubs * subs,
                    ..SetupPlan::default()
                }
            },
            fan_out: Some(if native { FanOut::Shared } else { FanOut::Copy }),
        }
    }

    fn run(&self, r: RoleRun) -> Result<Option<Sent>, RoleError> {
        let (role, ends, case, rec, ctl) = (r.role, r.ends, r.case, r.rec, r.ctl);
        let flow = Flow {
            confirm: false,
            // Only the first subscriber is the slow one.
            slow: param::duration(case, SLOW_SUBSCRIBER.key).filter(|_| role.id.number == Some(1)),
            clock_shift_ns: ctl.clock_shift(0),
            stamp_every: Flow::stamp_every(case),
        };
        if role.drives {
            if let [ep] = ends {
                return write_stream(&mut **ep, case, flow, rec, ctl.stop).map(Some);
            }
            let mut fan = CopyFanOut::new(ends);
            let sent = write_stream(&mut fan, case, flow, rec, ctl.stop);
            rec.counters.send_full += fan.refused();
            return sent.map(Some);
        }
        let Some((first, others)) = ends.split_first_mut() else {
            return Ok(None);
        };
        std::thread::scope(|scope| {
            let parts: Vec<_> = others
                .iter_mut()
                .enumerate()
                .map(|(k, ep)| {
                    let flow = Flow {
                        clock_shift_ns: ctl.clock_shift(k + 1),
                        ..flow
                    };
                    scope.spawn(move || {
                        let mut part = Recorder::new(&Metric::MESSAGES, case.interval);
                        let r = read_stream(&mut **ep, case, flow, &mut part);
                        part.finish(role.id, r.err().map(|e| e.to_string()))
                    })
                })
                .collect();
            let mine = read_stream(&mut **first, case, flow, rec);
            for p in parts {
                match p.join() {
                    Ok(part) => rec.absorb(part),
                    Err(_) => {
                        return Err(RoleError::Integrity(
                            "a subscriber's reading thread panicked".into(),
                        ))
                    }
                }
            }
            mine.map(|_| None)
        })
    }
}
