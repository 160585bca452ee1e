//! `keel serve`'s credential is on no command line: it comes from `KEEL_SERVE_TOKEN` or an
//! owner-only `--token-file`, and `--open` hands the browser an owner-only launch page with a
//! one-time code (a second redemption revokes the token). Every `/proc/*/cmdline` is read.

use crate::common::*;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Stdio};

fn on_any_command_line(needle: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline"))
            .map(|bytes| String::from_utf8_lossy(&bytes).contains(needle))
            .unwrap_or(false)
    })
}

/// `keel serve ARGS` with `env`; the child and the address it printed.
fn serve(home: &Home, args: &[&str], env: &[(&str, &str)]) -> (Child, String, String) {
    let mut all = vec!["serve"];
    all.extend_from_slice(args);
    let mut child = home
        .keel(&all)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_string();
    let address = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_default()
        .to_string();
    (child, address, url)
}

fn status_with(address: &str, token: &str) -> u16 {
    let server = crate::common::serve::Server {
        child: std::process::Command::new("true").spawn().unwrap(),
        address: address.to_string(),
        token: token.to_string(),
    };
    server
        .api("GET", "/api/sessions", serde_json::Value::Null)
        .0
}

#[test]
fn the_token_comes_from_the_environment_or_an_owner_only_file() {
    let home = Home::new("");
    let token = "env-token-5b1c9e2f7a3d4c6b";
    let (mut child, address, url) = serve(&home, &[], &[("KEEL_SERVE_TOKEN", token)]);
    assert!(
        !url.contains(token),
        "a token the user gave is not printed: {url}"
    );
    assert_eq!(status_with(&address, token), 200);
    assert_eq!(status_with(&address, "wrong-token-000000000"), 401);
    assert!(!on_any_command_line(token));
    child.kill().unwrap();
    child.wait().unwrap();

    let file = home.path().join("token.txt");
    let file_token = "file-token-8e2d4a6c1b3f5e7d";
    std::fs::write(&file, format!("{file_token}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = home.run(&["serve", "--token-file", file.to_str().unwrap()]);
    assert_eq!(refused.code(), 2);
    assert!(
        refused.stderr().contains("chmod 600"),
        "{}",
        refused.stderr()
    );
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (mut child, address, _) = serve(&home, &["--token-file", file.to_str().unwrap()], &[]);
    assert_eq!(status_with(&address, file_token), 200);
    assert!(!on_any_command_line(file_token));
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn open_hands_the_browser_a_one_time_code_and_no_argv_holds_a_credential() {
    let home = Home::new("");
    // A stand-in for xdg-open that records what it was given.
    let bin = home.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let opener = bin.join("xdg-open");
    let recorded = home.path().join("opened.txt");
    std::fs::write(
        &opener,
        format!("#!/bin/sh\nprintf '%s' \"$@\" > {}\n", recorded.display()),
    )
    .unwrap();
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let (mut child, address, url) = serve(&home, &["--open"], &[("PATH", &path)]);
    let token = url.split("#token=").nth(1).unwrap().to_string();
    wait_until("xdg-open ran", std::time::Duration::from_secs(10), || {
        recorded.exists()
    });
    let opened = std::fs::read_to_string(&recorded).unwrap();
    assert!(!opened.contains(&token), "{opened}");
    assert!(
        !opened.contains("code"),
        "a path, not a URL with a code: {opened}"
    );
    let page = std::path::Path::new(&opened);
    assert!(
        page.starts_with(home.path().join("state")),
        "in KEEL_HOME/state, hidden from every command and MCP server: {opened}"
    );
    assert_eq!(
        std::fs::metadata(page).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let html = std::fs::read_to_string(page).unwrap();
    let code = html
        .split("#code=")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_string();
    assert!(
        !html.contains(&token),
        "the page holds the code, not the token"
    );
    assert!(!on_any_command_line(&token));
    assert!(!on_any_command_line(&code));
    let redeem = |code: &str| {
        let server = crate::common::serve::Server {
            child: std::process::Command::new("true").spawn().unwrap(),
            address: address.clone(),
            token: String::new(),
        };
        server.api("POST", "/api/launch", serde_json::json!({ "code": code }))
    };
    assert_eq!(redeem("not-the-code").0, 401);
    let (status, body) = redeem(&code);
    assert_eq!(status, 200);
    assert_eq!(body["token"], token.as_str());
    assert_eq!(status_with(&address, &token), 200);
    // A second redemption: someone else has the code, so nobody keeps the token.
    let (status, body) = redeem(&code);
    assert_eq!(status, 409, "{body}");
    assert_eq!(status_with(&address, &token), 401, "the token is revoked");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn no_command_or_tool_of_a_session_reads_the_token_file() {
    let file_token = "file-token-3c9e1a7b5d2f4e6a";
    let steps = serde_json::json!({"steps": [
        {"tool": "bash", "args": {"command": "cat token.txt"}},
        {"tool": "read_file", "args": {"path": "token.txt"}},
        {"say": "done"},
    ]});
    let (home, mock) = scripted("chat", &steps.to_string(), "");
    home.prepend_config("permission_mode = \"auto\"");
    let file = home.path().join("token.txt");
    std::fs::write(&file, format!("{file_token}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut server =
        crate::common::serve::Server::start(&home, &["--token-file", file.to_str().unwrap()]);
    server.token = file_token.to_string();
    let session = server.new_session();
    assert_eq!(
        server
            .submit(&session, serde_json::json!({"input": "read it"}))
            .0,
        202
    );
    crate::common::serve::wait_until_idle(&server, &session);
    let sent: String = mock.requests().iter().map(|r| r.to_string()).collect();
    assert!(!sent.contains(file_token), "{sent}");
    assert!(
        sent.contains("Permission denied"),
        "the command was refused: {sent}"
    );
    assert!(
        sent.contains("keel sandbox: reading"),
        "the tool was refused: {sent}"
    );
}
