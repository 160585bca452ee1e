//! Dispatching one model request: attempts, bounded retries and account rotation.
//!
//! Invariants:
//! - The request bytes are projected once and reused for every attempt and account, so a retry
//!   sends exactly what the failed attempt sent.
//! - A retry happens only for a failed attempt (nothing of an attempt is committed before its
//!   stream completes), only for kinds the policy allows, and at most `max_retries` times.
//! - A `quota` failure moves to the next configured account and never returns to the exhausted
//!   one within the same `AccountCursor` (one turn).
//! - Every request, retry and rotation is an event; keys never are.

use crate::assemble::{Completion, Delta};
use crate::client::{AttemptFailure, HttpClient};
use crate::profile::ProviderProfile;
use crate::projection::{ProjectedRequest, ProjectionInput, project};
use keel_types::{EventBody, FailureDiagnostic, FailureKind};

/// Which accounts of a provider are still usable in this turn.
#[derive(Clone, Debug)]
pub struct AccountCursor {
    current: usize,
    exhausted: Vec<bool>,
}

impl AccountCursor {
    pub fn new(profile: &ProviderProfile) -> Self {
        Self {
            current: 0,
            exhausted: vec![false; profile.accounts.len()],
        }
    }

    pub fn current(&self) -> usize {
        self.current
    }

    /// Mark the current account exhausted and move to the next usable one.
    fn rotate(&mut self) -> Option<usize> {
        if let Some(flag) = self.exhausted.get_mut(self.current) {
            *flag = true;
        }
        let count = self.exhausted.len();
        let next = (1..count)
            .map(|offset| (self.current + offset) % count)
            .find(|index| !self.exhausted[*index])?;
        self.current = next;
        Some(next)
    }
}

/// Where the API key of an account comes from; the process environment in production.
pub trait KeySource: Send + Sync {
    fn key(&self, env_var: &str) -> Option<String>;
}

/// Reads keys from the process environment.
pub struct EnvKeys;

impl KeySource for EnvKeys {
    fn key(&self, env_var: &str) -> Option<String> {
        std::env::var(env_var)
            .ok()
            .filter(|key| !key.trim().is_empty())
    }
}

/// What is wrong with a key's text, if anything: a key must be one line of printable ASCII
/// without spaces (it goes into an HTTP header). Never quotes the key.
pub fn key_problem(key: &str) -> Option<String> {
    let (position, byte) = key
        .bytes()
        .enumerate()
        .find(|(_, byte)| !(0x21..=0x7e).contains(byte))?;
    let what = match byte {
        b'\n' => "a newline".to_string(),
        b'\r' => "a carriage return".to_string(),
        b' ' | b'\t' => "whitespace".to_string(),
        0x80..=0xff => "a non-ASCII character".to_string(),
        other => format!("the control character 0x{other:02x}"),
    };
    Some(format!(
        "contains {what} at byte {}; a key is one line of printable ASCII (check how the \
         variable was set, e.g. a trailing newline from a file)",
        position + 1
    ))
}

/// The result of a dispatched request, with the request that produced it.
#[derive(Debug)]
pub struct DispatchOutcome {
    pub completion: Completion,
    pub request: ProjectedRequest,
    pub attempts: u32,
}

pub struct Dispatcher<'a> {
    pub client: &'a HttpClient,
    pub profile: &'a ProviderProfile,
    pub keys: &'a dyn KeySource,
    /// keel's secrets: a provider's message that echoes one is never shown (`said`).
    pub secrets: &'a keel_types::Secrets,
}

impl Dispatcher<'_> {
    /// Project and send one request, retrying and rotating as the profile's policy says.
    pub async fn complete(
        &self,
        input: &ProjectionInput<'_>,
        accounts: &mut AccountCursor,
        emit: &mut (dyn FnMut(EventBody) + Send),
    ) -> Result<DispatchOutcome, FailureDiagnostic> {
        let request = project(self.profile, input).map_err(|error| {
            FailureDiagnostic::with_message(FailureKind::InvalidRequest, None, error.to_string())
        })?;
        self.send(request, input.model, accounts, emit).await
    }

    /// A trace id that shares a run of `keel_types::secrets::ECHO_RUN` bytes with any account's key is an echo
    /// of the key (a hostile or broken provider), not a trace id: it is dropped.
    fn without_echoed_key(&self, mut failure: AttemptFailure) -> AttemptFailure {
        let echoes = failure.diagnostic.trace_id.as_deref().is_some_and(|id| {
            self.profile
                .accounts
                .iter()
                .filter_map(|account| self.keys.key(&account.api_key_env))
                .any(|key| keel_types::secrets::shares_run(id, &key, keel_types::secrets::ECHO_RUN))
        });
        if echoes {
            failure.diagnostic.trace_id = None;
        }
        failure
    }

    /// Send a projected request for `model`, retrying and rotating as the profile's policy
    /// says.
    pub async fn send(
        &self,
        request: ProjectedRequest,
        model: &str,
        accounts: &mut AccountCursor,
        emit: &mut (dyn FnMut(EventBody) + Send),
    ) -> Result<DispatchOutcome, FailureDiagnostic> {
        let policy = &self.profile.retry;
        let mut retries = 0u32;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let Some(account) = self.profile.accounts.get(accounts.current()) else {
                return Err(FailureDiagnostic::with_message(
                    FailureKind::Auth,
                    None,
                    format!("provider `{}` has no account configured", self.profile.name),
                ));
            };
            emit(EventBody::LlmRequest {
                attempt,
                protocol: self.profile.protocol,
                model: model.to_string(),
                message_count: request.message_count,
                prefix_hash: request.prefix_hash.clone(),
                account: account.name.clone(),
            });
            let result = match self.keys.key(&account.api_key_env) {
                None => Err(AttemptFailure::from(FailureDiagnostic::with_message(
                    FailureKind::Auth,
                    None,
                    format!("environment variable {} is not set", account.api_key_env),
                ))),
                Some(key) if let Some(problem) = key_problem(&key) => {
                    Err(AttemptFailure::from(FailureDiagnostic::with_message(
                        FailureKind::Auth,
                        None,
                        format!("the environment variable {} {problem}", account.api_key_env),
                    )))
                }
                Some(key) => {
                    let mut forward = |delta: Delta<'_>| {
                        emit(match delta {
                            Delta::Text(text) => EventBody::LlmText {
                                delta: text.to_string(),
                            },
                            Delta::Reasoning(text) => EventBody::LlmReasoning {
                                delta: text.to_string(),
                            },
                        })
                    };
                    self.client
                        .attempt(self.profile, &key, request.body.clone(), &mut forward)
                        .await
                }
            };
            let failure = match result {
                Ok(completion) => {
                    return Ok(DispatchOutcome {
                        completion,
                        request,
                        attempts: attempt,
                    });
                }
                Err(failure) => failure,
            };
            let mut failure = self.without_echoed_key(failure);
            failure.diagnostic.message =
                crate::explain::what_to_do(&failure.diagnostic, self.profile, account, model);
            let kind = failure.diagnostic.kind;
            if policy.rotates_on(kind) {
                let from = account.name.clone();
                if let Some(next) = accounts.rotate() {
                    emit(EventBody::AccountRotated {
                        provider: self.profile.name.clone(),
                        from,
                        to: self.profile.accounts[next].name.clone(),
                        reason: kind,
                    });
                    continue;
                }
                // No account left: `quota` is never retried, `rate_limit` may wait and retry.
            }
            if failure.diagnostic.is_never_retryable() || !policy.allows_retry(kind, retries) {
                // The last attempt's words, for a person: beside the diagnostic, never in it.
                let keys: Vec<String> = self
                    .profile
                    .accounts
                    .iter()
                    .filter_map(|account| self.keys.key(&account.api_key_env))
                    .collect();
                if let Some(message) = failure
                    .said
                    .as_ref()
                    .and_then(|words| crate::said::shown(words, self.secrets, &keys))
                {
                    emit(EventBody::ProviderSaid {
                        status: failure.diagnostic.status,
                        message,
                    });
                }
                return Err(failure.diagnostic);
            }
            retries += 1;
            let delay = policy.delay_for(retries, failure.retry_after);
            emit(EventBody::LlmRetry {
                attempt: retries,
                max_retries: policy.max_retries,
                kind,
                status: failure.diagnostic.status,
                delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                host: url::Url::parse(&self.profile.base_url)
                    .ok()
                    .and_then(|url| url.host_str().map(str::to_string)),
            });
            tokio::time::sleep(delay).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Account, DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT};
    use crate::retry::RetryPolicy;
    use keel_types::{ReasoningProtocol, WireProtocol};

    fn profile(accounts: usize) -> ProviderProfile {
        ProviderProfile {
            name: "p".into(),
            protocol: WireProtocol::Chat,
            base_url: "http://127.0.0.1:9".into(),
            base_url_setting: String::new(),
            accounts: (0..accounts)
                .map(|i| Account {
                    name: format!("a{i}"),
                    api_key_env: format!("K{i}"),
                })
                .collect(),
            reasoning_protocol: ReasoningProtocol::Deepseek,
            retry: RetryPolicy::default(),
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_output_tokens: 16,
            native_web_search: false,
            max_event_bytes: crate::profile::DEFAULT_MAX_EVENT_BYTES,
            context_window: None,
            price: None,
            region: None,
            reasoning_effort: None,
        }
    }

    #[test]
    fn rotation_visits_each_account_once_and_never_returns() {
        let profile = profile(3);
        let mut cursor = AccountCursor::new(&profile);
        assert_eq!(cursor.rotate(), Some(1));
        assert_eq!(cursor.rotate(), Some(2));
        assert_eq!(cursor.rotate(), None);
        let mut single = AccountCursor::new(&profile_with(1));
        assert_eq!(single.rotate(), None);
    }

    #[test]
    fn malformed_keys_are_named_without_quoting_them() {
        assert_eq!(key_problem("sk-abc123"), None);
        let problem = key_problem("sk-abc\n123").unwrap();
        assert!(problem.contains("a newline at byte 7"), "{problem}");
        assert!(!problem.contains("abc"), "{problem}");
        assert!(key_problem("sk abc").unwrap().contains("whitespace"));
        assert!(key_problem("sk-é").unwrap().contains("non-ASCII"));
    }

    fn profile_with(accounts: usize) -> ProviderProfile {
        profile(accounts)
    }
}
