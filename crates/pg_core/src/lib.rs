//! The PG protocol as a sans-IO state machine: client operation ordering, the PG log,
//! replication to the acting set, commit and reply, peering, log recovery, backfill, stray
//! cleanup and interval fencing.
//!
//! **Rule:** this crate uses no tokio, no sockets, no threads and no clock. A [`Shard`]
//! takes [`Input`]s (a message, a peer's answer, a sync done, a timer fired, a new map, the
//! time) and returns [`Action`]s (send, reply once durable, set a timer); its store is
//! passed in and its commits are synchronous. The OSD daemon drives it over TCP and a
//! WAL-syncing committer; the simulator drives it over a simulated network and store, in
//! one thread, from a seed. Iteration that can decide anything runs over `BTreeMap`s.
//!
//! An operation flows: [`Input::Op`] → the PG's primary → [`exec`] against a
//! [`view::ObjectView`] → one store transaction → [`Action::Send`] of the write to each
//! replica and [`Action::WhenDurable`] for the local sync → once every replica and the
//! local store have it, [`Action::Reply`] (in PG order).

pub mod action;
pub mod damage;
pub mod ec;
pub mod exec;
pub mod limits;
pub mod peering;
pub mod pglog;
pub mod primary;
pub mod scrub;
pub mod shard;
pub mod split;
pub mod usage;
pub mod view;

pub use action::{Action, Awaiting, Counted, Durable, Input, Registration, Timer};
pub use limits::Flaws;
pub use limits::{Limits, ScrubLimits};
pub use scrub::{ScrubBoard, ScrubReport};
pub use shard::{Config, Shard, shard_of};
