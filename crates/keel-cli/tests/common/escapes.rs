//! The sandbox tests' fixture: a workspace that is the user's home (`~`, as when keel runs
//! in it), inside keel's home — so `~/.ssh` is inside the workspace and hidden by the sandbox,
//! and keel's state is outside it — with a directory outside it that must not change.

use super::*;
use serde_json::{Value, json};
use std::path::PathBuf;

pub const KEY_MATERIAL: &str = "PRIVATE-KEY-MATERIAL-5e1f";

pub struct Escapes {
    pub home: Home,
    /// The scripted model (`script`); its scenario file's directory is kept with it.
    pub mock: Option<(tempfile::TempDir, MockProcess)>,
    /// `$HOME` and the workspace.
    pub me: PathBuf,
    /// Outside the workspace: nothing may change here.
    pub outside: PathBuf,
}

impl Escapes {
    /// The places: a workspace that is `~`, with a key, a `.git` and a `keel.toml`, and a
    /// directory outside it.
    pub fn new() -> Escapes {
        let home = Home::new("");
        let me = home.path().join("me");
        let outside = home.path().join("outside");
        std::fs::create_dir_all(me.join(".ssh")).unwrap();
        std::fs::write(me.join(".ssh/id_rsa"), KEY_MATERIAL).unwrap();
        std::fs::create_dir_all(me.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(me.join(".git/info")).unwrap();
        std::fs::write(me.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(me.join("keel.toml"), "max_rounds = 60\n").unwrap();
        std::fs::write(me.join("mine.txt"), "mine").unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("victim"), "untouched").unwrap();
        Escapes {
            home,
            mock: None,
            me,
            outside,
        }
    }

    /// The model's script: `steps`, then a last answer; `config` added to the user's file.
    pub fn script(&mut self, steps: Vec<Value>, config: &str) {
        let mut steps = steps;
        steps.push(json!({"say": "done"}));
        let scenario = json!({ "steps": steps }).to_string();
        self.mock = Some(repoint(&self.home, "chat", &scenario, config));
    }

    pub fn mock(&self) -> &MockProcess {
        &self.mock.as_ref().expect("scripted").1
    }

    pub fn keel(&self, args: &[&str]) -> std::process::Command {
        let mut command = self.home.keel(args);
        command.current_dir(&self.me).env("HOME", &self.me);
        command
    }

    pub fn run(&self, args: &[&str]) -> Run {
        Run::from(self.keel(args).output().unwrap())
    }

    /// What the model was given for each tool call, from the last request it got.
    pub fn results(&self) -> Vec<String> {
        let requests = self.mock().requests();
        let last = requests.last().expect("keel asked the model");
        let body: Value = serde_json::from_str(last["body"].as_str().unwrap()).unwrap();
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|message| message["role"] == "tool")
            .map(|message| message["content"].as_str().unwrap().to_string())
            .collect()
    }

    /// The receipts of the session `run` worked in, as `keel session show --json` has them.
    pub fn receipts(&self, run: &Run) -> Vec<Value> {
        let session = run.events()[0]["session_id"].as_str().unwrap().to_string();
        let shown = self.run(&["session", "show", &session, "--json"]);
        let value: Value = serde_json::from_str(&shown.stdout()).unwrap();
        value["receipts"].as_array().unwrap().clone()
    }

    pub fn victim_untouched(&self) -> bool {
        std::fs::read_to_string(self.outside.join("victim")).unwrap() == "untouched"
    }
}

pub fn bash(command: impl Into<String>) -> Value {
    json!({"tool": "bash", "args": {"command": command.into()}})
}

/// A refused bash command: it failed, and the model is told what the sandbox forbids.
pub fn refused_by_the_sandbox(label: &str, result: &str) {
    assert!(
        result.contains("[exit code") && !result.contains("[exit code 0]"),
        "{label}: the command failed: {result}"
    );
    assert!(
        result.contains("keel's sandbox"),
        "{label}: the result says why: {result}"
    );
}
