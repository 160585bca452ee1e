use super::*;
use keel_types::hooks::HookLayer;

fn hook(event: HookEvent, claude: bool) -> ConfiguredHook {
    ConfiguredHook {
        event,
        matcher: None,
        command: "guard".into(),
        timeout_secs: 5,
        on_error: None,
        unconfined: false,
        layer: HookLayer::User,
        claude,
        origin: "config.toml:1".into(),
    }
}

fn input(event: HookEvent) -> HookInput {
    let mut fields = Map::new();
    fields.insert("tool_name".into(), Value::String("bash".into()));
    HookInput {
        event,
        turn: Some(1),
        subject: Some("bash".into()),
        fields,
    }
}

fn ended(end: HookEnd, stdout: &str, stderr: &str) -> HookRun {
    HookRun {
        end,
        stdout: stdout.into(),
        stderr: stderr.into(),
        duration: Duration::from_millis(3),
    }
}

fn decide(event: HookEvent, claude: bool, run: HookRun) -> (String, HookOutcome) {
    let mut outcome = HookOutcome::default();
    let (decision, _) = interpret(&hook(event, claude), &input(event), &run, &mut outcome);
    (decision, outcome)
}

#[test]
fn ends_decide_by_claude_codes_rules_and_failures_by_on_error() {
    let (decision, outcome) = decide(
        HookEvent::PreToolUse,
        false,
        ended(HookEnd::Exited(2), "", "no rm"),
    );
    assert_eq!(decision, "deny");
    assert_eq!(
        outcome.permission,
        Some(HookPermission::Deny("no rm".into()))
    );
    // A guard that crashes blocks; the same exit in a Claude Code hook does not.
    let (decision, outcome) = decide(
        HookEvent::PreToolUse,
        false,
        ended(HookEnd::Exited(1), "", ""),
    );
    assert_eq!(decision, "failed_deny");
    assert!(matches!(outcome.permission, Some(HookPermission::Deny(_))));
    let (decision, outcome) = decide(
        HookEvent::PreToolUse,
        true,
        ended(HookEnd::Exited(1), "", ""),
    );
    assert_eq!(decision, "failed_allow");
    assert!(outcome.permission.is_none());
    // A timeout denies even a Claude Code guard; elsewhere a failure goes on.
    let (decision, _) = decide(
        HookEvent::PreToolUse,
        true,
        ended(HookEnd::TimedOut, "", ""),
    );
    assert_eq!(decision, "failed_deny");
    let (decision, outcome) = decide(
        HookEvent::PostToolUse,
        false,
        ended(HookEnd::TimedOut, "", ""),
    );
    assert_eq!(decision, "failed_allow");
    assert!(outcome.block.is_none());
    // JSON only on exit 0; malformed JSON is a failure.
    let (decision, _) = decide(
        HookEvent::PreToolUse,
        false,
        ended(HookEnd::Exited(0), "{nope", ""),
    );
    assert_eq!(decision, "failed_deny");
    let (decision, outcome) = decide(
        HookEvent::PreToolUse,
        false,
        ended(
            HookEnd::Exited(0),
            r#"{"hookSpecificOutput": {"permissionDecision": "defer"}}"#,
            "",
        ),
    );
    assert_eq!(decision, "deny", "defer is deny");
    assert!(matches!(outcome.permission, Some(HookPermission::Deny(_))));
}

#[test]
fn several_hooks_combine_deny_over_ask_over_allow_and_context_is_bounded() {
    let mut outcome = HookOutcome::default();
    combine(&mut outcome, HookPermission::Allow);
    combine(&mut outcome, HookPermission::Ask(None));
    combine(&mut outcome, HookPermission::Allow);
    assert_eq!(outcome.permission, Some(HookPermission::Ask(None)));
    combine(&mut outcome, HookPermission::Deny("no".into()));
    combine(&mut outcome, HookPermission::Ask(None));
    assert_eq!(outcome.permission, Some(HookPermission::Deny("no".into())));
    outcome.context.push("x".repeat(MAX_CONTEXT_CHARS + 50));
    let text = outcome.context_text().unwrap();
    assert!(text.ends_with(&format!("cut at {MAX_CONTEXT_CHARS} characters]")));
    assert!(text.chars().count() < MAX_CONTEXT_CHARS + 100);
}
