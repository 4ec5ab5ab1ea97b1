//! What a write's data must match: its Content-MD5 and the additional checksum asked for.

use crate::checksum;
use bytes::Bytes;
use futures::StreamExt;
use s3s::{S3Request, S3Result, s3_error};

/// What a write's data must match: its Content-MD5 and the additional checksum asked for
/// (a value in a header, or in the aws-chunked trailer).
#[derive(Default)]
pub struct Integrity {
    content_md5: Option<String>,
    checksum: Option<checksum::Requested>,
    trailers: Option<s3s::TrailingHeaders>,
}

impl Integrity {
    /// Terms that check nothing sent and compute `checksum` (a copy's new checksum).
    pub fn computing(checksum: Option<checksum::Requested>) -> Integrity {
        Integrity { checksum, ..Integrity::default() }
    }

    /// The integrity terms of a request with `content_md5`.
    pub fn of<I>(req: &mut S3Request<I>, content_md5: Option<String>) -> S3Result<Integrity> {
        let checksum = checksum::requested(&req.headers).map_err(|e| s3_error!(InvalidRequest, "{e}"))?;
        Ok(Integrity { content_md5, checksum, trailers: req.trailing_headers.take() })
    }

    /// `body`, feeding the checksum asked for (returned) as it streams.
    pub fn watch<S, E>(
        &self,
        body: S,
    ) -> (impl futures::Stream<Item = Result<Bytes, E>> + Unpin, Option<checksum::Running>)
    where
        S: futures::Stream<Item = Result<Bytes, E>> + Unpin,
    {
        let running = self.checksum.as_ref().map(|c| checksum::Running::new(c.algorithm));
        let feed = running.clone();
        let body = body.map(move |item| {
            if let (Some(running), Ok(bytes)) = (&feed, &item) {
                running.update(bytes);
            }
            item
        });
        (body, running)
    }

    /// Checks the data's MD5 and checksum against what the request sent; the checksum to
    /// store.
    pub fn verify(&self, md5: &[u8], running: Option<&checksum::Running>) -> S3Result<Option<checksum::Stored>> {
        if let Some(expected) = &self.content_md5 {
            use base64::Engine;
            let digest = base64::engine::general_purpose::STANDARD.decode(expected).ok().filter(|d| d.len() == 16);
            match digest {
                None => return Err(s3_error!(InvalidDigest, "Content-MD5 is not a base64 MD5")),
                Some(d) if d != md5 => return Err(s3_error!(BadDigest)),
                Some(_) => {}
            }
        }
        let (Some(requested), Some(running)) = (&self.checksum, running) else { return Ok(None) };
        let algorithm = requested.algorithm;
        let computed = running.finish();
        let from_trailer = || {
            let trailers = self.trailers.as_ref()?;
            trailers.read(|h| h.get(algorithm.header()).and_then(|v| v.to_str().ok()).map(str::to_owned)).flatten()
        };
        match requested.value.clone().or_else(from_trailer) {
            Some(sent) if sent.trim() != computed => Err(s3_error!(
                BadDigest,
                "The {} you specified did not match the calculated checksum.",
                algorithm.name()
            )),
            _ => Ok(Some(checksum::Stored { algorithm, value: computed, parts: None })),
        }
    }
}
