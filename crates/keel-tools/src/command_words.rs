//! The command a simple command really runs, for `bash(...)` rules, and whether a rule's
//! pattern could match a command of which only the start can be read.
//!
//! The words come from `command_line`, already taken apart by a shell parser and with their
//! quotes removed; nothing here reads shell syntax. Like `command_line`, this is a convenience
//! for rules and not a sandbox.
//!
//! Invariants:
//! - `command_start` skips leading `NAME=value` assignments and the wrapper commands in
//!   `WRAPPERS` (with their options and option values); `None` when the words run out first.
//! - `canonical` is the words from the command start on, the command word reduced to its file
//!   name (`/bin/rm` reads `rm`); it is empty when the words run out before a command word.
//!   So for words `w` and any words `v` after them, `canonical(w)` is empty or a prefix of
//!   `canonical(w ++ v)`: the canonical form of a readable start begins every canonical form
//!   the whole command can have.
//! - `code_of` names the code a command runs from text: all arguments of `eval`, the first
//!   of `trap`, the `CODE` of `sh`/`bash`/`dash`/`zsh`/`ksh -c CODE`; `source`/`.` and a shell
//!   with an unreadable option run code no word shows (`Code::Unseen`); so do the builtins in
//!   `EVALUATING` given a literal `$(`/backtick (bash evaluates subscripts), assignments to
//!   the variables in `CODE_VARIABLES`, and `mapfile -C CODE` reads `CODE`.
//! - `could_start(pattern, prefix)` is true whenever some text that begins with `prefix`
//!   matches the glob `pattern` (`*` and `?` as globset reads them, any character included).
//!   It may also be true when none does: a `[…]` class is read as any one character and a
//!   `{…}` alternation as any text, so it over-approximates and never under-approximates.

/// Commands that run the command that follows them.
const WRAPPERS: [&str; 15] = [
    "command", "builtin", "exec", "env", "nice", "nohup", "sudo", "doas", "xargs", "coproc",
    "time", "timeout", "stdbuf", "setsid", "ionice",
];

/// Options of wrappers that take a value as the next word.
const OPTIONS_WITH_VALUE: [(&str, &str); 9] = [
    ("nice", "-n"),
    ("sudo", "-u"),
    ("sudo", "-g"),
    ("doas", "-u"),
    ("env", "-u"),
    ("xargs", "-n"),
    ("xargs", "-I"),
    ("ionice", "-c"),
    ("timeout", "-s"),
];

/// Commands that change how the shell reads what follows them, or run code from elsewhere.
pub const UNREAD_COMMANDS: [&str; 8] = [
    "eval", "exec", "source", ".", "alias", "builtin", "command", "trap",
];

/// Shells whose `-c` argument is code.
const SHELLS: [&str; 5] = ["sh", "bash", "dash", "zsh", "ksh"];

/// Builtins that evaluate text as arithmetic or names (`unset 'a[$(cmd)]'` runs `cmd`).
const EVALUATING: [&str; 14] = [
    "let",
    "declare",
    "typeset",
    "local",
    "export",
    "readonly",
    "unset",
    "read",
    "printf",
    "test",
    "[",
    "mapfile",
    "readarray",
    "wait",
];

/// Variables whose value bash runs or expands later (`PS4` under `set -x`, `BASH_ENV` ...).
const CODE_VARIABLES: [&str; 7] = [
    "PS0=",
    "PS1=",
    "PS2=",
    "PS4=",
    "PROMPT_COMMAND=",
    "BASH_ENV=",
    "ENV=",
];

/// Code a simple command runs from text rather than from its own words.
#[derive(Debug, PartialEq, Eq)]
pub enum Code<'w> {
    None,
    /// Code from elsewhere (`source FILE`, `. FILE`), or words that may be `-c`: unseen.
    Unseen,
    /// These words, joined by spaces, are code (`eval ...`, `trap CODE`, `sh -c CODE`);
    /// `None` for a word that cannot be read literally.
    Words(Vec<Option<&'w str>>),
}

/// Whether the command is or goes through one of `UNREAD_COMMANDS`, and the code it runs
/// from text. `words` have quotes removed, `None` for a word that cannot be read literally.
pub fn code_of(words: &[Option<String>]) -> (bool, Code<'_>) {
    let readable: Vec<String> = words.iter().map_while(Clone::clone).collect();
    let Some(start) = command_start(&readable) else {
        return (false, Code::None);
    };
    let runner = readable
        .iter()
        .take(start + 1)
        .any(|word| UNREAD_COMMANDS.contains(&word.as_str()));
    let args = words.get(start + 1..).unwrap_or_default().iter();
    let mut args = args.map(Option::as_deref);
    let code = match readable.get(start).map(String::as_str) {
        Some("eval") => Code::Words(args.skip_while(|w| *w == Some("--")).collect()),
        Some("trap") => {
            let mut code = args.skip_while(|w| w.is_some_and(|w| w.starts_with('-')));
            Code::Words(code.next().into_iter().collect())
        }
        Some("source" | ".") => Code::Unseen,
        Some("mapfile" | "readarray") => match args.skip_while(|w| *w != Some("-C")).nth(1) {
            Some(callback) => Code::Words(vec![callback]),
            None => Code::None,
        },
        Some(shell) if SHELLS.contains(&shell) => shell_code(&mut args),
        _ => Code::None,
    };
    let literal = || words.iter().flatten();
    let evaluating = readable
        .get(start)
        .is_some_and(|name| EVALUATING.contains(&name.as_str()));
    let evaluated = evaluating && literal().any(|word| word.contains("$(") || word.contains('`'));
    let later = literal().any(|word| CODE_VARIABLES.iter().any(|name| word.starts_with(name)));
    match code {
        Code::None if evaluated || later => (runner, Code::Unseen),
        Code::None => (runner, code),
        Code::Unseen | Code::Words(_) => (true, code),
    }
}

/// The code word of `sh [options] -c CODE`, from the shell's arguments.
fn shell_code<'w>(args: &mut impl Iterator<Item = Option<&'w str>>) -> Code<'w> {
    let mut takes_code = false;
    while let Some(arg) = args.next() {
        let Some(text) = arg else {
            return Code::Unseen;
        };
        if text == "--" {
            break;
        }
        if text.starts_with("--") {
            continue;
        }
        if text.len() > 1 && (text.starts_with('-') || text.starts_with('+')) {
            takes_code |= text.contains('c');
            if text.ends_with('o') {
                args.next(); // `-o option`
            }
            continue;
        }
        return if takes_code {
            Code::Words(vec![arg])
        } else {
            Code::None
        };
    }
    match args.next() {
        Some(arg) if takes_code => Code::Words(vec![arg]),
        _ => Code::None,
    }
}

/// Whether `word` is a `NAME=value` assignment.
fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// The index of the command word: past assignments and wrappers (see the module invariants).
pub fn command_start(words: &[String]) -> Option<usize> {
    let mut index = 0;
    loop {
        let word = words.get(index)?;
        if is_assignment(word) {
            index += 1;
            continue;
        }
        let Some(wrapper) = WRAPPERS.iter().find(|wrapper| *wrapper == word) else {
            return Some(index);
        };
        index += 1;
        while let Some(option) = words.get(index) {
            if option.starts_with('-') {
                let takes_value = OPTIONS_WITH_VALUE.contains(&(*wrapper, option.as_str()));
                index += if takes_value { 2 } else { 1 };
            } else if *wrapper == "env" && is_assignment(option) {
                index += 1;
            } else {
                break;
            }
        }
        if *wrapper == "timeout" {
            index += 1; // the duration
        }
    }
}

/// `words` as the command they run, for matching rules (see the module invariants).
pub fn canonical(words: &[String]) -> String {
    let Some(start) = command_start(words) else {
        return String::new();
    };
    let mut rest: Vec<&str> = words
        .get(start..)
        .unwrap_or_default()
        .iter()
        .map(String::as_str)
        .collect();
    if let Some(first) = rest.first_mut()
        && let Some(name) = first.rsplit('/').next()
        && !name.is_empty()
    {
        *first = name;
    }
    rest.join(" ")
}

/// One element of a glob, as `could_start` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Element {
    Literal(char),
    /// `?`, or a `[…]` class.
    AnyOne,
    /// `*`, `**`, or a `{…}` alternation.
    AnyRun,
}

/// The elements of a glob pattern, over-approximated (see the module invariants).
fn elements(pattern: &str) -> Vec<Element> {
    let mut elements = Vec::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped) => elements.push(Element::Literal(escaped)),
                None => elements.push(Element::AnyRun),
            },
            '*' => elements.push(Element::AnyRun),
            '?' => elements.push(Element::AnyOne),
            '[' => {
                // A `]` right after `[`, `[!` or `[^` is a member, not the end.
                if chars.peek().is_some_and(|next| matches!(next, '!' | '^')) {
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    chars.next();
                }
                if chars.by_ref().any(|member| member == ']') {
                    elements.push(Element::AnyOne);
                } else {
                    elements.push(Element::AnyRun);
                }
            }
            '{' => {
                elements.push(Element::AnyRun);
                let _ = chars.by_ref().any(|member| member == '}');
            }
            other => elements.push(Element::Literal(other)),
        }
    }
    elements
}

/// Whether some text beginning with `prefix` could match the glob `pattern` (see the module
/// invariants).
pub fn could_start(pattern: &str, prefix: &str) -> bool {
    let elements = elements(pattern);
    // `states[i]`: the first `i` elements can have matched the text read so far.
    let mut states = vec![false; elements.len() + 1];
    let close = |states: &mut Vec<bool>| {
        for (index, element) in elements.iter().enumerate() {
            if *element == Element::AnyRun
                && states.get(index) == Some(&true)
                && let Some(next) = states.get_mut(index + 1)
            {
                *next = true;
            }
        }
    };
    if let Some(first) = states.first_mut() {
        *first = true;
    }
    close(&mut states);
    for c in prefix.chars() {
        let mut next = vec![false; elements.len() + 1];
        for (index, element) in elements.iter().enumerate() {
            if states.get(index) != Some(&true) {
                continue;
            }
            let target = match element {
                Element::Literal(literal) if *literal == c => index + 1,
                Element::Literal(_) => continue,
                Element::AnyOne => index + 1,
                Element::AnyRun => index,
            };
            if let Some(state) = next.get_mut(target) {
                *state = true;
            }
        }
        close(&mut next);
        if !next.contains(&true) {
            return false;
        }
        states = next;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn spellings_of_one_command_read_the_same() {
        for spelling in [
            "rm -rf v",
            "/bin/rm -rf v",
            "command rm -rf v",
            "env rm -rf v",
            "env -i A=1 rm -rf v",
            "FOO=1 rm -rf v",
            "nice -n 5 rm -rf v",
            "sudo -u root rm -rf v",
            "coproc rm -rf v",
            "timeout 5 rm -rf v",
            "exec /usr/bin/rm -rf v",
        ] {
            assert_eq!(canonical(&owned(spelling)), "rm -rf v", "{spelling}");
        }
        assert_eq!(canonical(&owned("cargo test --all")), "cargo test --all");
        assert_eq!(canonical(&owned("A=1")), "");
    }

    #[test]
    fn a_start_that_ends_inside_the_wrappers_reads_empty() {
        for start in [
            "sudo",
            "nice -n",
            "sudo -u root",
            "timeout",
            "A=1",
            "env -i",
        ] {
            assert_eq!(canonical(&owned(start)), "", "{start}");
            assert_eq!(command_start(&owned(start)), None, "{start}");
        }
        assert_eq!(canonical(&owned("sudo /bin/rm")), "rm");
    }

    /// The code of a command whose words are `line` split at spaces, `?` an unreadable word.
    fn code(line: &str) -> String {
        let words: Vec<Option<String>> = line
            .split(' ')
            .map(|w| (w != "?").then(|| w.to_string()))
            .collect();
        format!("{:?}", code_of(&words).1)
    }

    #[test]
    fn code_words_are_found() {
        assert_eq!(code("eval -- a b"), r#"Words([Some("a"), Some("b")])"#);
        assert_eq!(code("eval a ?"), r#"Words([Some("a"), None])"#);
        assert_eq!(code("trap -p x EXIT"), r#"Words([Some("x")])"#);
        assert_eq!(code("sudo bash -ec x y"), r#"Words([Some("x")])"#);
        assert_eq!(code("sh -o errexit -c x"), r#"Words([Some("x")])"#);
        assert_eq!(code("sh -c -- x"), r#"Words([Some("x")])"#);
        assert_eq!(code("sh ? x"), "Unseen");
        assert_eq!(code("source x"), "Unseen");
        assert_eq!(code("bash x.sh -c"), "None");
        assert_eq!(code("cargo eval x"), "None");
        assert_eq!(code("mapfile -t -C x -c 1"), r#"Words([Some("x")])"#);
        assert_eq!(code("unset a[$(x)]"), "Unseen");
        assert_eq!(code("export PS4=x"), "Unseen");
        assert_eq!(code("echo a[$(x)]"), "None");
        assert!(code_of(&[Some("command".into()), Some("ls".into())]).0);
    }

    #[test]
    fn a_prefix_could_start_a_match_only_if_the_pattern_allows_it() {
        assert!(could_start("rm -rf *", ""));
        assert!(could_start("rm -rf *", "rm"));
        assert!(could_start("rm -rf *", "rm -rf /tmp x"));
        assert!(!could_start("rm -rf *", "cargo test"));
        assert!(could_start("rm -rf *", "rm -r"), "`rm -r` may go on `f`");
        assert!(!could_start("rm -rf *", "rm -fr"));
        assert!(could_start("rm -r", "rm -r"));
        assert!(!could_start("rm -r", "rm -rf"));
        assert!(could_start("git push * --force", "git push origin main"));
        assert!(could_start("*sudo*", "anything at all"));
        assert!(could_start("r? -rf", "rm -rf"));
        assert!(
            could_start("[rR]m *", "Rm x"),
            "a class is any one character"
        );
        assert!(
            could_start("{rm,mv} *", "mv a"),
            "an alternation is any text"
        );
        assert!(could_start("\\*x", "*x"));
        assert!(!could_start("\\*x", "ax"));
    }
}
