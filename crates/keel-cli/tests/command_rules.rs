//! `bash(...)` permission rules end to end: the real binary, the real bash tool, `keel mock`.
//!
//! Invariants checked here:
//! - An allow rule allows a line only if a shell parser read all of it and every simple
//!   command matches: a comment holding a quote, ANSI-C `$'…'` quoting, a here-document or a
//!   process substitution cannot carry `touch PWNED` past `allow = ["bash(cargo *)"]`.
//! - A deny rule fails closed: a word it cannot read (`$'rm'`), code hidden in `eval`, a
//!   here-document fed to `sh` or a process substitution cannot get past it.
//! - A plain list of allowed commands still runs without asking.

use crate::common::*;
use std::os::unix::fs::PermissionsExt;

/// `keel ARGS` in `home`, with a fake `cargo` first on the `PATH` that logs its arguments to
/// `cargo.log` (so an allowed `cargo build` is fast and touches nothing else).
fn run_with_fake_cargo(home: &Home, args: &[&str]) -> Run {
    let bin = home.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let cargo = bin.join("cargo");
    std::fs::write(&cargo, "#!/bin/sh\necho \"$@\" >> cargo.log\n").unwrap();
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Run::from(home.keel(args).env("PATH", path).output().unwrap())
}

#[test]
fn an_allow_rule_lets_nothing_it_cannot_read_run_without_asking() {
    let commands = [
        "cargo build # it's fine\ntouch PWNED",
        "cargo test $'\\'' ; touch PWNED #'",
        "cargo test $'\\x3b' touch PWNED",
        "cat <<EOF\n$(touch PWNED)\nEOF",
        "cat <(touch PWNED)",
        // Every command matches, but the here-document is the code `sh` runs.
        "sh -s <<'EOF'\ntouch PWNED\nEOF",
        "cargo build && cargo test",
    ];
    let (home, _mock) = scripted("chat", &commands_scenario(&commands), "");
    let allow = r#"allow = ["bash(cargo *)", "bash(cat *)", "bash(sh -s*)"]"#;
    home.append_config(&format!("[permissions]\n{allow}\n"));
    // Headless and in `ask` mode: a call that needs approval is denied.
    let run = run_with_fake_cargo(&home, &["run", "--json", "go"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        result_states(&run),
        [
            "denied",
            "denied",
            "denied",
            "denied",
            "denied",
            "denied",
            "completed"
        ],
        "{}",
        run.stdout()
    );
    assert!(!home.path().join("PWNED").exists(), "nothing ran touch");
    assert_eq!(
        std::fs::read_to_string(home.path().join("cargo.log")).unwrap(),
        "build\ntest\n",
        "the allowed list ran"
    );
}

#[test]
fn a_deny_rule_holds_against_what_it_cannot_read() {
    let commands = [
        "$'rm' -rf victim",
        "cargo test $'\\'' ; rm -rf victim #'",
        "eval \"$(printf 'rm -rf victim')\"",
        "sh <<EOF\ntouch PWNED\nEOF",
        "cat <(touch PWNED)",
        "ls victim",
    ];
    let (home, _mock) = scripted("chat", &commands_scenario(&commands), "");
    home.append_config("[permissions]\ndeny = [\"bash(rm -rf *)\", \"bash(touch *)\"]\n");
    std::fs::create_dir(home.path().join("victim")).unwrap();
    // `--yes` approves everything no rule denies.
    let run = home.run(&["run", "--yes", "--json", "go"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        result_states(&run),
        [
            "denied",
            "denied",
            "denied",
            "denied",
            "denied",
            "completed"
        ],
        "{}",
        run.stdout()
    );
    assert!(home.path().join("victim").is_dir(), "nothing was removed");
    assert!(!home.path().join("PWNED").exists(), "nothing ran touch");
}
