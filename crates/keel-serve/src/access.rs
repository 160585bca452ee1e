//! Who may talk to the server: the bearer token, the `Host` header (DNS rebinding) and the
//! `Origin` header (cross-site requests).
//!
//! Invariants:
//! - With a token, every `/api/` request must carry `Authorization: Bearer <token>` (401
//!   otherwise); the token is compared in constant time and never logged or echoed.
//! - Every request's `Host` must be the bound address or a loopback name with the bound port;
//!   an `Origin`, when present, must be `http://` and such a host (403 otherwise). There is no
//!   CORS: a page from another origin cannot read or drive the API.
//! - The UI page itself (`GET /`) needs no token (it carries none: the token is in the URL
//!   fragment, which browsers never send), but it is still Host- and Origin-checked.
//! - A launch code (`keel serve --open`) is redeemed once for the token (`POST /api/launch`,
//!   the only `/api/` path without the token). A second redemption means someone else holds
//!   the code: the token is revoked (replaced by one nobody knows) and every client is refused.

use crate::connections::ConnectionMark;
use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;

/// The access rules of one server.
pub struct Access {
    /// `None` with `--no-auth`; replaced when a launch code is used twice.
    token: std::sync::Mutex<Option<String>>,
    /// `host:port` values a request may name.
    pub hosts: Vec<String>,
    launch: std::sync::Mutex<Launch>,
}

/// The one-time launch code of `--open`.
enum Launch {
    None,
    Waiting(String),
    Redeemed(String),
}

/// Why a launch code was not redeemed.
#[derive(Debug, PartialEq, Eq)]
pub enum LaunchRefusal {
    /// Not this server's code.
    Unknown,
    /// Redeemed before: the token is now revoked.
    Reused,
}

fn locked<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Access {
    /// The hosts allowed for a server bound to `addr`.
    pub fn new(token: Option<String>, addr: std::net::SocketAddr) -> Access {
        let port = addr.port();
        let mut hosts = vec![
            addr.to_string(),
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ];
        hosts.dedup();
        Access {
            token: std::sync::Mutex::new(token),
            hosts,
            launch: std::sync::Mutex::new(Launch::None),
        }
    }

    /// The same rules, with a one-time launch code for the token.
    pub fn with_launch_code(self, code: String) -> Access {
        *locked(&self.launch) = Launch::Waiting(code);
        self
    }

    /// The token for `code`, once; a second redemption revokes the token.
    pub fn redeem(&self, code: &str) -> Result<Option<String>, LaunchRefusal> {
        let mut launch = locked(&self.launch);
        match &*launch {
            Launch::Waiting(known) if constant_time_eq(known.as_bytes(), code.as_bytes()) => {
                *launch = Launch::Redeemed(known.clone());
                Ok(locked(&self.token).clone())
            }
            Launch::Redeemed(known) if constant_time_eq(known.as_bytes(), code.as_bytes()) => {
                // The token was handed out and someone else has the code: nobody keeps it.
                let mut token = locked(&self.token);
                if token.is_some() {
                    *token = Some(crate::generate_token());
                }
                Err(LaunchRefusal::Reused)
            }
            Launch::Waiting(_) | Launch::Redeemed(_) | Launch::None => Err(LaunchRefusal::Unknown),
        }
    }

    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        // Exactly one Host: with two, a proxy and this server could disagree on which counts.
        if headers.get_all(header::HOST).iter().count() != 1 {
            return false;
        }
        headers
            .get(header::HOST)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|host| self.hosts.iter().any(|allowed| allowed == host))
    }

    fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        match headers.get(header::ORIGIN) {
            None => true,
            Some(origin) => origin.to_str().ok().is_some_and(|origin| {
                origin
                    .strip_prefix("http://")
                    .is_some_and(|host| self.hosts.iter().any(|allowed| allowed == host))
            }),
        }
    }

    /// Whether requests must present a token (not `--no-auth`).
    fn token_required(&self) -> bool {
        locked(&self.token).is_some()
    }

    fn token_ok(&self, headers: &HeaderMap) -> bool {
        let token = locked(&self.token);
        let Some(token) = token.as_ref() else {
            return true;
        };
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .unwrap_or("");
        constant_time_eq(presented.as_bytes(), token.as_bytes())
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The middleware: Host and Origin for everything, the token for the API.
pub async fn check(
    State(access): State<Arc<Access>>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let headers = request.headers();
    if !access.host_allowed(headers) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "host_not_allowed",
            "the Host header names neither this server's address nor a loopback name",
        ));
    }
    if !access.origin_allowed(headers) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            "requests from another origin are not allowed",
        ));
    }
    // A connection that presents the real token is a client's: it never gives way to
    // strangers when the connections are too many (`connections`).
    let mark = request.extensions().get::<ConnectionMark>().cloned();
    if access.token_required()
        && access.token_ok(headers)
        && let Some(mark) = &mark
    {
        mark.authenticated();
    }
    if request.uri().path() == "/api/launch" {
        let response = redeem(&access, request).await;
        if response.status().is_success()
            && let Some(mark) = &mark
        {
            mark.authenticated();
        }
        return Ok(response);
    }
    if request.uri().path().starts_with("/api/") && !access.token_ok(headers) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong token: send `Authorization: Bearer <token>` (the token keel serve printed)",
        ));
    }
    Ok(next.run(request).await)
}

/// `POST /api/launch` `{code}` → `{token}`: the launch page's one-time exchange.
async fn redeem(access: &Access, request: Request) -> Response {
    use axum::response::IntoResponse;
    if request.method() != axum::http::Method::POST {
        return ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method",
            "POST a launch code",
        )
        .into_response();
    }
    let body = axum::body::to_bytes(request.into_body(), 4096).await;
    let code = body
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|value| value.get("code")?.as_str().map(str::to_string))
        .unwrap_or_default();
    match access.redeem(&code) {
        Ok(token) => axum::Json(serde_json::json!({ "token": token })).into_response(),
        Err(LaunchRefusal::Unknown) => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "not this server's launch code",
        )
        .into_response(),
        Err(LaunchRefusal::Reused) => ApiError::new(
            StatusCode::CONFLICT,
            "launch_code_reused",
            "this launch code was used before, so someone else may hold it: the token is \
             revoked; restart keel serve",
        )
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn hosts_origins_and_tokens() {
        let access = Access::new(Some("t0k".into()), "127.0.0.1:8123".parse().unwrap());
        assert!(access.host_allowed(&headers(&[(header::HOST, "localhost:8123")])));
        assert!(!access.host_allowed(&headers(&[(header::HOST, "evil.example:8123")])));
        assert!(!access.host_allowed(&headers(&[(header::HOST, "127.0.0.1:9")])));
        assert!(!access.host_allowed(&HeaderMap::new()), "no Host at all");
        assert!(access.origin_allowed(&headers(&[(header::ORIGIN, "http://127.0.0.1:8123")])));
        assert!(!access.origin_allowed(&headers(&[(header::ORIGIN, "http://evil.example")])));
        assert!(!access.origin_allowed(&headers(&[(header::ORIGIN, "null")])));
        assert!(access.token_ok(&headers(&[(header::AUTHORIZATION, "Bearer t0k")])));
        assert!(!access.token_ok(&headers(&[(header::AUTHORIZATION, "Bearer t0kk")])));
        assert!(!access.token_ok(&HeaderMap::new()));
        let open = Access::new(None, "127.0.0.1:8123".parse().unwrap());
        let launched = Access::new(Some("t0k".into()), "127.0.0.1:8123".parse().unwrap())
            .with_launch_code("c0de".into());
        assert_eq!(launched.redeem("nope"), Err(LaunchRefusal::Unknown));
        assert_eq!(launched.redeem("c0de"), Ok(Some("t0k".into())));
        assert_eq!(launched.redeem("c0de"), Err(LaunchRefusal::Reused));
        assert!(
            !launched.token_ok(&headers(&[(header::AUTHORIZATION, "Bearer t0k")])),
            "a second redemption revokes the token"
        );
        assert!(open.token_ok(&HeaderMap::new()));
    }
}
