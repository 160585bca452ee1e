//! Fault injection at the proxy: `--faults "3:429,every:5:500,replay:opaque-400"`.
//!
//! - `N:STATUS` — the trial's N-th request gets STATUS (a provider's error body).
//! - `every:K:STATUS` — every K-th request gets STATUS.
//! - `replay:opaque-400` — the first request that replays a tool result gets an HTTP 400 with
//!   an empty body (the opaque rejection of the seed's protocol-recovery study).
//!
//! Invariant: counted per trial (each trial's proxy has its own plan); a spec that does not
//! parse is a usage error naming the part that is wrong.

use crate::EvalError;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Rule {
    Nth { n: u32, status: u16 },
    Every { k: u32, status: u16 },
    OpaqueReplay,
}

/// The faults one trial gets, and how far it has got.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    rules: Vec<Rule>,
    seen: u32,
    replay_faulted: bool,
}

/// A fault to answer with instead of forwarding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Injected {
    pub status: u16,
    pub body: String,
}

impl FaultPlan {
    pub fn parse(spec: &str) -> Result<FaultPlan, EvalError> {
        let mut rules = Vec::new();
        for part in spec
            .split(',')
            .map(str::trim)
            .filter(|part| !part.is_empty())
        {
            let bad = |why: &str| {
                EvalError::Usage(format!(
                    "--faults: `{part}` {why} (write N:STATUS, every:K:STATUS or replay:opaque-400)"
                ))
            };
            let status = |text: &str| -> Result<u16, EvalError> {
                text.parse::<u16>()
                    .ok()
                    .filter(|status| (400..600).contains(status))
                    .ok_or_else(|| bad("needs an HTTP error status (400-599)"))
            };
            let fields: Vec<&str> = part.split(':').collect();
            rules.push(match fields.as_slice() {
                ["replay", "opaque-400"] => Rule::OpaqueReplay,
                ["every", k, code] => Rule::Every {
                    k: k.parse()
                        .ok()
                        .filter(|k| *k > 0)
                        .ok_or_else(|| bad("needs K >= 1"))?,
                    status: status(code)?,
                },
                [n, code] => Rule::Nth {
                    n: n.parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| bad("needs N >= 1"))?,
                    status: status(code)?,
                },
                _ => return Err(bad("is not a fault")),
            });
        }
        Ok(FaultPlan {
            rules,
            ..FaultPlan::default()
        })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The fault for the next request (with `body`), if any.
    pub(crate) fn next(&mut self, body: &[u8]) -> Option<Injected> {
        self.seen += 1;
        let seen = self.seen;
        let replays = replays_a_tool_result(body);
        for rule in &self.rules {
            match rule {
                Rule::Nth { n, status } if *n == seen => return Some(error(*status)),
                Rule::Every { k, status } if seen.is_multiple_of(*k) => {
                    return Some(error(*status));
                }
                Rule::OpaqueReplay if replays && !self.replay_faulted => {
                    self.replay_faulted = true;
                    return Some(Injected {
                        status: 400,
                        body: String::new(),
                    });
                }
                _ => {}
            }
        }
        None
    }
}

/// A provider-like error body for `status` (what keel classifies; never its text).
fn error(status: u16) -> Injected {
    let (kind, message) = match status {
        429 => (
            "rate_limit_error",
            "Rate limit reached (injected by keel eval)",
        ),
        500..=599 => (
            "server_error",
            "The server had an error (injected by keel eval)",
        ),
        _ => ("invalid_request_error", "Injected by keel eval"),
    };
    Injected {
        status,
        body: serde_json::json!({"error": {"message": message, "type": kind, "code": kind}})
            .to_string(),
    }
}

/// Whether a request body replays a tool result (Chat `tool` message, Anthropic
/// `tool_result`, Responses `function_call_output`).
fn replays_a_tool_result(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    text.contains("\"role\":\"tool\"")
        || text.contains("\"type\":\"tool_result\"")
        || text.contains("\"type\":\"function_call_output\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_fires_where_it_says_counted_per_trial() {
        let mut plan = FaultPlan::parse("2:429, every:3:500, replay:opaque-400").unwrap();
        let plain: &[u8] = b"{\"messages\":[{\"role\":\"user\"}]}";
        let replay: &[u8] = b"{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}";
        let statuses: Vec<Option<u16>> = [plain, plain, plain, replay, replay, replay]
            .iter()
            .map(|body| plan.next(body).map(|fault| fault.status))
            .collect();
        assert_eq!(
            statuses,
            [None, Some(429), Some(500), Some(400), None, Some(500)]
        );
        let mut fresh = FaultPlan::parse("1:503").unwrap();
        assert_eq!(fresh.next(plain).map(|f| f.status), Some(503));
        assert_eq!(fresh.next(plain), None);
    }

    #[test]
    fn a_bad_spec_names_its_part() {
        for (spec, said) in [
            ("3:200", "`3:200`"),
            ("every:0:500", "K >= 1"),
            ("replay:loud", "`replay:loud`"),
            ("x", "is not a fault"),
        ] {
            let error = FaultPlan::parse(spec).unwrap_err().to_string();
            assert!(error.contains(said), "{spec}: {error}");
        }
        assert!(FaultPlan::parse("").unwrap().is_empty());
    }
}
