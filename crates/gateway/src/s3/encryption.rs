//! Server-side encryption in S3 terms: which key protects a write (the request's SSE
//! headers, else the bucket's default encryption), which opens a read, the response
//! headers that say so, and Put/Get/DeleteBucketEncryption. The cryptography is in
//! [`crate::crypt`].

use super::common::ShoalS3;
use crate::access::Action;
use crate::crypt::{CryptError, DefaultEncryption, Key, Kind, Protection, Sealed};
use crate::error::custom_error;
use crate::meta::BucketInfo;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use md5::{Digest, Md5};
use s3s::dto::*;
use s3s::{S3Error, S3Request, S3Response, S3Result, s3_error};

/// An SSE-C key a request carries, checked against its MD5.
pub(super) struct CustomerKey {
    key: Key,
    /// The key's MD5, base64, as the client sent it and responses echo it.
    md5: String,
}

impl CustomerKey {
    /// The MD5 responses show.
    pub(super) fn md5(&self) -> &str {
        &self.md5
    }
}

/// The SSE-C headers of a request (`copy_source`: the copy source's).
pub(super) struct CustomerHeaders<'a> {
    pub algorithm: Option<&'a str>,
    pub key: Option<&'a str>,
    pub md5: Option<&'a str>,
}

/// The [`CustomerHeaders`] of an input, or (`copy_source`) of its copy source.
macro_rules! customer_headers {
    ($input:expr) => {
        $crate::s3::encryption::CustomerHeaders {
            algorithm: $input.sse_customer_algorithm.as_deref(),
            key: $input.sse_customer_key.as_deref(),
            md5: $input.sse_customer_key_md5.as_deref(),
        }
    };
    ($input:expr, copy_source) => {
        $crate::s3::encryption::CustomerHeaders {
            algorithm: $input.copy_source_sse_customer_algorithm.as_deref(),
            key: $input.copy_source_sse_customer_key.as_deref(),
            md5: $input.copy_source_sse_customer_key_md5.as_deref(),
        }
    };
}
pub(super) use customer_headers;

/// Sets the encryption headers of a response about an object sealed as `sealed`
/// (`customer`: the SSE-C key the request gave).
macro_rules! show_encryption {
    ($out:expr, $sealed:expr, $customer:expr) => {{
        show_encryption!($out, $sealed);
        if let Some(customer) = $customer.filter(|_| $sealed.is_some_and(|s| s.kind == $crate::crypt::Kind::Customer)) {
            let customer: &$crate::s3::encryption::CustomerKey = customer;
            $out.sse_customer_algorithm = Some(ServerSideEncryption::AES256.to_owned());
            $out.sse_customer_key_md5 = Some(customer.md5().to_owned());
        }
    }};
    // Outputs without the SSE-C fields.
    ($out:expr, $sealed:expr) => {{
        let sealed: Option<&$crate::crypt::Sealed> = $sealed;
        match sealed.map(|s| &s.kind) {
            Some($crate::crypt::Kind::S3 { .. }) => {
                $out.server_side_encryption = Some(ServerSideEncryption::from_static(ServerSideEncryption::AES256));
            }
            Some($crate::crypt::Kind::Kms { key_id }) => {
                $out.server_side_encryption = Some(ServerSideEncryption::from_static(ServerSideEncryption::AWS_KMS));
                $out.ssekms_key_id = Some(key_id.clone());
            }
            Some($crate::crypt::Kind::Customer) | None => {}
        }
    }};
}
pub(super) use show_encryption;

/// What a write asks for: the `x-amz-server-side-encryption*` headers and the SSE-C key.
pub(super) struct Requested<'a> {
    pub algorithm: Option<&'a ServerSideEncryption>,
    pub kms_key_id: Option<&'a str>,
    pub customer: Option<&'a CustomerKey>,
}

/// The [`Requested`] encryption of a PutObject, CopyObject or CreateMultipartUpload input.
macro_rules! requested_encryption {
    ($input:expr, $customer:expr) => {
        $crate::s3::encryption::Requested {
            algorithm: $input.server_side_encryption.as_ref(),
            kms_key_id: $input.ssekms_key_id.as_deref(),
            customer: $customer,
        }
    };
}
pub(super) use requested_encryption;

fn not_applicable() -> S3Error {
    s3_error!(InvalidRequest, "The encryption parameters are not applicable to this object.")
}

fn crypt_error(e: CryptError) -> S3Error {
    match e {
        CryptError::WrongKey => s3_error!(AccessDenied, "The provided customer key does not match the object's key."),
        CryptError::UnknownKey(id) => custom_error(
            "KMS.NotFoundException",
            http::StatusCode::BAD_REQUEST,
            &format!("Invalid keyId {id}: no such key in the gateway's key file"),
        ),
        CryptError::Corrupt(what) | CryptError::KeyFile(what) => s3_error!(InternalError, "{what}"),
    }
}

impl ShoalS3 {
    /// The checked SSE-C key of `headers`, if they give one; `secure` is whether the
    /// request came over TLS (SSE-C keys are refused over plain HTTP unless
    /// `rgw_crypt_require_ssl` is off).
    pub(super) fn customer_key(&self, headers: CustomerHeaders<'_>, secure: bool) -> S3Result<Option<CustomerKey>> {
        let CustomerHeaders { algorithm, key, md5 } = headers;
        if algorithm.is_none() && key.is_none() && md5.is_none() {
            return Ok(None);
        }
        match algorithm {
            Some(ServerSideEncryption::AES256) => {}
            Some(other) => {
                return Err(custom_error(
                    "InvalidEncryptionAlgorithmError",
                    http::StatusCode::BAD_REQUEST,
                    &format!("The encryption algorithm '{other}' is not valid; supported value: AES256."),
                ));
            }
            None => {
                return Err(s3_error!(
                    InvalidArgument,
                    "Requests specifying Server Side Encryption with Customer provided keys must provide a valid encryption algorithm."
                ));
            }
        }
        if !secure && self.config.crypt_require_ssl {
            return Err(s3_error!(
                InvalidRequest,
                "Requests specifying Server Side Encryption with Customer provided keys must be made over a secure connection."
            ));
        }
        let bytes = key.and_then(|k| STANDARD.decode(k.trim()).ok()).and_then(|k| <[u8; 32]>::try_from(k).ok());
        let Some(bytes) = bytes else {
            return Err(s3_error!(InvalidArgument, "The secret key was invalid for the specified algorithm."));
        };
        let md5 = md5.map(str::trim).ok_or_else(|| {
            s3_error!(
                InvalidArgument,
                "Requests specifying Server Side Encryption with Customer provided keys must provide the client calculated MD5 of the secret key."
            )
        })?;
        if STANDARD.decode(md5).ok().as_deref() != Some(&Md5::digest(bytes)[..]) {
            return Err(s3_error!(
                InvalidArgument,
                "The calculated MD5 hash of the key did not match the hash that was provided."
            ));
        }
        Ok(Some(CustomerKey { key: Key::new(&bytes), md5: md5.to_owned() }))
    }

    /// The master key `id` of the gateway's key file.
    fn master_key(&self, id: &str) -> S3Result<&Key> {
        let keyring = self.keyring.as_ref().ok_or_else(|| {
            s3_error!(
                NotImplemented,
                "Server-side encryption with S3 or KMS keys needs a key file: set rgw_crypt_key_file on the gateway."
            )
        })?;
        keyring.key(id).map_err(crypt_error)
    }

    /// The master key a default or requested `algorithm` (with `kms_key_id`) names, and
    /// the kind of object it makes.
    fn managed_key(&self, algorithm: &str, kms_key_id: Option<&str>) -> S3Result<(&Key, Kind)> {
        match algorithm {
            ServerSideEncryption::AES256 if kms_key_id.is_none() => {
                let key_id = self.config.crypt_sse_s3_key_id.clone();
                Ok((self.master_key(&key_id)?, Kind::S3 { key_id }))
            }
            ServerSideEncryption::AES256 => Err(s3_error!(
                InvalidArgument,
                "x-amz-server-side-encryption-aws-kms-key-id requires x-amz-server-side-encryption: aws:kms"
            )),
            // Without a key id, the SSE-S3 key plays AWS's managed key aws/s3.
            ServerSideEncryption::AWS_KMS | ServerSideEncryption::AWS_KMS_DSSE => {
                let key_id = kms_key_id.map_or_else(|| self.config.crypt_sse_s3_key_id.clone(), str::to_owned);
                Ok((self.master_key(&key_id)?, Kind::Kms { key_id }))
            }
            other => Err(s3_error!(InvalidArgument, "The encryption method '{other}' is not supported.")),
        }
    }

    /// The data key and record of a new object in `bucket` written with `requested`:
    /// the request's own encryption, else the bucket's default, else none.
    pub(super) fn protection(&self, bucket: &BucketInfo, requested: Requested<'_>) -> S3Result<Option<Protection>> {
        let Requested { algorithm, kms_key_id, customer } = requested;
        if let Some(customer) = customer {
            if algorithm.is_some() || kms_key_id.is_some() {
                return Err(s3_error!(
                    InvalidArgument,
                    "Server Side Encryption with Customer provided key is incompatible with the encryption method specified."
                ));
            }
            return Ok(Some(customer.key.new_data_key(Kind::Customer)));
        }
        let (algorithm, kms_key_id) = match (algorithm, &bucket.encryption) {
            (Some(algorithm), _) => (algorithm.as_str(), kms_key_id),
            (None, _) if kms_key_id.is_some() => {
                return Err(s3_error!(
                    InvalidArgument,
                    "x-amz-server-side-encryption-aws-kms-key-id requires x-amz-server-side-encryption: aws:kms"
                ));
            }
            (None, Some(default)) => (default.algorithm.as_str(), default.kms_key_id.as_deref()),
            (None, None) => return Ok(None),
        };
        let (master, kind) = self.managed_key(algorithm, kms_key_id)?;
        Ok(Some(master.new_data_key(kind)))
    }

    /// The data key of an object (or upload) sealed as `sealed`, opened with the key
    /// file or the request's SSE-C key, which must be given exactly for SSE-C objects.
    pub(super) fn data_key(&self, sealed: Option<&Sealed>, customer: Option<&CustomerKey>) -> S3Result<Option<Key>> {
        let Some(sealed) = sealed else {
            return match customer {
                Some(_) => Err(not_applicable()),
                None => Ok(None),
            };
        };
        let wrapping = match (&sealed.kind, customer) {
            (Kind::Customer, Some(customer)) => &customer.key,
            (Kind::Customer, None) => {
                return Err(s3_error!(
                    InvalidRequest,
                    "The object was stored using a form of Server Side Encryption. The correct parameters must be provided to retrieve the object."
                ));
            }
            (Kind::S3 { .. } | Kind::Kms { .. }, Some(_)) => return Err(not_applicable()),
            (Kind::S3 { key_id } | Kind::Kms { key_id }, None) => self.master_key(key_id)?,
        };
        wrapping.unwrap_data_key(sealed).map(Some).map_err(crypt_error)
    }

    /// Checks a bucket's default encryption before it is put.
    fn check_default(&self, default: &DefaultEncryption) -> S3Result<()> {
        if default.kms_key_id.is_some() && default.algorithm == ServerSideEncryption::AES256 {
            return Err(s3_error!(InvalidArgument, "KMSMasterKeyID may be given only with SSEAlgorithm aws:kms"));
        }
        self.managed_key(&default.algorithm, default.kms_key_id.as_deref()).map(|_| ())
    }

    pub(super) async fn put_encryption(
        &self,
        req: S3Request<PutBucketEncryptionInput>,
    ) -> S3Result<S3Response<PutBucketEncryptionOutput>> {
        let bucket = self.open(&req, Action::PutEncryptionConfiguration).await?;
        let input = req.input;
        let rules = input.server_side_encryption_configuration.rules;
        let [rule] = &rules[..] else {
            return Err(s3_error!(MalformedXML, "the configuration must hold exactly one rule"));
        };
        let by_default = rule
            .apply_server_side_encryption_by_default
            .as_ref()
            .ok_or_else(|| s3_error!(MalformedXML, "the rule has no ApplyServerSideEncryptionByDefault"))?;
        let default = DefaultEncryption {
            algorithm: by_default.sse_algorithm.as_str().to_owned(),
            kms_key_id: by_default.kms_master_key_id.clone(),
            bucket_key_enabled: rule.bucket_key_enabled.unwrap_or(false),
        };
        self.check_default(&default)?;
        self.change_bucket(&bucket, |b| b.encryption = Some(default.clone())).await?;
        Ok(S3Response::new(PutBucketEncryptionOutput::default()))
    }

    pub(super) async fn get_encryption(
        &self,
        req: S3Request<GetBucketEncryptionInput>,
    ) -> S3Result<S3Response<GetBucketEncryptionOutput>> {
        let bucket = self.open(&req, Action::GetEncryptionConfiguration).await?;
        let Some(default) = &bucket.encryption else {
            return Err(custom_error(
                "ServerSideEncryptionConfigurationNotFoundError",
                http::StatusCode::NOT_FOUND,
                "The server side encryption configuration was not found",
            ));
        };
        let rule = ServerSideEncryptionRule {
            apply_server_side_encryption_by_default: Some(ServerSideEncryptionByDefault {
                sse_algorithm: ServerSideEncryption::from(default.algorithm.clone()),
                kms_master_key_id: default.kms_key_id.clone(),
            }),
            bucket_key_enabled: Some(default.bucket_key_enabled),
        };
        let configuration = ServerSideEncryptionConfiguration { rules: vec![rule] };
        Ok(S3Response::new(GetBucketEncryptionOutput { server_side_encryption_configuration: Some(configuration) }))
    }

    pub(super) async fn delete_encryption(
        &self,
        req: S3Request<DeleteBucketEncryptionInput>,
    ) -> S3Result<S3Response<DeleteBucketEncryptionOutput>> {
        let bucket = self.open(&req, Action::PutEncryptionConfiguration).await?;
        self.change_bucket(&bucket, |b| b.encryption = None).await?;
        Ok(S3Response::new(DeleteBucketEncryptionOutput::default()))
    }
}
