//! The read-only list: command lines that run without a question in `ask` mode, confined to
//! reading (PRODUCT.md §4: a read-only command asks no more than `read_file` does).
//!
//! What is on the list, and why:
//! - Programs that list, read, count, compare or search files, print text or tell about the
//!   system, and never change anything or run other code with the options they accept here:
//!   `PROGRAMS`. `sed` and `awk` are not on it (both write files and run commands from their
//!   own scripts); neither are `env`, `printenv` (the environment can hold the user's own
//!   tokens), `xargs`, `timeout` or anything that runs another program; nor `cd` (operands
//!   after it would be read from elsewhere); nor build and test commands (the "always" list's
//!   `cargo test` runs the repository's code).
//! - `git` with a subcommand that only reads (`GIT_READS`), and none of git's options that
//!   write a file, run a program, change where git looks, or compare paths outside the
//!   repository (`GIT_RISKY`).
//!
//! A line is read-only when, and only when:
//! - the shell grammar read it in full (`CommandLine::understood`: no substitution, expansion,
//!   here-document, function, `eval` ...), it has at least one simple command, and no
//!   redirection writes a file;
//! - every simple command's words are literal, the first one is a program of the list by its
//!   bare name (never `./ls`, never a variable assignment such as `GIT_EXTERNAL_DIFF=x git diff`),
//!   found on a `PATH` with no relative entry and none inside the workspace or the added
//!   directories (so the repository cannot provide its own `ls`);
//! - no option is one its program lists as risky (a short option is matched inside a cluster,
//!   `-rno` holds `-o`), and no short option carries a glued path (`-f/etc/x`);
//! - every word that could name a file — each operand, the value after `=` of a long option,
//!   and every file an input redirection reads — resolves, with `~` expanded and symlinks
//!   followed, inside the workspace or an added directory; a word with glob characters is
//!   expanded component by component against the directory tree and every match must resolve
//!   inside too (a link to `~/.ssh` in the repository is caught), and a component that starts
//!   with `.` and holds a glob character (which older bash lets match `..`) is refused.
//!   Programs that read no file (`echo`, `date` ...) skip the operand check.
//!
//! Deliberately stricter than needed: a pattern such as `grep /usr x` is taken for a path and
//! asks. The list is a convenience, not the boundary: a read-only command runs under the
//! read-only sandbox, which refuses every write and the network whatever the command does
//! (code git runs from the repository's own configuration included).

use crate::command_line::{self, SimpleCommand};
use crate::guard::WorkspaceGuard;
use globset::GlobBuilder;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A program of the list and what of it is not read-only.
struct Program {
    name: &'static str,
    /// Options that write a file, run code, follow links out of the tree it walks, or read a
    /// list of file names from a file: `-x` (also inside a cluster) or `--long` (also
    /// `--long=value`). For `find`, whole words.
    risky: &'static [&'static str],
    /// Whether its operands may name files (checked to be inside the workspace).
    reads_operands: bool,
    /// The most operands it reads (`uniq IN OUT` writes OUT).
    most_operands: Option<usize>,
}

const fn reads(name: &'static str, risky: &'static [&'static str]) -> Program {
    Program {
        name,
        risky,
        reads_operands: true,
        most_operands: None,
    }
}

const fn text_only(name: &'static str, risky: &'static [&'static str]) -> Program {
    Program {
        name,
        risky,
        reads_operands: false,
        most_operands: None,
    }
}

/// Checksums read a list of files to check from a file with `-c`.
const CHECKSUM_RISKY: &[&str] = &["-c", "--check"];
/// `grep -R` follows every link it meets.
const GREP_RISKY: &[&str] = &["-R", "--dereference-recursive"];

/// The programs of the list (see the module doc for why each kind is here).
const PROGRAMS: &[Program] = &[
    // Listing and describing files.
    reads("ls", &[]),
    reads("tree", &["-o", "-l", "-R", "--fromfile"]),
    reads("stat", &[]),
    reads(
        "file",
        &[
            "-C",
            "--compile",
            "-m",
            "--magic-file",
            "-f",
            "--files-from",
        ],
    ),
    reads("du", &["-L", "--dereference", "--files0-from"]),
    reads("df", &[]),
    reads("realpath", &[]),
    reads("readlink", &[]),
    reads("test", &[]),
    reads("[", &[]),
    // Reading files.
    reads("cat", &[]),
    reads("head", &[]),
    reads("tail", &[]),
    reads("nl", &[]),
    reads("tac", &[]),
    reads("rev", &[]),
    reads("od", &[]),
    reads("hexdump", &[]),
    reads("strings", &[]),
    reads("wc", &["--files0-from"]),
    reads("cut", &[]),
    reads("paste", &[]),
    reads("join", &[]),
    reads("comm", &[]),
    reads("column", &[]),
    reads("expand", &[]),
    reads("unexpand", &[]),
    reads("fold", &[]),
    reads("jq", &[]),
    reads("md5sum", CHECKSUM_RISKY),
    reads("sha1sum", CHECKSUM_RISKY),
    reads("sha256sum", CHECKSUM_RISKY),
    reads("sha512sum", CHECKSUM_RISKY),
    reads("b2sum", CHECKSUM_RISKY),
    reads("cksum", CHECKSUM_RISKY),
    reads(
        "sort",
        &[
            "-o",
            "--output",
            "--compress-program",
            "-T",
            "--temporary-directory",
            "--files0-from",
        ],
    ),
    Program {
        most_operands: Some(1),
        ..reads("uniq", &[])
    },
    // Comparing files (`diff -r` follows links inside the trees it compares).
    reads("diff", &["-r", "--recursive"]),
    reads("cmp", &[]),
    // Searching.
    reads("grep", GREP_RISKY),
    reads("egrep", GREP_RISKY),
    reads("fgrep", GREP_RISKY),
    reads(
        "rg",
        &[
            "--pre",
            "--pre-glob",
            "-L",
            "--follow",
            "-z",
            "--search-zip",
            "--hostname-bin",
        ],
    ),
    reads(
        "find",
        &[
            "-exec",
            "-execdir",
            "-ok",
            "-okdir",
            "-delete",
            "-fprint",
            "-fprint0",
            "-fprintf",
            "-fls",
            "-L",
            "-H",
            "-follow",
            "-files0-from",
        ],
    ),
    reads(
        "fd",
        &["-x", "--exec", "-X", "--exec-batch", "-L", "--follow"],
    ),
    reads(
        "fdfind",
        &["-x", "--exec", "-X", "--exec-batch", "-L", "--follow"],
    ),
    // Text and facts that read no file.
    text_only("echo", &[]),
    text_only("printf", &[]),
    text_only("true", &[]),
    text_only("false", &[]),
    text_only("pwd", &[]),
    text_only("basename", &[]),
    text_only("dirname", &[]),
    text_only("tr", &[]),
    text_only("seq", &[]),
    text_only(
        "date",
        &["-s", "--set", "-f", "--file", "-r", "--reference"],
    ),
    text_only("whoami", &[]),
    text_only("id", &[]),
    text_only("uname", &[]),
    text_only("nproc", &[]),
    text_only("which", &[]),
    text_only("type", &[]),
];

/// Builtins of bash: found without `PATH`.
const BUILTINS: &[&str] = &[
    "echo", "printf", "true", "false", "pwd", "test", "[", "type",
];

/// git subcommands that only read the repository.
const GIT_READS: &[&str] = &[
    "status",
    "diff",
    "log",
    "show",
    "blame",
    "annotate",
    "shortlog",
    "describe",
    "rev-parse",
    "rev-list",
    "ls-files",
    "ls-tree",
    "grep",
    "cat-file",
    "merge-base",
    "show-ref",
    "branch",
    "tag",
    "remote",
];

/// git options that write a file (`--output`), run a program (`--ext-diff`, `--textconv`,
/// `--filters`, `-O` for `git grep`'s pager), read an order file (`-O` for `git diff`), or
/// compare paths outside the repository (`--no-index`).
const GIT_RISKY: &[&str] = &[
    "--output",
    "--ext-diff",
    "--textconv",
    "--filters",
    "--no-index",
    "-O",
    "--open-files-in-pager",
    "--upload-pack",
    "--paginate",
];

/// Options of `git branch`, `git tag` and `git remote` that change something: these three are
/// read-only only when listing.
const GIT_LISTING_WRITES: &[&str] = &[
    "-d",
    "-D",
    "--delete",
    "-m",
    "-M",
    "--move",
    "-c",
    "-C",
    "--copy",
    "-f",
    "--force",
    "-u",
    "--set-upstream-to",
    "--unset-upstream",
    "--edit-description",
];

/// git's options before the subcommand that keel accepts (none that changes where it looks,
/// its configuration or what it runs).
const GIT_GLOBAL: &[&str] = &["--no-pager", "-P", "--no-optional-locks"];

/// The most directory entries one glob may make keel look at before it gives up and asks.
const MOST_GLOB_ENTRIES: usize = 10_000;

/// Where a read-only command may read, and how the shell finds programs and `~`.
pub struct ReadPlaces<'a> {
    /// The workspace and the added directories.
    pub guard: &'a WorkspaceGuard,
    /// `$HOME` as the command sees it (for `~`).
    pub home: Option<PathBuf>,
    /// `$PATH` as the command sees it.
    pub path: Option<OsString>,
}

impl<'a> ReadPlaces<'a> {
    /// The places as a command keel runs sees them: `HOME` and `PATH` of this process.
    pub fn from_env(guard: &'a WorkspaceGuard) -> ReadPlaces<'a> {
        ReadPlaces {
            guard,
            home: std::env::var_os("HOME").map(PathBuf::from),
            path: std::env::var_os("PATH"),
        }
    }
}

/// Why a line is not read-only.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotReadOnly {
    #[error("the shell grammar did not read all of it (an expansion, a substitution, …)")]
    NotUnderstood,
    #[error("it runs no command")]
    Empty,
    #[error("a redirection writes a file")]
    WritesFiles,
    #[error("a word cannot be read literally")]
    NotLiteral,
    #[error("`{0}` is not on the read-only list")]
    NotOnList(String),
    #[error("`{0}` is not found on PATH outside the workspace")]
    NotFound(String),
    #[error("`{program}` with `{option}` may write, run code or read outside")]
    RiskyOption { program: String, option: String },
    #[error("`{0}` is read outside the workspace")]
    Outside(String),
    #[error("`{0}` has more operands than it only reads")]
    TooManyOperands(String),
}

/// Whether `line` is read-only (see the module doc); the first reason it is not.
pub fn check(line: &str, places: &ReadPlaces<'_>) -> Result<(), NotReadOnly> {
    let parsed = command_line::parse(line);
    if !parsed.understood() {
        return Err(NotReadOnly::NotUnderstood);
    }
    if parsed.commands.is_empty() {
        return Err(NotReadOnly::Empty);
    }
    if parsed.writes_files {
        return Err(NotReadOnly::WritesFiles);
    }
    for target in &parsed.reads_from {
        let target = target.as_deref().ok_or(NotReadOnly::NotLiteral)?;
        inside(target, places)?;
    }
    parsed
        .commands
        .iter()
        .try_for_each(|command| check_command(command, places))
}

fn check_command(command: &SimpleCommand, places: &ReadPlaces<'_>) -> Result<(), NotReadOnly> {
    let words = command.literal_words().ok_or(NotReadOnly::NotLiteral)?;
    let Some((name, rest)) = words.split_first() else {
        return Err(NotReadOnly::Empty);
    };
    if name.contains('/') || name.contains('=') {
        return Err(NotReadOnly::NotOnList(name.clone()));
    }
    if name == "git" {
        found_outside(name, places)?;
        return check_git(rest, places);
    }
    let program = PROGRAMS
        .iter()
        .find(|program| program.name == name)
        .ok_or_else(|| NotReadOnly::NotOnList(name.clone()))?;
    if !BUILTINS.contains(&name.as_str()) {
        found_outside(name, places)?;
    }
    let whole_words = program.name == "find";
    let operands = options_and_operands(name, rest, program.risky, whole_words)?;
    if program
        .most_operands
        .is_some_and(|most| operands.len() > most)
    {
        return Err(NotReadOnly::TooManyOperands(name.clone()));
    }
    if program.reads_operands {
        for operand in operands {
            inside(operand, places)?;
        }
    }
    Ok(())
}

fn check_git(words: &[String], places: &ReadPlaces<'_>) -> Result<(), NotReadOnly> {
    let risky = |option: &str| NotReadOnly::RiskyOption {
        program: "git".into(),
        option: option.into(),
    };
    let mut rest = words;
    while let Some((word, after)) = rest.split_first() {
        if !word.starts_with('-') {
            break;
        }
        if !GIT_GLOBAL.contains(&word.as_str()) {
            return Err(risky(word));
        }
        rest = after;
    }
    let Some((subcommand, arguments)) = rest.split_first() else {
        return Err(NotReadOnly::NotOnList("git".into()));
    };
    if !GIT_READS.contains(&subcommand.as_str()) {
        return Err(NotReadOnly::NotOnList(format!("git {subcommand}")));
    }
    let listing_only = matches!(subcommand.as_str(), "branch" | "tag" | "remote");
    let mut risky_options = GIT_RISKY.to_vec();
    if listing_only {
        risky_options.extend_from_slice(GIT_LISTING_WRITES);
    }
    let operands = options_and_operands("git", arguments, &risky_options, false)?;
    // `git branch NAME` creates a branch, `git tag NAME` a tag, `git remote add` a remote:
    // these list only with no operand (or with `--list`/`-l`, whose operands are patterns).
    let lists = arguments
        .iter()
        .any(|word| word == "--list" || word == "-l");
    if listing_only && !operands.is_empty() && !lists {
        return Err(NotReadOnly::TooManyOperands(format!("git {subcommand}")));
    }
    for operand in operands {
        inside(operand, places)?;
    }
    Ok(())
}

/// The operands of `words` after every option is checked against `risky`; the values of
/// `--long=value` options count as operands (they may name files). `whole_words`: options are
/// matched as whole words (`find -exec`), never as clusters.
fn options_and_operands<'w>(
    program: &str,
    words: &'w [String],
    risky: &[&str],
    whole_words: bool,
) -> Result<Vec<&'w str>, NotReadOnly> {
    let refuse = |option: &str| NotReadOnly::RiskyOption {
        program: program.into(),
        option: option.into(),
    };
    let mut operands = Vec::new();
    let mut options_end = false;
    for word in words {
        if options_end || !word.starts_with('-') || word == "-" {
            if !word.is_empty() {
                operands.push(word.as_str());
            }
            continue;
        }
        if word == "--" {
            options_end = true;
            continue;
        }
        if whole_words {
            if risky.contains(&word.as_str()) {
                return Err(refuse(word));
            }
            continue;
        }
        if let Some(long) = word.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            let spelled = format!("--{name}");
            if risky.contains(&spelled.as_str()) {
                return Err(refuse(&spelled));
            }
            if let Some(value) = value.filter(|value| !value.is_empty()) {
                operands.push(value);
            }
            continue;
        }
        // A cluster of short options, whose tail may be a value (`-n5`, `-f/etc/x`).
        let cluster = &word[1..];
        if let Some(option) = risky
            .iter()
            .filter(|option| option.len() == 2 && !option.starts_with("--"))
            .find(|option| cluster.contains(&option[1..]))
        {
            return Err(refuse(option));
        }
        if cluster.contains('/') || cluster.contains('~') || cluster.contains("..") {
            // A value glued to an option that looks like a path: keel cannot tell which.
            return Err(NotReadOnly::Outside(word.clone()));
        }
    }
    Ok(operands)
}

/// `Ok` if `word`, taken as a path (with `~` expanded; a glob expanded), stays inside.
fn inside(word: &str, places: &ReadPlaces<'_>) -> Result<(), NotReadOnly> {
    let outside = || NotReadOnly::Outside(word.to_string());
    let expanded = match word.strip_prefix('~') {
        None => word.to_string(),
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            let home = places.home.as_ref().ok_or_else(outside)?;
            format!("{}{rest}", home.display())
        }
        // `~user`, `~+`, `~-`: another place keel does not look up.
        Some(_) => return Err(outside()),
    };
    let guard = places.guard;
    let stays = |path: &str| {
        guard
            .resolve(path)
            .is_ok_and(|resolved| guard.is_inside(&resolved))
    };
    // Unmatched, a glob is passed as written: that path must be inside too.
    if !stays(&expanded) {
        return Err(outside());
    }
    if !expanded.contains(['*', '?', '[']) {
        return Ok(());
    }
    let matches = glob_matches(&expanded, guard).ok_or_else(outside)?;
    if matches.iter().all(|path| stays(path)) {
        Ok(())
    } else {
        Err(outside())
    }
}

/// Every path `pattern` matches, as the shell would expand it (a superset: hidden entries
/// match too); `None` when keel cannot tell (a component such as `.*`, too many entries, a
/// directory it cannot read, a pattern globset refuses).
fn glob_matches(pattern: &str, guard: &WorkspaceGuard) -> Option<Vec<String>> {
    let absolute = pattern.starts_with('/');
    let mut found = vec![if absolute {
        "/".to_string()
    } else {
        String::new()
    }];
    let mut looked = 0;
    for component in pattern.split('/').filter(|part| !part.is_empty()) {
        let joined = |base: &str, name: &str| {
            if base.is_empty() || base.ends_with('/') {
                format!("{base}{name}")
            } else {
                format!("{base}/{name}")
            }
        };
        if !component.contains(['*', '?', '[']) {
            found = found.iter().map(|base| joined(base, component)).collect();
            continue;
        }
        if component.starts_with('.') {
            return None;
        }
        let matcher = GlobBuilder::new(component)
            .literal_separator(true)
            .build()
            .ok()?
            .compile_matcher();
        let mut next = Vec::new();
        for base in &found {
            let directory = guard
                .resolve(if base.is_empty() { "." } else { base })
                .ok()?;
            let Ok(entries) = std::fs::read_dir(&directory) else {
                continue;
            };
            for entry in entries {
                looked += 1;
                if looked > MOST_GLOB_ENTRIES {
                    return None;
                }
                let name = entry.ok()?.file_name();
                let name = name.to_str()?;
                if matcher.is_match(name) {
                    next.push(joined(base, name));
                }
            }
        }
        found = next;
    }
    Some(found)
}

/// `Ok` if the shell finds `program` on `PATH`, and no `PATH` entry is relative, empty or
/// inside the workspace or an added directory (the repository cannot provide its own `ls`,
/// also not behind an entry the sandbox hides, such as one in `/tmp`).
fn found_outside(program: &str, places: &ReadPlaces<'_>) -> Result<(), NotReadOnly> {
    let not_found = || NotReadOnly::NotFound(program.to_string());
    let path = places.path.as_ref().ok_or_else(not_found)?;
    let mut found = false;
    for entry in std::env::split_paths(path) {
        let inside = |path: &Path| {
            path.canonicalize()
                .is_ok_and(|real| places.guard.is_inside(&real))
        };
        let candidate = entry.join(program);
        if !entry.is_absolute() || inside(&entry) || inside(&candidate) {
            return Err(not_found());
        }
        found |= is_executable(&candidate);
    }
    if found { Ok(()) } else { Err(not_found()) }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
#[path = "read_only_commands_tests.rs"]
mod tests;
