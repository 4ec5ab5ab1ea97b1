//! What a class method is and how the OSD finds it: the context it runs in, its flags,
//! and the registry of classes by name.

use crate::access::ObjectAccess;
use shoal_types::{ClientId, Result, Versioned, err};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Everything a method sees: the object, who called, and the OSD's clock reading.
pub struct MethodContext<'a> {
    /// The target object inside the running transaction.
    pub object: &'a mut dyn ObjectAccess,
    /// The client that sent the operation.
    pub caller: ClientId,
    /// The OSD's time when the operation started, nanoseconds since the Unix epoch.
    pub now_ns: u64,
}

impl MethodContext<'_> {
    /// The typed state `class` cached for this object, if any and still valid.
    pub fn cached<T: Send + Sync + 'static>(&mut self, class: &str) -> Option<Arc<T>> {
        self.object.cached_state(class).and_then(|s| s.downcast::<T>().ok())
    }
}

/// Whether a method reads, writes, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MethodFlags {
    /// The method reads the object.
    pub read: bool,
    /// The method may change the object; such methods are refused in read-only operations.
    pub write: bool,
}

impl MethodFlags {
    /// Reads only.
    pub const RD: MethodFlags = MethodFlags { read: true, write: false };
    /// Reads and writes.
    pub const RDWR: MethodFlags = MethodFlags { read: true, write: true };
}

/// A method's implementation: input bytes in, output bytes out.
pub type MethodFn = fn(&mut MethodContext<'_>, &[u8]) -> Result<Vec<u8>>;

/// A registered method.
#[derive(Clone, Copy)]
pub struct Method {
    /// Read/write flags.
    pub flags: MethodFlags,
    /// The implementation.
    pub func: MethodFn,
}

/// The classes an OSD offers, looked up by name.
#[derive(Clone, Default)]
pub struct ClassRegistry {
    classes: BTreeMap<String, BTreeMap<String, Method>>,
}

impl ClassRegistry {
    /// Adds or replaces `class.method`.
    pub fn register(&mut self, class: &str, method: &str, flags: MethodFlags, func: MethodFn) {
        self.classes.entry(class.to_owned()).or_default().insert(method.to_owned(), Method { flags, func });
    }

    /// Finds `class.method`; EOPNOTSUPP names what is unknown.
    pub fn lookup(&self, class: &str, method: &str) -> Result<Method> {
        let methods =
            self.classes.get(class).ok_or_else(|| err::not_supported(format!("unknown object class '{class}'")))?;
        methods
            .get(method)
            .copied()
            .ok_or_else(|| err::not_supported(format!("object class '{class}' has no method '{method}'")))
    }
}

/// Decodes a method's input, turning malformed bytes into EINVAL that names the method.
pub fn decode_input<T: Versioned>(method: &str, input: &[u8]) -> Result<T> {
    T::decode(input).map_err(|e| err::invalid(format!("{method}: malformed input: {}", e.message)))
}

/// Decodes state a class stored in the object, turning corruption into EIO.
pub fn decode_stored<T: Versioned>(what: &str, bytes: &[u8]) -> Result<T> {
    T::decode(bytes).map_err(|e| err::io(format!("corrupt {what}: {}", e.message)))
}

/// Implements [`Versioned`] at version 1 for class request and reply types.
macro_rules! versioned_v1 {
    ($($t:ty => $name:literal),* $(,)?) => {
        $(impl shoal_types::Versioned for $t {
            const NAME: &'static str = $name;
            const VERSION: u8 = 1;
        })*
    };
}
pub(crate) use versioned_v1;
