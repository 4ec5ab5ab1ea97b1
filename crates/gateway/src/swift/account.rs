//! The account: HEAD (counts, metadata), GET (the container listing), POST (metadata), and
//! bulk delete (`POST` or `DELETE` with `?bulk-delete`).

use super::listing::{ContainerEntry, Format, ListingQuery, account_listing};
use super::{Call, Identity, Swift, bad_request, limits, show_meta, text, unavailable, updated_meta};
use http::{HeaderValue, Method, Response, StatusCode};
use http_body_util::BodyExt;
use s3s::Body;

/// The prefix of account metadata headers.
const META: &str = "x-account-meta-";

impl Swift {
    /// A request on the account, which needs a token.
    pub(super) async fn account(&self, call: &Call<'_>, body: Body) -> Response<Body> {
        let Some(identity) = call.requester.identity() else {
            return text(StatusCode::UNAUTHORIZED, "401 Unauthorized: no X-Auth-Token");
        };
        let bulk_delete = call.query("bulk-delete").is_some();
        match call.req.method().clone() {
            Method::HEAD => self.describe_account(identity, None).await,
            Method::GET => {
                let query = call.req.uri().query().unwrap_or_default();
                match ListingQuery::parse(query, call.req.headers()) {
                    Ok(query) => self.describe_account(identity, Some(query)).await,
                    Err((status, message)) => text(status, &message),
                }
            }
            Method::POST | Method::DELETE if bulk_delete => self.bulk_delete(call, body).await,
            Method::POST => self.post_account(call, identity).await,
            _ => text(StatusCode::METHOD_NOT_ALLOWED, "405 Method Not Allowed"),
        }
    }

    /// The account's counts and metadata (HEAD, `listing` None), or also its containers
    /// (GET, with the query of the listing).
    async fn describe_account(&self, identity: &Identity, listing: Option<ListingQuery>) -> Response<Body> {
        let (meta, objects) = (&self.s3.meta, &self.s3.objects);
        let names = match meta.user_buckets(&identity.user.uid).await {
            Ok(names) => names,
            Err(e) => return unavailable(e),
        };
        let mut containers = Vec::new();
        let (mut total_objects, mut total_bytes) = (0, 0);
        for name in names {
            let bucket = match meta.bucket(&name).await {
                Ok(Some(bucket)) => bucket,
                Ok(None) => continue, // removed meanwhile
                Err(e) => return unavailable(e),
            };
            let stats = match objects.bucket_stats(&bucket).await {
                Ok(stats) => stats,
                Err(e) => return unavailable(e),
            };
            total_objects += stats.entries;
            total_bytes += stats.bytes;
            containers.push(ContainerEntry {
                name,
                subdir: false,
                count: stats.entries,
                bytes: stats.bytes,
                created_ns: bucket.created_ns,
            });
        }
        let count = containers.len() as u64;
        let mut response = match listing {
            None => text(StatusCode::NO_CONTENT, ""),
            Some(query) => {
                let entries = containers.into_iter().map(|c| (c.name.clone(), c)).collect();
                let listed = query.select(entries, |name| ContainerEntry {
                    name,
                    subdir: true,
                    count: 0,
                    bytes: 0,
                    created_ns: 0,
                });
                match query.format {
                    Format::Plain if listed.is_empty() => text(StatusCode::NO_CONTENT, ""),
                    format => account_listing(format, &identity.user.uid, &listed),
                }
            }
        };
        let headers = response.headers_mut();
        for (name, value) in [
            ("x-account-container-count", count),
            ("x-account-object-count", total_objects),
            ("x-account-bytes-used", total_bytes),
        ] {
            headers.insert(name, HeaderValue::from(value));
        }
        show_meta(headers, META, &identity.user.account_meta);
        response
    }

    /// POST: sets and removes account metadata (`X-Account-Meta-*`,
    /// `X-Remove-Account-Meta-*`): 204.
    async fn post_account(&self, call: &Call<'_>, identity: &Identity) -> Response<Body> {
        // Applied to the stored record, not the cached one another gateway may have changed.
        let changed = self.s3.meta.modify_user(&identity.user.uid, |user| {
            user.account_meta = updated_meta(&user.account_meta, call.req.headers(), META)?;
            Ok(())
        });
        match changed.await {
            Ok(Ok(_)) => text(StatusCode::NO_CONTENT, ""),
            Ok(Err(response)) => response,
            Err(e) if e.errno == shoal_types::Errno::NotFound => text(StatusCode::NOT_FOUND, "404 Not Found"),
            Err(e) => unavailable(e),
        }
    }

    /// Bulk delete: the body names up to 10,000 objects (`/container/object`) or
    /// containers (`/container`), one per line, URL-encoded; each is deleted as a DELETE
    /// of its own would be. Answers 200 with the counts and errors (plain text, or JSON
    /// or XML as `Accept` asks), as Swift's bulk middleware.
    async fn bulk_delete(&self, call: &Call<'_>, body: Body) -> Response<Body> {
        let limit = limits::MAX_DELETES_PER_REQUEST * (limits::MAX_OBJECT_NAME_LENGTH * 3 + 260);
        let bytes = match http_body_util::Limited::new(body, limit).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => return text(StatusCode::PAYLOAD_TOO_LARGE, "413 Request Entity Too Large"),
        };
        let Ok(listing) = std::str::from_utf8(&bytes) else { return bad_request("the body is not UTF-8") };
        let names: Vec<String> = listing
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| percent_encoding::percent_decode_str(l).decode_utf8_lossy().into_owned())
            .collect();
        if names.len() > limits::MAX_DELETES_PER_REQUEST {
            return text(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("413 Request Entity Too Large: at most {} names", limits::MAX_DELETES_PER_REQUEST),
            );
        }
        let mut outcome = Outcome::default();
        for name in names {
            let path = name.trim_start_matches('/');
            let (container, object) = path.split_once('/').unwrap_or((path, ""));
            let response = match (container, object) {
                ("", _) => bad_request("no container"),
                (container, "") => self.delete_container(call, container).await,
                (container, object) => self.delete_object(call, container, object).await,
            };
            outcome.count(&name, response.status());
        }
        outcome.answer(call)
    }
}

/// What a bulk delete did.
#[derive(Default)]
pub(super) struct Outcome {
    deleted: u64,
    not_found: u64,
    errors: Vec<(String, StatusCode)>,
}

impl Outcome {
    /// Counts one deletion's answer.
    pub(super) fn count(&mut self, name: &str, status: StatusCode) {
        match status {
            s if s.is_success() => self.deleted += 1,
            StatusCode::NOT_FOUND => self.not_found += 1,
            s => self.errors.push((name.to_owned(), s)),
        }
    }

    /// The answer: 200, the counts and errors in the format the request's `Accept` asks.
    pub(super) fn answer(self, call: &Call<'_>) -> Response<Body> {
        let status = match self.errors.first() {
            None => "200 OK".to_owned(),
            Some(_) if self.errors.iter().all(|(_, s)| s.is_client_error()) => "400 Bad Request".to_owned(),
            Some(_) => "502 Bad Gateway".to_owned(),
        };
        let errors: Vec<(&str, String)> = (self.errors.iter())
            .map(|(name, s)| (name.as_str(), format!("{} {}", s.as_u16(), s.canonical_reason().unwrap_or(""))))
            .collect();
        match Format::accepted(call.req.headers()) {
            Format::Json => super::json(
                StatusCode::OK,
                &serde_json::json!({
                    "Number Deleted": self.deleted,
                    "Number Not Found": self.not_found,
                    "Response Status": status,
                    "Response Body": "",
                    "Errors": errors.iter().map(|(name, s)| [name, s.as_str()]).collect::<Vec<_>>(),
                }),
            ),
            Format::Xml => {
                let errors: String = (errors.iter())
                    .map(|(name, s)| {
                        format!("<object><name>{}</name><status>{s}</status></object>", crate::xml::xml_escape(name))
                    })
                    .collect();
                super::listing::xml(format!(
                    "<delete><number_deleted>{}</number_deleted><number_not_found>{}</number_not_found><response_status>{status}</response_status><response_body></response_body><errors>{errors}</errors></delete>",
                    self.deleted, self.not_found
                ))
            }
            Format::Plain => {
                let errors: String = errors.iter().map(|(name, s)| format!("{name}, {s}\n")).collect();
                text(
                    StatusCode::OK,
                    &format!(
                        "Number Deleted: {}\nNumber Not Found: {}\nResponse Body: \nResponse Status: {status}\nErrors:\n{errors}",
                        self.deleted, self.not_found
                    ),
                )
            }
        }
    }
}
