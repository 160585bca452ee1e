//! Markdown parsed once into blocks and inlines, the one model both outputs render: so the
//! terminal and the browser never disagree about what a message is.
//!
//! Invariants:
//! - Parsing never fails and never panics: an event the model does not expect is dropped or
//!   kept as text, never lost silently as a whole block.
//! - Raw HTML is kept as text (it is shown, never interpreted), in either output.
//! - Extensions: tables, strikethrough and task lists (what models write); nothing else.
//! - Nesting is bounded (`DEEPEST`): quotes, lists and inline markup nested deeper are kept
//!   as the content of the level above, so rendering (which recurses) can never exhaust the
//!   stack, whatever the input.

use pulldown_cmark::{Alignment, CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// A block of a message.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Block {
    Paragraph(Vec<Inline>),
    Heading(u8, Vec<Inline>),
    Quote(Vec<Block>),
    Code {
        language: Option<String>,
        text: String,
    },
    List {
        /// The first number of an ordered list.
        start: Option<u64>,
        items: Vec<Item>,
    },
    Rule,
    Table {
        aligns: Vec<Align>,
        head: Vec<Vec<Inline>>,
        rows: Vec<Vec<Vec<Inline>>>,
    },
    /// Raw HTML, shown as the text it is.
    Html(String),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Item {
    /// `Some(done)` for a task list item.
    pub task: Option<bool>,
    pub blocks: Vec<Block>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Center,
    Right,
}

/// Inline content.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Inline {
    Text(String),
    Code(String),
    Emphasis(Vec<Inline>),
    Strong(Vec<Inline>),
    Strike(Vec<Inline>),
    Link { url: String, children: Vec<Inline> },
    Image { url: String, alt: Vec<Inline> },
    SoftBreak,
    HardBreak,
}

/// What an open inline container becomes when it ends.
enum InlineKind {
    Paragraph,
    /// A tight list item's text, which has no paragraph of its own.
    Implicit,
    Heading(u8),
    Emphasis,
    Strong,
    Strike,
    Link(String),
    Image(String),
    Cell,
    /// A construct not modelled (footnote definition, superscript, …): its content is kept.
    Transparent,
}

enum BlocksKind {
    Root,
    Quote,
    Item(Option<bool>),
    /// A container past `DEEPEST`: its blocks join the container above.
    Flattened,
}

/// The deepest nesting of containers (and, apart, of inline markup) kept as such.
const DEEPEST: usize = 16;

enum Frame {
    Blocks(BlocksKind, Vec<Block>),
    Inlines(InlineKind, Vec<Inline>),
    Code(Option<String>, String),
    Html(String),
    List(Option<u64>, Vec<Item>),
    Table {
        aligns: Vec<Align>,
        head: Vec<Vec<Inline>>,
        rows: Vec<Vec<Vec<Inline>>>,
    },
    Row(Vec<Vec<Inline>>),
}

/// The language a fence's info string names: its first word (`rust ignore`, `js,linenos`).
pub(crate) fn fence_language(info: &str) -> Option<String> {
    info.split(|c: char| c.is_whitespace() || c == ',' || c == '{')
        .next()
        .filter(|word| !word.is_empty())
        .map(str::to_string)
}

pub(crate) fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS
}

/// `markdown` as blocks.
pub(crate) fn parse(markdown: &str) -> Vec<Block> {
    let mut builder = Builder {
        stack: vec![Frame::Blocks(BlocksKind::Root, Vec::new())],
        containers: 0,
        inlines: 0,
    };
    for event in Parser::new_ext(markdown, options()) {
        builder.event(event);
    }
    builder.finish()
}

struct Builder {
    stack: Vec<Frame>,
    /// Open quotes, lists and items (not flattened ones).
    containers: usize,
    /// Open inline frames.
    inlines: usize,
}

/// Which nesting count a frame adds to: (containers, inlines).
fn counts(frame: &Frame) -> (usize, usize) {
    match frame {
        Frame::Inlines(..) => (0, 1),
        Frame::Blocks(BlocksKind::Quote | BlocksKind::Item(_), _) | Frame::List(..) => (1, 0),
        _ => (0, 0),
    }
}

impl Builder {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => match self.stack.last_mut() {
                Some(Frame::Code(_, code)) | Some(Frame::Html(code)) => code.push_str(&text),
                _ => self.inline(Inline::Text(text.into_string())),
            },
            Event::Code(code) => self.inline(Inline::Code(code.into_string())),
            Event::InlineHtml(html) | Event::InlineMath(html) | Event::DisplayMath(html) => {
                self.inline(Inline::Text(html.into_string()))
            }
            Event::Html(html) => match self.stack.last_mut() {
                Some(Frame::Html(text)) => text.push_str(&html),
                _ => self.block(Block::Html(html.into_string())),
            },
            Event::FootnoteReference(label) => self.inline(Inline::Text(format!("[^{label}]"))),
            Event::SoftBreak => self.inline(Inline::SoftBreak),
            Event::HardBreak => self.inline(Inline::HardBreak),
            Event::Rule => self.block(Block::Rule),
            Event::TaskListMarker(done) => {
                self.close_implicit();
                if let Some(Frame::Blocks(BlocksKind::Item(task), _)) = self.stack.last_mut() {
                    *task = Some(done);
                }
            }
        }
    }

    fn push(&mut self, frame: Frame) {
        let (containers, inlines) = counts(&frame);
        self.containers += containers;
        self.inlines += inlines;
        self.stack.push(frame);
    }

    fn pop(&mut self) -> Option<Frame> {
        let frame = self.stack.pop()?;
        let (containers, inlines) = counts(&frame);
        self.containers -= containers;
        self.inlines -= inlines;
        Some(frame)
    }

    fn start(&mut self, tag: Tag<'_>) {
        let too_deep = match &tag {
            Tag::BlockQuote(_) | Tag::List(_) | Tag::Item => self.containers >= DEEPEST,
            Tag::Emphasis
            | Tag::Strong
            | Tag::Strikethrough
            | Tag::Link { .. }
            | Tag::Image { .. } => self.inlines >= DEEPEST,
            _ => false,
        };
        if too_deep {
            let frame = match tag {
                Tag::BlockQuote(_) | Tag::List(_) | Tag::Item => {
                    Frame::Blocks(BlocksKind::Flattened, Vec::new())
                }
                _ => Frame::Inlines(InlineKind::Transparent, Vec::new()),
            };
            self.close_implicit();
            self.push(frame);
            return;
        }
        let frame = match tag {
            Tag::Paragraph => Frame::Inlines(InlineKind::Paragraph, Vec::new()),
            Tag::Heading { level, .. } => {
                Frame::Inlines(InlineKind::Heading(level as u8), Vec::new())
            }
            Tag::BlockQuote(_) => Frame::Blocks(BlocksKind::Quote, Vec::new()),
            Tag::CodeBlock(kind) => {
                let language = match kind {
                    CodeBlockKind::Fenced(info) => fence_language(&info),
                    CodeBlockKind::Indented => None,
                };
                Frame::Code(language, String::new())
            }
            Tag::HtmlBlock => Frame::Html(String::new()),
            Tag::List(start) => Frame::List(start, Vec::new()),
            Tag::Item => Frame::Blocks(BlocksKind::Item(None), Vec::new()),
            Tag::Table(aligns) => Frame::Table {
                aligns: aligns
                    .into_iter()
                    .map(|align| match align {
                        Alignment::Center => Align::Center,
                        Alignment::Right => Align::Right,
                        Alignment::Left | Alignment::None => Align::Left,
                    })
                    .collect(),
                head: Vec::new(),
                rows: Vec::new(),
            },
            Tag::TableHead | Tag::TableRow => Frame::Row(Vec::new()),
            Tag::TableCell => Frame::Inlines(InlineKind::Cell, Vec::new()),
            Tag::Emphasis => Frame::Inlines(InlineKind::Emphasis, Vec::new()),
            Tag::Strong => Frame::Inlines(InlineKind::Strong, Vec::new()),
            Tag::Strikethrough => Frame::Inlines(InlineKind::Strike, Vec::new()),
            Tag::Link { dest_url, .. } => {
                Frame::Inlines(InlineKind::Link(dest_url.into_string()), Vec::new())
            }
            Tag::Image { dest_url, .. } => {
                Frame::Inlines(InlineKind::Image(dest_url.into_string()), Vec::new())
            }
            _ => Frame::Inlines(InlineKind::Transparent, Vec::new()),
        };
        if matches!(
            frame,
            Frame::Inlines(InlineKind::Paragraph | InlineKind::Heading(_), _)
                | Frame::Blocks(..)
                | Frame::Code(..)
                | Frame::Html(_)
                | Frame::List(..)
                | Frame::Table { .. }
        ) {
            self.close_implicit();
        }
        self.push(frame);
    }

    fn end(&mut self, tag: TagEnd) {
        if matches!(tag, TagEnd::Item | TagEnd::BlockQuote(_)) {
            self.close_implicit();
        }
        // The root stays; an end without its start (never from the parser) is ignored.
        if self.stack.len() < 2 {
            return;
        }
        let Some(frame) = self.pop() else {
            return;
        };
        match frame {
            Frame::Inlines(kind, inlines) => self.end_inlines(kind, inlines),
            Frame::Blocks(BlocksKind::Quote, blocks) => self.block(Block::Quote(blocks)),
            Frame::Blocks(BlocksKind::Item(task), blocks) => {
                if let Some(Frame::List(_, items)) = self.stack.last_mut() {
                    items.push(Item { task, blocks });
                }
            }
            Frame::Blocks(BlocksKind::Root, blocks) => {
                self.push(Frame::Blocks(BlocksKind::Root, blocks));
            }
            Frame::Blocks(BlocksKind::Flattened, blocks) => {
                for block in blocks {
                    self.block(block);
                }
            }
            Frame::Code(language, text) => self.block(Block::Code { language, text }),
            Frame::Html(text) => self.block(Block::Html(text)),
            Frame::List(start, items) => self.block(Block::List { start, items }),
            Frame::Table { aligns, head, rows } => self.block(Block::Table { aligns, head, rows }),
            Frame::Row(cells) => {
                if let Some(Frame::Table { head, rows, .. }) = self.stack.last_mut() {
                    if tag == TagEnd::TableHead {
                        *head = cells;
                    } else {
                        rows.push(cells);
                    }
                }
            }
        }
    }

    fn end_inlines(&mut self, kind: InlineKind, inlines: Vec<Inline>) {
        match kind {
            InlineKind::Paragraph | InlineKind::Implicit => self.block(Block::Paragraph(inlines)),
            InlineKind::Heading(level) => self.block(Block::Heading(level, inlines)),
            InlineKind::Emphasis => self.inline(Inline::Emphasis(inlines)),
            InlineKind::Strong => self.inline(Inline::Strong(inlines)),
            InlineKind::Strike => self.inline(Inline::Strike(inlines)),
            InlineKind::Link(url) => self.inline(Inline::Link {
                url,
                children: inlines,
            }),
            InlineKind::Image(url) => self.inline(Inline::Image { url, alt: inlines }),
            InlineKind::Cell => {
                if let Some(Frame::Row(cells)) = self.stack.last_mut() {
                    cells.push(inlines);
                }
            }
            InlineKind::Transparent => {
                for inline in inlines {
                    self.inline(inline);
                }
            }
        }
    }

    /// Add an inline to the innermost inline container, opening a tight item's text if needed.
    fn inline(&mut self, inline: Inline) {
        match self.stack.last_mut() {
            Some(Frame::Inlines(_, inlines)) => inlines.push(inline),
            Some(Frame::Code(_, text)) | Some(Frame::Html(text)) => {
                if let Inline::Text(more) = inline {
                    text.push_str(&more);
                }
            }
            _ => self.push(Frame::Inlines(InlineKind::Implicit, vec![inline])),
        }
    }

    /// Add a block to the innermost block container.
    fn block(&mut self, block: Block) {
        self.close_implicit();
        if let Some(Frame::Blocks(_, blocks)) = self.stack.last_mut() {
            blocks.push(block);
        }
    }

    fn close_implicit(&mut self) {
        if !matches!(
            self.stack.last(),
            Some(Frame::Inlines(InlineKind::Implicit, _))
        ) {
            return;
        }
        if let Some(Frame::Inlines(_, inlines)) = self.pop()
            && let Some(Frame::Blocks(_, blocks)) = self.stack.last_mut()
        {
            blocks.push(Block::Paragraph(inlines));
        }
    }

    fn finish(mut self) -> Vec<Block> {
        self.close_implicit();
        // Whatever is still open (never from the parser) is closed in order.
        while self.stack.len() > 1 {
            self.end(TagEnd::Paragraph);
        }
        match self.pop() {
            Some(Frame::Blocks(_, blocks)) => blocks,
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Inline {
        Inline::Text(s.into())
    }

    #[test]
    fn tight_and_task_items_get_their_text_as_a_paragraph() {
        let blocks = parse("- [x] done\n- plain\n  - nested\n");
        let Block::List { start, items } = &blocks[0] else {
            panic!("{blocks:?}")
        };
        assert_eq!(*start, None);
        assert_eq!(items[0].task, Some(true));
        assert_eq!(items[0].blocks, vec![Block::Paragraph(vec![text("done")])]);
        assert_eq!(items[1].blocks.len(), 2, "{:?}", items[1].blocks);
        assert!(matches!(items[1].blocks[1], Block::List { .. }));
    }

    #[test]
    fn nesting_past_the_deepest_is_kept_flat_and_never_exhausts_the_stack() {
        let quotes = format!("{}deep", "> ".repeat(50_000));
        let blocks = parse(&quotes);
        fn depth(blocks: &[Block]) -> usize {
            blocks
                .iter()
                .map(|block| match block {
                    Block::Quote(inner) => 1 + depth(inner),
                    Block::List { items, .. } => {
                        1 + items
                            .iter()
                            .map(|item| depth(&item.blocks))
                            .max()
                            .unwrap_or(0)
                    }
                    _ => 0,
                })
                .max()
                .unwrap_or(0)
        }
        assert_eq!(depth(&blocks), DEEPEST);
        assert!(crate::markdown_html(&quotes).contains("deep"));
        let lists = format!("{}x", "- ".repeat(50_000));
        assert!(depth(&parse(&lists)) <= DEEPEST);
        let lines = crate::markdown_lines(&lists, 80);
        assert!(lines.iter().all(|line| line.width() <= 80));
        let emphasis = format!("{}x{}", "*_".repeat(20_000), "_*".repeat(20_000));
        assert!(crate::markdown_html(&emphasis).contains('x'));
    }

    #[test]
    fn tables_keep_head_rows_and_alignment() {
        let blocks = parse("| a | b |\n|:--|--:|\n| 1 | 2 |\n");
        assert_eq!(
            blocks,
            vec![Block::Table {
                aligns: vec![Align::Left, Align::Right],
                head: vec![vec![text("a")], vec![text("b")]],
                rows: vec![vec![vec![text("1")], vec![text("2")]]],
            }]
        );
    }

    #[test]
    fn fences_keep_their_language_and_html_stays_text() {
        let blocks = parse("```rust ignore\nfn x() {}\n```\n\n<script>x</script>\n");
        assert_eq!(
            blocks[0],
            Block::Code {
                language: Some("rust".into()),
                text: "fn x() {}\n".into()
            }
        );
        assert_eq!(blocks[1], Block::Html("<script>x</script>\n".into()));
    }
}
