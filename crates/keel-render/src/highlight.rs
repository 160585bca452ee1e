//! Syntax highlighting of code blocks, as a few kinds of token both outputs colour alike.
//!
//! Invariants:
//! - The syntax definitions (syntect's, with its pure-Rust regex engine) load on the first code
//!   block that names a language, never before: start-up never pays for them.
//! - Tokens are classified by scope prefix into a handful of kinds and coloured with the
//!   terminal's own palette (readable on dark and light themes), and as CSS classes in HTML.
//! - Highlighting never fails: an unknown language or a parser error gives plain text, and the
//!   text is always the code exactly (`tokens` concatenated is the line).
//! - A `Highlighter` carries the parser's state from line to line, so a growing code block is
//!   highlighted one new line at a time.

use crate::style::{Color, Style};
use std::sync::OnceLock;
use syntect::parsing::{ParseState, Scope, ScopeStack, SyntaxReference, SyntaxSet};

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
        }
    }
}

/// The scope prefixes that decide a kind, most specific first.
const PREFIXES: &[(&str, Kind)] = &[
    ("comment", Kind::Comment),
    ("punctuation.definition.comment", Kind::Comment),
    ("string", Kind::String),
    ("constant.character.escape", Kind::String),
    ("constant.numeric", Kind::Constant),
    ("constant.language", Kind::Constant),
    ("constant.other", Kind::Constant),
    ("keyword.operator", Kind::Plain),
    ("keyword", Kind::Keyword),
    ("storage.type", Kind::Keyword),
    ("storage.modifier", Kind::Keyword),
    ("entity.name.tag", Kind::Keyword),
    ("entity.name.function", Kind::Function),
    ("support.function", Kind::Function),
    ("variable.function", Kind::Function),
    ("entity.other.attribute-name", Kind::Function),
    ("entity.name.type", Kind::Type),
    ("entity.name.class", Kind::Type),
    ("entity.name.struct", Kind::Type),
    ("entity.name.enum", Kind::Type),
    ("support.type", Kind::Type),
    ("support.class", Kind::Type),
];

struct Loaded {
    syntaxes: SyntaxSet,
    prefixes: Vec<(Scope, Kind)>,
}

fn loaded() -> &'static Loaded {
    static LOADED: OnceLock<Loaded> = OnceLock::new();
    LOADED.get_or_init(|| Loaded {
        syntaxes: SyntaxSet::load_defaults_newlines(),
        prefixes: PREFIXES
            .iter()
            .filter_map(|(name, kind)| Scope::new(name).ok().map(|scope| (scope, *kind)))
            .collect(),
    })
}

/// What a fence's language names, as the bundled syntaxes call it.
fn syntax_for(language: &str) -> Option<&'static SyntaxReference> {
    let language = language.trim().to_ascii_lowercase();
    let token = match language.as_str() {
        "ts" | "tsx" | "typescript" | "jsx" | "mjs" | "cjs" => "js",
        "shell" | "console" | "zsh" | "sh" => "bash",
        "jsonc" | "json5" => "json",
        "py3" | "python3" => "py",
        "golang" => "go",
        "yml" => "yaml",
        "c++" => "cpp",
        other => other,
    };
    let syntaxes = &loaded().syntaxes;
    syntaxes
        .find_syntax_by_token(token)
        .filter(|syntax| syntax.name != "Plain Text")
}

/// The kind of the innermost scope that has one.
fn kind_of(stack: &ScopeStack) -> Kind {
    let prefixes = &loaded().prefixes;
    for scope in stack.as_slice().iter().rev() {
        if let Some((_, kind)) = prefixes
            .iter()
            .find(|(prefix, _)| prefix.is_prefix_of(*scope))
        {
            return *kind;
        }
    }
    Kind::Plain
}

/// Highlights a code block line by line (a clone carries the state on separately).
#[derive(Clone)]
pub(crate) struct Highlighter {
    state: Option<(ParseState, ScopeStack)>,
}

impl Highlighter {
    /// For a block in `language` (`None` or unknown: plain text, and nothing is loaded).
    pub(crate) fn new(language: Option<&str>) -> Highlighter {
        let state = language
            .and_then(syntax_for)
            .map(|syntax| (ParseState::new(syntax), ScopeStack::new()));
        Highlighter { state }
    }

    /// The tokens of the next line (without its newline).
    pub(crate) fn line(&mut self, line: &str) -> Vec<(Kind, String)> {
        let Some((parser, stack)) = &mut self.state else {
            return vec![(Kind::Plain, line.to_string())];
        };
        // The bundled syntaxes match lines with their newline.
        let with_newline = format!("{line}\n");
        let Ok(ops) = parser.parse_line(&with_newline, &loaded().syntaxes) else {
            self.state = None;
            return vec![(Kind::Plain, line.to_string())];
        };
        let mut tokens: Vec<(Kind, String)> = Vec::new();
        let mut at = 0usize;
        let push = |kind: Kind, text: &str, tokens: &mut Vec<(Kind, String)>| {
            if text.is_empty() {
                return;
            }
            match tokens.last_mut() {
                Some((last, joined)) if *last == kind => joined.push_str(text),
                _ => tokens.push((kind, text.to_string())),
            }
        };
        for (offset, op) in ops {
            let offset = offset.min(line.len());
            if offset > at && line.is_char_boundary(offset) && line.is_char_boundary(at) {
                push(kind_of(stack), &line[at..offset], &mut tokens);
                at = offset;
            }
            if stack.apply(&op).is_err() {
                self.state = None;
                push(Kind::Plain, &line[at..], &mut tokens);
                return tokens;
            }
        }
        push(kind_of(stack), &line[at..], &mut tokens);
        if tokens.is_empty() {
            tokens.push((Kind::Plain, String::new()));
        }
        tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_keywords_strings_and_comments_get_their_kinds() {
        let mut highlighter = Highlighter::new(Some("rust"));
        let tokens = highlighter.line(r#"fn main() { let s = "hi"; } // done"#);
        let kind = |text: &str| {
            tokens
                .iter()
                .find(|(_, token)| token.contains(text))
                .map(|(kind, _)| *kind)
        };
        assert_eq!(kind("fn"), Some(Kind::Keyword), "{tokens:?}");
        assert_eq!(kind("\"hi\""), Some(Kind::String), "{tokens:?}");
        assert_eq!(kind("// done"), Some(Kind::Comment), "{tokens:?}");
        let text: String = tokens.iter().map(|(_, token)| token.as_str()).collect();
        assert_eq!(text, r#"fn main() { let s = "hi"; } // done"#);
    }

    #[test]
    fn state_carries_across_lines_and_unknown_languages_are_plain() {
        let mut highlighter = Highlighter::new(Some("python"));
        highlighter.line("x = \"\"\"a");
        let inside = highlighter.line("still a string");
        assert_eq!(inside, vec![(Kind::String, "still a string".into())]);
        let mut plain = Highlighter::new(Some("no-such-language"));
        assert_eq!(plain.line("x = 1"), vec![(Kind::Plain, "x = 1".into())]);
    }
}
