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
//!   command cannot turn a credential into a prompt. Files are bounded (`markdown_files.rs`).
//! - Expansion is one pass: text that an argument brings in is never expanded again.

use crate::markdown_files;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where a command comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandLayer {
    /// `$KEEL_HOME/commands/`
    User,
    /// The workspace's `.keel/commands/`
    Project,
    /// A skill the person may send as `/NAME` (`skills.rs`).
    Skill,
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

impl CustomCommands {
    /// The commands of `keel_home` (the user's) and of `workspace` (the project's); `builtins`
    /// are the names (with their slash) no file may take.
    pub fn load(workspace: &Path, keel_home: Option<&Path>, builtins: &[&str]) -> CustomCommands {
        let mut loaded = CustomCommands::default();
        let users = keel_home.map(|home| home.join("commands"));
        if let Some(project) =
            markdown_files::project_dir(workspace, ".keel/commands", "command", &mut loaded.notices)
            && !users
                .as_deref()
                .is_some_and(|users| markdown_files::same_dir(&project, users))
        {
            loaded.read_dir(&project, Some(workspace), builtins);
        }
        if let Some(home) = keel_home {
            loaded.read_dir(&home.join("commands"), None, builtins);
        }
        loaded
    }

    /// The commands of `dir`; `project`: the workspace it came with (`None`: the user's).
    fn read_dir(&mut self, dir: &Path, project: Option<&Path>, builtins: &[&str]) {
        let layer = match project {
            Some(_) => CommandLayer::Project,
            None => CommandLayer::User,
        };
        let reserved = |name: &str| {
            builtins
                .iter()
                .any(|builtin| builtin.trim_start_matches('/') == name)
                .then(|| format!("/{name} is a built-in command, which always wins"))
        };
        let files = markdown_files::read_dir(dir, project, "command", &reserved, &mut self.notices);
        for file in files {
            let shown = file.path.display().to_string();
            let (description, body, ignored) = front_matter(&file.text);
            for key in ignored {
                self.notices.push(format!(
                    "command file {shown}: {key} ignored (a command is a prompt; it cannot \
                     change tools, permissions or settings)"
                ));
            }
            let name = file.name.clone();
            let command = CustomCommand {
                name: name.clone(),
                description,
                body: body.to_string(),
                path: file.path.clone(),
                layer,
            };
            // Read project first, user second: the user's file replaces the project's.
            if let Some(replaced) = self.commands.insert(name.clone(), command)
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

    /// The skills the person may send as `/NAME`, as commands: a built-in or custom command of
    /// the same name wins (reported). `builtins` as for `load`.
    pub fn add_skills(&mut self, skills: &crate::skills::Skills, builtins: &[&str]) {
        for skill in skills.list().filter(|skill| skill.user_invocable) {
            let name = &skill.name;
            let builtin = builtins
                .iter()
                .any(|builtin| builtin.trim_start_matches('/') == name);
            // Your skill wins over a project's command; your command over any skill.
            let project_command = self
                .commands
                .get(name)
                .filter(|command| command.layer == CommandLayer::Project)
                .map(|command| command.path.clone());
            if let (Some(path), false, false) =
                (&project_command, builtin, skill.source.is_project())
            {
                self.notices.push(format!(
                    "command /{name} of the project ({}) is replaced by your skill `{name}`",
                    path.display().to_string().escape_debug()
                ));
                self.commands.remove(name);
            }
            if builtin || self.commands.contains_key(name) {
                self.notices.push(format!(
                    "skill `{name}` is not a slash command here: /{name} is {}, which wins (the \
                     model can still load the skill)",
                    if builtin {
                        "a built-in command"
                    } else {
                        "a custom command"
                    }
                ));
                continue;
            }
            self.commands.insert(
                name.clone(),
                CustomCommand {
                    name: name.clone(),
                    description: Some(skill.description.chars().take(200).collect()),
                    body: format!(
                        "[keel: the `{name}` skill; its files are in {}]\n\n{}",
                        skill.dir.display(),
                        skill.body.trim()
                    ),
                    path: skill.dir.join("SKILL.md"),
                    layer: CommandLayer::Skill,
                },
            );
        }
    }

    /// The commands, by name.
    pub fn list(&self) -> impl Iterator<Item = &CustomCommand> {
        self.commands.values()
    }

    /// The prompt `/name args` stands for, if `name` (with its slash) is a custom command.
    pub fn expand(&self, name: &str, args: &str) -> Option<String> {
        let command = self.commands.get(name.strip_prefix('/')?)?;
        Some(match command.layer {
            // A skill is written for the model: only `$ARGUMENTS` is its (a `$1` may be a
            // shell's), and arguments it does not place follow it.
            CommandLayer::Skill if command.body.contains("$ARGUMENTS") => {
                command.body.replace("$ARGUMENTS", args)
            }
            CommandLayer::Skill if !args.trim().is_empty() => {
                format!("{}\n\nARGUMENTS: {args}", command.body)
            }
            CommandLayer::Skill => command.body.clone(),
            CommandLayer::User | CommandLayer::Project => expand(&command.body, args),
        })
    }
}

/// The description, the body after the front matter, and the keys ignored.
fn front_matter(text: &str) -> (Option<String>, &str, Vec<String>) {
    let read = markdown_files::front_matter(text);
    let description = read
        .get("description")
        .map(|value| value.chars().take(200).collect());
    let mut ignored: Vec<String> = read
        .fields
        .iter()
        .filter(|field| field.key != "description")
        .map(|field| format!("`{}`", field.key))
        .collect();
    if !read.bad_lines.is_empty() {
        let lines: Vec<String> = read.bad_lines.iter().map(ToString::to_string).collect();
        ignored.push(format!(
            "line{} {} of its front matter",
            if lines.len() == 1 { "" } else { "s" },
            lines.join(", ")
        ));
    }
    (description, read.body, ignored)
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
