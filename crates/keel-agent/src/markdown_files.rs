//! `NAME.md` files with a front matter, from the workspace (a project's, e.g. `.keel/commands/`)
//! and from `$KEEL_HOME` (the user's): custom commands and agent definitions are both read
//! here, through the same guards.
//!
//! Invariants:
//! - A project's files come with the repository: only regular files directly in a directory
//!   inside the workspace are read (no link, no directory that leads out of it), and only when
//!   the directory and the file belong to the workspace's owner or root — another local user's
//!   files are not this workspace's owner's words. Files are bounded (`MOST_FILE_BYTES`) and
//!   must be UTF-8.
//! - Every file left out is named in a notice with why; nothing is dropped silently.
//! - The front matter is read as `key: value` lines only (no YAML engine): a value is text, a
//!   list is `a, b`, `[a, b]` or `- a` lines under its key; any other line is named by number.
//!   It ends at a line that is exactly `---`. A file's byte-order mark goes, and `\r\n` reads
//!   as `\n` (a file saved on Windows reads as any other).

use std::path::{Path, PathBuf};

/// The most bytes of one file that are read.
pub(crate) const MOST_FILE_BYTES: u64 = 64 * 1024;

/// One file read: its name (the file name without `.md`), its path and its text.
#[derive(Clone, Debug)]
pub(crate) struct MarkdownFile {
    pub name: String,
    pub path: PathBuf,
    pub text: String,
}

/// Whether `name` may name a command or an agent (letters, digits, `-`, `_`; at most 64).
pub(crate) fn usable_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The project directory `relative` of `workspace` if its files may be read: inside the
/// workspace, and it and the directory above it (`.keel`, `.claude`) the owner's.
pub(crate) fn project_dir(
    workspace: &Path,
    relative: &str,
    what: &str,
    notices: &mut Vec<String>,
) -> Option<PathBuf> {
    let dir = workspace.join(relative);
    let inside = dir
        .canonicalize()
        .ok()
        .zip(workspace.canonicalize().ok())
        .is_some_and(|(dir, root)| dir.starts_with(root));
    let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
    let stranger = [parent, dir.clone()]
        .into_iter()
        .find(|dir| !owned_by_workspace_owner(dir, workspace));
    match stranger {
        Some(stranger) if stranger.symlink_metadata().is_ok() => {
            notices.push(format!(
                "the {what}s of {} ignored: it belongs to another user",
                stranger.display()
            ));
            None
        }
        Some(_) => None,
        None if inside => Some(dir),
        None => None,
    }
}

/// Whether `a` and `b` are one directory (the workspace is `$HOME` and `$KEEL_HOME` is its
/// `.keel`: the project's files are the user's, read once, as the user's).
pub(crate) fn same_dir(a: &Path, b: &Path) -> bool {
    matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
}

/// The `NAME.md` files of `dir`, by name. `project`: the directory came with the workspace
/// (links refused, owner checked). `reserved` names a file's name taken by something that
/// always wins, with why. Each file left out is a notice naming it as a `what` file.
pub(crate) fn read_dir(
    dir: &Path,
    project: Option<&Path>,
    what: &str,
    reserved: &dyn Fn(&str) -> Option<String>,
    notices: &mut Vec<String>,
) -> Vec<MarkdownFile> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
    paths.sort();
    let mut files = Vec::new();
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
            notices.push(format!(
                "{what} file {shown} ignored: a {what} name is letters, digits, `-` and `_`"
            ));
            continue;
        }
        if let Some(why) = reserved(name) {
            notices.push(format!("{what} file {shown} ignored: {why}"));
            continue;
        }
        // A project's link could point anywhere (a credential made into a prompt).
        let regular = match project {
            Some(_) => path.symlink_metadata(),
            None => path.metadata(),
        }
        .is_ok_and(|meta| meta.is_file());
        if !regular {
            notices.push(format!(
                "{what} file {shown} ignored: not a regular file{}",
                if project.is_some() {
                    format!(" (a project's {what} may not be a link)")
                } else {
                    String::new()
                }
            ));
            continue;
        }
        if let Some(workspace) = project
            && !owned_by_workspace_owner(&path, workspace)
        {
            notices.push(format!(
                "{what} file {shown} ignored: it belongs to another user (keel takes \
                 {what}s only from the workspace's owner or root)"
            ));
            continue;
        }
        match read_bounded(&path) {
            Ok(text) => files.push(MarkdownFile {
                name: name.to_string(),
                path,
                text: text
                    .strip_prefix('\u{feff}')
                    .unwrap_or(&text)
                    .replace("\r\n", "\n"),
            }),
            Err(error) => notices.push(format!("{what} file {shown} ignored: {error}")),
        }
    }
    files
}

pub(crate) fn read_bounded(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|error| error.to_string())?;
    let mut bytes = Vec::new();
    file.take(MOST_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| error.to_string())?;
    if bytes.len() as u64 > MOST_FILE_BYTES {
        return Err(format!("larger than {MOST_FILE_BYTES} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

/// Whether `path` (not followed) belongs to the owner of `workspace` or to root; `false` for
/// what cannot be looked at.
pub(crate) fn owned_by_workspace_owner(path: &Path, workspace: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(owner) = crate::instructions::workspace_owner(workspace) else {
        return false;
    };
    path.symlink_metadata()
        .is_ok_and(|meta| meta.uid() == owner || meta.uid() == 0)
}

/// A front matter key as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    pub key: String,
    /// Trimmed, outer quotes removed; a block list (`- a` lines) joined with `, `.
    pub value: String,
}

/// A file's front matter and the body after it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct FrontMatter<'a> {
    pub fields: Vec<Field>,
    pub body: &'a str,
    /// Lines that are no `key: value` (1-based, in the file): only placed, never repeated (a
    /// line may hold anything).
    pub bad_lines: Vec<usize>,
}

impl FrontMatter<'_> {
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|field| field.key == key)
            .map(|field| field.value.as_str())
    }
}

/// Whether `text` reads as a front matter key (letters, digits, `-`, `_`).
fn is_key(text: &str) -> bool {
    usable_name(text)
}

fn unquoted(value: &str) -> String {
    value
        .trim()
        .trim_matches('"')
        .trim_matches('\'')
        .trim()
        .to_string()
}

/// The front matter (`---` lines around `key: value` lines) of `text`, and its body; a text
/// without one is all body.
pub(crate) fn front_matter(text: &str) -> FrontMatter<'_> {
    let all_body = FrontMatter {
        fields: Vec::new(),
        body: text,
        bad_lines: Vec::new(),
    };
    let Some(rest) = text.strip_prefix("---\n") else {
        return all_body;
    };
    // The closing line is `---` alone (a longer rule, `----`, is the body's).
    let mut offset = 0;
    let mut end = None;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches('\n') == "---" {
            end = Some((offset, offset + line.len()));
            break;
        }
        offset += line.len();
    }
    let Some((header_end, body_start)) = end else {
        return all_body;
    };
    let header = rest[..header_end]
        .strip_suffix('\n')
        .unwrap_or(&rest[..header_end]);
    let body = &rest[body_start..];
    let mut fields: Vec<Field> = Vec::new();
    let mut bad_lines = Vec::new();
    for (number, line) in header.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        // `- item` under a key with no value of its own: a block list.
        if let Some(item) = line.trim_start().strip_prefix("- ")
            && line.starts_with([' ', '-'])
            && let Some(last) = fields.last_mut()
        {
            if !last.value.is_empty() {
                last.value.push_str(", ");
            }
            last.value.push_str(&unquoted(item));
            continue;
        }
        match line.split_once(':') {
            Some((key, value)) if is_key(key.trim()) && !line.starts_with(' ') => {
                fields.push(Field {
                    key: key.trim().to_string(),
                    value: unquoted(value),
                });
            }
            _ => bad_lines.push(number + 2),
        }
    }
    FrontMatter {
        fields,
        body,
        bad_lines,
    }
}

/// A list value (`a, b`, `[a, b]`, or a block list already joined), its items trimmed.
pub(crate) fn list(value: &str) -> Vec<String> {
    let inner = value
        .trim()
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap_or(value);
    inner
        .split(',')
        .map(unquoted)
        .filter(|item| !item.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_reads_keys_lists_and_places_bad_lines() {
        let text = "---\nname: reviewer\ndescription: \"Reviews code\"\ntools:\n  - Read\n  - Grep\nmodel: 'deepseek/deepseek-chat'\n: nothing\n---\nBe brief.\n";
        let read = front_matter(text);
        assert_eq!(read.get("name"), Some("reviewer"));
        assert_eq!(read.get("description"), Some("Reviews code"));
        assert_eq!(read.get("tools"), Some("Read, Grep"));
        assert_eq!(read.get("model"), Some("deepseek/deepseek-chat"));
        assert_eq!(read.bad_lines, [8]);
        assert_eq!(read.body, "Be brief.\n");
        assert_eq!(front_matter("plain\n").body, "plain\n");
        assert_eq!(front_matter("---\nno end\n").body, "---\nno end\n");
        // Only a line of exactly `---` closes it.
        let ruled = front_matter("---\nname: a\n----\ntext\n---\nbody\n");
        assert_eq!(ruled.bad_lines, [3, 4]);
        assert_eq!(ruled.body, "body\n");
        assert_eq!(front_matter("---\nname: a\n---").body, "");
    }

    #[test]
    fn a_windows_file_with_a_byte_order_mark_reads_as_any_other() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.md"),
            "\u{feff}---\r\ndescription: d\r\n---\r\nBody.\r\n",
        )
        .unwrap();
        let mut notices = Vec::new();
        let files = read_dir(dir.path(), None, "agent", &|_| None, &mut notices);
        let read = front_matter(&files[0].text);
        assert_eq!(read.get("description"), Some("d"));
        assert_eq!(read.body, "Body.\n");
    }

    #[test]
    fn a_list_is_commas_brackets_or_joined_lines() {
        assert_eq!(list("Read, Grep ,Bash"), ["Read", "Grep", "Bash"]);
        assert_eq!(list("[\"read_file\", 'grep']"), ["read_file", "grep"]);
        assert_eq!(list(""), Vec::<String>::new());
    }
}
