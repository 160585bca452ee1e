//! `keel`'s live TUI under tmux: a real terminal emulator with a screen and a scrollback, typed
//! at with tmux's own key names, read back with `capture-pane` (text, or text with colours).
//! Each test gets a private tmux server (its own socket), killed when it ends.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::{Home, KEEL};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub struct Tmux {
    socket: tempfile::TempDir,
}

/// Whether tmux is here; under CI (`CI` set) its absence fails the test instead of skipping it.
pub fn available() -> bool {
    let found = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "tmux is missing: .ci/run installs it (apt-get install tmux)"
        );
        eprintln!("skipped: tmux is not installed");
    }
    found
}

impl Tmux {
    /// `keel ARGS` in a `width` × `height` terminal, in `cwd`, with `home` as KEEL_HOME.
    pub fn start(home: &Home, cwd: &Path, args: &[&str], size: (u16, u16)) -> Tmux {
        Tmux::start_with_env(home, cwd, args, size, &[])
    }

    /// `start`, with more environment variables for keel.
    pub fn start_with_env(
        home: &Home,
        cwd: &Path,
        args: &[&str],
        size: (u16, u16),
        env: &[(&str, &str)],
    ) -> Tmux {
        let tmux = Tmux {
            socket: tempfile::tempdir().unwrap(),
        };
        let command = format!(
            // After keel: its exit code, and whether it gave the terminal back in line mode.
            "{KEEL} {}; echo \"[keel exited: $?]\"; echo \"[terminal: $(stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' ')]\"; sleep 60",
            args.join(" ")
        );
        let env: Vec<String> = env
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        let mut with_env: Vec<&str> = Vec::new();
        for variable in &env {
            with_env.extend(["-e", variable]);
        }
        let out = tmux.run(
            &[
                &[
                    "new-session",
                    "-d",
                    "-s",
                    "keel",
                    "-x",
                    &size.0.to_string(),
                    "-y",
                    &size.1.to_string(),
                    "-c",
                    cwd.to_str().unwrap(),
                    "-e",
                    &format!("KEEL_HOME={}", home.path().display()),
                    "-e",
                    "DEEPSEEK_API_KEY=test-key-1",
                    "-e",
                    "NO_COLOR=",
                ][..],
                &with_env,
                &["sh", "-c", &command],
            ]
            .concat(),
        );
        assert!(
            out.status.success(),
            "tmux: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tmux.run(&["set-option", "-g", "history-limit", "5000"]);
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(self.socket.path().join("socket"))
            .args(args)
            .output()
            .unwrap()
    }

    /// Type `text` literally.
    pub fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-t", "keel", "-l", text]);
    }

    /// Paste `text` as a terminal does (bracketed, when keel asked for it).
    pub fn paste(&self, text: &str) {
        self.run(&["set-buffer", "-b", "keel-paste", "--", text]);
        self.run(&["paste-buffer", "-p", "-b", "keel-paste", "-t", "keel"]);
    }

    /// Press keys by tmux's names (`Enter`, `Escape`, `C-d`, `M-Enter`, `Tab`, `y`).
    pub fn press(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "keel"];
        args.extend(keys);
        self.run(&args);
    }

    /// Answer the approval on screen with `key`, after the pause in which keys typed as it
    /// appeared do not count as answers.
    pub fn answer(&self, key: &str) {
        std::thread::sleep(Duration::from_millis(350));
        self.press(&[key]);
    }

    /// What the screen shows now (text).
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "keel"]).stdout)
            .into_owned()
    }

    /// The screen with its colours (SGR sequences as tmux reproduces them).
    pub fn screen_with_colors(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-e", "-p", "-t", "keel"]).stdout)
            .into_owned()
    }

    /// The scrollback and the screen (text).
    pub fn everything(&self) -> String {
        String::from_utf8_lossy(
            &self
                .run(&["capture-pane", "-p", "-S", "-", "-t", "keel"])
                .stdout,
        )
        .into_owned()
    }

    /// The scrollback and the screen, each line the terminal wrapped joined again (`-J`): the
    /// lines as they were written, whatever the width is now.
    pub fn history(&self) -> String {
        String::from_utf8_lossy(
            &self
                .run(&["capture-pane", "-p", "-J", "-S", "-", "-t", "keel"])
                .stdout,
        )
        .into_owned()
    }

    /// keel in `home` with a second provider that has a key (MiMo's, so `/model` offers a
    /// pick), ready at its prompt.
    pub fn start_with_a_second_model(home: &Home) -> Tmux {
        home.append_config("[providers.mimo]\nregion = \"domestic\"\n");
        let tmux = Tmux::start_with_env(
            home,
            &home.path(),
            &[],
            (120, 40),
            &[("MIMO_API_KEY", "test-mimo")],
        );
        tmux.wait_for("mock-model · ask");
        tmux
    }

    /// Wait until the scrollback and screen show `marker`; fail, showing them, after 20 s.
    pub fn wait_for(&self, marker: &str) -> String {
        let started = Instant::now();
        loop {
            let shown = self.everything();
            if shown.contains(marker) {
                return shown;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the terminal never showed {marker:?}; it showed:\n{shown}"
            );
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    /// Wait until `marker` is on the screen and the turn has ended (the status line no longer
    /// says Esc stops it).
    pub fn wait_for_turn_end(&self, marker: &str) -> String {
        self.wait_until_screen(&format!("{marker:?} and the turn's end"), |screen| {
            let status = screen.lines().rev().find(|line| !line.trim().is_empty());
            screen.contains(marker) && status.is_some_and(|line| !line.contains("Esc stops"))
        })
    }

    /// Wait until the screen (not the scrollback) satisfies `test`; fail, showing it, after 10 s.
    pub fn wait_until_screen(&self, what: &str, test: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let screen = self.screen();
            if test(&screen) {
                return screen;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the screen never showed {what}; it showed:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    pub fn resize(&self, width: u16, height: u16) {
        self.run(&[
            "resize-window",
            "-t",
            "keel",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}
