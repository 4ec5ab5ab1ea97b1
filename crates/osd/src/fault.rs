//! An OSD that can no longer keep its promises — its WAL sync failed, a shard thread
//! panicked — raises a fault once. From then on it answers heartbeats with the reason, so
//! its peers report it and the monitor marks it down, and its daemon exits: peering moves
//! on instead of waiting for PGs that hang.

use std::sync::Arc;
use tokio::sync::watch;

/// The first fatal failure of an OSD, if any.
pub struct Fault(watch::Sender<Option<String>>);

impl Fault {
    /// No fault yet.
    pub fn new() -> Arc<Fault> {
        Arc::new(Fault(watch::channel(None).0))
    }

    /// Records `reason` unless a fault was raised before.
    pub fn raise(&self, reason: impl Into<String>) {
        let reason = reason.into();
        let first = self.0.send_if_modified(|current| {
            let first = current.is_none();
            if first {
                *current = Some(reason.clone());
            }
            first
        });
        if first {
            tracing::error!(reason, "fatal OSD failure: this OSD stops answering heartbeats");
        }
    }

    /// The reason of the fault raised, if any.
    pub fn reason(&self) -> Option<String> {
        self.0.borrow().clone()
    }

    /// Waits until a fault is raised; returns its reason.
    pub async fn raised(&self) -> String {
        let mut rx = self.0.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(reason) => reason.clone().unwrap_or_default(),
            Err(_) => String::new(),
        }
    }
}

/// Raises a fault when the thread holding it unwinds from a panic.
pub struct PanicGuard {
    /// The fault to raise.
    pub fault: Arc<Fault>,
    /// The thread's name, for the reason.
    pub thread: String,
}

impl Drop for PanicGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.fault.raise(format!("thread {} panicked", self.thread));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_thread_raises_the_fault_and_a_returning_one_does_not() {
        let fault = Fault::new();
        let quiet = PanicGuard { fault: fault.clone(), thread: "calm".into() };
        std::thread::spawn(move || drop(quiet)).join().unwrap();
        assert_eq!(fault.reason(), None);
        let guard = PanicGuard { fault: fault.clone(), thread: "osd-shard-1".into() };
        let joined = std::thread::spawn(move || {
            let _guard = guard;
            panic!("a bug in a shard");
        })
        .join();
        assert!(joined.is_err());
        assert_eq!(fault.reason().as_deref(), Some("thread osd-shard-1 panicked"));
        fault.raise("a later failure");
        assert_eq!(fault.reason().as_deref(), Some("thread osd-shard-1 panicked"), "the first reason stays");
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        assert_eq!(runtime.block_on(fault.raised()), "thread osd-shard-1 panicked");
    }
}
