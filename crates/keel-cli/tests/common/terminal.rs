//! `keel` under a real pseudo-terminal (util-linux `script`), typed at like a user would.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::{Home, KEEL};
use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// Start `keel` in a terminal and type each input, then wait until the screen shows its marker
/// in what came after the input was typed (or for the given pause when there is none); return
/// everything the terminal showed. A marker that does not appear within 20 s fails the test,
/// showing the screen.
pub fn interactive_until(home: &Home, inputs: &[(&str, Option<&str>, u64)]) -> String {
    interactive_session(home, inputs).0
}

/// `interactive_until`, also returning keel's exit code. An input `"\0wait-file:NAME"` waits
/// for NAME to appear in the home; `"\0signal:SIG"` sends SIG to keel instead of typing.
pub fn interactive_session(
    home: &Home,
    inputs: &[(&str, Option<&str>, u64)],
) -> (String, Option<i32>) {
    interactive_session_from(home, "/help for commands", inputs)
}

/// `interactive_session`, typing the first input once the screen shows `first_marker` (the
/// banner, or a question asked before it).
pub fn interactive_session_from(
    home: &Home,
    first_marker: &str,
    inputs: &[(&str, Option<&str>, u64)],
) -> (String, Option<i32>) {
    interactive_session_in(home, &home.path(), first_marker, inputs)
}

/// `interactive_session_from`, with `cwd` as the working directory (the workspace).
pub fn interactive_session_in(
    home: &Home,
    cwd: &Path,
    first_marker: &str,
    inputs: &[(&str, Option<&str>, u64)],
) -> (String, Option<i32>) {
    interactive_session_with_env(home, cwd, &[], first_marker, inputs)
}

/// `interactive_session_in`, with more environment variables for keel.
pub fn interactive_session_with_env(
    home: &Home,
    cwd: &Path,
    env: &[(&str, &str)],
    first_marker: &str,
    inputs: &[(&str, Option<&str>, u64)],
) -> (String, Option<i32>) {
    // The line mode: these tests read its lines (the live TUI has tests of its own, under tmux).
    session_under_script(home, cwd, env, "--plain", first_marker, inputs)
}

/// The live TUI under `script`, for what tmux cannot play: a terminal's own answers to keel's
/// questions, typed as bytes (the raw bytes keel writes are in the screen returned).
pub fn live_tui_session(
    home: &Home,
    inputs: &[(&str, Option<&str>, u64)],
) -> (String, Option<i32>) {
    session_under_script(home, &home.path(), &[], "", "/help for commands", inputs)
}

/// `keel` (no flags) under `script` with `env` over the harness's own (`TERM` included).
pub fn terminal_session_with_env(
    home: &Home,
    env: &[(&str, &str)],
    inputs: &[(&str, Option<&str>, u64)],
) -> (String, Option<i32>) {
    session_under_script(home, &home.path(), env, "", "/help for commands", inputs)
}

fn session_under_script(
    home: &Home,
    cwd: &Path,
    env: &[(&str, &str)],
    flags: &str,
    first_marker: &str,
    inputs: &[(&str, Option<&str>, u64)],
) -> (String, Option<i32>) {
    use std::io::Read;
    use std::sync::{Arc, Mutex};
    let mut child = std::process::Command::new("script")
        .args(["-qec", &format!("{KEEL} {flags}"), "/dev/null"])
        .current_dir(cwd)
        .env("KEEL_HOME", home.path())
        .env("DEEPSEEK_API_KEY", "test-key-1")
        .env("TERM", "xterm")
        .env("NO_COLOR", "1")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let screen = Arc::new(Mutex::new(String::new()));
    let writer = screen.clone();
    let reader = std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buffer) {
            if n == 0 {
                break;
            }
            writer
                .lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buffer[..n]));
        }
    });
    // Wait until `marker` shows after byte `from` of the screen; fail, showing it, if it does
    // not within 20 s.
    let wait_for = |marker: &str, from: usize| {
        let started = std::time::Instant::now();
        loop {
            let shown = screen.lock().unwrap();
            if shown
                .get(from..)
                .is_some_and(|after| after.contains(marker))
            {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the terminal never showed {marker:?}; it showed:\n{}",
                *shown
            );
            drop(shown);
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for(first_marker, 0);
    for (text, marker, pause_ms) in inputs {
        let from = screen.lock().unwrap().len();
        if let Some(name) = text.strip_prefix("\u{0}wait-file:") {
            let started = std::time::Instant::now();
            while !home.path().join(name).exists() {
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "{name} never appeared; the terminal showed:\n{}",
                    screen.lock().unwrap()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        } else if let Some(signal) = text.strip_prefix("\u{0}signal:") {
            let pid = keel_pid(&home.path()).expect("keel is running");
            std::process::Command::new("kill")
                .args([format!("-{signal}"), pid])
                .status()
                .unwrap();
        } else {
            stdin.write_all(text.as_bytes()).unwrap();
            stdin.flush().unwrap();
        }
        match marker {
            Some(marker) => wait_for(marker, from),
            None => std::thread::sleep(Duration::from_millis(*pause_ms)),
        }
    }
    drop(stdin);
    let status = child.wait().ok().and_then(|status| status.code());
    let _ = reader.join();
    let screen = screen.lock().unwrap().clone();
    (screen, status)
}

/// The pid of the `keel` running under `script` with `home` as its KEEL_HOME.
pub fn keel_pid(home: &Path) -> Option<String> {
    let output = std::process::Command::new("pgrep")
        .args(["-x", "keel"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                String::from_utf8_lossy(&environ).contains(&format!("KEEL_HOME={}", home.display()))
            })
        })
        .map(str::to_string)
}

/// Run `keel ARGS` under `script`, which gives it a pseudo-terminal; returns what it drew.
pub fn run_in_terminal(home: &Home, args: &[&str], no_color: bool) -> String {
    let mut command_line = String::from(KEEL);
    for arg in args {
        command_line.push_str(&format!(" '{arg}'"));
    }
    let mut command = std::process::Command::new("script");
    command
        .args(["-qec", &command_line, "/dev/null"])
        .current_dir(home.path())
        .env("KEEL_HOME", home.path())
        .env("DEEPSEEK_API_KEY", "test-key-1")
        .env("TERM", "xterm")
        .stdin(Stdio::null());
    if no_color {
        command.env("NO_COLOR", "1");
    } else {
        command.env_remove("NO_COLOR");
    }
    let output = command.output().expect("script(1) from util-linux");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What an 80-column terminal shows after `bytes` (tall enough that nothing scrolls away).
pub fn screen_of(bytes: &str) -> vt100::Screen {
    let mut terminal = vt100::Parser::new(500, 80, 0);
    terminal.process(bytes.as_bytes());
    terminal.screen().clone()
}
