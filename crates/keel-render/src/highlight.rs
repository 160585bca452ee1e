//! Syntax highlighting of code blocks, as a few kinds of token both outputs colour alike.
//!
//! Invariants:
//! - Grammars are tree-sitter parse tables compiled into the binary: nothing is loaded or
//!   compiled at run time, and a grammar's pages are touched only when a block in its language
//!   is shown. There are no highlight queries (compiling one walks a grammar's whole table);
//!   a token's kind comes from its node's kind, its field and its parent's kind.
//! - A block is highlighted in chunks of whole lines (`chunk_end`), each parsed on its own: a
//!   chunk's colours depend on its own text only, so a growing block highlights its open last
//!   chunk again and nothing before it, and a block rendered whole has the colours it had while
//!   it streamed (a chunk that grew is re-parsed from its previous tree, which tree-sitter
//!   makes the same tree a fresh parse gives). A chunk over `MAX_CHUNK_BYTES` is left plain.
//! - Highlighting never fails: an unknown language or a parse that gives up leaves plain text,
//!   and the tokens of a line are always the line exactly.

use crate::style::{Color, Style};
use tree_sitter::{InputEdit, Language, Node, Parser, Point, Tree};

/// What a token is, as far as its colour goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Plain,
    Comment,
    String,
    Constant,
    Keyword,
    Function,
    Type,
    /// A line a diff adds, or removes.
    Inserted,
    Deleted,
}

impl Kind {
    pub(crate) fn style(self) -> Style {
        match self {
            Kind::Plain => Style::PLAIN,
            Kind::Comment => Style::fg(Color::Gray).italic(),
            Kind::String => Style::fg(Color::Green),
            Kind::Constant => Style::fg(Color::Yellow),
            Kind::Keyword => Style::fg(Color::Magenta),
            Kind::Function => Style::fg(Color::Blue),
            Kind::Type => Style::fg(Color::Cyan),
            Kind::Inserted => Style::fg(Color::Green),
            Kind::Deleted => Style::fg(Color::Red),
        }
    }

    /// The CSS class of the browser's stylesheet, or none for plain text.
    pub(crate) fn class(self) -> Option<&'static str> {
        match self {
            Kind::Plain => None,
            Kind::Comment => Some("hl-comment"),
            Kind::String => Some("hl-string"),
            Kind::Constant => Some("hl-constant"),
            Kind::Keyword => Some("hl-keyword"),
            Kind::Function => Some("hl-function"),
            Kind::Type => Some("hl-type"),
            Kind::Inserted => Some("hl-inserted"),
            Kind::Deleted => Some("hl-deleted"),
        }
    }
}

/// One line's tokens: kinds with their text, which joined is the line.
pub(crate) type Tokens = Vec<(Kind, String)>;

/// A chunk closes at its first blank line once it has this many lines…
const MIN_CHUNK_LINES: usize = 16;
/// …or at this many lines.
const MAX_CHUNK_LINES: usize = 64;
/// A chunk longer than this (a few huge lines) is not parsed at all.
const MAX_CHUNK_BYTES: usize = 16 * 1024;

/// Where the chunk that starts at line `from` ends (exclusive), when the lines close it: after
/// its first blank line once it has `MIN_CHUNK_LINES` lines, or at `MAX_CHUNK_LINES`. `None`
/// when the lines run out first.
pub(crate) fn chunk_end(lines: &[&str], from: usize) -> Option<usize> {
    let mut end = from;
    while end < lines.len() {
        end += 1;
        let length = end - from;
        if length >= MAX_CHUNK_LINES
            || (length >= MIN_CHUNK_LINES && lines[end - 1].trim().is_empty())
        {
            return Some(end);
        }
    }
    None
}

/// The tokens of every line of a block, chunk by chunk.
pub(crate) fn highlight_lines(language: Option<&str>, lines: &[&str]) -> Vec<Tokens> {
    let mut highlighter = Highlighter::new(language);
    let mut tokens = Vec::with_capacity(lines.len());
    let mut from = 0;
    while from < lines.len() {
        let end = chunk_end(lines, from).unwrap_or(lines.len());
        tokens.extend(highlighter.chunk(&lines[from..end]));
        from = end;
    }
    tokens
}

/// The grammar a fence's language names, if keel has it.
fn grammar_for(language: &str) -> Option<Language> {
    let language = language.trim().to_ascii_lowercase();
    let grammar = match language.as_str() {
        "rust" | "rs" => tree_sitter_rust::LANGUAGE,
        "python" | "py" | "py3" | "python3" => tree_sitter_python::LANGUAGE,
        "bash" | "sh" | "shell" | "zsh" | "console" => tree_sitter_bash::LANGUAGE,
        "javascript" | "js" | "jsx" | "mjs" | "cjs" => tree_sitter_javascript::LANGUAGE,
        "typescript" | "ts" | "mts" | "cts" => tree_sitter_typescript::LANGUAGE_TYPESCRIPT,
        "tsx" => tree_sitter_typescript::LANGUAGE_TSX,
        "json" | "jsonc" | "json5" => tree_sitter_json::LANGUAGE,
        "go" | "golang" => tree_sitter_go::LANGUAGE,
        "c" | "h" => tree_sitter_c::LANGUAGE,
        "cpp" | "c++" | "cc" | "cxx" | "hpp" | "hh" => tree_sitter_cpp::LANGUAGE,
        "toml" => tree_sitter_toml_ng::LANGUAGE,
        "yaml" | "yml" => tree_sitter_yaml::LANGUAGE,
        _ => return None,
    };
    Some(grammar.into())
}

/// Whether a fence's language names a unified diff (coloured line by line, no grammar).
fn is_diff(language: &str) -> bool {
    matches!(
        language.trim().to_ascii_lowercase().as_str(),
        "diff" | "patch" | "udiff"
    )
}

/// The kind of a unified diff's line, from how it starts.
fn diff_line(line: &str) -> Kind {
    if line.starts_with("+++ ") || line.starts_with("--- ") {
        Kind::Keyword
    } else if line.starts_with("@@") {
        Kind::Function
    } else if line.starts_with('+') {
        Kind::Inserted
    } else if line.starts_with('-') {
        Kind::Deleted
    } else if line.starts_with("diff ") || line.starts_with("index ") {
        Kind::Comment
    } else {
        Kind::Plain
    }
}

/// How a block's lines get their kinds.
enum Mode {
    /// No language, an unknown one, or a grammar the parser refused.
    Plain,
    /// A unified diff: each line by its first characters.
    Diff,
    Parsed(Parser),
}

/// Parses a block's chunks in one language.
pub(crate) struct Highlighter {
    mode: Mode,
    /// The last chunk parsed and its tree: a chunk that only grew since (the open chunk of a
    /// streaming block) is parsed again from it, re-reading only what changed.
    last: Option<(String, Tree)>,
}

impl Highlighter {
    /// For a block in `language` (`None` or unknown: plain text).
    pub(crate) fn new(language: Option<&str>) -> Highlighter {
        let mode = match language {
            Some(language) if is_diff(language) => Mode::Diff,
            Some(language) => grammar_for(language)
                .and_then(|grammar| {
                    let mut parser = Parser::new();
                    parser.set_language(&grammar).ok().map(|()| parser)
                })
                .map_or(Mode::Plain, Mode::Parsed),
            None => Mode::Plain,
        };
        Highlighter { mode, last: None }
    }

    /// The tokens of each of `lines`, parsed together as one chunk.
    pub(crate) fn chunk(&mut self, lines: &[&str]) -> Vec<Tokens> {
        let plain = || -> Vec<Tokens> {
            lines
                .iter()
                .map(|line| vec![(Kind::Plain, (*line).to_string())])
                .collect()
        };
        let bytes: usize = lines.iter().map(|line| line.len() + 1).sum();
        let parser = match &mut self.mode {
            Mode::Diff => {
                return lines
                    .iter()
                    .map(|line| vec![(diff_line(line), (*line).to_string())])
                    .collect();
            }
            Mode::Parsed(parser) if bytes <= MAX_CHUNK_BYTES => parser,
            Mode::Parsed(_) | Mode::Plain => return plain(),
        };
        let mut text = String::with_capacity(bytes);
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        let previous = self.last.take().and_then(|(old, mut tree)| {
            let edit = growth(&old, &text)?;
            tree.edit(&edit);
            Some(tree)
        });
        let Some(tree) = parser.parse(&text, previous.as_ref()) else {
            return plain();
        };
        let kinds = paint(&tree, text.len());
        let mut tokens = Vec::with_capacity(lines.len());
        let mut start = 0;
        for line in lines {
            let end = start + line.len();
            tokens.push(runs(&text[start..end], &kinds[start..end]));
            start = end + 1;
        }
        self.last = Some((text, tree));
        tokens
    }
}

/// The edit that turns `old` (a chunk's text, ending in its newline) into `new`, when `new`
/// is `old` with more text before that final newline.
fn growth(old: &str, new: &str) -> Option<InputEdit> {
    let kept = old.len().checked_sub(1)?;
    if new.len() < old.len() || new.as_bytes()[..kept] != old.as_bytes()[..kept] {
        return None;
    }
    let point = |text: &str, at: usize| {
        let before = &text.as_bytes()[..at];
        let row = before.iter().filter(|byte| **byte == b'\n').count();
        let line_start = before
            .iter()
            .rposition(|byte| *byte == b'\n')
            .map_or(0, |newline| newline + 1);
        Point::new(row, at - line_start)
    };
    Some(InputEdit {
        start_byte: kept,
        old_end_byte: old.len(),
        new_end_byte: new.len(),
        start_position: point(old, kept),
        old_end_position: point(old, old.len()),
        new_end_position: point(new, new.len()),
    })
}

/// `text` cut where its bytes' kinds change (node boundaries are character boundaries).
fn runs(text: &str, kinds: &[Kind]) -> Tokens {
    let mut tokens: Tokens = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let kind = kinds[at];
        let mut end = at + 1;
        while end < text.len() && (kinds[end] == kind || !text.is_char_boundary(end)) {
            end += 1;
        }
        tokens.push((kind, text[at..end].to_string()));
        at = end;
    }
    if tokens.is_empty() {
        tokens.push((Kind::Plain, String::new()));
    }
    tokens
}

/// The kind of every byte of a parsed chunk. A node given a kind colours all of its bytes and
/// is not looked into.
fn paint(tree: &Tree, length: usize) -> Vec<Kind> {
    let mut kinds = vec![Kind::Plain; length];
    let mut cursor = tree.walk();
    // The kinds of the current node's ancestors, nearest last.
    let mut parents: Vec<&str> = Vec::new();
    // Byte ranges of the names a call or a macro invokes, found at the call.
    let mut callees: Vec<(usize, usize)> = Vec::new();
    'nodes: loop {
        let node = cursor.node();
        let field = cursor.field_name();
        if matches!(field, Some("function" | "macro"))
            && let Some(name) = callee_name(node)
        {
            callees.push((name.start_byte(), name.end_byte()));
        }
        let kind = classify(node, field, parents.last().copied(), &callees);
        if let Some(kind) = kind {
            let range = node.start_byte().min(length)..node.end_byte().min(length);
            kinds[range].fill(kind);
        } else if cursor.goto_first_child() {
            parents.push(node.kind());
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                continue 'nodes;
            }
            if !cursor.goto_parent() {
                break 'nodes;
            }
            parents.pop();
        }
    }
    kinds
}

/// Node kinds that name something (a function, a field, a command).
const NAMES: &[&str] = &[
    "identifier",
    "field_identifier",
    "property_identifier",
    "simple_identifier",
    "word",
];

/// The name a call target ends in: `f` of `f()`, `b` of `a.b()` or `a::b()`.
fn callee_name(node: Node<'_>) -> Option<Node<'_>> {
    let mut node = node;
    for _ in 0..4 {
        if NAMES.contains(&node.kind()) {
            return Some(node);
        }
        node = ["field", "property", "attribute", "name", "function"]
            .iter()
            .find_map(|field| node.child_by_field_name(field))?;
    }
    None
}

/// The kind a node gives all of its text, if any.
fn classify(
    node: Node<'_>,
    field: Option<&str>,
    parent: Option<&str>,
    callees: &[(usize, usize)],
) -> Option<Kind> {
    let kind = node.kind();
    if kind.contains("comment") {
        return Some(Kind::Comment);
    }
    if !node.is_named() {
        // Anonymous tokens that are words are the language's keywords.
        let word = kind.len() > 1 && kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
        return word.then_some(Kind::Keyword);
    }
    let parent = parent.unwrap_or("");
    if field == Some("key") && parent.ends_with("pair") || matches!(kind, "bare_key" | "quoted_key")
    {
        return Some(Kind::Type);
    }
    if kind.contains("string")
        || kind.ends_with("quote_scalar")
        || matches!(kind, "char_literal" | "rune_literal" | "heredoc_body")
    {
        return Some(Kind::String);
    }
    if kind.contains("integer")
        || kind.contains("float")
        || kind.contains("number")
        || kind.contains("boolean")
        || matches!(
            kind,
            "int_literal" | "imaginary_literal" | "true" | "false" | "null" | "none" | "nil"
        )
        || kind.starts_with("null_")
    {
        return Some(Kind::Constant);
    }
    if matches!(
        kind,
        "type_identifier" | "primitive_type" | "predefined_type" | "builtin_type" | "type"
    ) {
        return Some(Kind::Type);
    }
    if matches!(
        kind,
        "mutable_specifier" | "self" | "super" | "crate" | "this"
    ) {
        return Some(Kind::Keyword);
    }
    if kind == "command_name" {
        return Some(Kind::Function);
    }
    if NAMES.contains(&kind) {
        let defines_function = field == Some("name")
            && (parent.contains("function") || parent.contains("method"))
            || field == Some("declarator") && parent == "function_declarator";
        let range = (node.start_byte(), node.end_byte());
        // A name right before `(` or a parameter list where the tree has no call or
        // definition (code still arriving, held in an error node) is a function too.
        let before_parenthesis = || {
            node.next_sibling().is_some_and(|next| {
                let next = next.kind();
                next == "(" || next.ends_with("parameters") || next.ends_with("_list")
            })
        };
        if defines_function || callees.contains(&range) || before_parenthesis() {
            return Some(Kind::Function);
        }
        let defines_type = field == Some("name")
            && ["class", "struct", "enum", "trait", "interface", "type_"]
                .iter()
                .any(|word| parent.contains(word));
        if defines_type {
            return Some(Kind::Type);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kind of the token that is `text` (a node's bytes are one token unless its
    /// neighbour has the same kind, so `text` may also start a token).
    fn kind_of(tokens: &Tokens, text: &str) -> Option<Kind> {
        let exact = tokens.iter().find(|(_, token)| token.trim() == text);
        exact
            .or_else(|| tokens.iter().find(|(_, token)| token.starts_with(text)))
            .map(|(kind, _)| *kind)
    }

    fn one_line(language: &str, line: &str) -> Tokens {
        let tokens = highlight_lines(Some(language), &[line]).remove(0);
        let text: String = tokens.iter().map(|(_, token)| token.as_str()).collect();
        assert_eq!(text, line, "the tokens are the line");
        tokens
    }

    #[test]
    fn every_grammar_gives_its_keywords_strings_comments_numbers_and_names_their_kinds() {
        /// A language, a line in it, and the kinds some of its tokens must have.
        type Case = (&'static str, &'static str, &'static [(&'static str, Kind)]);
        let cases: &[Case] = &[
            (
                "rust",
                r#"pub fn main() { let s: u32 = 42; println!("hi"); } // done"#,
                &[
                    ("pub", Kind::Keyword),
                    ("main", Kind::Function),
                    ("let", Kind::Keyword),
                    ("u32", Kind::Type),
                    ("42", Kind::Constant),
                    ("println", Kind::Function),
                    ("\"hi\"", Kind::String),
                    ("// done", Kind::Comment),
                ],
            ),
            (
                "python",
                "def main(): return print('x', 1, None)  # c",
                &[
                    ("def", Kind::Keyword),
                    ("main", Kind::Function),
                    ("return", Kind::Keyword),
                    ("print", Kind::Function),
                    ("'x'", Kind::String),
                    ("1", Kind::Constant),
                    ("None", Kind::Constant),
                    ("# c", Kind::Comment),
                ],
            ),
            (
                "sh",
                "for n in 1 2; do echo \"$n\"; done # loop",
                &[
                    ("for", Kind::Keyword),
                    ("done", Kind::Keyword),
                    ("echo", Kind::Function),
                    ("\"$n\"", Kind::String),
                    ("# loop", Kind::Comment),
                ],
            ),
            (
                "js",
                "const f = (a) => console.log(`x`, 2, true); // c",
                &[
                    ("const", Kind::Keyword),
                    ("log", Kind::Function),
                    ("`x`", Kind::String),
                    ("2", Kind::Constant),
                    ("true", Kind::Constant),
                    ("// c", Kind::Comment),
                ],
            ),
            (
                "ts",
                "function f(x: number): string { return 'a'; }",
                &[
                    ("function", Kind::Keyword),
                    ("f", Kind::Function),
                    ("number", Kind::Type),
                    ("'a'", Kind::String),
                ],
            ),
            (
                "go",
                "func main() { fmt.Println(\"x\", 3) } // c",
                &[
                    ("func", Kind::Keyword),
                    ("main", Kind::Function),
                    ("Println", Kind::Function),
                    ("\"x\"", Kind::String),
                    ("3", Kind::Constant),
                    ("// c", Kind::Comment),
                ],
            ),
            (
                "c",
                "int main(void) { return 0; } /* c */",
                &[
                    ("int", Kind::Type),
                    ("main", Kind::Function),
                    ("return", Kind::Keyword),
                    ("0", Kind::Constant),
                    ("/* c */", Kind::Comment),
                ],
            ),
            (
                "cpp",
                "class A { public: int f() { return 1; } };",
                &[
                    ("class", Kind::Keyword),
                    ("A", Kind::Type),
                    ("int", Kind::Type),
                    ("1", Kind::Constant),
                ],
            ),
            (
                "json",
                r#"{"key": "value", "n": 1, "ok": true}"#,
                &[
                    ("\"key\"", Kind::Type),
                    ("\"value\"", Kind::String),
                    ("1", Kind::Constant),
                    ("true", Kind::Constant),
                ],
            ),
            (
                "toml",
                "name = \"keel\" # c",
                &[
                    ("name", Kind::Type),
                    ("\"keel\"", Kind::String),
                    ("# c", Kind::Comment),
                ],
            ),
            (
                "yaml",
                "key: 'value' # c",
                &[
                    ("key", Kind::Type),
                    ("'value'", Kind::String),
                    ("# c", Kind::Comment),
                ],
            ),
        ];
        for (language, line, expected) in cases {
            let tokens = one_line(language, line);
            for (text, kind) in *expected {
                assert_eq!(
                    kind_of(&tokens, text),
                    Some(*kind),
                    "{language}: {text:?} in {tokens:?}"
                );
            }
        }
    }

    #[test]
    fn a_diff_is_coloured_line_by_line() {
        let lines = [
            "diff --git a/x b/x",
            "--- a/x",
            "+++ b/x",
            "@@ -1,2 +1,2 @@",
            " same",
            "-old",
            "+new",
        ];
        let kinds: Vec<Kind> = highlight_lines(Some("diff"), &lines)
            .into_iter()
            .map(|tokens| {
                assert_eq!(tokens.len(), 1);
                tokens[0].0
            })
            .collect();
        assert_eq!(
            kinds,
            [
                Kind::Comment,
                Kind::Keyword,
                Kind::Keyword,
                Kind::Function,
                Kind::Plain,
                Kind::Deleted,
                Kind::Inserted
            ]
        );
    }

    #[test]
    fn an_unfinished_function_still_shows_its_name() {
        let tokens = one_line("rust", "fn main() {");
        assert_eq!(kind_of(&tokens, "fn"), Some(Kind::Keyword), "{tokens:?}");
        assert_eq!(kind_of(&tokens, "main"), Some(Kind::Function), "{tokens:?}");
    }

    #[test]
    fn a_chunk_carries_context_across_its_lines_and_unknown_languages_are_plain() {
        let lines = ["x = \"\"\"a", "still a string", "\"\"\""];
        let tokens = highlight_lines(Some("python"), &lines);
        assert_eq!(tokens[1], vec![(Kind::String, "still a string".into())]);
        let plain = highlight_lines(Some("no-such-language"), &["x = 1"]);
        assert_eq!(plain, vec![vec![(Kind::Plain, "x = 1".into())]]);
        assert_eq!(
            highlight_lines(None, &[""]),
            vec![vec![(Kind::Plain, String::new())]]
        );
    }

    #[test]
    fn a_grown_chunk_parsed_from_its_last_tree_gets_the_kinds_of_a_fresh_parse() {
        let blocks = [
            (
                "python",
                "def f(x):\n    s = '''a\n    b'''  # c\n    return f\"{x}\" + 1\n",
            ),
            (
                "sh",
                "if [ -n \"$a\" ]; then\n  cat <<EOF\nhi $a\nEOF\nfi # end\n",
            ),
            (
                "js",
                "const a = `x${1 + /* c */ 2}`;\nfunction g() { return 'y' }\n",
            ),
            ("rust", "/* open\n comment */ fn f() -> u8 { b'x' }\n"),
            ("ts", "let x: Map<string, number> = new Map(); // c\n"),
            ("tsx", "const a = <div className=\"x\">{1}</div>;\n"),
            ("json", "{\"a\": [1, {\"b\": \"c\"}], \"d\": null}\n"),
            (
                "go",
                "func f(s string) error {\n\treturn fmt.Errorf(`x %s`, s)\n}\n",
            ),
            (
                "c",
                "#include <stdio.h>\nint main(void) { printf(\"%d\", 1); }\n",
            ),
            ("cpp", "template <typename T> class A { T x; };\n"),
            ("toml", "[a.b]\nc = [1, \"d\"] # e\n"),
            ("yaml", "a:\n  - b: 'c'\n  - d # e\n"),
        ];
        for (language, code) in blocks {
            let mut reused = Highlighter::new(Some(language));
            for end in (1..=code.len()).filter(|end| code.is_char_boundary(*end)) {
                let text = &code[..end];
                let lines: Vec<&str> = text.split('\n').collect();
                let fresh = Highlighter::new(Some(language)).chunk(&lines);
                assert_eq!(reused.chunk(&lines), fresh, "{language} at {end}: {text:?}");
            }
        }
    }

    #[test]
    fn chunks_close_after_a_blank_line_once_long_enough_or_at_the_cap() {
        let mut lines = vec!["x"; 20];
        lines[5] = "";
        lines[17] = " ";
        assert_eq!(
            chunk_end(&lines, 0),
            Some(18),
            "the first blank line after 16"
        );
        assert_eq!(chunk_end(&lines, 18), None, "runs out");
        let long = vec!["x"; 70];
        assert_eq!(chunk_end(&long, 0), Some(MAX_CHUNK_LINES));
        assert_eq!(chunk_end(&long, 6), Some(70));
    }

    #[test]
    fn a_chunk_too_long_to_parse_is_plain_and_still_exact() {
        let long = format!("let s = \"{}\";", "é".repeat(MAX_CHUNK_BYTES));
        let tokens = highlight_lines(Some("rust"), &[long.as_str()]);
        assert_eq!(tokens, vec![vec![(Kind::Plain, long.clone())]]);
        let multibyte = one_line("rust", "let é = \"ü\"; // ß");
        assert_eq!(kind_of(&multibyte, "\"ü\""), Some(Kind::String));
    }
}
