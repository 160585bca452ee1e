//! `web_fetch`: GET an http(s) URL and give the model readable text.
//!
//! Invariants:
//! - No SSRF through the agent: before each request (the first and every redirect) the host is
//!   resolved and the connection is pinned to the checked address; an address that is
//!   loopback, private, link-local, shared (CGNAT), unspecified or multicast is refused unless a
//!   permission rule names the host (`allow = ["web_fetch(localhost)"]`).
//! - Bounded: at most `MAX_REDIRECTS` redirects, `TIMEOUT` for the whole fetch, `MAX_BODY`
//!   bytes read; the text given to the model is capped like every tool output.
//! - HTML becomes text with `html2text` (a well-kept crate, not hand-written); other text
//!   types are shown as they are; binary content is described, never dumped.
//! - The result names the final URL and the content type.

use crate::ToolOutput;
use crate::ToolServices;
use crate::output::{OUTPUT_CAP, truncate_middle};
use serde_json::Value;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

pub const MAX_REDIRECTS: usize = 5;
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// The most of a response body keel reads.
pub const MAX_BODY: usize = 2 * 1024 * 1024;

/// The host a `web_fetch` call's URL names (its permission subject), if it parses.
pub fn host_of(args: &Value) -> Option<String> {
    let url = url::Url::parse(args.get("url")?.as_str()?).ok()?;
    url.host_str()
        .map(|host| host.trim_matches(['[', ']']).to_string())
}

/// Whether `ip` is an address a fetch must not reach without the user's rule.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && c == 0)
                || (a == 198 && (18..20).contains(&b))
                || a >= 240
                || a == 0
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let segments = v6.segments();
            let first = segments[0];
            // IPv4-compatible `::a.b.c.d` and NAT64 `64:ff9b::a.b.c.d` reach IPv4 addresses.
            let embedded = Ipv4Addr::new(
                (segments[6] >> 8) as u8,
                segments[6] as u8,
                (segments[7] >> 8) as u8,
                segments[7] as u8,
            );
            let compatible = segments[..6].iter().all(|s| *s == 0);
            let nat64 = segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
            if (compatible || nat64) && is_internal(IpAddr::V4(embedded)) {
                return true;
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || (first & 0xffc0) == 0xfec0
        }
    }
}

pub async fn web_fetch(args: &Value, ctx: &ToolServices) -> ToolOutput {
    match tokio::time::timeout(TIMEOUT, fetch(args, ctx)).await {
        Ok(Ok(output)) => output,
        Ok(Err(message)) => ToolOutput::error(message),
        Err(_) => ToolOutput::error(format!(
            "web_fetch gave up after {} s without a complete answer",
            TIMEOUT.as_secs()
        )),
    }
}

async fn fetch(args: &Value, ctx: &ToolServices) -> Result<ToolOutput, String> {
    let given = args.get("url").and_then(Value::as_str).unwrap_or("");
    let mut url =
        url::Url::parse(given).map_err(|error| format!("`{given}` is not a URL: {error}"))?;
    for _hop in 0..=MAX_REDIRECTS {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "web_fetch reads http and https URLs only, not `{}:`",
                url.scheme()
            ));
        }
        // `https://docs.rs@evil.example/` is evil.example: credentials in a URL only mislead.
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!(
                "refused: `{}` carries a user name or password; web_fetch sends no credentials",
                url.host_str().unwrap_or("")
            ));
        }
        let host = url
            .host_str()
            .ok_or_else(|| format!("`{url}` has no host"))?
            .trim_matches(['[', ']'])
            .to_string();
        let port = url.port_or_known_default().unwrap_or(80);
        let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|error| format!("cannot resolve `{host}`: {error}"))?
            .collect();
        let Some(address) = addresses.first().copied() else {
            return Err(format!("`{host}` has no address"));
        };
        if let Some(internal) = addresses.iter().find(|a| is_internal(a.ip()))
            && !(ctx.internal_hosts)(&host)
        {
            return Err(format!(
                "refused: `{host}` is {} — a loopback, private or link-local address. If the \
                 user wants it fetched, they can allow the host with a rule such as \
                 `allow = [\"web_fetch({host})\"]`",
                internal.ip()
            ));
        }
        // Installing fails only if a provider is already installed, which is what we want.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .resolve(&host, address)
            .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| format!("cannot build an HTTP client: {error}"))?;
        let response = client
            .get(url.clone())
            .send()
            .await
            .map_err(|error| format!("fetching {url} failed: {error}"))?;
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|value| value.to_str().ok())
                .ok_or_else(|| format!("{url} answered {status} without a Location"))?;
            url = url
                .join(location)
                .map_err(|error| format!("{url} redirects to a bad URL: {error}"))?;
            continue;
        }
        return read(url, response, &ctx.secrets).await;
    }
    Err(format!(
        "stopped after {MAX_REDIRECTS} redirects (the last pointed to {url})"
    ))
}

async fn read(
    url: url::Url,
    mut response: reqwest::Response,
    secrets: &keel_types::Secrets,
) -> Result<ToolOutput, String> {
    let status = response.status();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_string();
    let mut body: Vec<u8> = Vec::new();
    let mut cut = false;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| format!("reading {url} failed: {error}"))?
    {
        let room = MAX_BODY - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            cut = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    let kind = content_type.to_ascii_lowercase();
    let text = if kind.contains("html") {
        // Converting a large page is real work: off the async threads.
        let page = body.clone();
        tokio::task::spawn_blocking(move || {
            html2text::from_read(page.as_slice(), 100)
                .unwrap_or_else(|_| String::from_utf8_lossy(&page).into_owned())
        })
        .await
        .unwrap_or_else(|_| "[the page could not be converted to text]".to_string())
    } else if kind.is_empty()
        || kind.starts_with("text/")
        || kind.contains("json")
        || kind.contains("xml")
        || kind.contains("javascript")
    {
        String::from_utf8_lossy(&body).into_owned()
    } else {
        format!(
            "[{} bytes of {content_type}: binary content, not shown]",
            body.len()
        )
    };
    let mut header = format!(
        "URL: {url}\nStatus: {}\nContent-Type: {}\n",
        status.as_u16(),
        if content_type.is_empty() {
            "(none)"
        } else {
            &content_type
        }
    );
    if cut {
        header.push_str(&format!("[only the first {MAX_BODY} bytes were read]\n"));
    }
    // Redacted before any cut. A body cut at `MAX_BODY` may end in the start of a secret that
    // was never read whole: the last bytes that could be one are dropped.
    let mut text = secrets.redact(&text).into_owned();
    if cut {
        let mut keep = text.len().saturating_sub(secrets.hold());
        while keep > 0 && !text.is_char_boundary(keep) {
            keep -= 1;
        }
        text.truncate(keep);
    }
    let content = truncate_middle(&secrets.redact(&format!("{header}\n{text}")), OUTPUT_CAP);
    let summary = format!(
        "{} {} · {} bytes",
        status.as_u16(),
        content_type.split(';').next().unwrap_or(""),
        body.len()
    );
    Ok(if status.is_success() {
        ToolOutput::ok(content, summary)
    } else {
        ToolOutput {
            content,
            is_error: true,
            summary,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_recognised() {
        for internal in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "fec0::1",
            "198.18.0.1",
            "240.0.0.1",
            "192.0.0.8",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "224.0.0.1",
        ] {
            assert!(is_internal(internal.parse().unwrap()), "{internal}");
        }
        for public in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(!is_internal(public.parse().unwrap()), "{public}");
        }
        assert_eq!(
            host_of(&serde_json::json!({"url": "http://[::1]:8080/x"})).as_deref(),
            Some("::1")
        );
        assert_eq!(host_of(&serde_json::json!({"url": "nope"})), None);
    }
}
