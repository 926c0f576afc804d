//! `none`: no channel. Workloads that measure a runtime rather than a transport (`spawn`,
//! `timers`) run over it, so that every case has the same shape; opening an end is refused.

use super::{
    Capabilities, ChannelSpec, Options, Place, Rendezvous, Setup, SetupPlan, Side, Transport,
    TransportError,
};
use crate::transport::OpenResult;

pub struct NoChannel;

impl Transport for NoChannel {
    fn name(&self) -> &'static str {
        "none"
    }
    fn about(&self) -> &'static str {
        "no channel: for workloads that measure a runtime, not a transport (spawn, timers)"
    }
    fn capabilities(&self, _: &Options) -> Capabilities {
        Capabilities {
            reliable: true,
            cross_process: true,
            ..Capabilities::default()
        }
    }
    fn setup(&self, _: &SetupPlan, _: &ChannelSpec) -> Result<Setup, TransportError> {
        Ok(Setup::new(
            Rendezvous::new(self.name(), Place::Key(String::new())),
            (),
        ))
    }
    fn open(&self, _: &Rendezvous, side: Side, _: &ChannelSpec) -> OpenResult {
        Err(TransportError::Unsupported(format!(
            "transport `none` has no channel to open ({}): use a real transport for a workload that moves messages",
            side.meeting()
        )))
    }
}
