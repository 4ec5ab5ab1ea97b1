//! Watch/notify: clients watch objects; a notify carries a payload to every watcher and
//! completes when all have acknowledged or the timeout passes. Watches live in memory:
//! a client whose connection drops loses its watches and must watch again.

use bytes::Bytes;
use shoal_types::msg::{Message, NotifyAck, NotifyEvent, NotifyReply, WatcherRef};
use shoal_types::{ClientId, ObjectName, PoolId};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Identifies one client connection to the OSD.
pub type ConnId = u64;

struct Watcher {
    client: ClientId,
    cookie: u64,
    conn: ConnId,
    sender: mpsc::Sender<Message>,
}

struct PendingNotify {
    waiting: BTreeSet<(ConnId, u64)>,
    refs: BTreeMap<(ConnId, u64), WatcherRef>,
    acks: Vec<(WatcherRef, Bytes)>,
    done: Option<oneshot::Sender<()>>,
}

impl PendingNotify {
    /// Wakes the notifier once nobody is left to wait for.
    fn finish_if_done(&mut self) {
        if self.waiting.is_empty()
            && let Some(done) = self.done.take()
        {
            let _ = done.send(());
        }
    }
}

#[derive(Default)]
struct State {
    watchers: HashMap<(PoolId, ObjectName), Vec<Watcher>>,
    notifies: HashMap<u64, PendingNotify>,
    next_notify_id: u64,
}

/// Every watch and in-flight notify of one OSD.
#[derive(Default)]
pub struct Watches {
    state: Mutex<State>,
}

impl Watches {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers (or refreshes) a watch.
    pub fn watch(
        &self,
        pool: PoolId,
        object: ObjectName,
        client: ClientId,
        cookie: u64,
        conn: ConnId,
        sender: mpsc::Sender<Message>,
    ) {
        let mut s = self.state();
        let list = s.watchers.entry((pool, object)).or_default();
        list.retain(|w| !(w.conn == conn && w.cookie == cookie));
        list.push(Watcher { client, cookie, conn, sender });
    }

    /// Removes a watch; true if it existed.
    pub fn unwatch(&self, pool: PoolId, object: &ObjectName, cookie: u64, conn: ConnId) -> bool {
        let mut s = self.state();
        let key = (pool, object.clone());
        let Some(list) = s.watchers.get_mut(&key) else { return false };
        let before = list.len();
        list.retain(|w| !(w.conn == conn && w.cookie == cookie));
        let removed = list.len() != before;
        if list.is_empty() {
            s.watchers.remove(&key);
        }
        removed
    }

    /// Forgets every watch of a closed connection; notifies waiting on them stop waiting.
    pub fn connection_closed(&self, conn: ConnId) {
        let mut s = self.state();
        s.watchers.retain(|_, list| {
            list.retain(|w| w.conn != conn);
            !list.is_empty()
        });
        for pending in s.notifies.values_mut() {
            pending.waiting.retain(|(c, _)| *c != conn);
            pending.finish_if_done();
        }
    }

    /// Records a watcher's acknowledgement.
    pub fn ack(&self, conn: ConnId, ack: NotifyAck) {
        let mut s = self.state();
        let Some(pending) = s.notifies.get_mut(&ack.notify_id) else { return };
        if pending.waiting.remove(&(conn, ack.cookie))
            && let Some(r) = pending.refs.get(&(conn, ack.cookie))
        {
            pending.acks.push((r.clone(), ack.reply));
        }
        pending.finish_if_done();
    }

    /// Sends `payload` to every watcher of the object and waits for their acks.
    pub async fn notify(
        &self,
        pool: PoolId,
        object: ObjectName,
        notifier: ClientId,
        payload: Bytes,
        timeout: Duration,
    ) -> NotifyReply {
        let (id, done_rx) = {
            let mut s = self.state();
            s.next_notify_id += 1;
            let id = s.next_notify_id;
            let (done_tx, done_rx) = oneshot::channel();
            let mut pending = PendingNotify {
                waiting: BTreeSet::new(),
                refs: BTreeMap::new(),
                acks: Vec::new(),
                done: Some(done_tx),
            };
            for w in s.watchers.get(&(pool, object)).into_iter().flatten() {
                let event = NotifyEvent { notify_id: id, cookie: w.cookie, notifier, payload: payload.clone() };
                pending.refs.insert((w.conn, w.cookie), WatcherRef { client: w.client, cookie: w.cookie });
                // A watcher whose queue is full or closed cannot ack: it will time out.
                if w.sender.try_send(Message::Notify(event)).is_ok() {
                    pending.waiting.insert((w.conn, w.cookie));
                }
            }
            if pending.waiting.is_empty() {
                let timed_out = pending.refs.into_values().collect();
                return NotifyReply { acks: Vec::new(), timed_out };
            }
            s.notifies.insert(id, pending);
            (id, done_rx)
        };
        let _ = tokio::time::timeout(timeout, done_rx).await;
        let pending = self.state().notifies.remove(&id);
        let Some(pending) = pending else { return NotifyReply::default() };
        let acked: BTreeSet<WatcherRef> = pending.acks.iter().map(|(r, _)| r.clone()).collect();
        let timed_out = pending.refs.into_values().filter(|r| !acked.contains(r)).collect();
        NotifyReply { acks: pending.acks, timed_out }
    }
}
