//! The system prompt.
//!
//! Invariant: it is one constant, the same bytes for every request of every session in every
//! project (so providers' prefix caches share it): no path, no date, no counter. What differs
//! by project (instructions, the workspace, the environment) is the session's context block,
//! at the head of its first user message.

pub const SYSTEM_PROMPT: &str = "You are keel, a coding agent working in the user's terminal. \
     Act through the tools: read before you edit, run commands to check your work, and keep \
     changes inside the workspace. Report only what tool results actually show; if a tool \
     failed, was denied or its outcome is unknown, say so instead of assuming success. \
     Correct an invalid tool call from its error message. Answer precisely and briefly.";

/// The Kimi model action policy (docs/eval.md): a constant addendum to the system prompt for
/// one model family. Off in production; `keel eval`'s `policy` variant turns it on, to measure
/// whether it is a stable gain before it ever is.
pub const KIMI_ACTION_POLICY: &str = "Action policy: do the work through the tools you are \
     permitted to use; never describe a change, a command or a check as done unless a tool \
     result in this conversation shows it. When a tool call is refused as invalid, read the \
     specific error and send a corrected call instead of repeating it or giving up. Respect \
     read-only and plan-mode limits and every denial; after a cancellation or an unknown \
     outcome, inspect with read-only tools before acting again.";

/// The action policy that applies to a model: matched by its real id (`kimi`, `kimi-…`,
/// `kimi_…`) or a declared capability (`reasoning_protocol = "kimi"`), never a display name.
pub fn action_policy_for(
    model_id: &str,
    reasoning: keel_types::ReasoningProtocol,
) -> Option<&'static str> {
    let id = model_id.to_ascii_lowercase();
    let kimi_id = id == "kimi" || id.starts_with("kimi-") || id.starts_with("kimi_");
    (kimi_id || reasoning == keel_types::ReasoningProtocol::Kimi).then_some(KIMI_ACTION_POLICY)
}

/// The system prompt of a session: the constant, and the model's action policy when the
/// session was opened with policies on (`keel eval`'s `policy` variant) and one applies. The
/// same bytes for every request of the session.
pub(crate) fn system_prompt(
    policies_on: bool,
    model_id: &str,
    reasoning: keel_types::ReasoningProtocol,
) -> std::borrow::Cow<'static, str> {
    match action_policy_for(model_id, reasoning).filter(|_| policies_on) {
        Some(policy) => format!("{SYSTEM_PROMPT}\n\n{policy}").into(),
        None => SYSTEM_PROMPT.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_types::ReasoningProtocol;

    #[test]
    fn the_policy_matches_a_real_kimi_id_or_capability_and_is_off_unless_asked_for() {
        for id in ["kimi", "kimi-k2-0905-preview", "Kimi_K3", "kimi-latest"] {
            assert!(
                action_policy_for(id, ReasoningProtocol::None).is_some(),
                "{id}"
            );
        }
        for id in ["kimiko", "deepseek-v4-flash", "moonshot-kimi", "k2"] {
            assert!(
                action_policy_for(id, ReasoningProtocol::Deepseek).is_none(),
                "{id}"
            );
        }
        assert!(action_policy_for("k3", ReasoningProtocol::Kimi).is_some());
        assert_eq!(
            system_prompt(false, "kimi-k2", ReasoningProtocol::Kimi),
            SYSTEM_PROMPT,
            "off in production"
        );
        let on = system_prompt(true, "kimi-k2", ReasoningProtocol::Kimi);
        assert!(on.starts_with(SYSTEM_PROMPT) && on.ends_with(KIMI_ACTION_POLICY));
        assert_eq!(
            system_prompt(true, "deepseek-v4-flash", ReasoningProtocol::Deepseek),
            SYSTEM_PROMPT,
            "only where the policy applies"
        );
    }
}
