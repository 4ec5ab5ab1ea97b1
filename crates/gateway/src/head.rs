//! The head object's record: an object's metadata ([`ObjectMeta`], versioned), kept in an
//! xattr of the head object beside the order of the write that produced it.

use crate::access::acl::Acl;
use crate::clock::{OrderClock, order_of, tag_of};
use crate::meta::CannedAcl;
use serde::{Deserialize, Serialize};
use shoal_client::{IoCtx, ReadOp};
use shoal_objclass::bucket_index::{IndexEntry, ObjectLock, Segment};
use shoal_types::{Errno, Result, StepOutput, Versioned, err};
use std::collections::BTreeMap;

/// The head object's xattr holding [`ObjectMeta`].
pub const META_XATTR: &str = "rgw.meta";
/// The head object's xattr holding the order of the write that produced it.
pub const ORDER_XATTR: &str = "rgw.order";

/// Everything about an object but its data, kept in its head object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectMeta {
    /// Size in bytes.
    pub size: u64,
    /// ETag without quotes: the MD5 of the data, or `md5-of-md5s-N` for multipart.
    pub etag: String,
    /// Last modification, nanoseconds since the Unix epoch.
    pub mtime_ns: u64,
    /// Owner's uid.
    pub owner: String,
    /// The object's ACL.
    pub acl: Acl,
    /// `Content-Type`.
    pub content_type: Option<String>,
    /// Other standard headers stored with the object (cache-control, content-disposition,
    /// content-encoding, content-language, expires).
    pub headers: BTreeMap<String, String>,
    /// User metadata (`x-amz-meta-*`, without the prefix).
    pub user_meta: BTreeMap<String, String>,
    /// Object tags.
    pub tags: Vec<(String, String)>,
    /// The write's order (see the module docs).
    pub order: String,
    /// Data outside the head, in order; empty when the data is in the head.
    pub tail: Vec<Segment>,
    /// Parts of a multipart object.
    pub parts: Option<u32>,
    /// The version id (`None`: the null version).
    pub version: Option<String>,
    /// The additional checksum the writer asked for.
    pub checksum: Option<crate::checksum::Stored>,
    /// How the data is encrypted, if it is ([`crate::crypt`]): the sizes of `tail` are
    /// then those of the stored ciphertext, `size` that of the plaintext.
    pub sealed: Option<crate::crypt::Sealed>,
}

impl ObjectMeta {
    /// The plaintext bytes of each tail segment (each part of a multipart object).
    pub fn segment_sizes(&self) -> impl Iterator<Item = u64> + Clone + '_ {
        let sealed = self.sealed.is_some();
        self.tail.iter().map(move |s| if sealed { crate::crypt::plain_size(s.size) } else { s.size })
    }

    /// The index entry of this write: `own_head` if the head is the version's own, with
    /// the object lock `lock`.
    pub fn index_entry(&self, own_head: bool, lock: ObjectLock) -> IndexEntry {
        IndexEntry {
            size: self.size,
            etag: self.etag.clone(),
            mtime_ns: self.mtime_ns,
            owner: self.owner.clone(),
            storage_class: "STANDARD".into(),
            order: self.order.clone(),
            tail: self.tail.clone(),
            version: self.version.clone(),
            delete_marker: false,
            own_head,
            lock,
            content_type: self.content_type.clone(),
        }
    }

    /// Gives the write an order (and mtime) from `clock` past `newer`'s, keeping its tag.
    pub fn reorder_past(&mut self, clock: &OrderClock, newer: &str) {
        clock.observe(newer);
        self.retime(clock);
    }

    /// Gives the write the next order (and mtime) from `clock`, keeping its tag.
    pub fn retime(&mut self, clock: &OrderClock) {
        self.mtime_ns = clock.now_ns();
        self.order = order_of(self.mtime_ns, tag_of(&self.order));
    }
}

impl Versioned for ObjectMeta {
    const NAME: &'static str = "object metadata";
    /// Version 4 added `sealed`; version 3 holds grants where version 2 had a canned
    /// ACL, and the checksum; version 2 added `version`.
    const VERSION: u8 = 4;

    fn decode_older(version: u8, body: &[u8]) -> Option<Result<Self>> {
        let v2 = match version {
            3 => {
                let v3 = shoal_types::encoding::decode_body::<ObjectMetaV3>("object metadata v3", body);
                return Some(v3.map(ObjectMeta::from));
            }
            // Version 1 is version 2 without its last field: a `None` appended reads as it.
            1 => shoal_types::encoding::decode_body::<ObjectMetaV2>("object metadata v1", &[body, &[0]].concat()),
            2 => shoal_types::encoding::decode_body::<ObjectMetaV2>("object metadata v2", body),
            _ => return None,
        };
        Some(v2.map(ObjectMeta::from))
    }
}

/// [`ObjectMeta`] version 2, with a canned ACL (also inside upload records of version 2).
#[derive(Deserialize)]
pub(crate) struct ObjectMetaV2 {
    size: u64,
    etag: String,
    mtime_ns: u64,
    owner: String,
    acl: CannedAcl,
    content_type: Option<String>,
    headers: BTreeMap<String, String>,
    user_meta: BTreeMap<String, String>,
    tags: Vec<(String, String)>,
    order: String,
    tail: Vec<Segment>,
    parts: Option<u32>,
    version: Option<String>,
}

/// [`ObjectMeta`] version 3, without `sealed` (inside upload records of version 3).
#[derive(Deserialize)]
pub(crate) struct ObjectMetaV3 {
    size: u64,
    etag: String,
    mtime_ns: u64,
    owner: String,
    acl: Acl,
    content_type: Option<String>,
    headers: BTreeMap<String, String>,
    user_meta: BTreeMap<String, String>,
    tags: Vec<(String, String)>,
    order: String,
    tail: Vec<Segment>,
    parts: Option<u32>,
    version: Option<String>,
    checksum: Option<crate::checksum::Stored>,
}

impl From<ObjectMetaV3> for ObjectMeta {
    fn from(v3: ObjectMetaV3) -> ObjectMeta {
        ObjectMeta {
            size: v3.size,
            etag: v3.etag,
            mtime_ns: v3.mtime_ns,
            owner: v3.owner,
            acl: v3.acl,
            content_type: v3.content_type,
            headers: v3.headers,
            user_meta: v3.user_meta,
            tags: v3.tags,
            order: v3.order,
            tail: v3.tail,
            parts: v3.parts,
            version: v3.version,
            checksum: v3.checksum,
            sealed: None,
        }
    }
}

impl From<ObjectMetaV2> for ObjectMeta {
    fn from(v2: ObjectMetaV2) -> ObjectMeta {
        ObjectMeta {
            acl: v2.acl.grants(&v2.owner),
            size: v2.size,
            etag: v2.etag,
            mtime_ns: v2.mtime_ns,
            owner: v2.owner,
            content_type: v2.content_type,
            headers: v2.headers,
            user_meta: v2.user_meta,
            tags: v2.tags,
            order: v2.order,
            tail: v2.tail,
            parts: v2.parts,
            version: v2.version,
            checksum: None,
            sealed: None,
        }
    }
}

/// Only the metadata of a head object (`None` when there is no such object).
pub async fn read_meta(data: &IoCtx, head: &str) -> Result<Option<ObjectMeta>> {
    match data.read(head, ReadOp::new().get_xattr(META_XATTR)).await {
        Ok(reply) => match reply.outputs.into_iter().next() {
            Some(StepOutput::Data(meta)) => Ok(Some(ObjectMeta::decode(&meta)?)),
            _ => Err(err::io("xattr read returned no data")),
        },
        Err(e) if matches!(e.errno, Errno::NotFound | Errno::NoData) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::acl::{Grant, Grantee, Group, Permission};

    #[test]
    fn metadata_keeps_its_golden_bytes_and_versions_1_to_3_still_decode() {
        let acl = Acl {
            grants: vec![
                Grant { grantee: Grantee::User("o".into()), permission: Permission::FullControl },
                Grant { grantee: Grantee::Group(Group::AllUsers), permission: Permission::Read },
            ],
        };
        let meta = ObjectMeta {
            size: 5,
            etag: "e".into(),
            mtime_ns: 7,
            owner: "o".into(),
            acl,
            tags: vec![("k".into(), "v".into())],
            order: "r".into(),
            tail: vec![Segment { prefix: "p".into(), size: 9 }],
            version: Some("x".into()),
            ..Default::default()
        };
        let meta = ObjectMeta {
            checksum: Some(crate::checksum::Stored {
                algorithm: crate::checksum::Algorithm::Crc32c,
                value: "c".into(),
                parts: Some(2),
            }),
            sealed: Some(crate::crypt::Sealed {
                kind: crate::crypt::Kind::Kms { key_id: "k".into() },
                wrapped: vec![1, 2],
                salts: vec![3],
            }),
            ..meta
        };
        // version, size, etag, mtime, owner, acl: 2 grants (User "o" FullControl, Group
        // AllUsers Read), no content type, no headers, no metadata, 1 tag, order, 1
        // segment, no parts, version id, checksum (CRC32C "c" of 2 parts), sealed (KMS
        // key "k", wrapped key [1, 2], salts [3]).
        let v3 = [
            3, 5, 1, b'e', 7, 1, b'o', 2, 0, 1, b'o', 4, 2, 0, 0, 0, 0, 0, 1, 1, b'k', 1, b'v', 1, b'r', 1, 1, b'p', 9,
            0, 1, 1, b'x', 1, 1, 1, b'c', 1, 2,
        ];
        let golden = [&[4][..], &v3[1..], &[1, 1, 1, b'k', 2, 1, 2, 1, 3]].concat();
        assert_eq!(meta.encode(), golden);
        assert_eq!(ObjectMeta::decode(&golden).unwrap(), meta);
        // Version 3: version 4 without `sealed`.
        let meta = ObjectMeta { sealed: None, ..meta };
        assert_eq!(ObjectMeta::decode(&v3).unwrap(), meta);
        // Version 2: canned ACL PublicRead (variant 1) where version 3 has the grants.
        let v2 = [
            &[2, 5, 1, b'e', 7, 1, b'o', 1, 0, 0, 0, 1, 1, b'k', 1, b'v', 1, b'r', 1, 1, b'p', 9, 0][..],
            &[1, 1, b'x'],
        ]
        .concat();
        assert_eq!(ObjectMeta::decode(&v2).unwrap(), ObjectMeta { checksum: None, ..meta.clone() });
        // Version 1: version 2 without the version id.
        let v1 = [&[1][..], &v2[1..v2.len() - 3]].concat();
        assert_eq!(ObjectMeta::decode(&v1).unwrap(), ObjectMeta { version: None, checksum: None, ..meta });
    }
}
