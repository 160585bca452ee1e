//! Tab completion and multi-line input for the interactive session's line editor.
//!
//! Invariants:
//! - Completion only suggests: nothing is read from a file and nothing is sent until Enter.
//! - A slash command at the start of the line completes from the controller's list; `@path`
//!   anywhere completes from the workspace's files (the `ignore` walker: `.gitignore`
//!   respected, in a git repository or not; hidden files skipped), matched fuzzily (the typed
//!   characters in order), best first. The file list is bounded, and taken again when it is
//!   older than `FILES_FRESH`, so files made during the session complete too.
//! - Alt+Enter inserts a newline; a pasted text keeps its lines; Enter sends. (Ctrl-J stays
//!   Enter in line mode: what is typed while a turn runs reaches the editor with its Enter
//!   already turned into a line feed by the terminal, and must still send.)

use keel_agent::SLASH_COMMANDS;
use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Cmd, Context, Helper, KeyCode, KeyEvent, Modifiers};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most files `@` completion looks at, and the most it offers.
const MOST_FILES: usize = 20_000;
const MOST_OFFERED: usize = 30;
/// How long a listing of the workspace's files is used before it is taken again.
const FILES_FRESH: Duration = Duration::from_secs(2);

pub struct LineHelper {
    workspace: PathBuf,
    /// The last listing of the workspace's files, and when it was taken.
    files: Mutex<Option<(Instant, Arc<Vec<String>>)>>,
    fresh_for: Duration,
    /// The session's custom commands, with their slash.
    custom: Vec<String>,
}

impl LineHelper {
    /// Completion in `workspace`, where `custom` are the session's custom commands.
    pub fn new(workspace: PathBuf, custom: Vec<String>) -> LineHelper {
        LineHelper {
            workspace,
            files: Mutex::new(None),
            fresh_for: FILES_FRESH,
            custom,
        }
    }

    /// Completion for `controller`'s session.
    pub fn for_session(controller: &keel_agent::Controller) -> LineHelper {
        let custom = controller
            .services()
            .commands()
            .list()
            .map(|command| format!("/{}", command.name))
            .collect();
        LineHelper::new(controller.settings().workspace.clone(), custom)
    }

    /// What can replace the word before `pos` in `line`: where it starts, and (shown,
    /// replacement) pairs, best first. A slash command at the start of the line, or `@path`.
    pub fn candidates(&self, line: &str, pos: usize) -> (usize, Vec<(String, String)>) {
        self.candidates_with(line, pos, &|_| Vec::new())
    }

    /// `candidates`, and a slash command's argument from `arguments(command)` (session ids,
    /// models, recovery ids: what the surface knows).
    pub fn candidates_with(
        &self,
        line: &str,
        pos: usize,
        arguments: &dyn Fn(&str) -> Vec<String>,
    ) -> (usize, Vec<(String, String)>) {
        let before = &line[..pos];
        let start = before.rfind(char::is_whitespace).map_or(0, |at| {
            at + before[at..].chars().next().map_or(1, char::len_utf8)
        });
        let word = &before[start..];
        let mut words = before[..start].split_whitespace();
        if let (Some(command), None) = (words.next(), words.next())
            && command.starts_with('/')
            && before.starts_with('/')
            && !word.starts_with('@')
        {
            let found: Vec<(String, String)> = arguments(command)
                .into_iter()
                .filter(|item| item.starts_with(word))
                .map(|item| (item.clone(), item))
                .collect();
            return (start, found);
        }
        if start == 0 && word.starts_with('/') {
            let found = command_candidates(word, &self.custom)
                .into_iter()
                .map(|name| (name.clone(), format!("{name} ")))
                .collect();
            return (0, found);
        }
        if let Some(typed) = word.strip_prefix('@') {
            let found = path_candidates(typed, &self.files())
                .into_iter()
                .map(|path| (path.clone(), format!("@{path}")))
                .collect();
            return (start, found);
        }
        (pos, Vec::new())
    }

    fn files(&self) -> Arc<Vec<String>> {
        let mut held = self
            .files
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((taken, files)) = held.as_ref()
            && taken.elapsed() < self.fresh_for
        {
            return files.clone();
        }
        let files = Arc::new(self.list_files());
        *held = Some((Instant::now(), files.clone()));
        files
    }

    fn list_files(&self) -> Vec<String> {
        ignore::WalkBuilder::new(&self.workspace)
            // `.gitignore` counts in a workspace that is not (yet) a git repository too.
            .require_git(false)
            .build()
            .flatten()
            .filter(|entry| entry.file_type().is_some_and(|kind| kind.is_file()))
            .filter_map(|entry| {
                entry
                    .path()
                    .strip_prefix(&self.workspace)
                    .ok()
                    .map(|relative| relative.to_string_lossy().into_owned())
            })
            .take(MOST_FILES)
            .collect()
    }
}

/// How well `candidate` matches `typed` (its characters in order, case-insensitive): lower is
/// better; `None` when it does not match at all.
fn fuzzy_score(typed: &str, candidate: &str) -> Option<usize> {
    let lower = candidate.to_lowercase();
    let mut at = 0;
    let mut gaps = 0;
    for c in typed.to_lowercase().chars() {
        let found = lower[at..].find(c)?;
        gaps += found;
        at += found + c.len_utf8();
    }
    // Tighter matches first, then shorter paths, then matches in the file name.
    let in_name = lower
        .rsplit('/')
        .next()
        .is_some_and(|name| name.contains(&typed.to_lowercase()));
    Some(gaps * 4 + candidate.len() + if in_name { 0 } else { 100 })
}

/// Candidates for `typed` among `files`, best first.
pub fn path_candidates(typed: &str, files: &[String]) -> Vec<String> {
    let mut scored: Vec<(usize, &String)> = files
        .iter()
        .filter_map(|file| fuzzy_score(typed, file).map(|score| (score, file)))
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(MOST_OFFERED)
        .map(|(_, file)| file.clone())
        .collect()
}

/// The slash menu's entries for `controller`'s session: the built-in commands, then its
/// custom ones with their front matter's description (or their file), escaped when drawn.
pub fn menu_entries(controller: &keel_agent::Controller) -> Vec<keel_tui::MenuEntry> {
    let built_in = SLASH_COMMANDS
        .iter()
        .map(|(usage, about)| keel_tui::MenuEntry::from_usage(usage, about));
    let custom = controller
        .services()
        .commands()
        .list()
        .map(|command| keel_tui::MenuEntry {
            name: format!("/{}", command.name),
            arguments: "[ARGUMENTS]".into(),
            about: command
                .description
                .clone()
                .unwrap_or_else(|| format!("custom command ({})", command.path.display())),
        });
    built_in.chain(custom).collect()
}

/// The slash commands starting with `typed`: the built-in ones, then `custom`.
fn command_candidates(typed: &str, custom: &[String]) -> Vec<String> {
    SLASH_COMMANDS
        .iter()
        .filter_map(|(usage, _)| usage.split_whitespace().next())
        .chain(custom.iter().map(String::as_str))
        .filter(|name| name.starts_with(typed))
        .map(str::to_string)
        .collect()
}

impl Completer for LineHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let (start, found) = self.candidates(line, pos);
        Ok((
            start,
            found
                .into_iter()
                .map(|(display, replacement)| Pair {
                    display,
                    replacement,
                })
                .collect(),
        ))
    }
}

impl Hinter for LineHelper {
    type Hint = String;
}

impl Highlighter for LineHelper {}

impl Validator for LineHelper {}

impl Helper for LineHelper {}

/// Keys that insert a newline instead of sending.
pub fn bind_newline_keys<H: Helper, I: rustyline::history::History>(
    editor: &mut rustyline::Editor<H, I>,
) {
    editor.bind_sequence(KeyEvent(KeyCode::Enter, Modifiers::ALT), Cmd::Newline);
}

/// What a slash command's argument may be, from the session: `/resume` the workspace's session
/// ids, `/model` the price table's models of this provider (and the current one), the recovery
/// commands the pending recovery id.
pub fn argument_candidates(controller: &keel_agent::Controller, command: &str) -> Vec<String> {
    match command {
        "/resume" => crate::session_setup::open_host()
            .ok()
            .and_then(|host| {
                let workspace = controller.settings().workspace.display().to_string();
                host.sessions_for_workspace(&workspace).ok()
            })
            .map(|sessions| sessions.into_iter().map(|session| session.id).collect())
            .unwrap_or_default(),
        "/model" => {
            let settings = controller.settings();
            let provider = &settings.profile.name;
            let mut models: Vec<String> = keel_llm::price::known_models(&settings.profile.base_url)
                .into_iter()
                .map(|model| format!("{provider}/{model}"))
                .collect();
            let current = format!("{provider}/{}", settings.model);
            if !models.contains(&current) {
                models.insert(0, current);
            }
            models
        }
        "/recover-context" | "/continue-checks" => {
            controller.pending_recovery().into_iter().collect()
        }
        _ => Vec::new(),
    }
}

/// The longest start all of `items` share.
pub fn common_prefix<'a>(mut items: impl Iterator<Item = &'a str>) -> String {
    let Some(first) = items.next() else {
        return String::new();
    };
    let mut common = first.to_string();
    for item in items {
        let shared = common
            .char_indices()
            .zip(item.chars())
            .take_while(|((_, a), b)| a == b)
            .last()
            .map_or(0, |((at, c), _)| at + c.len_utf8());
        common.truncate(shared);
    }
    common
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_list_respects_gitignore_and_sees_new_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".gitignore"), "build/\nsecret.txt\n").unwrap();
        std::fs::write(dir.path().join("main.rs"), "").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "").unwrap();
        std::fs::create_dir(dir.path().join("build")).unwrap();
        std::fs::write(dir.path().join("build/out.rs"), "").unwrap();
        let mut helper = LineHelper::new(dir.path().to_path_buf(), Vec::new());
        let shown = |helper: &LineHelper, typed: &str| -> Vec<String> {
            let line = format!("look at @{typed}");
            helper
                .candidates(&line, line.len())
                .1
                .into_iter()
                .map(|(shown, _)| shown)
                .collect()
        };
        assert_eq!(shown(&helper, "rs"), ["main.rs"], "not a git repository");
        assert!(shown(&helper, "secret").is_empty());
        // A file made later completes once the listing is taken again.
        helper.fresh_for = Duration::ZERO;
        std::fs::write(dir.path().join("later.rs"), "").unwrap();
        assert_eq!(shown(&helper, "later"), ["later.rs"]);
    }

    #[test]
    fn paths_match_fuzzily_best_first() {
        let files: Vec<String> = [
            "src/main.rs",
            "src/render/markdown.rs",
            "docs/readme.md",
            "README.md",
            "crates/keel-cli/src/main.rs",
        ]
        .iter()
        .map(|file| file.to_string())
        .collect();
        let found = path_candidates("main", &files);
        assert_eq!(found, ["src/main.rs", "crates/keel-cli/src/main.rs"]);
        assert_eq!(path_candidates("rdme", &files)[0], "README.md");
        assert!(path_candidates("zzz", &files).is_empty());
    }

    #[test]
    fn a_commands_argument_completes_from_what_the_surface_knows() {
        let helper = LineHelper::new(PathBuf::from("/nonexistent"), Vec::new());
        let arguments = |command: &str| match command {
            "/resume" => vec![
                "0a1b2c".to_string(),
                "0a9f00".to_string(),
                "77ee11".to_string(),
            ],
            _ => Vec::new(),
        };
        let (start, found) = helper.candidates_with("/resume 0a", 10, &arguments);
        assert_eq!(start, 8);
        let shown: Vec<&str> = found.iter().map(|(shown, _)| shown.as_str()).collect();
        assert_eq!(shown, ["0a1b2c", "0a9f00"]);
        // Only the first argument, only after a command.
        assert!(
            helper
                .candidates_with("/resume 0a1b2c 0a", 17, &arguments)
                .1
                .is_empty()
        );
        assert!(
            helper
                .candidates_with("tell 0a", 7, &arguments)
                .1
                .is_empty()
        );
    }

    #[test]
    fn commands_complete_from_the_controllers_list() {
        assert_eq!(
            command_candidates("/co", &["/commit".to_string(), "/review".to_string()]),
            [
                "/cost",
                "/context",
                "/continue-checks",
                "/compact",
                "/commit"
            ]
        );
        assert!(command_candidates("/nope", &[]).is_empty());
    }

    #[test]
    fn completion_fills_what_every_candidate_shares() {
        assert_eq!(
            common_prefix(["/resume ", "/recover-context "].into_iter()),
            "/re"
        );
        assert_eq!(common_prefix(["@src/a.rs"].into_iter()), "@src/a.rs");
        assert_eq!(common_prefix(std::iter::empty()), "");
    }
}
