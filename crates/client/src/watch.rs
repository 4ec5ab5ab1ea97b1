//! Watches held by this client and the notifications they receive.

use bytes::Bytes;
use shoal_types::msg::{Message, NotifyAck, NotifyEvent};
use shoal_types::{Result, err};
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::mpsc;

/// Notifications queued per watch before new ones are dropped (the notifier then sees a time-out).
const WATCH_QUEUE: usize = 1024;

/// A notification received by a watch; acknowledge it so the notifier stops waiting.
#[derive(Debug)]
pub struct Notification {
    /// The notifier's payload.
    pub event: NotifyEvent,
    ack_to: mpsc::Sender<Message>,
}

impl Notification {
    /// Acknowledges the notification with optional reply bytes for the notifier.
    pub async fn ack(self, reply: Bytes) -> Result<()> {
        let ack = NotifyAck { notify_id: self.event.notify_id, cookie: self.event.cookie, reply };
        self.ack_to.send(Message::NotifyAck(ack)).await.map_err(|_| err::not_connected("the OSD connection closed"))
    }
}

/// What a watch receives: notifications, or the news that the watch was lost.
#[derive(Debug)]
pub enum WatchEvent {
    /// A notification to handle and acknowledge.
    Notify(Notification),
    /// The watched object is gone (or the watch could not be registered again after
    /// its primary changed); no more notifications will come.
    Lost,
}

/// Cookie → receiver of a watch's events.
#[derive(Default)]
pub struct WatchTable {
    watches: Mutex<HashMap<u64, mpsc::Sender<WatchEvent>>>,
}

impl WatchTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, mpsc::Sender<WatchEvent>>> {
        self.watches.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers a watch; returns the receiver of its events.
    pub fn add(&self, cookie: u64) -> mpsc::Receiver<WatchEvent> {
        let (tx, rx) = mpsc::channel(WATCH_QUEUE);
        self.lock().insert(cookie, tx);
        rx
    }

    /// Forgets a watch.
    pub fn remove(&self, cookie: u64) {
        self.lock().remove(&cookie);
    }

    /// Routes a notification to its watch.
    pub fn deliver(&self, event: NotifyEvent, ack_to: mpsc::Sender<Message>) {
        if let Some(tx) = self.lock().get(&event.cookie) {
            let _ = tx.try_send(WatchEvent::Notify(Notification { event, ack_to }));
        }
    }

    /// Tells a watch it is gone for good, and forgets it.
    pub fn lost(&self, cookie: u64) {
        if let Some(tx) = self.lock().remove(&cookie) {
            let _ = tx.try_send(WatchEvent::Lost);
        }
    }
}
