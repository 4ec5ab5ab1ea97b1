//! Where OSDs record the PGs they activated: the monitor, reached in process (embedded
//! mode) or over the network (the OSD daemon).

use shoal_client::Rados;
use shoal_mon::Monitor;
use shoal_osd::PgRegistry;
use shoal_types::msg::{MapCommand, Reply};
use shoal_types::{ActiveInterval, OsdId, OsdMap, PgId, Result, err};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

type Recorded<'a> = Pin<Box<dyn Future<Output = Result<Arc<OsdMap>>> + Send + 'a>>;

/// The monitors, through a client connection.
pub struct MonitorClient(pub Rados);

impl PgRegistry for MonitorClient {
    fn record(&self, osd: OsdId, pgs: Vec<(PgId, ActiveInterval)>) -> Recorded<'_> {
        Box::pin(self.0.pgs_activated(osd, pgs))
    }

    fn primary_temp(&self, osd: OsdId, pgs: Vec<(PgId, Option<OsdId>)>) -> Recorded<'_> {
        Box::pin(self.0.primary_temp(osd, pgs))
    }
}

/// The in-process monitor of embedded mode.
pub struct LocalMonitor(pub Weak<Monitor>);

impl LocalMonitor {
    /// Hands `command` to the monitor; its answer is the map afterwards.
    fn change(&self, command: MapCommand) -> Recorded<'_> {
        Box::pin(async move {
            let mon = self.0.upgrade().ok_or_else(|| err::again("the monitor stopped"))?;
            match mon.handle(command).await? {
                Reply::Map(map) => Ok(Arc::new(*map)),
                other => Err(err::io(format!("unexpected reply {other:?}"))),
            }
        })
    }
}

impl PgRegistry for LocalMonitor {
    fn record(&self, osd: OsdId, pgs: Vec<(PgId, ActiveInterval)>) -> Recorded<'_> {
        self.change(MapCommand::PgsActivated { osd, pgs })
    }

    fn primary_temp(&self, osd: OsdId, pgs: Vec<(PgId, Option<OsdId>)>) -> Recorded<'_> {
        self.change(MapCommand::PrimaryTemp { osd, pgs })
    }
}
