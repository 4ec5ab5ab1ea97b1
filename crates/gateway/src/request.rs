//! What the front ends attach to a request in its extensions for the operations below
//! them: where it came from, and for S3 operations run on behalf of Swift, the caller and
//! the Swift headers to store.

use crate::meta::UserInfo;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where a request came from; the front puts it in the request's extensions.
#[derive(Clone, Debug, Default)]
pub struct Origin {
    /// The request id sent back as `x-amz-request-id`.
    pub request_id: String,
    /// The client's address.
    pub source_ip: String,
    /// Whether the request came over TLS.
    pub secure: bool,
}

/// The caller of an S3 operation run for a Swift request.
#[derive(Clone, Debug)]
pub(crate) struct SwiftCaller(pub(crate) Arc<UserInfo>);

/// Headers a Swift write stores with the object beside S3's (`x-delete-at`,
/// `x-object-manifest`, `x-static-large-object`, ...), shown again on GET and HEAD.
#[derive(Clone, Debug, Default)]
pub(crate) struct StoredHeaders(pub(crate) BTreeMap<String, String>);
