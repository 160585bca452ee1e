//! Custom slash commands: `NAME.md` files in `$KEEL_HOME/commands/` (the user's) and in the
//! workspace's `.keel/commands/` (the project's), each a prompt with `$ARGUMENTS` and `$1`…`$9`
//! filled from what follows `/NAME`.
//!
//! Invariants:
//! - A command is model input only: `/NAME args` becomes the prompt its file says, sent like
//!   typed text. Nothing in a command file changes a setting or a permission; front-matter keys
//!   other than `description` (`allowed-tools` and kin) are ignored, with a notice.
//! - Built-in commands always win: a file named like one is listed in a notice and ignored. The
//!   user's file wins over the project's of the same name.
//! - A project's files come with the repository: only regular files directly in its
//!   `.keel/commands/` are read (no link, no directory that leads out of the workspace), so a
//!   command cannot turn a credential into a prompt. Files are bounded.
//! - Expansion is one pass: text that an argument brings in is never expanded again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The most bytes of a command file that are read.
const MOST_COMMAND_BYTES: u64 = 64 * 1024;

/// Where a command comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandLayer {
    /// `$KEEL_HOME/commands/`
    User,
    /// The workspace's `.keel/commands/`
    Project,
}

/// One custom command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CustomCommand {
    /// Without the slash.
    pub name: String,
    pub description: Option<String>,
    /// The prompt, with `$ARGUMENTS` and `$1`…`$9` still in it.
    pub body: String,
    pub path: PathBuf,
    pub layer: CommandLayer,
}

/// The custom commands of a session, by name, and what loading them had to say.
#[derive(Clone, Debug, Default)]
pub struct CustomCommands {
    commands: BTreeMap<String, CustomCommand>,
    /// Files left out, and keys ignored, said once at session start.
    pub notices: Vec<String>,
}

/// Whether `name` may name a command (letters, digits, `-`, `_`; at most 64).
fn usable_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl CustomCommands {
    /// The commands of `keel_home` (the user's) and of `workspace` (the project's); `builtins`
    /// are the names (with their slash) no file may take.
    pub fn load(workspace: &Path, keel_home: Option<&Path>, builtins: &[&str]) -> CustomCommands {
        let mut loaded = CustomCommands::default();
        let project = workspace.join(".keel/commands");
        let project_inside = project
            .canonicalize()
            .ok()
            .zip(workspace.canonicalize().ok())
            .is_some_and(|(dir, root)| dir.starts_with(root));
        // Another local user's commands are not this workspace's owner's prompts.
        let strangers = [workspace.join(".keel"), project.clone()]
            .into_iter()
            .find(|dir| !owned_by_workspace_owner(dir, workspace));
        match strangers {
            Some(dir) if dir.symlink_metadata().is_ok() => loaded.notices.push(format!(
                "the commands of {} ignored: it belongs to another user",
                dir.display()
            )),
            Some(_) => {}
            None if project_inside => {
                loaded.read_dir(&project, CommandLayer::Project, builtins);
            }
            None => {}
        }
        if let Some(home) = keel_home {
            loaded.read_dir(&home.join("commands"), CommandLayer::User, builtins);
        }
        loaded
    }

    fn read_dir(&mut self, dir: &Path, layer: CommandLayer, builtins: &[&str]) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
        paths.sort();
        for path in paths {
            let shown = path.display().to_string();
            let Some(name) = path
                .file_name()
                .and_then(|name| name.to_str())
                .and_then(|name| name.strip_suffix(".md"))
            else {
                continue;
            };
            if !usable_name(name) {
                self.notices.push(format!(
                    "command file {shown} ignored: a command name is letters, digits, `-` and `_`"
                ));
                continue;
            }
            if builtins
                .iter()
                .any(|builtin| builtin.trim_start_matches('/') == name)
            {
                self.notices.push(format!(
                    "command file {shown} ignored: /{name} is a built-in command, which always wins"
                ));
                continue;
            }
            // A project's link could point anywhere (a credential made into a prompt).
            let regular = match layer {
                CommandLayer::Project => path.symlink_metadata(),
                CommandLayer::User => path.metadata(),
            }
            .is_ok_and(|meta| meta.is_file());
            if !regular {
                self.notices.push(format!(
                    "command file {shown} ignored: not a regular file{}",
                    if layer == CommandLayer::Project {
                        " (a project's command may not be a link)"
                    } else {
                        ""
                    }
                ));
                continue;
            }
            if layer == CommandLayer::Project
                && let Some(workspace) = dir.parent().and_then(Path::parent)
                && !owned_by_workspace_owner(&path, workspace)
            {
                self.notices.push(format!(
                    "command file {shown} ignored: it belongs to another user (keel takes \
                     commands only from the workspace's owner or root)"
                ));
                continue;
            }
            let text = match read_bounded(&path) {
                Ok(text) => text,
                Err(error) => {
                    self.notices
                        .push(format!("command file {shown} ignored: {error}"));
                    continue;
                }
            };
            let (description, body, ignored) = front_matter(&text);
            for key in ignored {
                self.notices.push(format!(
                    "command file {shown}: {key} ignored (a command is a prompt; it cannot \
                     change tools, permissions or settings)"
                ));
            }
            let command = CustomCommand {
                name: name.to_string(),
                description,
                body: body.to_string(),
                path: path.clone(),
                layer,
            };
            // Read project first, user second: the user's file replaces the project's.
            if let Some(replaced) = self.commands.insert(name.to_string(), command)
                && replaced.layer == CommandLayer::Project
                && layer == CommandLayer::User
            {
                self.notices.push(format!(
                    "command /{name} of the project ({}) is replaced by yours ({shown})",
                    replaced.path.display()
                ));
            }
        }
    }

    /// The commands, by name.
    pub fn list(&self) -> impl Iterator<Item = &CustomCommand> {
        self.commands.values()
    }

    /// The prompt `/name args` stands for, if `name` (with its slash) is a custom command.
    pub fn expand(&self, name: &str, args: &str) -> Option<String> {
        let command = self.commands.get(name.strip_prefix('/')?)?;
        Some(expand(&command.body, args))
    }
}

fn read_bounded(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|error| error.to_string())?;
    let mut bytes = Vec::new();
    file.take(MOST_COMMAND_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| error.to_string())?;
    if bytes.len() as u64 > MOST_COMMAND_BYTES {
        return Err(format!("larger than {MOST_COMMAND_BYTES} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

/// Whether `path` (not followed) belongs to the owner of `workspace` or to root; `false` for
/// what cannot be looked at.
fn owned_by_workspace_owner(path: &Path, workspace: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(owner) = crate::instructions::workspace_owner(workspace) else {
        return false;
    };
    path.symlink_metadata()
        .is_ok_and(|meta| meta.uid() == owner || meta.uid() == 0)
}

/// Whether `text` reads as a front matter key (letters, digits, `-`, `_`): only such a thing
/// is repeated in a notice.
fn is_front_matter_key(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 64
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The description, the body after the front matter, and the keys ignored.
fn front_matter(text: &str) -> (Option<String>, &str, Vec<String>) {
    let Some(rest) = text.strip_prefix("---\n") else {
        return (None, text, Vec::new());
    };
    let Some(end) = rest.find("\n---") else {
        return (None, text, Vec::new());
    };
    let header = &rest[..end];
    let after = &rest[end + 4..];
    let body = after.strip_prefix('\n').unwrap_or(after);
    let mut description = None;
    let mut ignored = Vec::new();
    for (number, line) in header.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match line.split_once(':') {
            Some((key, value)) if key.trim() == "description" => {
                let value = value.trim().trim_matches('"').trim();
                description = Some(value.chars().take(200).collect());
            }
            // A key is named; a line that is none is only placed (it may hold anything).
            Some((key, _)) if is_front_matter_key(key.trim()) => {
                ignored.push(format!("`{}`", key.trim()));
            }
            Some(_) | None => ignored.push(format!("line {} of its front matter", number + 2)),
        }
    }
    (description, body, ignored)
}

/// `body` with `$ARGUMENTS` replaced by `args` and `$1`…`$9` by its words (an absent word is
/// empty), in one pass.
fn expand(body: &str, args: &str) -> String {
    let words: Vec<&str> = args.split_whitespace().collect();
    let mut out = String::with_capacity(body.len() + args.len());
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(args);
            rest = tail;
        } else if let Some(digit) = after.chars().next().filter(|c| ('1'..='9').contains(c)) {
            let index = digit as usize - '1' as usize;
            out.push_str(words.get(index).copied().unwrap_or(""));
            rest = &after[1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_fill_in_once() {
        assert_eq!(
            expand(
                "Fix $1 in $2; all: $ARGUMENTS; cost $4 [$5] $",
                "bug#4 lib.rs $1 $ARGUMENTS"
            ),
            "Fix bug#4 in lib.rs; all: bug#4 lib.rs $1 $ARGUMENTS; cost $ARGUMENTS [] $"
        );
        assert_eq!(expand("no args: [$1] [$ARGUMENTS]", ""), "no args: [] []");
    }

    #[test]
    fn front_matter_gives_a_description_and_names_what_it_ignores() {
        let (description, body, ignored) = front_matter(
            "---\ndescription: \"Review a file\"\nallowed-tools: bash\n---\nReview $1.\n",
        );
        assert_eq!(description.as_deref(), Some("Review a file"));
        assert_eq!(body, "Review $1.\n");
        assert_eq!(ignored, ["`allowed-tools`"]);
        assert_eq!(front_matter("plain $1\n").1, "plain $1\n");
    }

    #[test]
    fn the_user_wins_a_clash_builtins_win_always_and_project_links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("ws");
        let home = dir.path().join("home");
        std::fs::create_dir_all(workspace.join(".keel/commands")).unwrap();
        std::fs::create_dir_all(home.join("commands")).unwrap();
        std::fs::write(workspace.join(".keel/commands/review.md"), "project review").unwrap();
        std::fs::write(workspace.join(".keel/commands/ship.md"), "ship $1").unwrap();
        std::fs::write(workspace.join(".keel/commands/help.md"), "not help").unwrap();
        std::fs::write(home.join("commands/review.md"), "my review of $ARGUMENTS").unwrap();
        std::fs::write(dir.path().join("secret"), "s3cret").unwrap();
        std::os::unix::fs::symlink(
            dir.path().join("secret"),
            workspace.join(".keel/commands/leak.md"),
        )
        .unwrap();
        let commands = CustomCommands::load(&workspace, Some(&home), &["/help", "/quit"]);
        let names: Vec<&str> = commands.list().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["review", "ship"]);
        assert_eq!(
            commands.expand("/review", "a b").as_deref(),
            Some("my review of a b")
        );
        assert_eq!(commands.expand("/ship", "v2").as_deref(), Some("ship v2"));
        assert_eq!(commands.expand("/leak", ""), None);
        let notices = commands.notices.join("\n");
        assert!(notices.contains("/help is a built-in command"), "{notices}");
        assert!(notices.contains("may not be a link"), "{notices}");
        assert!(notices.contains("replaced by yours"), "{notices}");
    }
}
