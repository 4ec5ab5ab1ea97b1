//! Heartbeats: every OSD pings every other up OSD on links of their own (so pings never
//! queue behind replication traffic) and reports a peer that has not answered within the
//! grace period. The monitor decides, from the reports, whether to mark it down.

use crate::peers::PeerNet;
use shoal_transport::Network;
use shoal_types::msg::PeerRequest;
use shoal_types::{OsdId, OsdMap};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// How often to ping and how long silence is tolerated (`osd_heartbeat_interval`,
/// `osd_heartbeat_grace`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeartbeatOptions {
    /// Time between pings.
    pub interval: Duration,
    /// Silence after which a peer is reported.
    pub grace: Duration,
}

impl Default for HeartbeatOptions {
    fn default() -> Self {
        HeartbeatOptions { interval: Duration::from_secs(6), grace: Duration::from_secs(20) }
    }
}

/// Reports of silent peers held while the monitor is not told (beyond, a report is
/// dropped: it comes again the next interval).
const PENDING_REPORTS: usize = 256;

/// Starts pinging the up OSDs of `map` (except `me`); the returned receiver yields a peer
/// each time it is found silent for longer than the grace (once per interval while it is).
pub fn start(
    me: OsdId,
    network: Arc<dyn Network>,
    map: watch::Receiver<Arc<OsdMap>>,
    options: watch::Receiver<HeartbeatOptions>,
) -> mpsc::Receiver<OsdId> {
    let (failed_tx, failed_rx) = mpsc::channel(PENDING_REPORTS);
    let links = PeerNet::new(me, network, map.clone(), tokio::runtime::Handle::current());
    // Keyed by address too: an OSD that restarted (on a new address) starts afresh even if
    // its down time fell between two rounds.
    let last_reply: Arc<Mutex<HashMap<(OsdId, String), Instant>>> = Arc::default();
    let mut options = options;
    tokio::spawn(async move {
        loop {
            if options.has_changed().unwrap_or(false) {
                // Silence so far was judged by the old options: start every peer afresh.
                last_reply.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
            }
            let HeartbeatOptions { interval, grace } = *options.borrow_and_update();
            let peers: Vec<(OsdId, String)> = map
                .borrow()
                .osds
                .iter()
                .filter(|(id, o)| o.up && **id != me)
                .map(|(id, o)| (*id, o.addr.clone()))
                .collect();
            let now = Instant::now();
            let silent: Vec<OsdId> = {
                let mut last = last_reply.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                // A peer newly up gets a full grace period from now.
                last.retain(|peer, _| peers.contains(peer));
                for peer in &peers {
                    last.entry(peer.clone()).or_insert(now);
                }
                last.iter().filter(|(_, at)| now.duration_since(**at) > grace).map(|((id, _), _)| *id).collect()
            };
            for id in silent {
                tracing::warn!(peer = %id, "no heartbeat reply within the grace period; reporting it");
                if let Err(mpsc::error::TrySendError::Closed(_)) = failed_tx.try_send(id) {
                    return;
                }
            }
            for peer in peers {
                let last = last_reply.clone();
                links.send(
                    peer.0,
                    PeerRequest::Ping { from: me },
                    Box::new(move |reply| {
                        if reply.is_ok() {
                            let mut last = last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                            if let Some(at) = last.get_mut(&peer) {
                                *at = Instant::now();
                            }
                        }
                    }),
                );
            }
            tokio::time::sleep(interval).await;
        }
    });
    failed_rx
}
