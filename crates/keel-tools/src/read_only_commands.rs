//! The read-only list: command lines that run without a question in `ask` mode, confined to
//! reading (docs/configuration.md#read-only-commands: it asks no more than `read_file` does).
//!
//! What is on the list, and why:
//! - Programs that list, read, count, compare or search files, print text or tell about the
//!   system, and never change anything or run other code with the options they accept here:
//!   `PROGRAMS`. `sed` and `awk` are not on it (both write files and run commands from their
//!   own scripts); neither are `env`, `printenv` and `jq` (the environment can hold the user's
//!   own tokens, and jq reads it and modules from anywhere), `strings` (it reads options from
//!   any `@file`), `xargs`, `timeout` or anything that runs another program; nor `cd`
//!   (operands after it would be read from elsewhere); nor build and test commands (the
//!   "always" list's `cargo test` runs the repository's code).
//! - `git` with a subcommand that only reads (`GIT_READS`), and none of git's options that
//!   write a file, run a program, change where git looks, or compare paths outside the
//!   repository (`GIT_RISKY`); `branch`, `tag` and `remote` only as they list.
//!
//! A line is read-only when, and only when:
//! - the shell grammar read it in full (`CommandLine::understood`: no substitution, expansion,
//!   here-document, function, `eval` ...), it has at least one simple command, and no
//!   redirection writes a file;
//! - every simple command's words are literal, the first one is a program of the list by its
//!   bare name (never `./ls`, never a variable assignment such as `GIT_EXTERNAL_DIFF=x git diff`),
//!   found on `PATH` where the repository cannot have put it (`read_only_paths::found_outside`);
//! - no option is one its program lists as risky, or an abbreviation of one (GNU programs and
//!   git take `--compress-p` for `--compress-program`); a short option is matched inside a
//!   cluster (`-rno` holds `-o`);
//! - every word that could name a file stays inside the workspace and the added directories
//!   (`read_only_paths::inside`: `~`, links and the shell's globs followed): each operand, the
//!   value after `=` of a long option, every tail of a short-option cluster longer than one
//!   character (`-f../x`, `-flink`), and every file an input redirection reads. Programs that
//!   read no file (`echo`, `date` ...) skip the operand check but not for a glob the shell
//!   would expand (`echo ~/*` lists your home); a search's first operand is its pattern, not a
//!   path, unless `-e`/`-f` gave the pattern; `diff` and `cmp` take files only (they follow
//!   links inside directories);
//! - a `git` line's repository lies inside (`read_only_paths::repository_inside`).
//!
//! Deliberately stricter than needed: an operand such as `ls /usr` asks, and a cluster is
//! matched letter by letter. The list is a convenience, not the boundary: a read-only command
//! runs under the read-only sandbox, which refuses every write and the network whatever the
//! command does (code git runs from the repository's own configuration included).

use crate::command_line::{self, SimpleCommand};
pub use crate::read_only_paths::ReadPlaces;
use crate::read_only_paths::{self, Leads};

/// A program of the list and what of it is not read-only.
struct Program {
    name: &'static str,
    /// Options that write a file, run code, follow links out of the tree it walks, or read a
    /// list of file names from a file: `-x` (also inside a cluster) or `--long` (also
    /// `--long=value` and any abbreviation). For `find`, whole words.
    risky: &'static [&'static str],
    /// Whether its operands may name files (checked to be inside the workspace).
    reads_operands: bool,
    /// The first operand is a pattern unless an option gave it (`grep`, `rg`).
    pattern_first: bool,
    /// Its operands must be files, not directories.
    files_only: bool,
    /// The most operands it reads (`uniq IN OUT` writes OUT).
    most_operands: Option<usize>,
}

const fn reads(name: &'static str, risky: &'static [&'static str]) -> Program {
    Program {
        name,
        risky,
        reads_operands: true,
        pattern_first: false,
        files_only: false,
        most_operands: None,
    }
}

const fn searches(name: &'static str, risky: &'static [&'static str]) -> Program {
    Program {
        pattern_first: true,
        ..reads(name, risky)
    }
}

const fn text_only(name: &'static str, risky: &'static [&'static str]) -> Program {
    Program {
        reads_operands: false,
        ..reads(name, risky)
    }
}

/// Options of a search that give its pattern (so every operand is a path).
const PATTERN_OPTIONS: &[&str] = &["-e", "-f", "--regexp", "--file"];

/// Checksums read a list of files to check from a file with `-c`.
const CHECKSUM_RISKY: &[&str] = &["-c", "--check"];
/// `grep -R` follows every link it meets.
const GREP_RISKY: &[&str] = &["-R", "--dereference-recursive"];

/// The programs of the list (see the module doc for why each kind is here).
const PROGRAMS: &[Program] = &[
    // Listing and describing files.
    reads("ls", &["-L", "--dereference"]),
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
    reads("wc", &["--files0-from"]),
    reads("cut", &[]),
    reads("paste", &[]),
    reads("join", &[]),
    reads("comm", &[]),
    reads("column", &[]),
    reads("expand", &[]),
    reads("unexpand", &[]),
    reads("fold", &[]),
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
    Program {
        files_only: true,
        ..reads("diff", &["-r", "--recursive"])
    },
    Program {
        files_only: true,
        ..reads("cmp", &[])
    },
    // Searching.
    searches("grep", GREP_RISKY),
    searches("egrep", GREP_RISKY),
    searches("fgrep", GREP_RISKY),
    searches(
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
    "--config-env",
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

/// Options that make `git branch` and `git tag` list (their operands are then patterns).
const GIT_LISTING: &[&str] = &[
    "--list",
    "-l",
    "--contains",
    "--no-contains",
    "--merged",
    "--no-merged",
    "--points-at",
];

/// git's options before the subcommand that keel accepts (none that changes where it looks,
/// its configuration or what it runs).
const GIT_GLOBAL: &[&str] = &["--no-pager", "-P", "--no-optional-locks"];

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
    #[error("`{0}` would be read as an option")]
    GlobToOption(String),
    #[error("`{0}` is a directory, and this program follows links inside directories")]
    Directory(String),
    #[error("git would read a repository outside the workspace")]
    RepositoryOutside,
}

/// One word a command gets, and whether the shell may expand it as a glob.
#[derive(Clone, Copy)]
struct Word<'w> {
    text: &'w str,
    globbed: bool,
    /// An operand of its own, not the value of a `--long=value` option.
    positional: bool,
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
        // A redirection's target is not globbed by a non-interactive bash.
        inside(target, false, places)?;
    }
    parsed
        .commands
        .iter()
        .try_for_each(|command| check_command(command, places))
}

/// `Ok` if `word` stays inside (`read_only_paths::inside`), else why not.
fn inside(word: &str, globbed: bool, places: &ReadPlaces<'_>) -> Result<(), NotReadOnly> {
    read_only_paths::inside(word, globbed, places).map_err(|leads| match leads {
        Leads::Outside => NotReadOnly::Outside(word.to_string()),
        Leads::ToAnOption(option) => NotReadOnly::GlobToOption(option),
    })
}

fn check_command(command: &SimpleCommand, places: &ReadPlaces<'_>) -> Result<(), NotReadOnly> {
    let texts = command.literal_words().ok_or(NotReadOnly::NotLiteral)?;
    let words: Vec<Word<'_>> = texts
        .iter()
        .enumerate()
        .map(|(index, text)| Word {
            text,
            globbed: command.globbed.get(index).copied().unwrap_or(true),
            positional: true,
        })
        .collect();
    let Some((name, rest)) = words.split_first() else {
        return Err(NotReadOnly::Empty);
    };
    let name = name.text;
    if name.contains('/') || name.contains('=') {
        return Err(NotReadOnly::NotOnList(name.to_string()));
    }
    let found = |program: &str| {
        if read_only_paths::found_outside(program, places) {
            Ok(())
        } else {
            Err(NotReadOnly::NotFound(program.to_string()))
        }
    };
    if name == "git" {
        found(name)?;
        return check_git(rest, places);
    }
    let program = PROGRAMS
        .iter()
        .find(|program| program.name == name)
        .ok_or_else(|| NotReadOnly::NotOnList(name.to_string()))?;
    if !BUILTINS.contains(&name) {
        found(name)?;
    }
    let whole_words = program.name == "find";
    let mut operands = options_and_operands(name, rest, program.risky, whole_words, places)?;
    if program
        .most_operands
        .is_some_and(|most| operands.len() > most)
    {
        return Err(NotReadOnly::TooManyOperands(name.to_string()));
    }
    let pattern_given = rest.iter().any(|word| {
        PATTERN_OPTIONS
            .iter()
            .any(|option| word.text.starts_with(option))
    });
    if program.pattern_first
        && !pattern_given
        && let Some(pattern) = operands.iter().position(|word| word.positional)
    {
        operands.remove(pattern);
    }
    for operand in operands {
        if program.reads_operands || operand.globbed {
            inside(operand.text, operand.globbed, places)?;
        }
        if program.files_only && read_only_paths::is_directory(operand.text, places.guard) {
            return Err(NotReadOnly::Directory(operand.text.to_string()));
        }
    }
    Ok(())
}

fn check_git(words: &[Word<'_>], places: &ReadPlaces<'_>) -> Result<(), NotReadOnly> {
    let risky = |option: &str| NotReadOnly::RiskyOption {
        program: "git".into(),
        option: option.into(),
    };
    let mut rest = words;
    while let Some((word, after)) = rest.split_first() {
        if !word.text.starts_with('-') {
            break;
        }
        if !GIT_GLOBAL.contains(&word.text) {
            return Err(risky(word.text));
        }
        rest = after;
    }
    let Some((subcommand, arguments)) = rest.split_first() else {
        return Err(NotReadOnly::NotOnList("git".into()));
    };
    let subcommand = subcommand.text;
    if !GIT_READS.contains(&subcommand) {
        return Err(NotReadOnly::NotOnList(format!("git {subcommand}")));
    }
    if !read_only_paths::repository_inside(places.guard) {
        return Err(NotReadOnly::RepositoryOutside);
    }
    let listing_only = matches!(subcommand, "branch" | "tag" | "remote");
    let mut risky_options = GIT_RISKY.to_vec();
    if listing_only {
        risky_options.extend_from_slice(GIT_LISTING_WRITES);
    }
    let mut operands = options_and_operands("git", arguments, &risky_options, false, places)?;
    // `git branch NAME` creates a branch, `git tag NAME` a tag, `git remote add` a remote:
    // these list only with no operand, or with an option that makes them list (whose
    // operands are patterns or commits); `git remote` also as `get-url NAME` and `show`.
    if listing_only && operands.iter().any(|word| word.positional) {
        let lists = arguments.iter().any(|word| {
            GIT_LISTING
                .iter()
                .any(|option| word.text.starts_with(option))
        });
        let first = operands.iter().position(|word| word.positional);
        let remote_reads = subcommand == "remote"
            && matches!(first.map(|at| operands[at].text), Some("get-url" | "show"));
        if let Some(at) = first.filter(|_| remote_reads) {
            operands.remove(at);
        } else if !lists || subcommand == "remote" {
            return Err(NotReadOnly::TooManyOperands(format!("git {subcommand}")));
        }
    }
    for operand in operands {
        inside(operand.text, operand.globbed, places)?;
    }
    Ok(())
}

/// Whether the long option `--name` is `risky` or an abbreviation of it.
fn long_is_risky(name: &str, risky: &str) -> bool {
    risky.starts_with("--") && name.len() > 2 && risky.starts_with(name)
}

/// The operands of `words` after every option is checked against `risky`; the values of
/// `--long=value` options count as operands (they may name files), and every tail longer than
/// one character of a short-option cluster must stay inside. `whole_words`: options are
/// matched as whole words (`find -exec`), never as clusters.
fn options_and_operands<'w>(
    program: &str,
    words: &[Word<'w>],
    risky: &[&str],
    whole_words: bool,
    places: &ReadPlaces<'_>,
) -> Result<Vec<Word<'w>>, NotReadOnly> {
    let refuse = |option: &str| NotReadOnly::RiskyOption {
        program: program.into(),
        option: option.into(),
    };
    let mut operands = Vec::new();
    let mut options_end = false;
    for word in words {
        let text = word.text;
        if options_end || !text.starts_with('-') || text == "-" {
            if !text.is_empty() {
                operands.push(*word);
            }
            continue;
        }
        if text == "--" {
            options_end = true;
            continue;
        }
        if whole_words {
            if let Some(option) = risky.iter().find(|option| **option == text) {
                return Err(refuse(option));
            }
            continue;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            let spelled = format!("--{name}");
            if let Some(option) = risky.iter().find(|option| long_is_risky(&spelled, option)) {
                return Err(refuse(option));
            }
            if let Some(value) = value.filter(|value| !value.is_empty()) {
                operands.push(Word {
                    text: value,
                    globbed: word.globbed,
                    positional: false,
                });
            }
            continue;
        }
        // A cluster of short options, whose tail may be a value (`-n5`, `-f../x`).
        let cluster = &text[1..];
        if let Some(option) = risky
            .iter()
            .filter(|option| option.len() == 2 && !option.starts_with("--"))
            .find(|option| cluster.contains(&option[1..]))
        {
            return Err(refuse(option));
        }
        for (at, _) in cluster.char_indices().skip(1) {
            let tail = &cluster[at..];
            if tail.chars().count() > 1 {
                inside(tail, word.globbed, places)?;
            }
        }
    }
    Ok(operands)
}

#[cfg(test)]
#[path = "read_only_commands_tests.rs"]
mod tests;
