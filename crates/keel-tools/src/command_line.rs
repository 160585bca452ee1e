//! Taking a shell command line apart with a real shell grammar, so that `bash(...)` permission
//! rules see every simple command a line runs and know what they could not read.
//!
//! The grammar is `brush-parser`'s (pure Rust, no C build, a typed AST with exhaustive enums:
//! a new construct in a future version fails to compile here rather than slip past). Its 0.4.0
//! release depends on `insta` outside its tests; that only costs build time. The parser reads
//! bash as `bash -c` does by default: no `extglob`, no POSIX mode.
//!
//! It serves rules, it is not a sandbox (docs/security.md#command-rules: rules are parsed by a
//! real shell grammar and fail closed on what it cannot read; the kernel sandbox is the
//! boundary). A script, a function from the environment, `bash -c "$X"` ... can always run what
//! no text shows.
//!
//! Invariants:
//! - Every simple command is found wherever it sits: in pipelines, `&&`/`||`/`;`/`&` lists,
//!   subshells, brace groups, `if`/`while`/`until`/`for`/`case` bodies, function bodies,
//!   coprocesses, `$(…)`, backticks, `<(…)`/`>(…)` (also inside double quotes and
//!   here-documents), and the literal code of `eval`, `trap`, `sh -c` and `mapfile -C`
//!   (`command_words::code_of`).
//! - A simple command's `written` text is its words and redirections as written, one space
//!   apart; its `words` have their quotes removed, `None` for a word the matcher cannot read
//!   literally (any expansion, ANSI-C or locale quoting, brace expansion, process
//!   substitution).
//! - `unread` names every construct the matcher does not fully understand: comments, ANSI-C
//!   `$'…'` and locale `$"…"` quoting, here-documents and here-strings, process and command
//!   substitution, arithmetic, parameter expansion, brace expansion, `[[ … ]]`, array
//!   assignments, the commands in `command_words::UNREAD_COMMANDS` and the code runners of
//!   `code_of`, function definitions, coprocesses, and anything the parser fails on. An empty
//!   `unread` (and no `hidden`) is a line read in full.
//! - `hidden` is set when the line may run commands no entry of `commands` shows: a parse
//!   failure (also a line longer than `MAX_CHARS`, nested deeper than `MAX_DEPTH` or with more
//!   than `MAX_OPENERS` openings, or one the parser would panic on), `Code::Unseen` (`source`,
//!   `.`, subscripts given to evaluating builtins ...), code given to `eval`/`trap`/`sh -c`
//!   that is not literal, and `$(`/backticks where bash evaluates text as arithmetic
//!   (`(( ))`, `$(( ))`, `[[ ]]`, `${…}`, array subscripts).
//! - `inert` holds text a shell does not run here but a misreading could: comment bodies and
//!   here-document and here-string contents.
//! - `writes_files` is set by any redirection that writes to a file (`>`, `>>`, `>|`, `<>`,
//!   `&>`, `>&name`), on a simple or a compound command, unless its target is `/dev/null`; a
//!   duplication onto another descriptor (`2>&1`) writes no file.
//! - `reads_from` holds the target of every redirection that reads a file (`<`, `<&name`), as
//!   written with quotes removed, `None` where it cannot be read literally.
//! - Parsing never panics and never overflows the caller's stack: it runs on a thread of its
//!   own with `STACK_SIZE` of stack, and a panic or a failed spawn reads as a parse failure.

use crate::command_words::{Code, code_of};
use brush_parser::ast;
use brush_parser::word::{self, WordPiece, WordPieceWithSource};
use brush_parser::{ParserOptions, Token};

/// Lines longer than this (in characters) are not parsed.
const MAX_CHARS: usize = 100_000;
/// How deep substitutions and `eval`/`sh -c` code may nest.
const MAX_DEPTH: usize = 16;
/// How many openings (`(`, `{`, `if`, `$(` ...) one text may have: each costs parser stack.
const MAX_OPENERS: usize = 256;
/// The stack of the parsing thread.
const STACK_SIZE: usize = 64 << 20;

/// Words that open a nesting construct.
const OPENING_WORDS: [&str; 10] = [
    "{", "if", "while", "until", "for", "select", "case", "function", "coproc", "[[",
];

/// A construct the matcher does not fully understand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Construct {
    Unparsed,
    Comment,
    AnsiCQuote,
    LocaleQuote,
    HereDocument,
    HereString,
    ProcessSubstitution,
    CommandSubstitution,
    Arithmetic,
    ParameterExpansion,
    BraceExpansion,
    ExtendedTest,
    ArrayAssignment,
    /// A command of `command_words::UNREAD_COMMANDS`, or one that runs code (`code_of`).
    CodeRunner,
    FunctionDefinition,
    Coprocess,
}

/// One simple command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimpleCommand {
    /// Its words and redirections as written, one space apart.
    pub written: String,
    /// Its words with quotes removed; `None` for a word that cannot be read literally.
    pub words: Vec<Option<String>>,
    /// For each word, whether it has a `*`, `?` or `[` outside quotes and escapes: a pattern
    /// the shell may expand to file names.
    pub globbed: Vec<bool>,
}

impl SimpleCommand {
    /// The words, if every one of them can be read literally.
    pub fn literal_words(&self) -> Option<Vec<String>> {
        self.words.iter().cloned().collect()
    }

    /// The words before the first one that cannot be read literally.
    pub fn readable_start(&self) -> Vec<String> {
        self.words.iter().map_while(Clone::clone).collect()
    }
}

/// A command line taken apart for permission rules (see the module invariants).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandLine {
    pub commands: Vec<SimpleCommand>,
    pub unread: Vec<Construct>,
    pub hidden: bool,
    pub inert: Vec<String>,
    pub writes_files: bool,
    /// The files input redirections read (see the module invariants).
    pub reads_from: Vec<Option<String>>,
}

impl CommandLine {
    /// Whether the whole line was read: no construct the matcher does not understand.
    pub fn understood(&self) -> bool {
        self.unread.is_empty() && !self.hidden
    }

    fn unparsed() -> CommandLine {
        CommandLine {
            unread: vec![Construct::Unparsed],
            hidden: true,
            ..CommandLine::default()
        }
    }
}

/// Take `line` apart (see the module invariants).
pub fn parse(line: &str) -> CommandLine {
    if line.chars().count() > MAX_CHARS || would_panic(line) {
        return CommandLine::unparsed();
    }
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("keel-command-line".into())
            .stack_size(STACK_SIZE)
            .spawn_scoped(scope, || {
                let mut reader = Reader {
                    options: ParserOptions {
                        enable_extended_globbing: false,
                        ..ParserOptions::default()
                    },
                    line: CommandLine::default(),
                };
                reader.text(line, 0);
                reader.line
            })
            .ok()
            .and_then(|thread| thread.join().ok())
            .unwrap_or_else(CommandLine::unparsed)
    })
}

/// Whether `line` has a number brush-parser 0.4.0 would `unwrap` into an overflow (a file
/// descriptor before `<`/`>`, a `~N` directory, a `{N..M}` sequence): a run of ten or more
/// digits next to one of `<>~+-.{}` (all ASCII, so bytes will do).
fn would_panic(line: &str) -> bool {
    let bytes = line.as_bytes();
    let risky = |index: Option<usize>| {
        let byte = index.and_then(|index| bytes.get(index));
        byte.is_some_and(|byte| b"<>~+-.{}".contains(byte))
    };
    let mut run = 0;
    for index in 0..=bytes.len() {
        if bytes.get(index).is_some_and(u8::is_ascii_digit) {
            run += 1;
            continue;
        }
        if run >= 10 && (risky(Some(index)) || risky((index - run).checked_sub(1))) {
            return true;
        }
        run = 0;
    }
    false
}

/// Whether `text` holds a command substitution, for text bash may evaluate as arithmetic.
fn has_code(text: &str) -> bool {
    text.contains("$(") || text.contains('`')
}

/// The number of openings in `tokens`, an upper bound on the parser's nesting.
fn openers(tokens: &[Token]) -> usize {
    tokens
        .iter()
        .map(|token| match token {
            Token::Operator(operator, _) => usize::from(operator.contains('(')),
            Token::Word(word, _) => {
                usize::from(OPENING_WORDS.contains(&word.as_str()))
                    + word.matches("$(").count()
                    + word.matches("${").count()
                    + word.matches('`').count()
                    + word.matches("<(").count()
                    + word.matches(">(").count()
            }
        })
        .sum()
}

struct Reader {
    options: ParserOptions,
    line: CommandLine,
}

/// A simple command's words as they are read: their literal texts and whether each globs.
#[derive(Default)]
struct Words {
    texts: Vec<Option<String>>,
    globbed: Vec<bool>,
}

impl Words {
    fn push(&mut self, text: Option<String>, globbed: bool) {
        self.texts.push(text);
        self.globbed.push(globbed);
    }
}

impl Reader {
    fn mark(&mut self, construct: Construct) {
        if !self.line.unread.contains(&construct) {
            self.line.unread.push(construct);
        }
    }

    fn unparsed(&mut self) {
        self.mark(Construct::Unparsed);
        self.line.hidden = true;
    }

    /// Code bash evaluates as arithmetic.
    fn arithmetic(&mut self, text: &str) {
        self.mark(Construct::Arithmetic);
        if has_code(text) {
            self.line.hidden = true;
        }
    }

    /// A whole text of shell code: the line, or code nested in it.
    fn text(&mut self, text: &str, depth: usize) {
        if depth > MAX_DEPTH {
            self.unparsed();
            return;
        }
        let Ok(tokens) =
            brush_parser::uncached_tokenize_str(text, &self.options.tokenizer_options())
        else {
            self.unparsed();
            return;
        };
        if openers(&tokens) > MAX_OPENERS {
            self.unparsed();
            return;
        }
        self.comments(text, &tokens);
        match brush_parser::parse_tokens(&tokens, &self.options) {
            Ok(program) => {
                for list in &program.complete_commands {
                    self.list(list, depth);
                }
            }
            Err(_) => self.unparsed(),
        }
    }

    /// A `#` outside every word starts a comment (the tokenizer drops comments).
    fn comments(&mut self, text: &str, tokens: &[Token]) {
        let chars: Vec<char> = text.chars().collect();
        let mut in_word = vec![false; chars.len()];
        for token in tokens {
            if let Token::Word(_, span) = token {
                let end = span.end.index.min(chars.len());
                for flag in in_word.iter_mut().take(end).skip(span.start.index) {
                    *flag = true;
                }
            }
        }
        for (index, c) in chars.iter().enumerate() {
            if *c == '#' && in_word.get(index) == Some(&false) {
                self.mark(Construct::Comment);
                let body = chars.iter().skip(index + 1).take_while(|c| **c != '\n');
                self.line.inert.push(body.collect());
            }
        }
    }

    fn list(&mut self, list: &ast::CompoundList, depth: usize) {
        for ast::CompoundListItem(and_or, _separator) in &list.0 {
            for (_operator, pipeline) in and_or {
                for command in &pipeline.seq {
                    self.command(command, depth);
                }
            }
        }
    }

    fn command(&mut self, command: &ast::Command, depth: usize) {
        match command {
            ast::Command::Simple(simple) => self.simple(simple, depth),
            ast::Command::Compound(compound, redirects) => {
                self.compound(compound, depth);
                self.redirects(redirects.as_ref(), depth);
            }
            ast::Command::Function(definition) => {
                self.mark(Construct::FunctionDefinition);
                self.word(&definition.fname, depth);
                let ast::FunctionBody(body, redirects) = &definition.body;
                self.compound(body, depth);
                self.redirects(redirects.as_ref(), depth);
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.mark(Construct::ExtendedTest);
                self.test(&test.expr, depth);
                self.redirects(redirects.as_ref(), depth);
            }
        }
    }

    fn redirects(&mut self, redirects: Option<&ast::RedirectList>, depth: usize) {
        for redirect in redirects.iter().flat_map(|list| &list.0) {
            self.redirect(redirect, depth);
        }
    }

    fn test(&mut self, expr: &ast::ExtendedTestExpr, depth: usize) {
        let operands = |reader: &mut Reader, words: &[&ast::Word]| {
            for word in words {
                // Operands of arithmetic tests and `-v` subscripts are evaluated.
                if has_code(&word.value) {
                    reader.line.hidden = true;
                }
                reader.word(word, depth);
            }
        };
        match expr {
            ast::ExtendedTestExpr::And(left, right) | ast::ExtendedTestExpr::Or(left, right) => {
                self.test(left, depth);
                self.test(right, depth);
            }
            ast::ExtendedTestExpr::Not(inner) | ast::ExtendedTestExpr::Parenthesized(inner) => {
                self.test(inner, depth);
            }
            ast::ExtendedTestExpr::UnaryTest(_, operand) => operands(self, &[operand]),
            ast::ExtendedTestExpr::BinaryTest(_, left, right) => operands(self, &[left, right]),
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand, depth: usize) {
        match compound {
            ast::CompoundCommand::Arithmetic(command) => self.arithmetic(&command.expr.value),
            ast::CompoundCommand::ArithmeticForClause(command) => {
                self.mark(Construct::Arithmetic);
                for expr in [&command.initializer, &command.condition, &command.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(&expr.value);
                }
                self.list(&command.body.list, depth);
            }
            ast::CompoundCommand::BraceGroup(group) => self.list(&group.list, depth),
            ast::CompoundCommand::Subshell(subshell) => self.list(&subshell.list, depth),
            ast::CompoundCommand::ForClause(command) => {
                for value in command.values.iter().flatten() {
                    self.word(value, depth);
                }
                self.list(&command.body.list, depth);
            }
            ast::CompoundCommand::CaseClause(command) => {
                self.word(&command.value, depth);
                for item in &command.cases {
                    for pattern in &item.patterns {
                        self.word(pattern, depth);
                    }
                    if let Some(list) = &item.cmd {
                        self.list(list, depth);
                    }
                }
            }
            ast::CompoundCommand::IfClause(command) => {
                self.list(&command.condition, depth);
                self.list(&command.then, depth);
                for clause in command.elses.iter().flatten() {
                    if let Some(condition) = &clause.condition {
                        self.list(condition, depth);
                    }
                    self.list(&clause.body, depth);
                }
            }
            ast::CompoundCommand::WhileClause(command)
            | ast::CompoundCommand::UntilClause(command) => {
                let ast::WhileOrUntilClauseCommand(condition, body, _) = command;
                self.list(condition, depth);
                self.list(&body.list, depth);
            }
            ast::CompoundCommand::Coprocess(command) => {
                self.mark(Construct::Coprocess);
                if let Some(name) = &command.name {
                    self.word(name, depth);
                }
                self.command(&command.body, depth);
            }
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, depth: usize) {
        // Hold the command's place, so that it comes before the commands nested in its words.
        let place = self.line.commands.len();
        self.line.commands.push(SimpleCommand::default());
        let mut written = Vec::new();
        let mut words = Words::default();
        for item in simple.prefix.iter().flat_map(|prefix| &prefix.0) {
            self.item(item, &mut written, &mut words, depth);
        }
        if let Some(name) = &simple.word_or_name {
            written.push(name.value.clone());
            let literal = self.word(name, depth);
            words.push(literal, self.globbed(name));
        }
        for item in simple.suffix.iter().flat_map(|suffix| &suffix.0) {
            self.item(item, &mut written, &mut words, depth);
        }
        self.code_in(&words.texts, depth);
        if let Some(slot) = self.line.commands.get_mut(place) {
            *slot = SimpleCommand {
                written: written.join(" "),
                words: words.texts,
                globbed: words.globbed,
            };
        }
    }

    fn item(
        &mut self,
        item: &ast::CommandPrefixOrSuffixItem,
        written: &mut Vec<String>,
        words: &mut Words,
        depth: usize,
    ) {
        match item {
            ast::CommandPrefixOrSuffixItem::IoRedirect(redirect) => {
                written.push(self.redirect(redirect, depth));
            }
            ast::CommandPrefixOrSuffixItem::Word(word) => {
                written.push(word.value.clone());
                let literal = self.word(word, depth);
                words.push(literal, self.globbed(word));
            }
            ast::CommandPrefixOrSuffixItem::AssignmentWord(assignment, word) => {
                let array = match (&assignment.name, &assignment.value) {
                    (ast::AssignmentName::VariableName(_), ast::AssignmentValue::Scalar(_)) => {
                        false
                    }
                    (ast::AssignmentName::ArrayElementName(..), _)
                    | (_, ast::AssignmentValue::Array(_)) => true,
                };
                if array {
                    // Subscripts are arithmetic.
                    self.mark(Construct::ArrayAssignment);
                    if has_code(&word.value) {
                        self.line.hidden = true;
                    }
                }
                written.push(word.value.clone());
                let literal = self.word(word, depth);
                words.push(literal, self.globbed(word));
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(kind, subshell) => {
                self.mark(Construct::ProcessSubstitution);
                self.list(&subshell.list, depth);
                written.push(format!("{kind}(…)"));
                words.push(None, false);
            }
        }
    }

    /// Code a simple command runs from its words: `eval`, `trap`, `sh -c`, `source`.
    fn code_in(&mut self, words: &[Option<String>], depth: usize) {
        let (runner, code) = code_of(words);
        if runner {
            self.mark(Construct::CodeRunner);
        }
        match code {
            Code::None => {}
            Code::Unseen => self.line.hidden = true,
            Code::Words(code) => match code.into_iter().collect::<Option<Vec<&str>>>() {
                Some(text) => self.text(&text.join(" "), depth + 1),
                None => self.line.hidden = true,
            },
        }
    }

    /// Whether `word` has a glob character outside quotes and escapes.
    fn globbed(&self, word: &ast::Word) -> bool {
        word::parse(&word.value, &self.options).map_or(true, |pieces| {
            pieces.iter().any(|piece| match &piece.piece {
                WordPiece::Text(text) => text.contains(['*', '?', '[']),
                _ => false,
            })
        })
    }

    /// A word's literal text, or `None` if it has a piece that cannot be read literally.
    fn word(&mut self, word: &ast::Word, depth: usize) -> Option<String> {
        let Ok(pieces) = word::parse(&word.value, &self.options) else {
            self.unparsed();
            return None;
        };
        let mut text = String::new();
        let mut readable = true;
        for piece in &pieces {
            readable &= self.piece(piece, &word.value, &mut text, depth);
        }
        if word.value.contains('{') && self.brace_expands(&word.value) {
            self.mark(Construct::BraceExpansion);
            readable = false;
        }
        readable.then_some(text)
    }

    fn brace_expands(&self, word: &str) -> bool {
        match word::parse_brace_expansions(word, &self.options) {
            Ok(Some(pieces)) => pieces.iter().any(|piece| match piece {
                word::BraceExpressionOrText::Expr(_) => true,
                word::BraceExpressionOrText::Text(_) => false,
            }),
            Ok(None) => false,
            Err(_) => true,
        }
    }

    /// Push `piece`'s literal text to `text`; `false` if it cannot be read literally.
    fn piece(
        &mut self,
        piece: &WordPieceWithSource,
        source: &str,
        text: &mut String,
        depth: usize,
    ) -> bool {
        match &piece.piece {
            WordPiece::Text(literal) | WordPiece::SingleQuotedText(literal) => {
                text.push_str(literal);
                true
            }
            WordPiece::EscapeSequence(escape) => {
                let escaped = escape.strip_prefix('\\').unwrap_or(escape);
                if escaped != "\n" {
                    text.push_str(escaped);
                }
                true
            }
            WordPiece::TildeExpansion(_) => {
                let written = source.get(piece.start_index..piece.end_index);
                text.push_str(written.unwrap_or("~"));
                true
            }
            WordPiece::DoubleQuotedSequence(inner) => {
                let mut readable = true;
                for inner_piece in inner {
                    readable &= self.piece(inner_piece, source, text, depth);
                }
                readable
            }
            WordPiece::GettextDoubleQuotedSequence(inner) => {
                self.mark(Construct::LocaleQuote);
                for inner_piece in inner {
                    self.piece(inner_piece, source, text, depth);
                }
                false
            }
            WordPiece::AnsiCQuotedText(_) => {
                self.mark(Construct::AnsiCQuote);
                false
            }
            WordPiece::ParameterExpansion(_) => {
                self.mark(Construct::ParameterExpansion);
                // Subscripts and `${x:-…}` words can hold substitutions.
                let written = source.get(piece.start_index..piece.end_index);
                if has_code(written.unwrap_or(source)) {
                    self.line.hidden = true;
                }
                false
            }
            WordPiece::CommandSubstitution(code)
            | WordPiece::BackquotedCommandSubstitution(code) => {
                self.mark(Construct::CommandSubstitution);
                self.text(code, depth + 1);
                false
            }
            WordPiece::ArithmeticExpression(expr) => {
                self.arithmetic(&expr.value);
                false
            }
        }
    }

    /// A redirection as written; marks and reads what it holds.
    fn redirect(&mut self, redirect: &ast::IoRedirect, depth: usize) -> String {
        let fd = |fd: &Option<ast::IoFd>| fd.map(|fd| fd.to_string()).unwrap_or_default();
        match redirect {
            ast::IoRedirect::File(number, kind, target) => {
                let writes = match (kind, target) {
                    (
                        ast::IoFileRedirectKind::Write
                        | ast::IoFileRedirectKind::Append
                        | ast::IoFileRedirectKind::ReadAndWrite
                        | ast::IoFileRedirectKind::Clobber,
                        ast::IoFileRedirectTarget::Filename(word)
                        | ast::IoFileRedirectTarget::Duplicate(word),
                    ) => word.value != "/dev/null",
                    // `>&name` is a file unless it names a descriptor (`>&2`, `>&-`).
                    (
                        ast::IoFileRedirectKind::DuplicateOutput,
                        ast::IoFileRedirectTarget::Filename(word)
                        | ast::IoFileRedirectTarget::Duplicate(word),
                    ) => {
                        word.value != "/dev/null"
                            && word.value != "-"
                            && !word.value.chars().all(|c| c.is_ascii_digit())
                    }
                    _ => false,
                };
                self.line.writes_files |= writes;
                let reads = match kind {
                    ast::IoFileRedirectKind::Read => true,
                    // `<&name` reads a file unless it names a descriptor (`<&0`, `<&-`).
                    ast::IoFileRedirectKind::DuplicateInput => match target {
                        ast::IoFileRedirectTarget::Filename(word)
                        | ast::IoFileRedirectTarget::Duplicate(word) => {
                            word.value != "-" && !word.value.chars().all(|c| c.is_ascii_digit())
                        }
                        _ => false,
                    },
                    _ => false,
                };
                let target = match target {
                    ast::IoFileRedirectTarget::Filename(word)
                    | ast::IoFileRedirectTarget::Duplicate(word) => {
                        let literal = self.word(word, depth);
                        if reads {
                            self.line.reads_from.push(literal);
                        }
                        word.value.clone()
                    }
                    ast::IoFileRedirectTarget::Fd(target) => target.to_string(),
                    ast::IoFileRedirectTarget::ProcessSubstitution(kind, subshell) => {
                        self.mark(Construct::ProcessSubstitution);
                        self.list(&subshell.list, depth);
                        format!("{kind}(…)")
                    }
                };
                format!("{}{kind}{target}", fd(number))
            }
            ast::IoRedirect::HereDocument(number, document) => {
                self.mark(Construct::HereDocument);
                self.line.inert.push(document.doc.value.clone());
                if document.requires_expansion {
                    match word::parse_heredoc(&document.doc.value, &self.options) {
                        Ok(pieces) => {
                            let mut text = String::new();
                            for piece in &pieces {
                                self.piece(piece, &document.doc.value, &mut text, depth);
                            }
                        }
                        Err(_) => self.unparsed(),
                    }
                }
                let dash = if document.remove_tabs { "-" } else { "" };
                format!("{}<<{dash}{}", fd(number), document.here_end.value)
            }
            ast::IoRedirect::HereString(number, word) => {
                self.mark(Construct::HereString);
                if let Some(text) = self.word(word, depth) {
                    self.line.inert.push(text);
                }
                format!("{}<<<{}", fd(number), word.value)
            }
            ast::IoRedirect::OutputAndError(word, append) => {
                self.line.writes_files |= word.value != "/dev/null";
                self.word(word, depth);
                let more = if *append { ">" } else { "" };
                format!("&>{more}{}", word.value)
            }
        }
    }
}

#[cfg(test)]
#[path = "command_line_tests.rs"]
mod tests;
