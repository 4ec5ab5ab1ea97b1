//! Account and container listings: the query (`format`, `marker`, `end_marker`, `prefix`,
//! `delimiter`, `path`, `limit`, `reverse`) and the three formats (plain text, JSON, XML).

use super::limits::LISTING_LIMIT;
use super::{json, text};
use crate::xml::xml_escape;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use s3s::Body;

/// A listing's format: `format=` or, without it, the `Accept` header; plain by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Format {
    Plain,
    Json,
    Xml,
}

impl Format {
    /// The format a request's `Accept` header asks for (plain when it names none).
    pub fn accepted(headers: &HeaderMap) -> Format {
        match headers.get(http::header::ACCEPT).and_then(|a| a.to_str().ok()).unwrap_or_default() {
            a if a.contains("application/json") => Format::Json,
            a if a.contains("application/xml") || a.contains("text/xml") => Format::Xml,
            _ => Format::Plain,
        }
    }
}

/// The parameters of a listing.
#[derive(Debug)]
pub(super) struct ListingQuery {
    pub format: Format,
    pub marker: Option<String>,
    pub end_marker: Option<String>,
    pub prefix: String,
    /// Roll names up to the first delimiter after the prefix into `subdir` entries.
    pub delimiter: String,
    /// `path=`: only the names right under this pseudo-directory (no subdirectories).
    pub path: Option<String>,
    pub limit: usize,
    pub reverse: bool,
}

impl ListingQuery {
    /// Parses a listing's query string and `Accept` header: 400 for a bad `limit`,
    /// `format` or `delimiter`, 412 for a `limit` above 10,000 (as Swift).
    pub fn parse(query: &str, headers: &HeaderMap) -> Result<ListingQuery, (StatusCode, String)> {
        let mut q = ListingQuery {
            format: Format::accepted(headers),
            marker: None,
            end_marker: None,
            prefix: String::new(),
            delimiter: String::new(),
            path: None,
            limit: LISTING_LIMIT,
            reverse: false,
        };
        let bad = |message: String| (StatusCode::BAD_REQUEST, format!("400 Bad Request: {message}"));
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            match &*key {
                "format" => {
                    q.format = match &*value.to_ascii_lowercase() {
                        "json" => Format::Json,
                        "xml" => Format::Xml,
                        "plain" | "" => Format::Plain,
                        other => return Err(bad(format!("format '{other}' is not plain, json or xml"))),
                    }
                }
                "marker" => q.marker = Some(value.into_owned()),
                "end_marker" => q.end_marker = Some(value.into_owned()),
                "prefix" => q.prefix = value.into_owned(),
                "delimiter" if value.chars().count() > 1 => {
                    return Err(bad("a delimiter is one character".into()));
                }
                "delimiter" => q.delimiter = value.into_owned(),
                "path" => q.path = Some(value.into_owned()),
                "reverse" => {
                    q.reverse = matches!(&*value.to_ascii_lowercase(), "true" | "1" | "yes" | "on" | "t" | "y")
                }
                "limit" => {
                    q.limit = value.parse().map_err(|_| bad(format!("limit '{value}' is not a number")))?;
                    if q.limit > LISTING_LIMIT {
                        return Err((
                            StatusCode::PRECONDITION_FAILED,
                            format!("412 Precondition Failed: limit is at most {LISTING_LIMIT}"),
                        ));
                    }
                }
                _ => {}
            }
        }
        if let Some(path) = &q.path {
            // As Swift: the names directly under `path/`, without subdirectories.
            q.prefix = match path.trim_end_matches('/') {
                "" => String::new(),
                dir => format!("{dir}/"),
            };
            q.delimiter = "/".into();
        }
        Ok(q)
    }

    /// Whether `name` is inside the markers (in the listing's direction).
    pub fn within(&self, name: &str) -> bool {
        let after = |name: &str, bound: &str| if self.reverse { name < bound } else { name > bound };
        self.marker.as_deref().is_none_or(|m| after(name, m))
            && self.end_marker.as_deref().is_none_or(|m| after(m, name))
    }

    /// The entries (by name) this listing returns: those with the prefix, inside the
    /// markers, in name order (reversed with `reverse`), at most `limit`; with a
    /// delimiter, names holding it after the prefix are rolled up into one `subdir` entry
    /// per common prefix.
    pub fn select<T>(&self, mut entries: Vec<(String, T)>, subdir: impl Fn(String) -> T) -> Vec<T> {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        if self.reverse {
            entries.reverse();
        }
        let mut selected = Vec::new();
        let mut last_subdir: Option<String> = None;
        for (name, entry) in entries {
            let Some(rest) = name.strip_prefix(&self.prefix) else { continue };
            let rolled = (!self.delimiter.is_empty())
                .then(|| rest.find(&self.delimiter))
                .flatten()
                .map(|at| name[..self.prefix.len() + at + self.delimiter.len()].to_owned());
            let shown = rolled.as_deref().unwrap_or(&name);
            if !self.within(shown) || (rolled.is_some() && last_subdir == rolled) {
                continue;
            }
            if selected.len() == self.limit {
                break;
            }
            match rolled {
                Some(prefix) => {
                    selected.push(subdir(prefix.clone()));
                    last_subdir = Some(prefix);
                }
                None => selected.push(entry),
            }
        }
        selected
    }
}

/// One entry of an account listing.
pub(super) struct ContainerEntry {
    pub name: String,
    /// A rolled-up common prefix, not a container.
    pub subdir: bool,
    pub count: u64,
    pub bytes: u64,
    pub created_ns: u64,
}

/// One entry of a container listing.
pub(super) enum ObjectEntry {
    Object {
        name: String,
        hash: String,
        bytes: u64,
        content_type: String,
        mtime_ns: u64,
    },
    /// A pseudo-directory (a common prefix).
    Subdir(String),
}

impl ObjectEntry {
    fn name(&self) -> &str {
        match self {
            ObjectEntry::Object { name, .. } | ObjectEntry::Subdir(name) => name,
        }
    }
}

/// An account listing in `format`, for the account named `account`.
pub(super) fn account_listing(format: Format, account: &str, entries: &[ContainerEntry]) -> Response<Body> {
    match format {
        Format::Plain => plain(entries.iter().map(|c| c.name.as_str())),
        Format::Json => {
            let entries: Vec<serde_json::Value> = entries
                .iter()
                .map(|c| match c.subdir {
                    true => serde_json::json!({"subdir": c.name}),
                    false => serde_json::json!({"name": c.name, "count": c.count, "bytes": c.bytes, "last_modified": swift_time(c.created_ns)}),
                })
                .collect();
            json(StatusCode::OK, &serde_json::Value::Array(entries))
        }
        Format::Xml => {
            let mut body = format!("<account name=\"{}\">", xml_escape(account));
            for c in entries {
                body.push_str(&match c.subdir {
                    true => subdir_xml(&c.name),
                    false => format!(
                        "<container><name>{}</name><count>{}</count><bytes>{}</bytes><last_modified>{}</last_modified></container>",
                        xml_escape(&c.name),
                        c.count,
                        c.bytes,
                        swift_time(c.created_ns)
                    ),
                });
            }
            body.push_str("</account>");
            xml(body)
        }
    }
}

/// A container listing in `format`, for the container named `container`.
pub(super) fn container_listing(format: Format, container: &str, entries: &[ObjectEntry]) -> Response<Body> {
    match format {
        Format::Plain => plain(entries.iter().map(ObjectEntry::name)),
        Format::Json => {
            let entries: Vec<serde_json::Value> = entries
                .iter()
                .map(|entry| match entry {
                    ObjectEntry::Object { name, hash, bytes, content_type, mtime_ns } => serde_json::json!({
                        "name": name, "hash": hash, "bytes": bytes, "content_type": content_type,
                        "last_modified": swift_time(*mtime_ns),
                    }),
                    ObjectEntry::Subdir(name) => serde_json::json!({"subdir": name}),
                })
                .collect();
            json(StatusCode::OK, &serde_json::Value::Array(entries))
        }
        Format::Xml => {
            let mut body = format!("<container name=\"{}\">", xml_escape(container));
            for entry in entries {
                body.push_str(&match entry {
                    ObjectEntry::Object { name, hash, bytes, content_type, mtime_ns } => format!(
                        "<object><name>{}</name><hash>{}</hash><bytes>{bytes}</bytes><content_type>{}</content_type><last_modified>{}</last_modified></object>",
                        xml_escape(name),
                        xml_escape(hash),
                        xml_escape(content_type),
                        swift_time(*mtime_ns)
                    ),
                    ObjectEntry::Subdir(name) => subdir_xml(name),
                });
            }
            body.push_str("</container>");
            xml(body)
        }
    }
}

/// A common prefix in an XML listing.
fn subdir_xml(name: &str) -> String {
    let name = xml_escape(name);
    format!("<subdir name=\"{name}\"><name>{name}</name></subdir>")
}

/// A plain listing: one name per line, every line `\n`-terminated; 204 when empty.
fn plain<'a>(names: impl Iterator<Item = &'a str>) -> Response<Body> {
    let body: String = names.map(|name| format!("{name}\n")).collect();
    match body.is_empty() {
        true => text(StatusCode::NO_CONTENT, ""),
        false => {
            let mut response = text(StatusCode::OK, "");
            *response.body_mut() = Body::from(body);
            response
        }
    }
}

/// An XML answer (a listing, or a bulk delete's outcome).
pub(super) fn xml(body: String) -> Response<Body> {
    let mut response = Response::new(Body::from(format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{body}")));
    response
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/xml; charset=utf-8"));
    response
}

/// A time as Swift's listings give it: UTC, microseconds, no zone.
pub(super) fn swift_time(ns: u64) -> String {
    match time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns)) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.microsecond()
        ),
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(query: &str) -> Result<ListingQuery, (StatusCode, String)> {
        ListingQuery::parse(query, &HeaderMap::new())
    }

    #[test]
    fn listings_page_by_marker_end_marker_prefix_limit_and_reverse() {
        let names = ["b", "a", "c", "ab"].map(|n| (n.to_owned(), n));
        let select = |query: &str| parse(query).unwrap().select(names.to_vec(), |_| "/");
        assert_eq!(select(""), ["a", "ab", "b", "c"]);
        assert_eq!(select("marker=a&limit=2"), ["ab", "b"]);
        assert_eq!(select("end_marker=b"), ["a", "ab"]);
        assert_eq!(select("prefix=a&format=json"), ["a", "ab"]);
        assert_eq!(select("reverse=true&marker=c"), ["b", "ab", "a"]);
        let dirs = ["a/1", "a/2", "b", "c/x/1", "c/y"].map(|n| (n.to_owned(), n.to_owned()));
        let rolled = |query: &str| parse(query).unwrap().select(dirs.to_vec(), |p| format!("dir {p}"));
        assert_eq!(rolled("delimiter=/"), ["dir a/", "b", "dir c/"]);
        assert_eq!(rolled("delimiter=/&reverse=1"), ["dir c/", "b", "dir a/"]);
        assert_eq!(rolled("delimiter=/&prefix=c/"), ["dir c/x/", "c/y"]);
        assert_eq!(rolled("delimiter=/&marker=a/&limit=1"), ["b"]);
        assert_eq!(parse("limit=10001").unwrap_err().0, StatusCode::PRECONDITION_FAILED);
        assert_eq!(parse("limit=-1").unwrap_err().0, StatusCode::BAD_REQUEST);
        assert_eq!(parse("format=xml2").unwrap_err().0, StatusCode::BAD_REQUEST);
        assert_eq!(parse("delimiter=ab").unwrap_err().0, StatusCode::BAD_REQUEST);
        assert_eq!(swift_time(1_795_761_042_123_456_789), "2026-11-27T06:30:42.123456");
    }

    #[test]
    fn the_format_comes_from_the_query_or_the_accept_header_and_path_sets_prefix_and_delimiter() {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::ACCEPT, HeaderValue::from_static("application/json"));
        assert_eq!(ListingQuery::parse("", &headers).unwrap().format, Format::Json);
        assert_eq!(ListingQuery::parse("format=xml", &headers).unwrap().format, Format::Xml);
        headers.insert(http::header::ACCEPT, HeaderValue::from_static("text/xml"));
        assert_eq!(ListingQuery::parse("", &headers).unwrap().format, Format::Xml);
        let q = parse("path=photos/2026/").unwrap();
        assert_eq!((q.prefix.as_str(), q.delimiter.as_str()), ("photos/2026/", "/"));
        assert_eq!(parse("path=").unwrap().prefix, "");
    }

    #[test]
    fn listings_render_in_each_format_with_names_escaped() {
        let entries = [
            ObjectEntry::Object {
                name: "a<&>.txt".into(),
                hash: "h".into(),
                bytes: 3,
                content_type: "text/plain".into(),
                mtime_ns: 0,
            },
            ObjectEntry::Subdir("d/".into()),
        ];
        let body = |response: Response<Body>| {
            let mut body = response.into_body();
            String::from_utf8(body.take_bytes().unwrap().to_vec()).unwrap()
        };
        assert_eq!(body(container_listing(Format::Plain, "c", &entries)), "a<&>.txt\nd/\n");
        let listed: serde_json::Value =
            serde_json::from_str(&body(container_listing(Format::Json, "c", &entries))).unwrap();
        assert_eq!(listed[0]["name"], "a<&>.txt");
        assert_eq!(listed[0]["last_modified"], "1970-01-01T00:00:00.000000");
        assert_eq!(listed[1], serde_json::json!({"subdir": "d/"}));
        let xml = body(container_listing(Format::Xml, "c&", &entries));
        assert!(
            xml.contains(
                "<container name=\"c&amp;\"><object><name>a&lt;&amp;&gt;.txt</name><hash>h</hash><bytes>3</bytes>"
            ),
            "{xml}"
        );
        assert!(xml.ends_with("<subdir name=\"d/\"><name>d/</name></subdir></container>"), "{xml}");
        assert_eq!(container_listing(Format::Plain, "c", &[]).status(), StatusCode::NO_CONTENT);
        assert_eq!(body(account_listing(Format::Json, "u", &[])), "[]");
    }

    proptest! {
        #[test]
        fn any_query_parses_or_is_refused_without_panicking(query in ".{0,80}") {
            if let Ok(q) = parse(&query) {
                prop_assert!(q.limit <= LISTING_LIMIT);
                prop_assert!(q.delimiter.chars().count() <= 1);
            }
        }
    }
}
