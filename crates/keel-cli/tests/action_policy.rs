//! The Kimi action policy: off in production, on only for `keel eval`'s `policy` variant (the
//! hidden `--action-policy` switch), and only for a model it applies to.

use crate::common::*;
use serde_json::json;

const POLICY_START: &str = "Action policy: do the work through the tools";

fn system_of(mock: &MockProcess) -> String {
    let request = &mock.requests()[0];
    let body: serde_json::Value = serde_json::from_str(request["body"].as_str().unwrap()).unwrap();
    body["messages"][0]["content"].as_str().unwrap().to_string()
}

#[test]
fn the_policy_is_sent_only_when_switched_on_for_a_model_it_applies_to() {
    let steps = json!({"steps": [{"say": "ok"}]}).to_string();
    // A Kimi-capable endpoint: the policy applies.
    for (switch, kimi, sent) in [
        (true, true, true),
        (false, true, false),
        (true, false, false),
    ] {
        let extra = if kimi {
            "reasoning_protocol = \"kimi\""
        } else {
            ""
        };
        let (home, mock) = scripted("chat", &steps, extra);
        let mut args = vec!["run", "--json"];
        if switch {
            args.push("--action-policy");
        }
        args.push("hi");
        let run = home.run(&args);
        assert_eq!(run.code(), 0, "{}", run.stderr());
        let system = system_of(&mock);
        assert_eq!(
            system.contains(POLICY_START),
            sent,
            "switch {switch}, kimi {kimi}: {system}"
        );
        assert!(system.starts_with("You are keel"), "{system}");
    }
    let help = KEEL_HELP();
    assert!(
        !help.contains("action-policy"),
        "not a setting users see: {help}"
    );
}

#[allow(non_snake_case)]
fn KEEL_HELP() -> String {
    let home = Home::new("");
    home.run(&["run", "--help"]).stdout()
}
