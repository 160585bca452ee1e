//! What a failure means for the person who has to fix it: the provider, the key's variable,
//! the URL keel used, the model — and what to do next.
//!
//! Invariants:
//! - Built from keel's own knowledge (the profile, the account, the classification), never
//!   from the provider's words: no response body is ever quoted.
//! - A URL is shown as scheme, host, port and path only (no credentials, no query).
//! - A failure these rules do not cover keeps the message it had.

use crate::profile::{Account, ProviderProfile};
use keel_types::{FailureDiagnostic, FailureKind, SubReason};

/// The message for `diagnostic`, a failure of `account` at `profile` asking for `model`.
pub(crate) fn what_to_do(
    diagnostic: &FailureDiagnostic,
    profile: &ProviderProfile,
    account: &Account,
    model: &str,
) -> String {
    let provider = &profile.name;
    match (diagnostic.kind, diagnostic.status, diagnostic.sub_reason) {
        (FailureKind::Auth, Some(401 | 403), _) => format!(
            "the provider `{provider}` refused the key in {} (account `{}`): check the key, \
             and `keel config` for which variable and provider keel uses",
            account.api_key_env, account.name
        ),
        (_, Some(_), Some(SubReason::UnknownModel)) => format!(
            "the provider `{provider}` does not know the model `{model}`: check the model id \
             (`--model`, or `model` in your config; `keel config` shows where it comes from)"
        ),
        (_, Some(404), _) => format!(
            "the provider answered 404 Not Found for {}: check `base_url` of \
             [providers.{provider}] (`keel config` shows it)",
            shown_url(&profile.endpoint())
        ),
        // No advice the provider's own code does not give (its words are shown apart, as
        // `provider/said`).
        (FailureKind::InvalidRequest, Some(_), _) => format!(
            "the provider `{provider}` rejected the request as invalid; `keel config` shows the \
             settings keel sent it"
        ),
        (FailureKind::Transport, _, Some(SubReason::LoopbackRefused)) => format!(
            "nothing is listening at {}: the connection was refused (not retried: a local \
             server that is not running does not start by waiting); {} chose this URL",
            shown_url(&profile.endpoint()),
            chosen_by(profile)
        ),
        (FailureKind::Transport | FailureKind::Timeout, None, _) => format!(
            "{} — at {}, which {} chose",
            diagnostic.message,
            shown_url(&profile.endpoint()),
            chosen_by(profile)
        ),
        _ => diagnostic.message.clone(),
    }
}

/// What chose the provider's URL, as a person reads it.
fn chosen_by(profile: &ProviderProfile) -> String {
    if profile.base_url_setting.is_empty() {
        format!("`base_url` of [providers.{}]", profile.name)
    } else {
        profile.base_url_setting.clone()
    }
}

/// `url` as scheme, host, port and path: no credentials, no query, no fragment.
pub(crate) fn shown_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) => {
            let host = parsed.host_str().unwrap_or("?");
            let port = parsed
                .port_or_known_default()
                .map(|port| format!(":{port}"))
                .unwrap_or_default();
            format!("{}://{host}{port}{}", parsed.scheme(), parsed.path())
        }
        Err(_) => "the configured base_url (it does not parse as a URL)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_credentials_or_query() {
        assert_eq!(
            shown_url("https://user:secret@api.example.com:8443/v1/chat/completions?key=abc#x"),
            "https://api.example.com:8443/v1/chat/completions"
        );
        assert!(shown_url("not a url").contains("does not parse"));
    }
}
