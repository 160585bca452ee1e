//! What an "always" answer at an approval covers, for the rest of one session.
//!
//! Invariants:
//! - A tool other than `bash` is covered by its name: "always" for `edit_file` allows every
//!   later `edit_file` call of the session.
//! - A `bash` line is covered command by command, each by its program and subcommand
//!   (`git status`, `cargo test`) when the program is one of `SUBCOMMAND_PROGRAMS` and its
//!   next word is a subcommand (not an option); any other command only by its exact words
//!   (`rm -rf build` covers `rm -rf build`, never `rm -rf ~`). A later line is allowed only if
//!   every command in it is covered.
//! - A line the command parser does not read in full (`command_line::CommandLine::understood`),
//!   a command with a word it cannot read literally, and a line with no command are covered by
//!   nothing: "always" is not offered for them.
//! - The scopes are only ever held in memory by a surface, never written to a file.

use crate::BuiltinTool;
use crate::command_line;

/// Programs whose second word is a subcommand: "always" for `git status` covers every
/// `git status …`, not every `git …`.
const SUBCOMMAND_PROGRAMS: &[&str] = &[
    "apt",
    "apt-get",
    "brew",
    "bun",
    "bundle",
    "cargo",
    "cmake",
    "composer",
    "conda",
    "deno",
    "docker",
    "dotnet",
    "gem",
    "gh",
    "git",
    "go",
    "gradle",
    "helm",
    "just",
    "kubectl",
    "make",
    "mvn",
    "npm",
    "pip",
    "pip3",
    "pnpm",
    "poetry",
    "rustup",
    "swift",
    "systemctl",
    "terraform",
    "uv",
    "yarn",
];

/// What "always" for a call of `tool` on `subject` covers: one scope per command (see the
/// module invariants), or `None` when nothing can be remembered for it.
pub fn always_scopes(tool: &str, subject: &str) -> Option<Vec<String>> {
    if tool != BuiltinTool::Bash.name() {
        return Some(vec![tool.to_string()]);
    }
    let line = command_line::parse(subject);
    if !line.understood() || line.commands.is_empty() {
        return None;
    }
    let mut scopes: Vec<String> = Vec::new();
    for command in &line.commands {
        let words = command.literal_words()?;
        let scope = scope_of(&words)?;
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    Some(scopes)
}

/// One command's scope: program and subcommand, or its exact words.
fn scope_of(words: &[String]) -> Option<String> {
    let program = words.first()?;
    match words.get(1) {
        Some(sub)
            if SUBCOMMAND_PROGRAMS.contains(&program.as_str())
                && !sub.starts_with('-')
                && !sub.is_empty() =>
        {
            Some(format!("{program} {sub}"))
        }
        _ => Some(words.join(" ")),
    }
}

/// Whether a command line is covered by `allowed` scopes: every command's scope among them.
pub fn covered_by(tool: &str, subject: &str, allowed: &dyn Fn(&str) -> bool) -> bool {
    always_scopes(tool, subject).is_some_and(|scopes| scopes.iter().all(|scope| allowed(scope)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scopes(line: &str) -> Option<Vec<String>> {
        always_scopes("bash", line)
    }

    #[test]
    fn a_program_with_subcommands_is_covered_by_program_and_subcommand() {
        assert_eq!(
            scopes("git status --short"),
            Some(vec!["git status".into()])
        );
        assert_eq!(
            scopes("cargo build && cargo test -p keel"),
            Some(vec!["cargo build".into(), "cargo test".into()])
        );
        // The same scope twice is one scope.
        assert_eq!(scopes("git add a; git add b"), Some(vec!["git add".into()]));
    }

    #[test]
    fn any_other_command_is_covered_by_its_exact_words() {
        assert_eq!(scopes("rm -rf build"), Some(vec!["rm -rf build".into()]));
        assert_eq!(scopes("ls"), Some(vec!["ls".into()]));
        // An option before the subcommand: no subcommand is read, the words are the scope.
        assert_eq!(
            scopes("git -C /tmp status"),
            Some(vec!["git -C /tmp status".into()])
        );
        assert_eq!(
            scopes("sudo git status"),
            Some(vec!["sudo git status".into()])
        );
    }

    #[test]
    fn a_line_not_read_in_full_is_covered_by_nothing() {
        assert_eq!(scopes("git status $(curl evil)"), None);
        assert_eq!(scopes("echo \"$HOME\""), None);
        assert_eq!(scopes("eval \"$X\""), None);
        assert_eq!(scopes(""), None);
        assert_eq!(scopes("git status # note"), None);
    }

    #[test]
    fn a_later_line_is_allowed_only_if_every_command_is_covered() {
        let allowed = |scope: &str| scope == "git status" || scope == "cargo test";
        assert!(covered_by("bash", "git status", &allowed));
        assert!(covered_by("bash", "git status -s && cargo test", &allowed));
        assert!(!covered_by("bash", "git status && rm -rf ~", &allowed));
        assert!(!covered_by("bash", "git push", &allowed));
        assert!(!covered_by("bash", "git status $(rm -rf ~)", &allowed));
        let rm = |scope: &str| scope == "rm -rf build";
        assert!(covered_by("bash", "rm -rf build", &rm));
        assert!(!covered_by("bash", "rm -rf ~", &rm));
    }

    #[test]
    fn other_tools_are_covered_by_their_name() {
        assert_eq!(
            always_scopes("edit_file", "src/main.rs"),
            Some(vec!["edit_file".into()])
        );
        assert!(covered_by("edit_file", "other.rs", &|s| s == "edit_file"));
        assert!(!covered_by("write_file", "other.rs", &|s| s == "edit_file"));
    }
}
