//! Containers: PUT (create, with metadata and ACLs), HEAD, GET (the object listing), POST
//! (metadata and ACLs), DELETE.

use super::listing::{Format, ListingQuery, ObjectEntry, container_listing};
use super::{Call, Need, Swift, acl, bad_request, refused, show_meta, text, unavailable, updated_meta};
use crate::meta::{BucketInfo, SwiftContainer};
use http::{HeaderValue, Method, Response, StatusCode};
use s3s::Body;
use s3s::dto::{CreateBucketInput, DeleteBucketInput};
use shoal_objclass::bucket_index::ListItem;

/// The prefix of container metadata headers.
const META: &str = "x-container-meta-";

impl Swift {
    /// A request on a container.
    pub(super) async fn container(&self, call: &Call<'_>, name: &str, body: Body) -> Response<Body> {
        match call.req.method().clone() {
            Method::PUT => self.create_container(call, name).await,
            Method::HEAD => self.describe_container(call, name, None).await,
            Method::GET => {
                let query = call.req.uri().query().unwrap_or_default();
                match ListingQuery::parse(query, call.req.headers()) {
                    Ok(query) => self.describe_container(call, name, Some(query)).await,
                    Err((status, message)) => text(status, &message),
                }
            }
            Method::POST => self.post_container(call, name).await,
            Method::DELETE if call.query("bulk-delete").is_some() => self.account(call, body).await,
            Method::DELETE => self.delete_container(call, name).await,
            _ => text(StatusCode::METHOD_NOT_ALLOWED, "405 Method Not Allowed"),
        }
    }

    /// PUT: 201 created, 202 when the user has it already (its metadata and ACLs
    /// updated), 409 when another user does.
    async fn create_container(&self, call: &Call<'_>, name: &str) -> Response<Body> {
        let Some(identity) = call.requester.identity() else {
            return text(StatusCode::UNAUTHORIZED, "401 Unauthorized: no X-Auth-Token");
        };
        if let Err(message) = validate_container(name) {
            return bad_request(&message);
        }
        match self.s3.meta.bucket(name).await {
            Ok(Some(bucket)) if bucket.owner == identity.user.uid => {
                return match self.update_container(call, &bucket).await {
                    Ok(()) => text(StatusCode::ACCEPTED, ""),
                    Err(response) => response,
                };
            }
            Ok(Some(_)) => return text(StatusCode::CONFLICT, "409 Conflict: the container belongs to another user"),
            Ok(None) => {}
            Err(e) => return unavailable(e),
        }
        let swift = match updated_swift(&SwiftContainer::default(), call) {
            Ok(swift) => swift,
            Err(response) => return response,
        };
        let input = CreateBucketInput { bucket: name.to_owned(), ..Default::default() };
        let mut req = Self::on_behalf(&identity.user, call.req, input);
        req.extensions.insert(swift);
        match self.s3.create_bucket(req).await {
            Ok(_) => text(StatusCode::CREATED, ""),
            Err(e) => refused(&e),
        }
    }

    /// POST: sets and removes metadata and ACLs; 204. Only the owner may.
    async fn post_container(&self, call: &Call<'_>, name: &str) -> Response<Body> {
        let bucket = match self.owned(call, name).await {
            Ok(bucket) => bucket,
            Err(response) => return response,
        };
        match self.update_container(call, &bucket).await {
            Ok(()) => text(StatusCode::NO_CONTENT, ""),
            Err(response) => response,
        }
    }

    /// Applies the request's metadata and ACL headers to a container.
    async fn update_container(&self, call: &Call<'_>, bucket: &BucketInfo) -> Result<(), Response<Body>> {
        let changed = self.s3.meta.modify_bucket(&bucket.name, &bucket.id, |b| {
            b.swift = updated_swift(&b.swift, call)?;
            Ok(())
        });
        changed.await.map_err(unavailable)?
    }

    /// The container, if the requester owns it: 401 without a token, 403 for another
    /// user's, 404 when there is none.
    async fn owned(&self, call: &Call<'_>, name: &str) -> Result<std::sync::Arc<BucketInfo>, Response<Body>> {
        let Some(identity) = call.requester.identity() else {
            return Err(text(StatusCode::UNAUTHORIZED, "401 Unauthorized: no X-Auth-Token"));
        };
        let bucket = self.bucket(name).await?;
        if bucket.owner != identity.user.uid {
            return Err(text(StatusCode::FORBIDDEN, "403 Forbidden: only the container's owner may"));
        }
        Ok(bucket)
    }

    /// HEAD (`listing` None) or GET: counts, metadata and, to the owner, ACLs; with GET
    /// the listing.
    async fn describe_container(&self, call: &Call<'_>, name: &str, listing: Option<ListingQuery>) -> Response<Body> {
        let need = if listing.is_some() { Need::List } else { Need::Read };
        let bucket = match self.listable(call, name, need).await {
            Ok(bucket) => bucket,
            Err(response) => return response,
        };
        let stats = match self.s3.objects.bucket_stats(&bucket).await {
            Ok(stats) => stats,
            Err(e) => return unavailable(e),
        };
        let mut response = match listing {
            None => text(StatusCode::NO_CONTENT, ""),
            Some(query) => match self.list_objects(&bucket, &query).await {
                Ok(entries) if entries.is_empty() && query.format == Format::Plain => text(StatusCode::NO_CONTENT, ""),
                Ok(entries) => container_listing(query.format, name, &entries),
                Err(e) => return unavailable(e),
            },
        };
        let headers = response.headers_mut();
        headers.insert("x-container-object-count", HeaderValue::from(stats.entries));
        headers.insert("x-container-bytes-used", HeaderValue::from(stats.bytes));
        if let Ok(created) = HeaderValue::from_str(&format!("{}.{:05}", bucket.created_ns / 1_000_000_000, 0)) {
            headers.insert("x-timestamp", created);
        }
        show_meta(headers, META, &bucket.swift.meta);
        let owner = call.requester.identity().is_some_and(|i| i.user.uid == bucket.owner);
        for (header, acl) in
            [("x-container-read", &bucket.swift.read_acl), ("x-container-write", &bucket.swift.write_acl)]
        {
            if let Some(value) = acl.as_deref().filter(|_| owner).and_then(|a| HeaderValue::from_str(a).ok()) {
                headers.insert(header, value);
            }
        }
        response
    }

    /// The container's objects the listing query selects, read from its index.
    async fn list_objects(&self, bucket: &BucketInfo, query: &ListingQuery) -> shoal_types::Result<Vec<ObjectEntry>> {
        let objects = &self.s3.objects;
        let entry = |item: ListItem| match item {
            ListItem::Entry(name, e) => ObjectEntry::Object {
                name,
                hash: e.etag,
                bytes: e.size,
                content_type: e.content_type.unwrap_or_else(|| "binary/octet-stream".into()),
                mtime_ns: e.mtime_ns,
            },
            ListItem::Prefix(name) => ObjectEntry::Subdir(name),
        };
        let wanted = |item: &ListItem| query.path.is_none() || matches!(item, ListItem::Entry(..));
        if query.reverse {
            // The index lists forward: read every name with the prefix, then select.
            let mut all = Vec::new();
            let mut after = String::new();
            loop {
                let (items, more) = objects.list(bucket, &query.prefix, &query.delimiter, &after, 1000).await?;
                after = items.last().map(|i| i.name().to_owned()).unwrap_or_default();
                all.extend(items.into_iter().filter(wanted).map(|i| (i.name().to_owned(), entry(i))));
                if !more || after.is_empty() {
                    return Ok(query.select(all, ObjectEntry::Subdir));
                }
            }
        }
        let mut listed = Vec::new();
        let mut after = query.marker.clone().unwrap_or_default();
        while listed.len() < query.limit {
            let (items, more) =
                objects.list(bucket, &query.prefix, &query.delimiter, &after, query.limit - listed.len()).await?;
            after = items.last().map(|i| i.name().to_owned()).unwrap_or_default();
            let before_end = items.iter().take_while(|i| query.within(i.name())).count();
            let ended = before_end < items.len();
            listed.extend(items.into_iter().take(before_end).filter(wanted).map(entry));
            if !more || ended || after.is_empty() {
                break;
            }
        }
        Ok(listed)
    }

    /// DELETE: 204, 404 when there is none, 409 when it holds objects.
    pub(super) async fn delete_container(&self, call: &Call<'_>, name: &str) -> Response<Body> {
        let Some(identity) = call.requester.identity() else {
            return text(StatusCode::UNAUTHORIZED, "401 Unauthorized: no X-Auth-Token");
        };
        let input = DeleteBucketInput { bucket: name.to_owned(), ..Default::default() };
        match self.s3.delete_bucket(Self::on_behalf(&identity.user, call.req, input)).await {
            Ok(_) => text(StatusCode::NO_CONTENT, ""),
            Err(e) => refused(&e),
        }
    }
}

/// A container's Swift record with the request's metadata and ACL headers applied:
/// 400 for bad ACLs or metadata over Swift's limits.
fn updated_swift(stored: &SwiftContainer, call: &Call<'_>) -> Result<SwiftContainer, Response<Body>> {
    let meta = updated_meta(&stored.meta, call.req.headers(), META)?;
    let acl = |current: &Option<String>, header: &str, write: bool| -> Result<Option<String>, Response<Body>> {
        if call.req.headers().contains_key(format!("x-remove-{}", &header[2..]).as_str()) {
            return Ok(None);
        }
        match call.header(header) {
            None => Ok(current.clone()),
            Some(value) => match acl::clean(value, write).map_err(|m| bad_request(&m))? {
                cleaned if cleaned.is_empty() => Ok(None),
                cleaned => Ok(Some(cleaned)),
            },
        }
    };
    Ok(SwiftContainer {
        meta,
        read_acl: acl(&stored.read_acl, "x-container-read", false)?,
        write_acl: acl(&stored.write_acl, "x-container-write", true)?,
    })
}

/// Container names as RGW takes them: 3 to 255 bytes, no `/`, not starting with `.`.
fn validate_container(name: &str) -> Result<(), String> {
    match name.len() {
        n if n > 255 => Err(format!("Container name length of {n} longer than 255")),
        n if n < 3 => Err(format!("container name '{name}' is shorter than 3 bytes")),
        _ if name.starts_with('.') || name.contains('/') => {
            Err(format!("container name '{name}' starts with '.' or holds '/'"))
        }
        _ => Ok(()),
    }
}
