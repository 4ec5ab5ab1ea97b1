//! `${filename}` in the key of a browser form upload (POST object): S3 replaces it with the
//! name of the file the form sends. s3s 0.14 keeps that name to itself, so the front
//! rewrites the `key` field, which comes before the file in the form, before s3s reads it.
//! Pure: bytes in, bytes out.

/// Most form bytes (the fields before the file) searched for the file's name; a form whose
/// file part starts later passes unchanged.
pub const MAX_FIELDS: usize = 64 << 10;

/// The part delimiter (`--` and the boundary) of a `multipart/form-data` content type.
pub fn delimiter(content_type: &str) -> Option<Vec<u8>> {
    let (kind, params) = content_type.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    let boundary = params.split(';').find_map(|param| {
        let (name, value) = param.split_once('=')?;
        name.trim().eq_ignore_ascii_case("boundary").then(|| value.trim().trim_matches('"'))
    })?;
    (!boundary.is_empty()).then(|| format!("--{boundary}").into_bytes())
}

/// What the start of a form says.
#[derive(Debug, PartialEq, Eq)]
pub enum Scan {
    /// The file part's headers are not all in yet.
    More,
    /// They are: the start of the form with the key rewritten, or `None` to leave it as it is.
    Done(Option<Vec<u8>>),
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|at| at + from)
}

/// A `Content-Disposition` parameter (`name`, `filename`) of a part's headers.
fn disposition_param<'a>(headers: &'a str, param: &str) -> Option<&'a str> {
    let line = headers.split("\r\n").find(|l| l.to_ascii_lowercase().starts_with("content-disposition:"))?;
    line.split(';').find_map(|p| {
        let (name, value) = p.trim().split_once('=')?;
        name.trim().eq_ignore_ascii_case(param).then(|| value.trim().trim_matches('"'))
    })
}

/// Looks through the start of a form (delimited by `delimiter`) for the file part; once
/// its headers are in, replaces `${filename}` in the `key` field with the file's name
/// (its last path component).
pub fn rewrite(prefix: &[u8], delimiter: &[u8]) -> Scan {
    let mut key: Option<(usize, usize)> = None;
    let Some(mut at) = find(prefix, delimiter, 0) else { return Scan::More };
    loop {
        let part = at + delimiter.len();
        if prefix.get(part..part + 2) == Some(b"--") {
            return Scan::Done(None);
        }
        let Some(headers_end) = find(prefix, b"\r\n\r\n", part) else { return Scan::More };
        let headers = String::from_utf8_lossy(&prefix[part..headers_end]);
        let value = headers_end + 4;
        match disposition_param(&headers, "name") {
            Some(name) if name.eq_ignore_ascii_case("file") => {
                let file = disposition_param(&headers, "filename").unwrap_or_default();
                let file = file.rsplit(['/', '\\']).next().unwrap_or_default();
                let Some((start, end)) = key else { return Scan::Done(None) };
                let Ok(text) = std::str::from_utf8(&prefix[start..end]) else { return Scan::Done(None) };
                if !text.contains("${filename}") {
                    return Scan::Done(None);
                }
                let key = text.replace("${filename}", file);
                return Scan::Done(Some([&prefix[..start], key.as_bytes(), &prefix[end..]].concat()));
            }
            name => {
                let next = [b"\r\n".as_slice(), delimiter].concat();
                let Some(end) = find(prefix, &next, value) else { return Scan::More };
                if name.is_some_and(|n| n.eq_ignore_ascii_case("key")) {
                    key = Some((value, end));
                }
                at = end + 2;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DELIMITER: &[u8] = b"--XyZ";

    fn form(key: &str, filename: &str) -> Vec<u8> {
        format!(
            "--XyZ\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\n{key}\r\n\
             --XyZ\r\nContent-Disposition: form-data; name=\"policy\"\r\n\r\neyJ9\r\n\
             --XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n\
             Content-Type: text/plain\r\n\r\nfile data\r\n--XyZ--\r\n"
        )
        .into_bytes()
    }

    #[test]
    fn the_boundary_comes_from_the_content_type() {
        assert_eq!(delimiter("multipart/form-data; boundary=XyZ").unwrap(), DELIMITER);
        assert_eq!(delimiter("Multipart/Form-Data; charset=x; boundary=\"XyZ\"").unwrap(), DELIMITER);
        assert_eq!(delimiter("application/json; boundary=XyZ"), None);
        assert_eq!(delimiter("multipart/form-data; boundary="), None);
        assert_eq!(delimiter("multipart/form-data"), None);
    }

    #[test]
    fn the_key_gets_the_file_name() {
        let Scan::Done(Some(rewritten)) = rewrite(&form("uploads/${filename}", "C:\\docs\\a b.txt"), DELIMITER) else {
            panic!("expected a rewrite");
        };
        assert_eq!(rewritten, form("uploads/a b.txt", "C:\\docs\\a b.txt"));
        assert_eq!(rewrite(&form("uploads/fixed", "a.txt"), DELIMITER), Scan::Done(None));
    }

    #[test]
    fn a_form_cut_short_asks_for_more() {
        let whole = form("u/${filename}", "a.txt");
        let file_headers_end = find(&whole, b"file data", 0).unwrap();
        for cut in [0, 3, 10, 60, file_headers_end - 1] {
            assert_eq!(rewrite(&whole[..cut], DELIMITER), Scan::More, "cut at {cut}");
        }
        assert!(matches!(rewrite(&whole[..file_headers_end], DELIMITER), Scan::Done(Some(_))));
    }

    proptest! {
        #[test]
        fn any_bytes_scan_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..400), cut in 0usize..400) {
            let _ = rewrite(&bytes, DELIMITER);
            let mut with_form = form("k/${filename}", "f").to_vec();
            with_form.truncate(cut.min(with_form.len()));
            with_form.extend_from_slice(&bytes);
            let _ = rewrite(&with_form, DELIMITER);
        }
    }
}
