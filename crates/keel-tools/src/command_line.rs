//! Splitting a shell command line into simple commands, so that `bash(...)` permission rules
//! see each command a line runs, not just the line's text.
//!
//! This is a convenience for rules, not a sandbox: it knows quotes, backslash escapes, the
//! list and pipe operators, groups and substitutions, and nothing else of the shell (no
//! expansion, aliases, functions, `eval`, `sh -c`, here-documents). A line can always run
//! something its text does not show; only the workspace guard and the permission mode bound
//! what a command can do.
//!
//! Invariants:
//! - A line splits on `;`, `&&`, `||`, `|`, `&` and newlines outside single and double quotes
//!   and not after a backslash (`>&` and `&>` are redirections, not separators).
//! - The insides of `$(…)`, `` `…` ``, `<(…)` and `>(…)` (also within double quotes) and of
//!   `(…)` subshells are split out as commands of their own; the line is then marked as having
//!   a substitution if it had `$(`, a backtick, `<(` or `>(` outside single quotes.
//! - Each command has its runs of unquoted blanks collapsed to one space and is trimmed; a
//!   leading `{` word and a trailing `}` word of a group are removed, and so are leading
//!   keywords (`if`, `then`, `do`, `!` ...) and commands that are only a closing keyword
//!   (`fi`, `done` ...); empty commands are dropped. Quoted text is kept verbatim.

/// A command line taken apart for permission rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandLine {
    /// The simple commands, normalised, in order.
    pub commands: Vec<String>,
    /// The whole line with unquoted blanks collapsed and trimmed.
    pub normalised: String,
    /// Whether the line runs a command or process substitution.
    pub has_substitution: bool,
}

/// Where the scanner is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Context {
    /// Top level, a subshell or a `$(…)`/`<(…)`/`>(…)` (closed by `)`).
    Code,
    /// Inside backticks (closed by a backtick).
    Backtick,
    Single,
    Double,
}

struct Scanner {
    commands: Vec<String>,
    current: String,
    normalised: String,
    stack: Vec<Context>,
    has_substitution: bool,
    /// The length of `current` right after a backslash-escaped character was pushed.
    escaped_end: Option<usize>,
}

impl Scanner {
    fn context(&self) -> Context {
        self.stack.last().copied().unwrap_or(Context::Code)
    }

    /// Push `c` to the current command and the whole line.
    fn push(&mut self, c: char) {
        self.current.push(c);
        self.normalised.push(c);
    }

    /// An unquoted blank: at most one space, and none at the start.
    fn blank(&mut self) {
        if !self.current.is_empty() && !self.current.ends_with(' ') {
            self.current.push(' ');
        }
        if !self.normalised.is_empty() && !self.normalised.ends_with(' ') {
            self.normalised.push(' ');
        }
    }

    /// End the current command.
    fn split(&mut self) {
        let command = strip_group(self.current.trim());
        if !command.is_empty() {
            self.commands.push(command.to_string());
        }
        self.current.clear();
        self.escaped_end = None;
    }

    /// A separator or grouping symbol: it ends the command but stays in the whole line.
    fn operator(&mut self, c: char) {
        self.split();
        self.normalised.push(c);
    }
}

/// Take `line` apart.
pub fn parse(line: &str) -> CommandLine {
    let mut scanner = Scanner {
        commands: Vec::new(),
        current: String::new(),
        normalised: String::new(),
        stack: Vec::new(),
        has_substitution: false,
        escaped_end: None,
    };
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        let context = scanner.context();
        match context {
            Context::Single => {
                scanner.push(c);
                if c == '\'' {
                    scanner.stack.pop();
                }
            }
            Context::Double => match c {
                '\\' => {
                    scanner.push(c);
                    if let Some(next) = chars.next() {
                        scanner.push(next);
                    }
                }
                '"' => {
                    scanner.push(c);
                    scanner.stack.pop();
                }
                '$' if chars.peek() == Some(&'(') => {
                    chars.next();
                    open_substitution(&mut scanner, "$(", Context::Code);
                }
                '`' => open_substitution(&mut scanner, "`", Context::Backtick),
                _ => scanner.push(c),
            },
            Context::Code | Context::Backtick => code_char(&mut scanner, context, c, &mut chars),
        }
    }
    scanner.split();
    CommandLine {
        commands: scanner.commands,
        normalised: scanner.normalised.trim().to_string(),
        has_substitution: scanner.has_substitution,
    }
}

fn open_substitution(scanner: &mut Scanner, opener: &str, context: Context) {
    scanner.split();
    scanner.normalised.push_str(opener);
    scanner.has_substitution = true;
    scanner.stack.push(context);
}

/// One character outside quotes (at the top, in a subshell or in a substitution).
fn code_char(
    scanner: &mut Scanner,
    context: Context,
    c: char,
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
) {
    match c {
        '\\' => match chars.next() {
            // A line continuation is a blank.
            Some('\n') => scanner.blank(),
            Some(next) => {
                scanner.push(c);
                scanner.push(next);
                scanner.escaped_end = Some(scanner.current.len());
            }
            None => scanner.push(c),
        },
        '\'' => {
            scanner.push(c);
            scanner.stack.push(Context::Single);
        }
        '"' => {
            scanner.push(c);
            scanner.stack.push(Context::Double);
        }
        ' ' | '\t' | '\r' => scanner.blank(),
        '`' if context == Context::Backtick => {
            scanner.operator(c);
            scanner.stack.pop();
        }
        '`' => open_substitution(scanner, "`", Context::Backtick),
        '(' => {
            let escaped = scanner.escaped_end == Some(scanner.current.len());
            let opener = match scanner.current.chars().last() {
                Some(prefix @ ('$' | '<' | '>')) if !escaped => {
                    scanner.current.pop();
                    scanner.normalised.pop();
                    Some(prefix)
                }
                _ => None,
            };
            match opener {
                Some(prefix) => {
                    open_substitution(scanner, &format!("{prefix}("), Context::Code);
                }
                None => {
                    scanner.operator(c);
                    scanner.stack.push(Context::Code);
                }
            }
        }
        ')' => {
            scanner.operator(c);
            if context == Context::Code && !scanner.stack.is_empty() {
                scanner.stack.pop();
            }
        }
        '&' if scanner.current.ends_with(['>', '<']) || chars.peek() == Some(&'>') => {
            scanner.push(c);
        }
        ';' | '&' | '|' | '\n' => scanner.operator(c),
        _ => scanner.push(c),
    }
}

/// Words that start a command without being it: group and compound-command keywords.
const LEADING_KEYWORDS: [&str; 10] = [
    "{", "!", "if", "then", "elif", "else", "while", "until", "do", "time",
];

/// Words that end a group or a compound command.
const CLOSING_KEYWORDS: [&str; 4] = ["}", "fi", "done", "esac"];

/// Remove leading keywords (`{`, `if`, `then`, `do`, `!` ...), a trailing `}` word, and a
/// command that is only a closing keyword (`fi`, `done` ...).
fn strip_group(command: &str) -> &str {
    let mut command = command;
    loop {
        let before = command;
        if let Some(rest) = LEADING_KEYWORDS
            .iter()
            .find_map(|word| command.strip_prefix(word)?.strip_prefix(' '))
        {
            command = rest.trim_start();
        }
        if LEADING_KEYWORDS.contains(&command) || CLOSING_KEYWORDS.contains(&command) {
            command = "";
        }
        if let Some(rest) = command.strip_suffix(" }") {
            command = rest.trim_end();
        }
        if command == before {
            return command;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commands(line: &str) -> Vec<String> {
        parse(line).commands
    }

    #[test]
    fn operators_split_and_blanks_collapse() {
        assert_eq!(commands("a&&b"), ["a", "b"]);
        assert_eq!(commands("a||b"), ["a", "b"]);
        assert_eq!(commands("a|b"), ["a", "b"]);
        assert_eq!(commands("a & b;c"), ["a", "b", "c"]);
        assert_eq!(commands("a\nb\n"), ["a", "b"]);
        assert_eq!(commands("  rm \t -rf   /x  "), ["rm -rf /x"]);
        assert_eq!(parse("  rm \t -rf   /x  ").normalised, "rm -rf /x");
    }

    #[test]
    fn empty_segments_are_dropped() {
        assert_eq!(commands(";; a ;;; b ; "), ["a", "b"]);
        assert_eq!(commands("a |& b"), ["a", "b"]);
        assert!(commands("").is_empty());
        assert!(commands(" ; \n ").is_empty());
    }

    #[test]
    fn quotes_keep_separators_and_blanks() {
        assert_eq!(commands("echo 'a; b'  && c"), ["echo 'a; b'", "c"]);
        assert_eq!(
            commands("echo \"a  &&  b\" | c"),
            ["echo \"a  &&  b\"", "c"]
        );
        assert_eq!(commands("echo \"it's\"; d"), ["echo \"it's\"", "d"]);
        assert_eq!(commands("echo 'say \"hi\"; x'"), ["echo 'say \"hi\"; x'"]);
    }

    #[test]
    fn escapes_keep_separators() {
        assert_eq!(commands("echo a\\;b; c"), ["echo a\\;b", "c"]);
        assert_eq!(commands("echo \\& x"), ["echo \\& x"]);
        assert_eq!(commands("echo \"a\\\"; b\"; c"), ["echo \"a\\\"; b\"", "c"]);
        assert_eq!(commands("rm \\\n  -rf /x"), ["rm -rf /x"]);
    }

    #[test]
    fn redirections_are_not_separators() {
        assert_eq!(commands("make 2>&1 | tee log"), ["make 2>&1", "tee log"]);
        assert_eq!(commands("make &> log; ls"), ["make &> log", "ls"]);
    }

    #[test]
    fn groups_and_subshells_are_opened() {
        assert_eq!(commands("(rm -rf /x)"), ["rm -rf /x"]);
        assert_eq!(commands("{ rm -rf /x; }"), ["rm -rf /x"]);
        assert_eq!(
            commands("(cd a && rm -rf b) | c"),
            ["cd a", "rm -rf b", "c"]
        );
        assert!(!parse("(a)").has_substitution);
    }

    #[test]
    fn compound_commands_show_the_commands_they_run() {
        assert_eq!(
            commands("if true; then rm -rf /x; else ls; fi"),
            ["true", "rm -rf /x", "ls"]
        );
        assert_eq!(
            commands("while read f; do rm  $f; done < list"),
            ["read f", "rm $f", "done < list"]
        );
        assert_eq!(commands("! time make"), ["make"]);
        assert_eq!(commands("iffy; done_list"), ["iffy", "done_list"]);
    }

    #[test]
    fn substitutions_are_split_out_and_marked() {
        let line = parse("echo $(rm -rf /x) end");
        assert_eq!(line.commands, ["echo", "rm -rf /x", "end"]);
        assert!(line.has_substitution);
        let quoted = parse("echo \"a $(rm -rf /x) b\"");
        assert!(quoted.commands.contains(&"rm -rf /x".to_string()));
        assert!(quoted.has_substitution);
        assert_eq!(
            commands("echo `rm -rf /x`; ls"),
            ["echo", "rm -rf /x", "ls"]
        );
        assert!(parse("diff <(a) >(b)").has_substitution);
        assert!(parse("echo \"`a`\"").has_substitution);
        let inert = parse("echo '$(a) `b`'");
        assert!(!inert.has_substitution);
        assert_eq!(inert.commands, ["echo '$(a) `b`'"]);
        assert!(!parse("echo \\$(a)").has_substitution);
        assert!(parse("\\$; x$(c)").has_substitution);
    }
}
