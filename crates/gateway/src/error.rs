//! The S3 errors a client sees for failures of the layers below.

use crate::objects::StreamError;
use s3s::{S3Error, s3_error};
use shoal_types::{Errno, RadosError};

/// Turns an object-layer failure into the S3 error a client should see.
pub fn rados_error(e: RadosError) -> S3Error {
    match e.errno {
        Errno::TimedOut | Errno::NotConnected | Errno::ConnectionRefused | Errno::Again => {
            s3_error!(ServiceUnavailable, "{e}")
        }
        Errno::FileTooBig | Errno::TooBig => s3_error!(EntityTooLarge, "{e}"),
        Errno::AccessDenied => s3_error!(AccessDenied, "{}", e.message),
        // A full OSD or a pool at its quota: the cluster cannot take the data now, whatever
        // the client sends; deletes still work (as MinIO's 507 for a full drive).
        Errno::NoSpace | Errno::QuotaExceeded => {
            custom_error("InsufficientStorage", http::StatusCode::INSUFFICIENT_STORAGE, &e.message)
        }
        _ => {
            tracing::error!(error = %e, "object layer error");
            s3_error!(InternalError, "{e}")
        }
    }
}

impl From<StreamError> for S3Error {
    fn from(e: StreamError) -> S3Error {
        stream_error(e)
    }
}

/// Turns a failure to stream a request body into the object layer into an S3 error.
pub fn stream_error(e: StreamError) -> S3Error {
    match e {
        // s3s does not export its aws-chunked error type: recognise a bad chunk signature by its text.
        StreamError::Body(msg) if msg.contains("SignatureMismatch") => {
            s3_error!(SignatureDoesNotMatch, "a chunk signature of the aws-chunked body does not match")
        }
        StreamError::Body(msg) => s3_error!(IncompleteBody, "reading the request body failed: {msg}"),
        StreamError::TooLarge => s3_error!(EntityTooLarge, "the object exceeds the largest allowed size"),
        StreamError::Rados(e) if e.errno == Errno::NotFound => s3_error!(NoSuchUpload),
        StreamError::Rados(e) => rados_error(e),
    }
}

/// An S3 error with a code s3s does not know and its status.
pub fn custom_error(code: &'static str, status: http::StatusCode, message: &str) -> S3Error {
    let mut error = S3Error::with_message(s3s::S3ErrorCode::Custom(code.into()), message.to_owned());
    error.set_status_code(status);
    error
}
