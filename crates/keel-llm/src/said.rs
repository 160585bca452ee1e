//! The provider's own words about a request it refused, for a person to read
//! (`provider/said`): the structured error message of a JSON body, made safe to show.
//!
//! Invariants:
//! - Only a message the protocol's error shape names is taken (`error.message`, also under
//!   Anthropic's `"type": "error"`; a top-level `message`); a body that is not JSON, or has
//!   none, gives nothing — never raw bytes.
//! - A message that shares `ECHO_RUN` bytes with any of keel's secrets is dropped whole
//!   (a hostile or broken provider echoing the key).
//! - Control, bidi and other invisible characters are escaped (`\u{1b}`), white space runs are
//!   one space, and at most `PROVIDER_SAID_CHARS` characters are kept (an escape never cut).
//! - The words travel beside the diagnostic (`ProviderWords`), never in it: they are never
//!   stored.

use keel_types::event::PROVIDER_SAID_CHARS;
use keel_types::secrets::ECHO_RUN;
use keel_types::{Secrets, WireProtocol};

/// A provider's message as it came, before `shown` makes it safe; its `Debug` prints only its
/// length (it may reach no log).
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderWords(String);

impl std::fmt::Debug for ProviderWords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProviderWords({} bytes)", self.0.len())
    }
}

/// The structured error message of `body` under `protocol`'s error shape, if it has one.
pub fn said_in(protocol: WireProtocol, body: &[u8]) -> Option<ProviderWords> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let error = value.get("error");
    let message = match protocol {
        // Anthropic's `{"type": "error", "error": {"message"}}`, and the same without the
        // outer `type` that gateways in front of Anthropic-shaped endpoints answer with.
        WireProtocol::Anthropic => error.and_then(|error| error.get("message")),
        WireProtocol::Chat | WireProtocol::Responses => error.and_then(|error| {
            error
                .get("message")
                .or_else(|| error.is_string().then_some(error))
        }),
    }
    // llama-server and kin: a top-level message.
    .or_else(|| value.get("message"))?
    .as_str()?;
    let message = message.trim();
    (!message.is_empty()).then(|| ProviderWords(message.to_string()))
}

/// `words` as a person may see them, or `None` when they echo one of `secrets` (or `keys`,
/// the provider's own account keys).
pub fn shown(words: &ProviderWords, secrets: &Secrets, keys: &[String]) -> Option<String> {
    let raw = words.0.as_str();
    if secrets.shares_run(raw, ECHO_RUN)
        || keys
            .iter()
            .any(|key| keel_types::secrets::shares_run(raw, key, ECHO_RUN))
    {
        return None;
    }
    let mut out = String::new();
    let mut count = 0usize;
    let mut space = false;
    for c in raw.chars() {
        let piece = if c.is_whitespace() {
            if space {
                continue;
            }
            space = true;
            " ".to_string()
        } else {
            space = false;
            if c.is_control() || keel_types::is_invisible(c) {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        };
        let width = piece.chars().count();
        if count + width > PROVIDER_SAID_CHARS - 1 {
            out.push('…');
            return Some(out);
        }
        count += width;
        out.push_str(&piece);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> Secrets {
        Secrets::from_names(["DEEPSEEK_API_KEY".to_string()], |_| {
            Some("sk-canary-0123456789".to_string())
        })
    }

    #[test]
    fn each_protocols_shape_gives_its_message_and_nothing_else_gives_any() {
        let chat =
            br#"{"error":{"message":"Invalid max_tokens value","type":"invalid_request_error"}}"#;
        let anthropic =
            br#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#;
        let llama = br#"{"error":{"code":400,"message":"llama says"}}"#;
        let top = br#"{"message":"top level"}"#;
        let said = |protocol, body: &[u8]| said_in(protocol, body).map(|words| words.0);
        assert_eq!(
            said(WireProtocol::Chat, chat).as_deref(),
            Some("Invalid max_tokens value")
        );
        assert_eq!(
            said(WireProtocol::Anthropic, anthropic).as_deref(),
            Some("bad")
        );
        assert_eq!(
            said(WireProtocol::Anthropic, chat).as_deref(),
            Some("Invalid max_tokens value"),
            "a gateway's OpenAI-shaped body on the Anthropic protocol"
        );
        assert_eq!(
            said(WireProtocol::Responses, llama).as_deref(),
            Some("llama says")
        );
        assert_eq!(said(WireProtocol::Chat, top).as_deref(), Some("top level"));
        assert_eq!(said(WireProtocol::Chat, b"<html>bad gateway</html>"), None);
        assert_eq!(
            said(WireProtocol::Chat, br#"{"error":{"message":"  "}}"#),
            None
        );
    }

    #[test]
    fn a_message_is_made_safe_or_dropped() {
        let words = |text: &str| ProviderWords(text.to_string());
        assert_eq!(
            shown(&words("bad\u{1b}[2J\nnews\u{202e}"), &secrets(), &[]).as_deref(),
            Some("bad\\u{1b}[2J news\\u{202e}")
        );
        assert_eq!(
            shown(&words("your key sk-canary-0123 is wrong"), &secrets(), &[]),
            None
        );
        assert_eq!(
            shown(
                &words("echo 12345678abc"),
                &Secrets::default(),
                &["x12345678".into()]
            ),
            None
        );
        let long = shown(&words(&"a".repeat(1000)), &secrets(), &[]).unwrap();
        assert_eq!(long.chars().count(), PROVIDER_SAID_CHARS);
        assert!(long.ends_with('…'));
        assert!(format!("{:?}", words("secretish")).contains("9 bytes"));
    }
}
