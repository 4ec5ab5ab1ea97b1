//! Heartbeats: every OSD pings every other up OSD on links of their own (so pings never
//! queue behind replication traffic) and reports a peer that has not answered within the
//! grace period. A peer whose address refuses the connection (its process died on a host
//! that is up) is reported at once, as Ceph's `osd_fast_fail_on_connection_refused` does;
//! a link that closes is pinged again at once to find out. The monitor decides, from the
//! reports, whether to mark it down.

use crate::peers::PeerNet;
use shoal_transport::Network;
use shoal_types::msg::PeerRequest;
use shoal_types::{Errno, OsdId, OsdMap};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// How often to ping, how long silence is tolerated and whether a refused connection
/// counts at once (`osd_heartbeat_interval`, `osd_heartbeat_grace`,
/// `osd_fast_fail_on_connection_refused`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeartbeatOptions {
    /// Time between pings.
    pub interval: Duration,
    /// Silence after which a peer is reported.
    pub grace: Duration,
    /// Report a peer whose address refuses the connection without waiting for the grace.
    pub fast_fail: bool,
}

impl Default for HeartbeatOptions {
    fn default() -> Self {
        HeartbeatOptions { interval: Duration::from_secs(6), grace: Duration::from_secs(20), fast_fail: true }
    }
}

/// A peer found failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerFailure {
    /// It has not answered within the grace period.
    Silent(OsdId),
    /// Its address, as the map gave it, refused the connection: nothing listens there.
    Refused {
        /// The peer.
        peer: OsdId,
        /// The address that refused.
        addr: String,
    },
}

/// Reports of failed peers held while the monitor is not told (beyond, a report is
/// dropped: it comes again the next interval).
const PENDING_REPORTS: usize = 256;

/// When each peer (keyed by address too: an OSD that restarted on a new address starts
/// afresh even if its down time fell between two rounds) last answered.
type LastReply = Arc<Mutex<HashMap<(OsdId, String), Instant>>>;

/// Starts pinging the up OSDs of `map` (except `me`); the returned receiver yields each
/// failure found (a silent peer once per interval while it is).
pub fn start(
    me: OsdId,
    network: Arc<dyn Network>,
    map: watch::Receiver<Arc<OsdMap>>,
    options: watch::Receiver<HeartbeatOptions>,
) -> mpsc::Receiver<PeerFailure> {
    let (failed_tx, failed_rx) = mpsc::channel(PENDING_REPORTS);
    let (links, mut closed) = PeerNet::watched(me, network, map.clone(), tokio::runtime::Handle::current());
    let pinger = Pinger { me, links, last_reply: LastReply::default(), failed: failed_tx };
    let mut options = options;
    tokio::spawn(async move {
        let mut next_round = Instant::now();
        // When a closed link last made a peer be pinged out of turn.
        let mut pinged_on_close: HashMap<OsdId, Instant> = HashMap::new();
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(next_round) => {}
                Some(peer) = closed.recv() => {
                    let HeartbeatOptions { interval, fast_fail, .. } = *options.borrow();
                    let recently = pinged_on_close.get(&peer).is_some_and(|at| at.elapsed() < interval);
                    let addr = map.borrow().osds.get(&peer).filter(|o| o.up).map(|o| o.addr.clone());
                    if let (false, Some(addr)) = (recently, addr) {
                        pinged_on_close.insert(peer, Instant::now());
                        pinger.ping((peer, addr), fast_fail);
                    }
                    continue;
                }
            }
            if options.has_changed().unwrap_or(false) {
                // Silence so far was judged by the old options: start every peer afresh.
                pinger.last_reply.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
            }
            let HeartbeatOptions { interval, grace, fast_fail } = *options.borrow_and_update();
            let peers: Vec<(OsdId, String)> = map
                .borrow()
                .osds
                .iter()
                .filter(|(id, o)| o.up && **id != me)
                .map(|(id, o)| (*id, o.addr.clone()))
                .collect();
            let now = Instant::now();
            let silent: Vec<OsdId> = {
                let mut last = pinger.last_reply.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                // A peer newly up gets a full grace period from now.
                last.retain(|peer, _| peers.contains(peer));
                for peer in &peers {
                    last.entry(peer.clone()).or_insert(now);
                }
                last.iter().filter(|(_, at)| now.duration_since(**at) > grace).map(|((id, _), _)| *id).collect()
            };
            for id in silent {
                tracing::warn!(peer = %id, "no heartbeat reply within the grace period; reporting it");
                if let Err(mpsc::error::TrySendError::Closed(_)) = pinger.failed.try_send(PeerFailure::Silent(id)) {
                    return;
                }
            }
            pinged_on_close.retain(|peer, _| peers.iter().any(|(id, _)| id == peer));
            for peer in peers {
                pinger.ping(peer, fast_fail);
            }
            next_round = Instant::now() + interval;
        }
    });
    failed_rx
}

/// Sends pings and takes their answers.
struct Pinger {
    me: OsdId,
    links: Arc<PeerNet>,
    last_reply: LastReply,
    failed: mpsc::Sender<PeerFailure>,
}

impl Pinger {
    /// Pings `peer` (its id and address in the map); a reply marks it alive, a refused
    /// connection reports it at once when `fast_fail`.
    fn ping(&self, peer: (OsdId, String), fast_fail: bool) {
        let (last, failed) = (self.last_reply.clone(), self.failed.clone());
        self.links.send(
            peer.0,
            PeerRequest::Ping { from: self.me },
            Box::new(move |reply| match reply {
                Ok(_) => {
                    let mut last = last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    if let Some(at) = last.get_mut(&peer) {
                        *at = Instant::now();
                    }
                }
                Err(e) if fast_fail && e.errno == Errno::ConnectionRefused => {
                    let (id, addr) = peer;
                    tracing::warn!(peer = %id, %addr, "its address refused the connection; reporting it");
                    let _ = failed.try_send(PeerFailure::Refused { peer: id, addr });
                }
                Err(_) => {}
            }),
        );
    }
}
