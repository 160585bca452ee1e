//! What a session used and cost, as every surface shows it: a failed or stopped turn's
//! responses count (the provider billed them), the built-in price table prices DeepSeek's own
//! models, and a session with tokens no price covers says so instead of passing a part for the
//! whole.

use crate::common::serve::*;
use crate::common::*;
use serde_json::{Value, json};

/// A price per million tokens the user set: 1 for a cache hit, 2 for a miss, 4 for output.
const EUR_PRICE: &str = "[providers.deepseek.price]\ninput_cache_hit = 1.0\ninput_cache_miss = 2.0\noutput = 4.0\ncurrency = \"EUR\"\n";

fn cost_of(usage: &Value) -> f64 {
    let count = |key: &str| usage[key].as_f64().unwrap();
    (count("cache_hit") * 1.0 + count("cache_miss") * 2.0 + count("output") * 4.0) / 1e6
}

#[test]
fn a_failed_turn_counts_what_its_responses_used_in_the_event_and_the_session() {
    // A tool round the provider answered, then the provider refuses the next request.
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo one"}},
        {"fault": {"status": 400, "body": "{\"error\":{\"message\":\"bad request\",\"type\":\"invalid_request_error\"}}"}},
        {"say": "fine now"}
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config("permission_mode = \"auto\"\n");
    home.append_config(EUR_PRICE);
    let run = home.run(&["run", "--json", "go"]);
    assert_ne!(run.code(), 0, "{}", run.stderr());
    let failed = &run.events_of("turn/failed")[0];
    let usage = &failed["usage"];
    assert!(usage["input"].as_u64().unwrap() > 0, "{failed}");
    assert_eq!(failed["cost"]["currency"], "EUR", "{failed}");
    let amount = failed["cost"]["amount"].as_f64().unwrap();
    assert!((amount - cost_of(usage)).abs() < 1e-12, "{failed}");

    // The session's totals, read by another process, include the failed turn's; a completed
    // turn after it adds its own.
    let server = Server::start(&home, &[]);
    let (_, sessions) = server.api("GET", "/api/sessions", Value::Null);
    let id = sessions[0]["id"].as_str().unwrap().to_string();
    let (status, header) = server.api("GET", &format!("/api/sessions/{id}"), Value::Null);
    assert_eq!(status, 200, "{header}");
    assert_eq!(header["usage"], *usage, "{header}");
    assert_eq!(
        header["cost"]["amount"].as_f64().unwrap(),
        amount,
        "{header}"
    );
    assert_eq!(header["cost_partial"], false, "{header}");
    assert!(
        header["cost_display"].as_str().unwrap().starts_with("€0.0"),
        "{header}"
    );
}

#[test]
fn a_stopped_turn_counts_the_responses_it_received() {
    // The second response never ends: the turn is stopped while it waits.
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo one"}},
        {"fault": "stall", "seconds": 30},
        {"say": "later"}
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config("permission_mode = \"auto\"\n");
    home.append_config(EUR_PRICE);
    let server = Server::start(&home, &[]);
    let session = server.new_session();
    assert_eq!(server.submit(&session, json!({"input": "go"})).0, 202);
    server.events(&session, None, "tool/result", 100);
    let (status, _) = server.api(
        "POST",
        &format!("/api/sessions/{session}/cancel"),
        Value::Null,
    );
    assert!(status < 300, "{status}");
    let events = server.events(&session, None, "turn/failed", 200);
    let failed = events.iter().find(|e| e["type"] == "turn/failed").unwrap();
    assert_eq!(failed["diagnostic"]["kind"], "cancelled", "{failed}");
    assert!(failed["usage"]["input"].as_u64().unwrap() > 0, "{failed}");
    let (_, header) = server.api("GET", &format!("/api/sessions/{session}"), Value::Null);
    assert_eq!(header["usage"], failed["usage"], "{header}");
    assert_eq!(header["cost"], failed["cost"], "{header}");
}

#[test]
fn a_deepseek_model_bought_from_another_host_has_no_price() {
    let steps = json!({"steps": [{"say": "priced"}]}).to_string();
    // The table prices a model at its provider's own host (api.deepseek.com); the mock on
    // loopback serves the same model id, as a reseller would, and gets no price.
    let (home, _mock) = scripted("chat", &steps, "");
    let run = home.run(&["run", "--json", "--model", "deepseek/deepseek-v4-pro", "hi"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(run.events_of("llm/request")[0]["model"], "deepseek-v4-pro");
    let completed = &run.events_of("turn/completed")[0];
    assert!(
        completed.get("cost").is_none(),
        "a reseller's host is not priced: {completed}"
    );
}

#[test]
fn a_session_with_unpriced_tokens_never_shows_a_part_of_its_cost_as_the_whole() {
    let steps = json!({"steps": [{"say": "priced"}, {"say": "unpriced"}]}).to_string();
    let (home, mock) = scripted("chat", &steps, "");
    home.append_config(EUR_PRICE);
    assert_eq!(home.run(&["run", "--json", "hi"]).code(), 0);
    // The same session goes on without a price (the user removed it, or another model).
    std::fs::write(
        home.path().join("config.toml"),
        config_for("chat", &mock.base_url, ""),
    )
    .unwrap();
    let run = home.run(&["run", "-c", "--json", "again"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let server = Server::start(&home, &[]);
    let (_, sessions) = server.api("GET", "/api/sessions", Value::Null);
    let id = sessions[0]["id"].as_str().unwrap().to_string();
    let (_, header) = server.api("GET", &format!("/api/sessions/{id}"), Value::Null);
    assert_eq!(header["cost_partial"], true, "{header}");
    let shown = header["cost_display"].as_str().unwrap();
    assert!(
        shown.starts_with("€0.0") && shown.ends_with(" + unpriced tokens"),
        "{header}"
    );
}

#[test]
fn a_turn_stopped_by_a_bug_in_keel_still_counts_its_responses() {
    let steps = json!({"steps": [
        {"tool": "bash", "args": {"command": "echo one"}},
        {"say": "never reached"}
    ]});
    let (home, _mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config("permission_mode = \"auto\"\n");
    home.append_config(EUR_PRICE);
    // A panic as the command's result is committed: after the first response was billed.
    let run: Run = home
        .keel(&["run", "--json", "go"])
        .env("KEEL_KILL_AT", "panic:before_result_commit")
        .output()
        .unwrap()
        .into();
    let failed = &run.events_of("turn/failed")[0];
    assert!(
        failed["diagnostic"]["message"]
            .as_str()
            .unwrap()
            .contains("a bug in keel"),
        "{failed}"
    );
    assert!(failed["usage"]["input"].as_u64().unwrap() > 0, "{failed}");
    let amount = failed["cost"]["amount"].as_f64().unwrap();
    assert!(
        (amount - cost_of(&failed["usage"])).abs() < 1e-12,
        "{failed}"
    );
}
