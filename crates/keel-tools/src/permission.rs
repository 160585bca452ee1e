//! Permission policy: modes and allow/ask/deny rules (docs/configuration.md#permissions).
//!
//! Invariants:
//! - `PermissionMode`'s serialized names (`read-only`, `plan`, `ask`, `auto`) are part of the
//!   config contract (docs/configuration.md#permissions) and of ACP's session modes.
//! - Deny wins over everything; then `read-only` and `plan` refuse every tool that can change
//!   anything (the modes differ only in `propose_plan`, which the agent answers);
//!   then a project's ask rules, then allow, then the user's ask rules; then read-only tools
//!   run, a read-only command (`Reach::ReadOnlyCommand`) in `ask` mode runs confined to
//!   reading unless `ask_read_only_commands` is set, and the mode decides the rest.
//! - A rule is `tool` or `tool(glob)`; the glob is matched against the call's subject (the
//!   command line for `bash`, the resolved path for path tools; see `ValidCall::subject`).
//! - A `bash` line is taken apart by a shell parser into simple commands (`command_line`).
//!   A pattern-less `bash` rule matches every line. Otherwise an allow rule allows the line
//!   only if the line was read in full (no construct of `command_line::Construct`, nothing
//!   hidden) and every simple command, as written, matches an allow rule.
//! - A deny or ask rule with a pattern fails closed: it applies if the line may run code no
//!   command shows (`CommandLine::hidden`: unparseable, `eval "$X"`, `source` ...); or if it
//!   matches the raw line, the line with blanks collapsed, a line of a comment or of a
//!   here-document or here-string (`CommandLine::inert`); or any simple command as written,
//!   with quotes removed, or in canonical form (`command_words::canonical`); or, for a command
//!   with a word that cannot be read literally, if some text beginning with the words before
//!   that word (plain or canonical) could match (`command_words::could_start`) — so
//!   `$'rm' -rf /` is denied by `bash(rm -rf *)`, and `cargo test "$X"` is not.
//! - This is a convenience, not a sandbox: a shell line can run what its text does not show.
//! - Rules are validated when they are parsed (`PermissionRule::parse`), before any policy
//!   holds them; a bad rule is a `RuleError` naming it.

use crate::command_line::{self, CommandLine, SimpleCommand};
use crate::command_words::{canonical, could_start};
use crate::specs::BuiltinTool;
use globset::{Glob, GlobMatcher};
use serde::{Deserialize, Serialize};

/// How much keel may do without asking (docs/configuration.md#permissions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PermissionMode {
    /// No tool may change anything.
    ReadOnly,
    /// Nothing is changed until the person approves a plan the model proposes
    /// (`propose_plan`).
    Plan,
    /// Changes need the user's approval; headless runs fail closed.
    Ask,
    /// Changes inside the workspace run without asking.
    Auto,
}

impl PermissionMode {
    pub fn parse(name: &str) -> Option<PermissionMode> {
        match name {
            "read-only" => Some(Self::ReadOnly),
            "plan" => Some(Self::Plan),
            "ask" => Some(Self::Ask),
            "auto" => Some(Self::Auto),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::Plan => "plan",
            Self::Ask => "ask",
            Self::Auto => "auto",
        }
    }

    /// Every mode, strictest first.
    pub const ALL: [PermissionMode; 4] = [Self::ReadOnly, Self::Plan, Self::Ask, Self::Auto];

    /// What the mode means, in words for the model (told when the mode changes).
    pub fn meaning(self) -> &'static str {
        match self {
            Self::ReadOnly => {
                "tools that change files or run commands outside a read-only sandbox are refused"
            }
            Self::Plan => {
                "nothing is changed until the user approves a plan: research with read-only \
                 tools, then present the plan with propose_plan"
            }
            Self::Ask => "changes need the user's approval",
            Self::Auto => "changes inside the workspace run without asking; the rules still apply",
        }
    }

    /// Whether only what reads may run (`read-only`, and `plan` until a plan is approved).
    pub fn only_reads(self) -> bool {
        matches!(self, Self::ReadOnly | Self::Plan)
    }

    /// Why a call that could change something is refused in this mode (`None`: it is not).
    pub fn refusal(self) -> Option<&'static str> {
        match self {
            Self::ReadOnly => Some("denied: keel is in read-only mode"),
            Self::Plan => Some(
                "denied: keel is in plan mode, where nothing is changed until the user approves \
                 a plan: research with read-only tools, then present the plan with propose_plan",
            ),
            Self::Ask | Self::Auto => None,
        }
    }
}

/// Why a rule's text is not a rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("rule `{rule}`: missing the closing `)`")]
    MissingParen { rule: String },
    #[error("rule `{rule}`: bad pattern ({reason})")]
    BadPattern { rule: String, reason: String },
    #[error("rule `{rule}`: expected `tool` or `tool(pattern)`")]
    Malformed { rule: String },
}

/// Whether a call can change anything (or reach outside the workspace).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Reads the workspace only.
    ReadsWorkspace,
    /// Writes, runs commands, or reads outside the workspace.
    Sensitive,
    /// A command line on the read-only list (`read_only_commands`) that will run under an
    /// enforced read-only sandbox if it is not asked about.
    ReadOnlyCommand,
}

/// What the policy says about one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Runs without a question, confined to reading: a read-only command in `ask` mode.
    AllowReadOnly,
    /// Needs the user's approval (headless runs refuse).
    Ask,
    Deny(String),
}

/// One allow, ask or deny rule: `tool` or `tool(glob)`.
#[derive(Clone, Debug)]
pub struct PermissionRule {
    text: String,
    tool: String,
    subject: Option<GlobMatcher>,
}

impl PermissionRule {
    pub fn parse(text: &str) -> Result<PermissionRule, RuleError> {
        let trimmed = text.trim();
        let (tool, subject) = match trimmed.split_once('(') {
            Some((tool, rest)) => {
                let pattern = rest
                    .strip_suffix(')')
                    .ok_or_else(|| RuleError::MissingParen {
                        rule: text.to_string(),
                    })?;
                // Path subjects are normalised (no `./`), so patterns are too.
                let pattern = if tool.trim() == BuiltinTool::Bash.name() {
                    pattern
                } else {
                    pattern.trim_start_matches("./")
                };
                let glob = Glob::new(pattern).map_err(|error| RuleError::BadPattern {
                    rule: text.to_string(),
                    reason: error.to_string(),
                })?;
                (tool.trim(), Some(glob.compile_matcher()))
            }
            None => (trimmed, None),
        };
        // A tool name, or a prefix of names ending in `*` (`mcp__github__*`).
        let stem = tool.strip_suffix('*').unwrap_or(tool);
        if stem.is_empty()
            || !stem
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(RuleError::Malformed {
                rule: text.to_string(),
            });
        }
        Ok(PermissionRule {
            text: text.to_string(),
            tool: tool.to_string(),
            subject,
        })
    }

    fn matches(&self, tool: &str, subject: &str) -> bool {
        let named = match self.tool.strip_suffix('*') {
            Some(prefix) => tool.starts_with(prefix),
            None => self.tool == tool,
        };
        named
            && self
                .subject
                .as_ref()
                .is_none_or(|glob| glob.is_match(subject))
    }
}

/// What rules are matched against for one call.
enum Subjects<'a> {
    /// A path (or nothing): one subject.
    Plain(&'a str),
    /// A `bash` command line, taken apart.
    Command { raw: &'a str, line: CommandLine },
}

/// Whether `rule` is written for `tool` (whatever its pattern).
fn names_tool(rule: &PermissionRule, tool: &str) -> bool {
    match rule.tool.strip_suffix('*') {
        Some(prefix) => tool.starts_with(prefix),
        None => rule.tool == tool,
    }
}

/// `text` with its runs of blanks collapsed to one space and trimmed.
fn collapsed(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether a deny or ask rule's pattern applies to one simple command: its text as written,
/// its words with quotes removed, or their canonical form; and when some word cannot be read,
/// whenever a text beginning with the words before it (plain or canonical) could match.
fn applies_to_command(glob: &GlobMatcher, command: &SimpleCommand) -> bool {
    if glob.is_match(&command.written) {
        return true;
    }
    match command.literal_words() {
        Some(words) => glob.is_match(words.join(" ")) || glob.is_match(canonical(&words)),
        None => {
            let start = command.readable_start();
            let pattern = glob.glob().glob();
            could_start(pattern, &start.join(" ")) || could_start(pattern, &canonical(&start))
        }
    }
}

/// Whether a deny or ask rule applies to a command line (see the module invariants).
fn applies_to_line(rule: &PermissionRule, tool: &str, raw: &str, line: &CommandLine) -> bool {
    if !names_tool(rule, tool) {
        return false;
    }
    let Some(glob) = &rule.subject else {
        return true;
    };
    line.hidden
        || glob.is_match(raw)
        || glob.is_match(collapsed(raw))
        || line.inert.iter().any(|text| {
            glob.is_match(collapsed(text)) || text.lines().any(|l| glob.is_match(collapsed(l)))
        })
        || line
            .commands
            .iter()
            .any(|command| applies_to_command(glob, command))
}

impl<'a> Subjects<'a> {
    fn of(tool: &str, subject: &'a str) -> Subjects<'a> {
        if tool == BuiltinTool::Bash.name() {
            Subjects::Command {
                raw: subject,
                line: command_line::parse(subject),
            }
        } else {
            Subjects::Plain(subject)
        }
    }

    /// The first rule that matches the call or any command in it (deny and ask rules).
    fn any_match<'r>(&self, rules: &'r [PermissionRule], tool: &str) -> Option<&'r PermissionRule> {
        rules.iter().find(|rule| match self {
            Subjects::Plain(subject) => rule.matches(tool, subject),
            Subjects::Command { raw, line } => applies_to_line(rule, tool, raw, line),
        })
    }

    /// Whether `rules` allow the whole call: a line read in full, every command of it matched.
    fn all_match(&self, rules: &[PermissionRule], tool: &str) -> bool {
        match self {
            Subjects::Plain(subject) => rules.iter().any(|rule| rule.matches(tool, subject)),
            Subjects::Command { raw, line } => {
                if rules
                    .iter()
                    .any(|rule| rule.tool == tool && rule.subject.is_none())
                {
                    return true;
                }
                if !line.understood() {
                    return false;
                }
                if line.commands.is_empty() {
                    let whole = raw.trim();
                    return rules.iter().any(|rule| rule.matches(tool, whole));
                }
                // Allow rules see the command as written: `sudo cargo test` is not `cargo test`.
                line.commands.iter().all(|command| {
                    command.literal_words().is_some()
                        && rules
                            .iter()
                            .any(|rule| rule.matches(tool, &command.written))
                })
            }
        }
    }
}

#[derive(Clone, Debug)]
pub struct PermissionPolicy {
    pub mode: PermissionMode,
    allow: Vec<PermissionRule>,
    ask: Vec<PermissionRule>,
    deny: Vec<PermissionRule>,
    /// Ask rules that beat allow rules: a project's (docs/configuration.md#permissions).
    overriding_ask: Vec<PermissionRule>,
    /// Ask about read-only commands too (`ask_read_only_commands`).
    ask_read_only_commands: bool,
}

impl PermissionPolicy {
    /// A policy from rule texts; the first bad rule is the error.
    pub fn new(
        mode: PermissionMode,
        allow: &[String],
        ask: &[String],
        deny: &[String],
    ) -> Result<PermissionPolicy, RuleError> {
        let parse = |rules: &[String]| {
            rules
                .iter()
                .map(|r| PermissionRule::parse(r))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(PermissionPolicy::from_rules(
            mode,
            parse(allow)?,
            parse(ask)?,
            parse(deny)?,
        ))
    }

    /// A policy from rules already parsed (so their caller could say where each came from).
    pub fn from_rules(
        mode: PermissionMode,
        allow: Vec<PermissionRule>,
        ask: Vec<PermissionRule>,
        deny: Vec<PermissionRule>,
    ) -> PermissionPolicy {
        PermissionPolicy {
            mode,
            allow,
            ask,
            deny,
            overriding_ask: Vec::new(),
            ask_read_only_commands: false,
        }
    }

    /// The same policy, asking about read-only commands too when `ask` is set
    /// (`ask_read_only_commands`).
    pub fn with_ask_read_only_commands(mut self, ask: bool) -> PermissionPolicy {
        self.ask_read_only_commands = ask;
        self
    }

    /// Whether read-only commands are asked about like any other.
    pub fn asks_read_only_commands(&self) -> bool {
        self.ask_read_only_commands
    }

    /// The same policy with ask rules that are checked before the allow rules (a project's ask
    /// rules: a repository may make keel ask where the user's rule would allow).
    pub fn with_overriding_ask(mut self, rules: Vec<PermissionRule>) -> PermissionPolicy {
        self.overriding_ask = rules;
        self
    }

    pub fn mode_only(mode: PermissionMode) -> PermissionPolicy {
        PermissionPolicy::from_rules(mode, Vec::new(), Vec::new(), Vec::new())
    }

    /// Decide for `tool` acting on `subject` (see `ValidCall::subject`).
    /// Whether an allow rule written for exactly this tool names this subject with a pattern
    /// of its own (not a bare rule, a tool-name prefix or a lone `*`), and no deny rule matches:
    /// the explicit consent some checks (a fetch of a private address) require.
    pub fn names_subject(&self, tool: &str, subject: &str) -> bool {
        let subjects = Subjects::of(tool, subject);
        subjects.any_match(&self.deny, tool).is_none()
            && self.allow.iter().any(|rule| {
                rule.tool == tool
                    && rule.subject.as_ref().is_some_and(|glob| {
                        !glob.glob().glob().trim_matches('*').is_empty() && glob.is_match(subject)
                    })
            })
    }

    /// Whether an ask rule (a project's or the user's) matches `tool` on `subject`: a hook's
    /// `allow` never answers such a question.
    pub fn asks(&self, tool: &str, subject: &str) -> bool {
        let subjects = Subjects::of(tool, subject);
        subjects.any_match(&self.overriding_ask, tool).is_some()
            || subjects.any_match(&self.ask, tool).is_some()
    }

    pub fn decide(&self, tool: &str, subject: &str, reach: Reach) -> Decision {
        let changes_things = reach != Reach::ReadsWorkspace;
        let subjects = Subjects::of(tool, subject);
        if let Some(rule) = subjects.any_match(&self.deny, tool) {
            return Decision::Deny(format!("denied by the rule `{}`", rule.text));
        }
        if let Some(refusal) = self.mode.refusal().filter(|_| changes_things) {
            return Decision::Deny(refusal.into());
        }
        if subjects.any_match(&self.overriding_ask, tool).is_some() {
            return Decision::Ask;
        }
        if subjects.all_match(&self.allow, tool) {
            return Decision::Allow;
        }
        if subjects.any_match(&self.ask, tool).is_some() {
            return Decision::Ask;
        }
        if !changes_things {
            return Decision::Allow;
        }
        if reach == Reach::ReadOnlyCommand
            && self.mode == PermissionMode::Ask
            && !self.ask_read_only_commands
        {
            return Decision::AllowReadOnly;
        }
        match self.mode.refusal() {
            Some(refusal) => Decision::Deny(refusal.into()),
            None if self.mode == PermissionMode::Auto => Decision::Allow,
            None => Decision::Ask,
        }
    }
}

#[cfg(test)]
mod tests;
