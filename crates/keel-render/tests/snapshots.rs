//! What each markdown construct and each diff looks like, at 40, 80 and 120 columns, with
//! colours (each styled run written as `⟦style|text⟧`) and without (`NO_COLOR`: the plain
//! lines), and as HTML. A change to the look of anything shows here as a snapshot diff.

use keel_render::{FileDiff, Line, Style, markdown_html, markdown_lines, to_plain};

const WIDTHS: [usize; 3] = [40, 80, 120];

const DOCUMENTS: &[(&str, &str)] = &[
    (
        "inline",
        "# Heading one\n\n## Heading two\n\n### Heading three\n\nPlain, *emphasis*, **strong**, ***both***, ~~struck~~, `inline code`, a soft\nbreak and a hard  \nbreak, and a paragraph long enough to wrap at forty columns and at eighty columns too, since it keeps going for a while.\n",
    ),
    (
        "lists",
        "1. First item, long enough to wrap when the terminal is narrow like forty columns\n2. Second\n   - nested bullet\n   - another\n     - deeper\n       - deepest\n3. Third\n\n7. starts at seven\n8. eight\n9. nine\n10. ten\n\n- [x] done task\n- [ ] open task\n\n* loose item\n\n* with a second paragraph\n\n  inside it\n",
    ),
    (
        "tables",
        "| Name | Size | Notes |\n|:-----|-----:|:-----:|\n| keel | 19.5 MiB | fast |\n| other agent with a long name | 618 MiB | slow and heavy on memory, with a note long enough to wrap |\n\n| a | b | c | d | e | f | g | h | i | j |\n|---|---|---|---|---|---|---|---|---|---|\n| alpha | bravo | charlie | delta | echo | foxtrot | golf | hotel | india | juliett |\n",
    ),
    (
        "quotes_and_rules",
        "> A quote with **bold**\n> over two lines.\n>\n> > and a nested quote\n\n---\n\nafter the rule\n",
    ),
    (
        "code",
        "```rust\nfn main() {\n\tlet answer = 42; // the answer\n    println!(\"{answer}\");\n}\n```\n\n```python\ndef f(x):\n    \"\"\"doc\"\"\"\n    return x * 2  # twice\n```\n\n```\nno language: a line long enough to be broken at forty columns, never re-flowed\n```\n\n    indented code\n",
    ),
    (
        "links",
        "A [link](https://example.com/docs \"title\"), an autolink <https://auto.link>, a [bad one](javascript:alert(1)), a [relative](../x.md) and an ![image](https://example.com/a.png \"t\") and ![](data:image/png;base64,AAAA).\n",
    ),
    (
        "hostile",
        "Text with \u{1b}[2J an escape, a \u{9b}31m C1, \u{202e}reversed\u{202c} bidi, <b>inline html</b> and\n\n<script>alert(1)</script>\n\n`code \u{1b}]8;;http://x\u{7}hyperlink\u{1b}]8;;\u{7}`\n",
    ),
];

/// Each styled run as `⟦style|text⟧`; plain text as is.
fn styled(lines: &[Line]) -> String {
    let mut out = String::new();
    for line in lines {
        for span in &line.spans {
            if span.style == Style::PLAIN {
                out.push_str(span.text());
            } else {
                out.push_str(&format!("⟦{}|{}⟧", describe(span.style), span.text()));
            }
        }
        out.push('\n');
    }
    out
}

fn describe(style: Style) -> String {
    let mut parts: Vec<String> = Vec::new();
    for (on, name) in [
        (style.bold, "b"),
        (style.dim, "dim"),
        (style.italic, "i"),
        (style.underline, "u"),
        (style.crossed, "s"),
    ] {
        if on {
            parts.push(name.into());
        }
    }
    if let Some(color) = style.fg {
        parts.push(format!("{color:?}").to_lowercase());
    }
    parts.join(",")
}

fn assert_fits(name: &str, lines: &[Line], width: usize) {
    for line in lines {
        assert!(
            line.width() <= width,
            "{name} at {width}: {:?} is {} wide",
            line.plain(),
            line.width()
        );
    }
}

#[test]
fn every_markdown_construct_at_every_width_with_and_without_colour() {
    for (name, markdown) in DOCUMENTS {
        for width in WIDTHS {
            let lines = markdown_lines(markdown, width);
            assert_fits(name, &lines, width);
            insta::assert_snapshot!(format!("{name}_{width}_no_color"), to_plain(&lines));
            insta::assert_snapshot!(format!("{name}_{width}_color"), styled(&lines));
        }
        insta::assert_snapshot!(format!("{name}_html"), markdown_html(markdown));
    }
}

#[test]
fn diffs_at_every_width_with_and_without_colour() {
    let old = "fn main() {\n    let x = 1;\n    let y = 2;\n    println!(\"{}\", x + y);\n}\n\nfn unchanged_one() {}\nfn unchanged_two() {}\nfn unchanged_three() {}\nfn unchanged_four() {}\n\nfn tail() {\n    old_call(\"a long argument that will need to be broken at forty columns\");\n}\n";
    let new = old
        .replace("let y = 2;", "let y = 3;\n    let z = y * 2;")
        .replace("old_call", "new_call");
    let cases: Vec<(&str, FileDiff)> = vec![
        ("edit", FileDiff::new(Some(old.as_bytes()), new.as_bytes())),
        (
            "new_file",
            FileDiff::new(None, b"first line\n\tsecond, tabbed\n"),
        ),
        ("binary", FileDiff::new(Some(b"text"), b"\x89PNG\x00\x01")),
    ];
    for (name, diff) in cases {
        for width in WIDTHS {
            let lines = diff.lines(width);
            assert_fits(name, &lines, width);
            insta::assert_snapshot!(format!("diff_{name}_{width}_no_color"), to_plain(&lines));
            insta::assert_snapshot!(format!("diff_{name}_{width}_color"), styled(&lines));
        }
        insta::assert_snapshot!(format!("diff_{name}_html"), diff.html());
    }
}
