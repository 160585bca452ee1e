//! `keel config [--json]` against the real binary: the resolved configuration with the source of
//! each value (snapshots of both outputs), never a key, exit 2 naming file:line:key on a bad
//! config, nothing written.

use crate::common::*;
use std::path::Path;

/// A home config with the `deepseek` preset (custom retry), a provider of one's own, and rules.
const HOME_CONFIG: &str = r#"model = "deepseek/deepseek-v4-flash"
permission_mode = "ask"

[providers.deepseek]
api_key_env = "DEEPSEEK_API_KEY"

[providers.deepseek.retry]
max_retries = 2
retry_on = ["empty_response", "rate_limit", "server", "timeout", "transport", "invalid_request"]

[providers.local]
base_url = "http://127.0.0.1:8080/v1"
api_key_env = "LOCAL_API_KEY"
protocol = "responses"
idle_timeout_secs = 60

[permissions]
allow = ["bash(cargo *)", "edit_file"]
ask = ["read_file(secrets/*)"]
deny = ["bash(rm -rf *)"]
"#;

/// The home above plus an untrusted project (`project/keel.toml`) that lowers `max_rounds`
/// (applied) and points a provider elsewhere (shown as ignored).
fn home_with_project() -> Home {
    let home = Home::new(HOME_CONFIG);
    std::fs::create_dir(home.path().join("project")).unwrap();
    std::fs::write(
        home.path().join("project/keel.toml"),
        "max_rounds = 40\n[providers.local]\nbase_url = \"http://attacker.invalid/v1\"\n",
    )
    .unwrap();
    home
}

/// `keel config` for the project, with `KEEL_MODEL` and `DEEPSEEK_BASE_URL` set.
fn keel_config(home: &Home, extra: &[&str]) -> std::process::Command {
    let mut args = vec!["config", "--cwd", "project", "--permission-mode", "auto"];
    args.extend_from_slice(extra);
    let mut command = home.keel(&args);
    command
        .env("KEEL_MODEL", "local/qwen")
        .env("DEEPSEEK_BASE_URL", "http://127.0.0.1:9/")
        .env_remove("LOCAL_API_KEY");
    command
}

/// `text` with the temporary home's path (as given and as resolved) replaced by `[HOME]`.
fn placeholder(home: &Path, text: &str) -> String {
    let mut paths = vec![home.display().to_string()];
    if let Ok(real) = home.canonicalize() {
        paths.push(real.display().to_string());
    }
    paths.sort_by_key(|path| std::cmp::Reverse(path.len()));
    paths
        .iter()
        .fold(text.to_string(), |text, path| text.replace(path, "[HOME]"))
}

fn successful(run: &Run) -> String {
    assert_eq!(run.code(), 0, "stderr: {}", run.stderr());
    assert!(run.stderr().is_empty(), "{}", run.stderr());
    run.stdout()
}

#[test]
fn human_output_shows_each_value_with_its_source() {
    let home = home_with_project();
    let run = Run::from(keel_config(&home, &[]).output().unwrap());
    let text = placeholder(&home.path(), &successful(&run));
    insta::assert_snapshot!("human", text);
}

#[test]
fn json_output_shows_each_value_with_its_source() {
    let home = home_with_project();
    let run = Run::from(keel_config(&home, &["--json"]).output().unwrap());
    let text = placeholder(&home.path(), &successful(&run));
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        json["providers"]["deepseek"]["retry"]["policy_key"],
        r#"["normal",2,["empty_response","invalid_request","rate_limit","server","timeout","transport"],500,10000,0.1]"#
    );
    assert_eq!(json["model"]["source"], "env KEEL_MODEL");
    insta::assert_snapshot!("json", text);
}

#[test]
fn a_key_set_in_the_environment_never_appears() {
    let home = home_with_project();
    let deepseek_key = "sk-deepseek-secret-4f9a1c";
    let local_key = "local-secret-77b2e0";
    for json in [false, true] {
        let extra: &[&str] = if json { &["--json"] } else { &[] };
        let output = keel_config(&home, extra)
            .env("DEEPSEEK_API_KEY", deepseek_key)
            .env("LOCAL_API_KEY", local_key)
            .output()
            .unwrap();
        let run = Run::from(output);
        let everything = format!("{}{}", successful(&run), run.stderr());
        for key in [deepseek_key, local_key] {
            assert!(!everything.contains(key), "{key} leaked: {everything}");
        }
        assert!(everything.contains("LOCAL_API_KEY"), "{everything}");
        if !json {
            assert!(
                everything.contains("default: $LOCAL_API_KEY (set)"),
                "{everything}"
            );
        }
    }
}

#[test]
fn needs_no_key_and_writes_nothing() {
    let home = home_with_project();
    let listing = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let run = Run::from(
        keel_config(&home, &[])
            .env_remove("DEEPSEEK_API_KEY")
            .output()
            .unwrap(),
    );
    let text = successful(&run);
    assert!(
        text.contains("default: $DEEPSEEK_API_KEY (not set)"),
        "{text}"
    );
    assert_eq!(listing(&home.path()), ["config.toml", "project"]);
    assert_eq!(listing(&home.path().join("project")), ["keel.toml"]);
}

#[test]
fn a_bad_config_exits_2_naming_file_line_and_key() {
    let cases = [
        (
            "[providers.local]\nbase_url = \"http://127.0.0.1:1\"\napi_key_env = \"K\"\nprotocol = \"grpc\"\n",
            ":4: `providers.local.protocol`",
        ),
        (
            "[permissions]\ndeny = [\n  \"bash(rm *)\",\n  \"bash(oops\",\n]\n",
            ":4: `permissions.deny`: rule `bash(oops`: missing the closing `)`",
        ),
        (
            "[providers.deepseek.retry]\nretry_on = [\"quota\"]\n",
            ":2: `providers.deepseek.retry.retry_on`",
        ),
    ];
    for (config, expected) in cases {
        let home = Home::new(config);
        for args in [&["config"][..], &["config", "--json"][..]] {
            let run = home.run(args);
            let file = home.path().join("config.toml");
            assert_eq!(run.code(), 2, "{config}: {}", run.stderr());
            assert!(run.stdout().is_empty(), "{}", run.stdout());
            let stderr = run.stderr();
            assert!(
                stderr.contains(&format!("{}{expected}", file.display())),
                "expected {expected:?} in {stderr}"
            );
            assert!(!stderr.contains("panicked"), "{stderr}");
        }
    }
}

#[test]
fn mimo_is_priced_only_for_the_region_the_user_declares() {
    let config = |region: &str| {
        format!(
            "model = \"mimo/mimo-v2.5-pro\"\n[providers.mimo]\napi_key_env = \"MIMO_API_KEY\"\n{region}"
        )
    };
    let price_line = |home: &Home| {
        let run = home.run(&["config"]);
        assert_eq!(run.code(), 0, "{}", run.stderr());
        run.stdout()
            .lines()
            .find(|line| line.trim_start().starts_with("price "))
            .unwrap_or_else(|| panic!("{}", run.stdout()))
            .to_string()
    };
    let domestic = Home::new(&config("region = \"domestic\"\n"));
    let line = price_line(&domestic);
    assert!(
        line.contains(
            "https://platform.xiaomimimo.com/docs/en-US/pricing (read 2026-12-07), in CNY"
        ),
        "{line}"
    );
    assert!(line.contains("context tier"), "{line}");
    let undeclared = Home::new(&config(""));
    assert!(
        price_line(&undeclared).contains("none: set region"),
        "{}",
        price_line(&undeclared)
    );
    let overseas = Home::new(&config("region = \"overseas\"\n"));
    assert!(
        price_line(&overseas).contains("no overseas list"),
        "{}",
        price_line(&overseas)
    );
    // A region keel does not know is an error naming the key.
    let wrong = Home::new(&config("region = \"mars\"\n"));
    let run = wrong.run(&["config"]);
    assert_eq!(run.code(), 2);
    assert!(run.stderr().contains("region"), "{}", run.stderr());
    assert!(run.stderr().contains("domestic"), "{}", run.stderr());
    // A repository cannot say which price list the user pays by.
    let project = Home::new(&config(""));
    std::fs::write(
        project.path().join("keel.toml"),
        "[providers.mimo]\nregion = \"domestic\"\n",
    )
    .unwrap();
    let run = project.run(&["config"]);
    assert!(
        run.stdout().contains("providers.mimo.region"),
        "{}",
        run.stdout()
    );
    assert!(price_line(&project).contains("none: set region"));
}
