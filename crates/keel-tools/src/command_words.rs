//! The command a simple command really runs, for `bash(...)` rules: the words as the shell
//! reads them, without the wrappers and assignments that only change how it runs.
//!
//! Like `command_line`, a convenience for rules and not a sandbox: `$x -rf dir`, `eval`,
//! `sh -c`, aliases and functions defined elsewhere still run what no text shows.
//!
//! Invariants:
//! - Quotes and backslashes are removed the way the shell removes them (`'rm'`, `r""m` and
//!   `\rm` all read `rm`); runs of blanks separate words.
//! - Leading `NAME=value` assignments, `{`, `(`, `NAME()`, `function NAME` and the wrapper
//!   commands in `WRAPPERS` (with their options) are dropped; the command word is reduced to
//!   its file name (`/bin/rm` reads `rm`).

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

/// The words of `command` after quote removal.
pub fn words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for inner in chars.by_ref() {
                    if inner == '\'' {
                        break;
                    }
                    current.push(inner);
                }
            }
            '"' => {
                in_word = true;
                while let Some(inner) = chars.next() {
                    match inner {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some(next @ ('"' | '\\' | '$' | '`')) => current.push(next),
                            Some(next) => {
                                current.push('\\');
                                current.push(next);
                            }
                            None => current.push('\\'),
                        },
                        other => current.push(other),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(next) = chars.next() {
                    current.push(next);
                }
            }
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            other => {
                in_word = true;
                current.push(other);
            }
        }
    }
    if in_word {
        words.push(current);
    }
    words
}

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

/// `command` as the command it runs, for matching rules (see the module invariants).
pub fn canonical(command: &str) -> String {
    let words = words(command);
    let mut index = 0;
    while let Some(word) = words.get(index) {
        if is_assignment(word) || word == "{" || word == "(" || word.ends_with("()") {
            index += 1;
            continue;
        }
        if word == "function" {
            index += 2;
            continue;
        }
        let Some(wrapper) = WRAPPERS.iter().find(|wrapper| *wrapper == word) else {
            break;
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
    let mut rest: Vec<String> = words.get(index..).unwrap_or_default().to_vec();
    if let Some(first) = rest.first_mut()
        && let Some(name) = first.rsplit('/').next()
        && !name.is_empty()
    {
        *first = name.to_string();
    }
    rest.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_command_read_the_same() {
        for spelling in [
            "rm -rf v",
            "/bin/rm -rf v",
            "\\rm -rf v",
            "'rm' -rf v",
            "r\"\"m -rf v",
            "command rm -rf v",
            "env rm -rf v",
            "env -i A=1 rm -rf v",
            "FOO=1 rm -rf v",
            "nice -n 5 rm -rf v",
            "sudo -u root rm -rf v",
            "coproc rm -rf v",
            "function f { rm -rf v",
            "f() { rm -rf v",
            "timeout 5 rm -rf v",
            "exec /usr/bin/rm -rf v",
        ] {
            assert_eq!(canonical(spelling), "rm -rf v", "{spelling}");
        }
    }

    #[test]
    fn quoted_arguments_keep_their_text() {
        assert_eq!(
            words(r#"git commit -m "a b\"c" 'd e'"#),
            ["git", "commit", "-m", "a b\"c", "d e"]
        );
        assert_eq!(canonical("cargo test --all"), "cargo test --all");
        assert_eq!(canonical("A=1"), "");
    }
}
