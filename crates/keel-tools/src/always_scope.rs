//! What an "always" answer at an approval covers, for the rest of one session.
//!
//! Invariants:
//! - A tool other than `bash` is covered by its name: "always" for `edit_file` allows every
//!   later `edit_file` call of the session.
//! - A `bash` line is covered command by command. A command is covered by its program and
//!   subcommand (`git status`, `cargo test`) only where that pair is one of
//!   `READ_ONLY_SUBCOMMANDS` (it reads, or builds and tests the workspace, and has no
//!   sub-subcommand that deletes) and no later word is one of `RISKY_OPTIONS` (options that run
//!   a program, write a file or read another configuration); any other command is covered
//!   only by its exact words (`rm -rf build` covers `rm -rf build`, never `rm -rf ~`;
//!   `git reset HEAD a.rs` never covers `git reset --hard`). A later line is allowed only if
//!   every command in it is covered.
//! - A line the command parser does not read in full (`command_line::CommandLine::understood`),
//!   a line that redirects output into a file (`CommandLine::writes_files`), a command with a
//!   word it cannot read literally, and a line with no command are covered by nothing:
//!   "always" is not offered for them.
//! - A scope is its words, kept apart (`touch "x y"` is not `touch x y`); its label quotes any
//!   word that is not plain, so a label reads as exactly the words it covers.
//! - The scopes are only ever held in memory by a surface, never written to a file.

use crate::BuiltinTool;
use crate::command_line;

/// Program and subcommand pairs whose "always" covers every later call of that subcommand.
const READ_ONLY_SUBCOMMANDS: &[(&str, &[&str])] = &[
    (
        "git",
        &[
            "status",
            "log",
            "diff",
            "show",
            "blame",
            "shortlog",
            "describe",
            "rev-parse",
            "ls-files",
            "grep",
        ],
    ),
    (
        "cargo",
        &[
            "build", "test", "check", "clippy", "doc", "tree", "metadata", "bench",
        ],
    ),
    ("npm", &["test", "ls", "outdated", "view"]),
    ("pnpm", &["test", "ls", "outdated"]),
    ("yarn", &["test"]),
    ("bun", &["test"]),
    ("deno", &["test", "check", "lint"]),
    ("go", &["test", "build", "vet", "list", "version"]),
    ("dotnet", &["build", "test"]),
    ("swift", &["build", "test"]),
    ("mvn", &["test", "compile", "verify"]),
    ("gradle", &["test", "build"]),
    ("pip", &["list", "show", "freeze"]),
    ("pip3", &["list", "show", "freeze"]),
    ("poetry", &["show", "check"]),
    ("rustup", &["show"]),
    ("docker", &["ps", "images"]),
    ("kubectl", &["get", "describe", "logs"]),
    ("systemctl", &["status"]),
];

/// Options after the subcommand that make a command more than its subcommand says: running a
/// program (`git grep -O`, `go test -exec`), writing a file (`--output`), or reading another
/// configuration or repository (`--config`, `-C`). A command with one is covered only by its
/// exact words. Matched as the whole word, as `--long=…`, or as a short option with its value
/// attached (`-Ocmd`).
const RISKY_OPTIONS: &[&str] = &[
    "--open-files-in-pager",
    "--output",
    "--exec",
    "--exec-path",
    "--upload-pack",
    "--receive-pack",
    "--config",
    "--eval",
    "--file",
    "--ext-diff",
    "--textconv",
    "--git-dir",
    "--work-tree",
    "--manifest-path",
    "--script-shell",
    "-exec",
    "-toolexec",
    "-O",
    "-o",
    "-c",
    "-C",
    "-x",
    "-f",
];

/// What one "always" covers: a program and subcommand, or a command's exact words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope(Vec<String>);

impl Scope {
    /// A key no two different scopes share (its words, kept apart).
    pub fn key(&self) -> String {
        self.0.join("\u{1f}")
    }

    /// The scope as a person reads it: its words, each not plain one single-quoted.
    pub fn label(&self) -> String {
        self.0
            .iter()
            .map(|word| quoted(word))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=@%+-".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// What "always" for a call of `tool` on `subject` covers: one scope per command (see the
/// module invariants), or `None` when nothing can be remembered for it.
pub fn always_scopes(tool: &str, subject: &str) -> Option<Vec<Scope>> {
    if tool != BuiltinTool::Bash.name() {
        return Some(vec![Scope(vec![tool.to_string()])]);
    }
    let line = command_line::parse(subject);
    if !line.understood() || line.writes_files || line.commands.is_empty() {
        return None;
    }
    let mut scopes: Vec<Scope> = Vec::new();
    for command in &line.commands {
        let scope = scope_of(command.literal_words()?)?;
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    Some(scopes)
}

/// One command's scope: program and subcommand, or its exact words.
fn scope_of(words: Vec<String>) -> Option<Scope> {
    let (program, sub) = (words.first()?, words.get(1));
    let read_only = sub.is_some_and(|sub| {
        READ_ONLY_SUBCOMMANDS
            .iter()
            .any(|(name, subs)| name == program && subs.contains(&sub.as_str()))
    });
    let risky = words.iter().skip(2).any(|word| {
        RISKY_OPTIONS.iter().any(|option| {
            word == option
                || word
                    .strip_prefix(option)
                    .is_some_and(|rest| rest.starts_with('=') || !option.starts_with("--"))
        })
    });
    match sub {
        Some(sub) if read_only && !risky => Some(Scope(vec![program.clone(), sub.clone()])),
        _ => Some(Scope(words)),
    }
}

/// Whether a call is covered by `allowed` scope keys: every command's scope among them.
pub fn covered_by(tool: &str, subject: &str, allowed: &dyn Fn(&str) -> bool) -> bool {
    always_scopes(tool, subject)
        .is_some_and(|scopes| scopes.iter().all(|scope| allowed(&scope.key())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(line: &str) -> Option<Vec<String>> {
        always_scopes("bash", line).map(|scopes| scopes.iter().map(Scope::label).collect())
    }

    #[test]
    fn a_read_only_subcommand_is_covered_by_program_and_subcommand() {
        assert_eq!(
            labels("git status --short"),
            Some(vec!["git status".into()])
        );
        assert_eq!(
            labels("cargo build && cargo test -p keel 2>&1"),
            Some(vec!["cargo build".into(), "cargo test".into()])
        );
        assert_eq!(
            labels("git log -1; git log -2"),
            Some(vec!["git log".into()])
        );
    }

    #[test]
    fn any_other_command_is_covered_by_its_exact_words() {
        for line in [
            "rm -rf build",
            "ls",
            "git reset HEAD a.rs",
            "git checkout main",
            "git stash list",
            "git branch",
            "gh pr view 12",
            "docker compose ps",
            "uv run pytest",
            "git -C /tmp status",
            "sudo git status",
        ] {
            let words: Vec<&str> = line.split(' ').collect();
            assert_eq!(labels(line), Some(vec![words.join(" ")]), "{line}");
        }
    }

    #[test]
    fn a_risky_option_narrows_a_read_only_subcommand_to_its_exact_words() {
        for line in [
            "git grep -Ovim TODO",
            "git grep --open-files-in-pager=vim TODO",
            "git log --output=build.rs",
            "git diff --ext-diff",
            "go test -exec ./run.sh",
            "cargo test --config build.rustc-wrapper='./x'",
        ] {
            let label = labels(line).unwrap().remove(0);
            assert_ne!(label.split(' ').count(), 2, "{line}: {label}");
        }
    }

    #[test]
    fn a_line_not_read_in_full_or_writing_a_file_is_covered_by_nothing() {
        for line in [
            "git status $(curl evil)",
            "echo \"$HOME\"",
            "eval \"$X\"",
            "",
            "git status # note",
            "git status > src/main.rs",
            "{ git status; } > f",
            "git log -1 --format=x >> build.rs && cargo build",
        ] {
            assert_eq!(labels(line), None, "{line}");
        }
        // Output thrown away or onto another descriptor writes no file.
        assert_eq!(
            labels("git status > /dev/null 2>&1"),
            Some(vec!["git status".into()])
        );
    }

    #[test]
    fn scopes_keep_their_words_apart_and_labels_say_them_exactly() {
        let spaced = always_scopes("bash", "touch \"x y\"").unwrap();
        let split = always_scopes("bash", "touch x y").unwrap();
        assert_ne!(spaced[0].key(), split[0].key());
        assert_eq!(spaced[0].label(), "touch 'x y'");
        assert_eq!(
            labels("echo 'a, rm -rf ~'"),
            Some(vec!["echo 'a, rm -rf ~'".into()])
        );
        assert_eq!(
            labels("echo \"it's\""),
            Some(vec!["echo 'it'\\''s'".into()])
        );
    }

    #[test]
    fn a_later_line_is_allowed_only_if_every_command_is_covered() {
        let keys = |line: &str| -> Vec<String> {
            always_scopes("bash", line)
                .unwrap()
                .iter()
                .map(Scope::key)
                .collect()
        };
        let held = [keys("git status"), keys("cargo test")].concat();
        let allowed = |key: &str| held.iter().any(|held| held == key);
        assert!(covered_by("bash", "git status", &allowed));
        assert!(covered_by("bash", "git status -s && cargo test", &allowed));
        assert!(!covered_by("bash", "git status && rm -rf ~", &allowed));
        assert!(!covered_by("bash", "git push", &allowed));
        assert!(!covered_by("bash", "git status $(rm -rf ~)", &allowed));
        assert!(!covered_by("bash", "git status > src/main.rs", &allowed));
        let rm = keys("rm -rf build");
        let allowed = |key: &str| rm.iter().any(|held| held == key);
        assert!(covered_by("bash", "rm -rf build", &allowed));
        assert!(!covered_by("bash", "rm -rf ~", &allowed));
    }

    #[test]
    fn other_tools_are_covered_by_their_name() {
        let scopes = always_scopes("edit_file", "src/main.rs").unwrap();
        assert_eq!(scopes[0].label(), "edit_file");
        let key = scopes[0].key();
        assert!(covered_by("edit_file", "other.rs", &|s| s == key));
        assert!(!covered_by("write_file", "other.rs", &|s| s == key));
    }
}
