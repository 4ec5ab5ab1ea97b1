//! The one error type of the object layer, shaped after RADOS' errno results.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What went wrong, named after the Linux errno RADOS returns for it.
///
/// Callers branch on this; the accompanying message is for people.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Errno {
    /// The object, pool, key or lock does not exist (`ENOENT`).
    NotFound,
    /// The object or pool already exists (`EEXIST`).
    Exists,
    /// A guard did not hold; nothing was applied (`ECANCELED`).
    Canceled,
    /// An asserted version is below the object's version (`ERANGE`).
    Range,
    /// An asserted version is above the object's version (`EOVERFLOW`).
    Overflow,
    /// A request or value exceeds a configured limit (`E2BIG`).
    TooBig,
    /// The object would exceed the maximum object size (`EFBIG`).
    FileTooBig,
    /// An xattr or omap name is longer than allowed (`ENAMETOOLONG`).
    NameTooLong,
    /// The requested attribute does not exist (`ENODATA`).
    NoData,
    /// Unknown object class or method, or a method not allowed here (`EOPNOTSUPP`).
    NotSupported,
    /// A queue or store is full (`ENOSPC`).
    NoSpace,
    /// A lock is held by someone else (`EBUSY`).
    Busy,
    /// A malformed request or argument (`EINVAL`).
    InvalidArgument,
    /// A notify or request did not complete in time (`ETIMEDOUT`).
    TimedOut,
    /// An epoch-guarded write carried an epoch older than the object's (`ESTALE`).
    StaleEpoch,
    /// The peer went away before answering (`ENOTCONN`).
    NotConnected,
    /// The local store failed (`EIO`).
    Io,
    /// The PG is not served here right now (not primary, peering, interval changed):
    /// fetch a newer map and resend (`EAGAIN`).
    Again,
    /// The change is forbidden by a protection of the object, e.g. an object lock
    /// (`EACCES`). Appended last, so the encodings of the others are unchanged.
    AccessDenied,
    /// Nothing listens at the peer's address: its process is gone (`ECONNREFUSED`). A
    /// lost connection as [`Errno::NotConnected`] is, and more: the peer is known dead.
    /// Appended last, so the encodings of the others are unchanged.
    ConnectionRefused,
    /// The pool is over its quota (`EDQUOT`); deletes still work. Appended last.
    QuotaExceeded,
}

impl Errno {
    /// The positive Linux errno value, as librados reports it (negated there).
    pub fn code(self) -> i32 {
        match self {
            Errno::NotFound => 2,
            Errno::Io => 5,
            Errno::Again => 11,
            Errno::AccessDenied => 13,
            Errno::TooBig => 7,
            Errno::Busy => 16,
            Errno::Exists => 17,
            Errno::InvalidArgument => 22,
            Errno::FileTooBig => 27,
            Errno::NoSpace => 28,
            Errno::Range => 34,
            Errno::NameTooLong => 36,
            Errno::NoData => 61,
            Errno::Overflow => 75,
            Errno::NotSupported => 95,
            Errno::NotConnected => 107,
            Errno::ConnectionRefused => 111,
            Errno::TimedOut => 110,
            Errno::StaleEpoch => 116,
            Errno::Canceled => 125,
            Errno::QuotaExceeded => 122,
        }
    }

    /// The conventional symbolic name, e.g. `ENOENT`.
    pub fn name(self) -> &'static str {
        match self {
            Errno::NotFound => "ENOENT",
            Errno::Exists => "EEXIST",
            Errno::Canceled => "ECANCELED",
            Errno::Range => "ERANGE",
            Errno::Overflow => "EOVERFLOW",
            Errno::TooBig => "E2BIG",
            Errno::FileTooBig => "EFBIG",
            Errno::NameTooLong => "ENAMETOOLONG",
            Errno::NoData => "ENODATA",
            Errno::NotSupported => "EOPNOTSUPP",
            Errno::NoSpace => "ENOSPC",
            Errno::Busy => "EBUSY",
            Errno::InvalidArgument => "EINVAL",
            Errno::TimedOut => "ETIMEDOUT",
            Errno::StaleEpoch => "ESTALE",
            Errno::NotConnected => "ENOTCONN",
            Errno::Io => "EIO",
            Errno::Again => "EAGAIN",
            Errno::AccessDenied => "EACCES",
            Errno::ConnectionRefused => "ECONNREFUSED",
            Errno::QuotaExceeded => "EDQUOT",
        }
    }

    /// Whether the call failed because the connection to its peer failed (closed, or
    /// refused): a caller may connect and try again.
    pub fn is_disconnect(self) -> bool {
        matches!(self, Errno::NotConnected | Errno::ConnectionRefused)
    }
}

/// An error of the object layer: an [`Errno`] plus a message naming the problem.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RadosError {
    /// What happened, for callers to branch on.
    pub errno: Errno,
    /// What happened, for people.
    pub message: String,
}

impl RadosError {
    /// An error with the given errno and message.
    pub fn new(errno: Errno, message: impl Into<String>) -> Self {
        RadosError { errno, message: message.into() }
    }
}

impl fmt::Display for RadosError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.errno.name(), self.errno.code(), self.message)
    }
}

impl std::error::Error for RadosError {}

/// Result of an object-layer call.
pub type Result<T> = std::result::Result<T, RadosError>;

/// Shorthand constructors, one per errno, e.g. `err::not_found("pool 7")`.
pub mod err {
    use super::{Errno, RadosError};

    macro_rules! ctor {
        ($($fn_name:ident => $variant:ident),* $(,)?) => {
            $(
                #[doc = concat!("A [`RadosError`] with [`Errno::", stringify!($variant), "`].")]
                pub fn $fn_name(message: impl Into<String>) -> RadosError {
                    RadosError::new(Errno::$variant, message)
                }
            )*
        };
    }

    ctor! {
        not_found => NotFound,
        exists => Exists,
        canceled => Canceled,
        range => Range,
        overflow => Overflow,
        too_big => TooBig,
        file_too_big => FileTooBig,
        name_too_long => NameTooLong,
        no_data => NoData,
        not_supported => NotSupported,
        no_space => NoSpace,
        quota_exceeded => QuotaExceeded,
        busy => Busy,
        invalid => InvalidArgument,
        timed_out => TimedOut,
        stale_epoch => StaleEpoch,
        not_connected => NotConnected,
        io => Io,
        again => Again,
        access => AccessDenied,
        connection_refused => ConnectionRefused,
    }
}
