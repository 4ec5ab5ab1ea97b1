//! XML text for the answers the gateway writes itself (errors, Swift and SNS listings).

/// `s` as XML text or attribute value.
pub fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
