//! Shoal's vocabulary: the ids, errors, compound operations and messages every layer speaks.
//!
//! Pure data: this crate must not depend on tokio, RocksDB, sockets or the clock.

pub mod auth;
pub mod autoscale;
pub mod crush;
pub mod encoding;
pub mod erasure;
pub mod error;
pub mod ids;
pub mod map;
pub mod msg;
pub mod op;
pub mod pg;
pub mod resize;
pub mod space;

pub use encoding::Versioned;
pub use error::{Errno, RadosError, Result, err};
pub use ids::{ClientId, ObjectId, ObjectName, OsdId, PgId, PoolId, ReqId};
pub use map::{ActiveInterval, CLUSTER_FLAGS, OsdEntry, OsdMap, Pool, PoolSpec};
pub use op::{CmpMode, CmpOp, ObjectStat, Step, StepOutput};
pub use pg::{EVersion, PgInfo, PgLogEntry, PgMissing, PgStat, PgStateFlag, PgSummary};
