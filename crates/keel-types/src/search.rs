//! Provider-native web search results and their `sources_status` (docs/features.md#web-search).
//!
//! Invariants:
//! - `available` means at least one source URL is http(s), has a host and carries no userinfo;
//!   otherwise `not_provided` — an informative completed state, not an error.
//! - Links inside generated text are never promoted to sources; only structured sources count.
//! - A record without `sources_status` (written before it existed) is never inferred: it stays
//!   `None`.
//! - `sources_status` is display data: it is never sent back to the provider; the raw provider
//!   blocks in `replay` are.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourcesStatus {
    Available,
    NotProvided,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchSource {
    pub url: String,
    #[serde(default)]
    pub title: String,
}

/// One provider-native web search inside an assistant response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WebSearch {
    pub query: String,
    #[serde(default)]
    pub sources: Vec<SearchSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources_status: Option<SourcesStatus>,
    /// The provider's own blocks or items, replayed unmodified in later requests.
    #[serde(default)]
    pub replay: Vec<serde_json::Value>,
}

// `serde_json::Value` is not `Eq`, but equality of values is total here (no NaN floats in JSON
// from serde_json), which the history's derives rely on.
impl Eq for WebSearch {}

/// http or https, with a host, without userinfo.
pub fn is_usable_source(url: &str) -> bool {
    match url::Url::parse(url.trim()) {
        Ok(parsed) => {
            matches!(parsed.scheme(), "http" | "https")
                && parsed.host_str().is_some_and(|host| !host.is_empty())
                && parsed.username().is_empty()
                && parsed.password().is_none()
        }
        Err(_) => false,
    }
}

pub fn sources_status(sources: &[SearchSource]) -> SourcesStatus {
    if sources.iter().any(|source| is_usable_source(&source.url)) {
        SourcesStatus::Available
    } else {
        SourcesStatus::NotProvided
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(url: &str) -> SearchSource {
        SearchSource {
            url: url.into(),
            title: String::new(),
        }
    }

    #[test]
    fn url_rules_follow_the_seed() {
        assert!(is_usable_source("https://example.com/a?b=c"));
        assert!(is_usable_source("http://docs.rs"));
        for bad in [
            "ftp://example.com",
            "https://user:pw@example.com",
            "https://user@example.com",
            "https://",
            "example.com",
            "",
            "javascript:alert(1)",
            "file:///etc/passwd",
        ] {
            assert!(!is_usable_source(bad), "{bad}");
        }
    }

    #[test]
    fn status_needs_one_usable_source() {
        assert_eq!(sources_status(&[]), SourcesStatus::NotProvided);
        assert_eq!(
            sources_status(&[source("ftp://x")]),
            SourcesStatus::NotProvided
        );
        assert_eq!(
            sources_status(&[source("ftp://x"), source("https://ok.org")]),
            SourcesStatus::Available
        );
    }

    #[test]
    fn old_records_without_the_field_are_not_inferred() {
        let old: WebSearch =
            serde_json::from_str(r#"{"query":"q","sources":[{"url":"https://a.org"}]}"#).unwrap();
        assert_eq!(old.sources_status, None);
        let json = serde_json::to_string(&old).unwrap();
        assert!(!json.contains("sources_status"));
    }
}
