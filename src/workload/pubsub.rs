//! `pubsub`: P publishers and S subscribers (the publish-subscribe report's 1-to-5 and 5-to-1
//! tests). Every publisher-to-subscriber channel carries a stream: a publisher writes each
//! message once to its fan-out (the transport's own, or a copy per subscriber), and each
//! subscriber reads and checks what every publisher sent it. This module is that channel's two
//! ends.

use super::stream::Stream;
use super::{check_common, RoleError, Sent, Workload};
use crate::measure::Recorder;
use crate::result::CaseConfig;
use crate::transport::{Capabilities, Endpoint, FloorKind};
use std::sync::atomic::AtomicBool;

pub struct PubSub;

impl Workload for PubSub {
    fn name(&self) -> &'static str {
        "pubsub"
    }
    fn about(&self) -> &'static str {
        "P publishers to S subscribers (--pubs, --subs) at --rate: per-subscriber latency, loss and CPU"
    }
    fn roles(&self) -> [&'static str; 2] {
        ["publisher", "subscriber"]
    }
    fn latency_kind(&self, _case: &CaseConfig) -> &'static str {
        "one-way (publish to delivery)"
    }
    fn floor_kind(&self) -> FloorKind {
        FloorKind::Stream
    }
    fn check(&self, case: &CaseConfig, caps: &Capabilities) -> Result<(), String> {
        if case.confirm {
            return Err("pubsub does not take --confirm (a publisher would wait for every subscriber in turn): use `stream --confirm` for acknowledged writes".into());
        }
        check_common(case, caps)
    }
    fn active(
        &self,
        ep: &mut dyn Endpoint,
        case: &CaseConfig,
        rec: &mut Recorder,
        stop: &AtomicBool,
    ) -> Result<Sent, RoleError> {
        Stream.active(ep, case, rec, stop)
    }
    fn passive(
        &self,
        ep: &mut dyn Endpoint,
        case: &CaseConfig,
        rec: &mut Recorder,
    ) -> Result<(), RoleError> {
        Stream.passive(ep, case, rec)
    }
}
