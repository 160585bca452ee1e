//! Configuration tests: precedence, presets, and errors that name file, line and key.

use super::*;
use crate::layer::locate;
use crate::source::Source;
use keel_llm::RetryPolicy;
use keel_types::{FailureKind, ReasoningProtocol, WireProtocol};
use std::time::Duration;

fn config(text: &str) -> Result<KeelConfig, ConfigError> {
    KeelConfig::from_texts(
        vec![(PathBuf::from("/home/u/.keel/config.toml"), text.into())],
        Overrides::default(),
    )
}

fn in_file_error(text: &str) -> (usize, String, String) {
    match config(text) {
        Err(ConfigError::InFile {
            line,
            key,
            message,
            file,
        }) => {
            assert_eq!(file, PathBuf::from("/home/u/.keel/config.toml"));
            (line, key, message)
        }
        other => panic!("expected a file error, got {other:?}"),
    }
}

#[test]
fn empty_config_gives_the_deepseek_default() {
    let config = config("").unwrap();
    assert_eq!(
        config.model().unwrap(),
        ModelRef {
            provider: "deepseek".into(),
            model: "deepseek-v4-flash".into()
        }
    );
    let profile = config.profile("deepseek").unwrap();
    assert_eq!(profile.protocol, WireProtocol::Chat);
    assert_eq!(profile.base_url, "https://api.deepseek.com");
    assert_eq!(profile.accounts[0].api_key_env, "DEEPSEEK_API_KEY");
    assert_eq!(profile.reasoning_protocol, ReasoningProtocol::Deepseek);
    assert_eq!(profile.retry, RetryPolicy::default());
    assert_eq!(profile.idle_timeout, Duration::from_secs(300));
    assert_eq!(config.permission_mode(), PermissionMode::Ask);
}

#[test]
fn contract_example_parses() {
    let text = r#"
model = "deepseek/deepseek-v4-flash"
permission_mode = "ask"

[providers.deepseek]
protocol = "chat"
base_url = "https://api.deepseek.com/"
api_key_env = "DEEPSEEK_API_KEY"
reasoning_protocol = "deepseek"

[providers.deepseek.retry]
mode = "normal"
max_retries = 2
retry_on = ["empty_response", "rate_limit", "server", "timeout", "transport", "invalid_request"]
base_delay_ms = 500
max_delay_ms = 10000
jitter = 0.1
"#;
    let profile = config(text).unwrap().profile("deepseek").unwrap();
    assert_eq!(profile.base_url, "https://api.deepseek.com");
    assert_eq!(profile.retry.max_retries, 2);
    assert!(profile.retry.allows_retry(FailureKind::InvalidRequest, 1));
    assert!(!profile.retry.allows_retry(FailureKind::InvalidRequest, 2));
}

#[test]
fn accounts_and_custom_providers() {
    let text = r#"
model = "local/smollm"
[providers.deepseek]
accounts = [{ name = "a", api_key_env = "K1" }, { name = "b", api_key_env = "K2" }]
[providers.local]
protocol = "responses"
base_url = "http://127.0.0.1:8080/v1"
api_key_env = "LOCAL_KEY"
idle_timeout_secs = 5
"#;
    let config = config(text).unwrap();
    let deepseek = config.profile("deepseek").unwrap();
    let names: Vec<_> = deepseek.accounts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    let local = config.profile("local").unwrap();
    assert_eq!(local.protocol, WireProtocol::Responses);
    assert_eq!(local.reasoning_protocol, ReasoningProtocol::None);
    assert_eq!(local.idle_timeout, Duration::from_secs(5));
    assert_eq!(local.endpoint(), "http://127.0.0.1:8080/v1/responses");
}

#[test]
fn malformed_toml_names_file_and_line() {
    let (line, _, message) = in_file_error("model = \"a/b\"\n\n[providers.deepseek\n");
    assert_eq!(line, 3);
    assert!(!message.is_empty());
}

#[test]
fn unknown_protocol_names_line_and_key() {
    let (line, key, message) =
        in_file_error("model = \"deepseek/x\"\n[providers.deepseek]\nprotocol = \"grpc\"\n");
    assert_eq!(line, 3);
    assert_eq!(key, "providers.deepseek.protocol");
    // What was expected, never the value (a file may hold a secret where a name should be).
    assert!(
        !message.contains("grpc") && message.contains("`chat`"),
        "{message}"
    );
}

#[test]
fn unknown_reasoning_protocol_names_line_and_key() {
    let (line, key, message) =
        in_file_error("[providers.kimi]\n\nreasoning_protocol = \"guess\"\n");
    assert_eq!(line, 3);
    assert_eq!(key, "providers.kimi.reasoning_protocol");
    assert!(
        !message.contains("guess") && message.contains("expected"),
        "{message}"
    );
}

#[test]
fn invalid_base_url_names_line_and_key() {
    for bad in [
        "not a url",
        "ftp://host",
        "http://user:pw@host",
        "https://h/?q=1",
    ] {
        let text = format!("[providers.deepseek]\nbase_url = \"{bad}\"\n");
        let (line, key, message) = in_file_error(&text);
        assert_eq!(
            (line, key.as_str()),
            (2, "providers.deepseek.base_url"),
            "{bad}"
        );
        assert!(!message.contains("pw"), "{message}");
    }
}

#[test]
fn wrong_type_and_unknown_keys_are_named() {
    let (line, key, message) =
        in_file_error("[providers.deepseek.retry]\nmax_retries = \"five\"\n");
    assert_eq!(
        (line, key.as_str()),
        (2, "providers.deepseek.retry.max_retries")
    );
    assert!(
        message.contains("invalid type") || message.contains("expected"),
        "{message}"
    );
    let error = config("modle = \"deepseek/x\"\n").unwrap_err().to_string();
    assert!(
        error.contains("keel does not know 1 key")
            && error.contains("line 1: `modle` — did you mean `model`?"),
        "{error}"
    );
}

#[test]
fn never_retryable_kinds_are_refused_in_retry_on() {
    let (line, key, message) =
        in_file_error("[providers.deepseek.retry]\nretry_on = [\"server\", \"quota\"]\n");
    assert_eq!(
        (line, key.as_str()),
        (2, "providers.deepseek.retry.retry_on")
    );
    assert!(message.contains("quota"), "{message}");
    let (_, _, message) = in_file_error("[providers.deepseek.retry]\nretry_on = [\"sever\"]\n");
    assert!(
        message.contains("unknown failure kind `sever`"),
        "{message}"
    );
    let (_, key, _) = in_file_error("[providers.deepseek.retry]\njitter = 2.0\n");
    assert_eq!(key, "providers.deepseek.retry.jitter");
    let (_, key, _) = in_file_error("[providers.deepseek.retry]\nmode = \"always\"\n");
    assert_eq!(key, "providers.deepseek.retry.mode");
}

#[test]
fn model_without_provider_or_unknown_provider_is_refused() {
    let (line, key, message) = in_file_error("model = \"deepseek-v4\"\n");
    assert_eq!((line, key.as_str()), (1, "model"));
    assert!(message.contains("<provider>/<model id>"), "{message}");
    let (_, _, message) = in_file_error("model = \"nobody/x\"\n");
    assert!(message.contains("unknown provider `nobody`"), "{message}");
}

#[test]
fn custom_provider_without_base_url_or_key_is_refused() {
    let error = config("[providers.local]\nprotocol = \"chat\"\n").unwrap_err();
    assert!(error.to_string().contains("base_url"), "{error}");
    let error = config("[providers.local]\nbase_url = \"http://127.0.0.1:1\"\n").unwrap_err();
    assert!(error.to_string().contains("api_key_env"), "{error}");
    let error = config("[providers.openai-compatible]\napi_key_env = \"K\"\n").unwrap_err();
    assert!(error.to_string().contains("base_url"), "{error}");
}

#[test]
fn precedence_flag_env_project_home() {
    let home = (PathBuf::from("home.toml"), "model = \"deepseek/home\"\n[providers.deepseek.retry]\nmax_retries = 1\nbase_delay_ms = 7\n".to_string());
    let project = (
        PathBuf::from("keel.toml"),
        "model = \"deepseek/project\"\n[providers.deepseek.retry]\nmax_retries = 3\n".to_string(),
    );
    let config =
        KeelConfig::from_texts(vec![project.clone(), home.clone()], Overrides::default()).unwrap();
    assert_eq!(config.model().unwrap().model, "project");
    let retry = config.profile("deepseek").unwrap().retry;
    assert_eq!(retry.max_retries, 3, "project file wins per field");
    assert_eq!(
        retry.base_delay,
        Duration::from_millis(7),
        "home still fills other fields"
    );

    let env = Overrides {
        model_env: Some("deepseek/env".into()),
        deepseek_base_url_env: Some("http://127.0.0.1:9/".into()),
        ..Overrides::default()
    };
    let config = KeelConfig::from_texts(vec![project.clone(), home.clone()], env.clone()).unwrap();
    assert_eq!(config.model().unwrap().model, "env");
    assert_eq!(
        config.profile("deepseek").unwrap().base_url,
        "http://127.0.0.1:9"
    );

    let flag = Overrides {
        model_flag: Some("deepseek/flag".into()),
        ..env
    };
    let config = KeelConfig::from_texts(vec![project, home], flag).unwrap();
    assert_eq!(config.model().unwrap().model, "flag");
}

#[test]
fn bad_env_values_name_the_variable() {
    let overrides = Overrides {
        deepseek_base_url_env: Some("nope".into()),
        ..Overrides::default()
    };
    let error = KeelConfig::from_texts(vec![], overrides).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("environment variable DEEPSEEK_BASE_URL"),
        "{error}"
    );
    let overrides = Overrides {
        model_env: Some("x".into()),
        ..Overrides::default()
    };
    let error = KeelConfig::from_texts(vec![], overrides).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("environment variable KEEL_MODEL"),
        "{error}"
    );
}

#[test]
fn locate_handles_spans_at_the_edges() {
    assert_eq!(locate("", &(0..0)), (1, String::new()));
    assert_eq!(locate("a = 1", &(100..200)).0, 1);
}

fn file_source(path: &str, line: usize) -> Source {
    Source::File {
        path: PathBuf::from(path),
        line,
    }
}

#[test]
fn every_resolved_value_says_where_it_came_from() {
    let home = (
        PathBuf::from("home.toml"),
        "model = \"local/m\"\npermission_mode = \"read-only\"\n\
         [providers.local]\nbase_url = \"http://127.0.0.1:1\"\napi_key_env = \"LOCAL_KEY\"\n\
         [providers.deepseek.retry]\nmax_retries = 1\nbase_delay_ms = 7\n"
            .to_string(),
    );
    let project = (
        PathBuf::from("keel.toml"),
        "max_rounds = 40\n[providers.deepseek.retry]\nmax_retries = 3\n".to_string(),
    );
    let overrides = Overrides {
        model_env: Some("deepseek/env".into()),
        deepseek_base_url_env: Some("http://127.0.0.1:9/".into()),
        permission_mode_flag: Some(ModeFlag::Yes),
        ..Overrides::default()
    };
    let config = KeelConfig::from_texts(vec![project, home], overrides).unwrap();
    let resolved = config.resolve().unwrap();
    assert_eq!(
        resolved.files,
        [PathBuf::from("keel.toml"), PathBuf::from("home.toml")]
    );
    assert_eq!(resolved.model.value.to_string(), "deepseek/env");
    assert_eq!(resolved.model.source, Source::Env("KEEL_MODEL"));
    assert_eq!(resolved.permission_mode.value, PermissionMode::Auto);
    assert_eq!(resolved.permission_mode.source, Source::Flag("--yes"));
    assert_eq!(resolved.max_rounds.value, 40);
    assert_eq!(resolved.max_rounds.source, file_source("keel.toml", 1));

    let names: Vec<&str> = resolved.providers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["deepseek", "local"], "the active provider first");
    let deepseek = &resolved.providers[0];
    assert_eq!(deepseek.base_url.value, "http://127.0.0.1:9");
    assert_eq!(deepseek.base_url.source, Source::Env("DEEPSEEK_BASE_URL"));
    assert_eq!(deepseek.protocol.source, Source::Preset("deepseek"));
    assert_eq!(deepseek.accounts.source, Source::Preset("deepseek"));
    assert!(deepseek.idle_timeout.is_default());
    assert_eq!(deepseek.retry.max_retries.value, 3);
    assert_eq!(
        deepseek.retry.max_retries.source,
        file_source("keel.toml", 3)
    );
    assert_eq!(deepseek.retry.base_delay.value, Duration::from_millis(7));
    assert_eq!(
        deepseek.retry.base_delay.source,
        file_source("home.toml", 8)
    );
    assert!(deepseek.retry.jitter.is_default());
    assert_eq!(deepseek.profile(), config.profile("deepseek").unwrap());

    let local = &resolved.providers[1];
    assert!(local.protocol.is_default(), "no preset: keel's default");
    assert_eq!(local.base_url.source, file_source("home.toml", 4));
    assert_eq!(local.accounts.source, file_source("home.toml", 5));
}

#[test]
fn model_sources_follow_precedence() {
    let file = (
        PathBuf::from("c.toml"),
        "\nmodel = \"kimi/k\"\n".to_string(),
    );
    let config = KeelConfig::from_texts(vec![file.clone()], Overrides::default()).unwrap();
    assert_eq!(
        config.resolve().unwrap().model.source,
        file_source("c.toml", 2)
    );
    let flag = Overrides {
        model_flag: Some("deepseek/f".into()),
        model_env: Some("kimi/e".into()),
        permission_mode_flag: Some(ModeFlag::PermissionMode(PermissionMode::ReadOnly)),
        ..Overrides::default()
    };
    let resolved = KeelConfig::from_texts(vec![file], flag)
        .unwrap()
        .resolve()
        .unwrap();
    assert_eq!(resolved.model.source, Source::Flag("--model"));
    assert_eq!(resolved.permission_mode.value, PermissionMode::ReadOnly);
    assert_eq!(
        resolved.permission_mode.source,
        Source::Flag("--permission-mode")
    );
    let resolved = config_resolved("");
    assert_eq!(resolved.model.value.to_string(), DEFAULT_MODEL);
    assert!(resolved.model.is_default() && resolved.max_rounds.is_default());
    assert!(resolved.permission_mode.is_default());
}

fn config_resolved(text: &str) -> ResolvedConfig {
    config(text).unwrap().resolve().unwrap()
}

#[test]
fn permission_rules_of_every_file_make_the_policy() {
    let home = (
        PathBuf::from("home.toml"),
        "[permissions]\ndeny = [\"bash(rm *)\"]\n".to_string(),
    );
    let project = (
        PathBuf::from("keel.toml"),
        "[permissions]\nallow = [\n  \"bash\",\n]\n".to_string(),
    );
    let config = KeelConfig::from_texts(vec![project, home], Overrides::default()).unwrap();
    let rules: Vec<(RuleList, String, String)> = config
        .rules()
        .into_iter()
        .map(|rule| (rule.list, rule.text, rule.source.to_string()))
        .collect();
    assert_eq!(
        rules,
        [
            (RuleList::Allow, "bash".into(), "keel.toml:3".into()),
            (RuleList::Deny, "bash(rm *)".into(), "home.toml:2".into()),
        ]
    );
    let policy = config.permission_policy().unwrap();
    assert_eq!(policy.mode, PermissionMode::Ask);
    assert!(matches!(
        policy.decide("bash", "rm -rf x", keel_tools::Reach::Sensitive),
        keel_tools::Decision::Deny(reason) if reason.contains("bash(rm *)")
    ));
    assert_eq!(
        policy.decide("bash", "ls", keel_tools::Reach::Sensitive),
        keel_tools::Decision::Allow
    );
}

#[test]
fn a_bad_rule_names_file_line_and_list() {
    let (line, key, message) =
        in_file_error("[permissions]\nask = [\n  \"read_file\",\n  \"bash(oops\",\n]\n");
    assert_eq!((line, key.as_str()), (4, "permissions.ask"));
    assert_eq!(message, "rule `bash(oops`: missing the closing `)`");
    let (line, key, _) = in_file_error("[permissions]\ndeny = [\"\"]\n");
    assert_eq!((line, key.as_str()), (2, "permissions.deny"));
    let error = config("compact_at = 1.5\n").unwrap_err();
    assert!(
        error.to_string().contains("`compact_at`: must be a share"),
        "{error}"
    );
    assert_eq!(
        config("compact_at = 0.5\n").unwrap().compact_at().unwrap(),
        0.5
    );
    let error = config("max_rounds = 0\n").unwrap_err();
    assert!(
        error
            .to_string()
            .contains("`max_rounds`: must be at least 1"),
        "{error}"
    );
}
