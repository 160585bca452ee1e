//! The one-line notices a session prints between answers (retries, recoveries, compactions,
//! searches, ignored project settings, a turn's usage), in the words both terminal modes use.
//!
//! Invariants:
//! - Text from outside (provider and account names, reasons, queries, file names) is made
//!   visible before it is placed in a notice.
//! - Pure: the caller decides where a notice goes (stderr in line mode, the scrollback in the
//!   live region).

use keel_render::{visible, visible_line};
use keel_types::{EventBody, InputKind, SourcesStatus, Usage};

/// Tokens of a turn or a session, as a person reads them.
pub fn usage_line(usage: &Usage, cache_hit_ratio: f64) -> String {
    let mut line = format!("tokens: {} in", usage.input);
    if usage.cache_hit + usage.cache_miss > 0 {
        line.push_str(&format!(
            " ({} cache hit, {:.0}%)",
            usage.cache_hit,
            cache_hit_ratio * 100.0
        ));
    }
    line.push_str(&format!(" · {} out", usage.output));
    if usage.reasoning > 0 {
        line.push_str(&format!(" ({} reasoning)", usage.reasoning));
    }
    line
}

/// The notice an event stands for, if it is one of the simple ones (a line or two of text).
pub fn notice(body: &EventBody) -> Option<String> {
    let text = match body {
        EventBody::LlmRetry {
            attempt,
            max_retries,
            kind,
            status,
            delay_ms,
            host,
        } => {
            let status = status.map(|s| format!(" (HTTP {s})")).unwrap_or_default();
            let host = host
                .as_deref()
                .map(|host| format!(" to {}", visible_line(host)))
                .unwrap_or_default();
            format!(
                "↻ retry {attempt}/{max_retries}{host} in {:.1} s: {}{status}",
                *delay_ms as f64 / 1000.0,
                kind.describe()
            )
        }
        // The provider's own words: plain text, every control escaped, labelled as its.
        EventBody::ProviderSaid { message, .. } => {
            format!("the provider said: {}", visible_line(message))
        }
        EventBody::AccountRotated {
            provider,
            from,
            to,
            reason,
        } => format!(
            "⇄ {}: account `{}` failed ({}); switching to `{}`",
            visible_line(provider),
            visible_line(from),
            reason.describe(),
            visible_line(to)
        ),
        EventBody::TurnCompleted {
            usage,
            cache_hit_ratio,
            not_ready_reason,
            context,
            cost,
            ..
        } => {
            let context = context
                .map(|context| format!(" · ctx {}%", context.percent()))
                .unwrap_or_default();
            let cost = cost
                .as_ref()
                .map(|cost| format!(" · {}", cost.display()))
                .unwrap_or_default();
            let usage = format!("{}{cost}{context}", usage_line(usage, *cache_hit_ratio));
            match not_ready_reason {
                Some(reason) => format!("not ready: {}\n{usage}", visible(reason)),
                None => usage,
            }
        }
        EventBody::RecoveryOffered { action, .. } => match action {
            InputKind::FinalReadinessRecovery => {
                "continue checks? /continue-checks goes on from here".to_string()
            }
            InputKind::ContextRecovery | InputKind::Compaction => {
                "/compact summarises the history so the task can go on".to_string()
            }
            InputKind::ProtocolRecovery | InputKind::User => {
                "/recover-context replays the task from valid history".to_string()
            }
        },
        EventBody::ContextCompacted {
            revision,
            tokens_before,
            tokens_after,
            reason,
        } => format!(
            "⟲ context compacted ({}): about {tokens_before} → {tokens_after} tokens, history revision {revision}",
            visible_line(reason)
        ),
        EventBody::RecoveryConsumed { .. } => "recovering…".to_string(),
        EventBody::JobStarted { job, command, .. } => {
            format!(
                "⚙ {job} started in the background: {}",
                visible_line(command)
            )
        }
        EventBody::JobExited {
            job,
            exit_code,
            signal,
            ..
        } => match (exit_code, signal) {
            (Some(code), _) => format!("⚙ {job} exited with code {code}"),
            (None, Some(signal)) => format!("⚙ {job} was killed by signal {signal}"),
            (None, None) => format!("⚙ {job} ended"),
        },
        // A hook that went on and said nothing is not news; one that decided, failed or spoke is.
        EventBody::HookRan {
            event,
            command,
            exit,
            duration_ms,
            decision,
            message,
            ..
        } if decision != "none" || message.is_some() => {
            let ended =
                exit.map_or_else(|| "no exit code".to_string(), |code| format!("exit {code}"));
            let mut line = format!(
                "⚓ {event} hook `{}`: {decision} ({ended}, {duration_ms} ms)",
                visible_line(&shorten(command, 60))
            );
            if let Some(message) = message {
                line.push_str(&format!("\n  {}", visible_line(message)));
            }
            line
        }
        EventBody::RecoveryExpired { .. } => {
            "the earlier offer to go on no longer applies (new input, or a new history)".to_string()
        }
        EventBody::SearchResult {
            query,
            sources_status,
            sources,
        } => {
            let about = match sources_status {
                Some(SourcesStatus::Available) => format!("{sources} source(s)"),
                Some(SourcesStatus::NotProvided) => {
                    "the provider gave no structured sources; its summary is kept".to_string()
                }
                None => "sources status not recorded".to_string(),
            };
            format!("⌕ web search `{}` — {about}", visible_line(query))
        }
        EventBody::PrefixChanged { reason } if reason == "mcp_tools_changed" => {
            "⟲ MCP tools changed: this turn's requests offer the new list".to_string()
        }
        EventBody::SnapshotFailed { side, reason, .. } if side == "prune" => format!(
            "! keel could not prune its snapshot store ({}); it keeps growing until it can",
            visible_line(reason)
        ),
        EventBody::SnapshotPruned {
            brackets,
            bytes_before,
            bytes_after,
        } => format!(
            "⟲ snapshot store over checkpoint_max_bytes: the oldest {brackets} command snapshot(s) pruned ({} → {} KiB); a rewind past them cannot undo those commands",
            bytes_before / 1024,
            bytes_after / 1024
        ),
        EventBody::SnapshotFailed {
            side,
            call_ids,
            reason,
        } => format!(
            "! no snapshot of the workspace {} {} ({}): a rewind cannot tell what {} changed from what anyone else did",
            if side == "after" { "after" } else { "before" },
            if call_ids.len() == 1 {
                "this command"
            } else {
                "these commands"
            },
            visible_line(reason),
            if call_ids.len() == 1 { "it" } else { "they" },
        ),
        EventBody::TrustIgnored(ignored) => format!(
            "note: {}:{}: `{}` {}",
            visible_line(&ignored.file),
            ignored.line,
            visible_line(&ignored.key),
            ignored.reason
        ),
        _ => return None,
    };
    Some(text)
}

/// `text` cut to `chars` characters, with an ellipsis when cut.
fn shorten(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_string();
    }
    text.chars().take(chars).collect::<String>() + "…"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_line_shows_cache_hits_only_when_reported() {
        let usage = Usage {
            input: 200,
            output: 30,
            reasoning: 10,
            cache_hit: 150,
            cache_miss: 50,
            cache_write: 0,
        };
        assert_eq!(
            usage_line(&usage, usage.cache_hit_ratio()),
            "tokens: 200 in (150 cache hit, 75%) · 30 out (10 reasoning)"
        );
        let bare = Usage {
            input: 5,
            output: 1,
            ..Usage::default()
        };
        assert_eq!(usage_line(&bare, 0.0), "tokens: 5 in · 1 out");
    }
}
