//! What rendering a streaming answer costs (`cargo bench -p keel-render --bench
//! stream_render`): a 1 MiB markdown answer and a 1 MiB open code fence, each arriving in
//! 16-byte deltas, drawn at 60 frames a second — one delta a frame (960 B/s, faster than a
//! model streams) and 100 a frame (96 KiB/s, a transcript replayed). Reports time per frame
//! (median, p99, worst) and the total against only copying the same bytes out raw, measured in
//! the same run. Target: ≤ 2 ms per frame.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_render::{Colors, MarkdownStream, OpenCode, line_to_ansi, markdown_lines, visible};
use std::time::{Duration, Instant};

const DELTA: usize = 16;
const WIDTH: usize = 100;
const SIZE: usize = 1 << 20;

/// A long answer with every construct a model writes.
fn mixed_answer() -> String {
    let section = "## Findings\n\nThe **cache hit** ratio stays high because every request starts with the \
previous one's bytes; see [the docs](https://example.com/docs) and `keel config`.\n\n\
- first point, long enough to wrap at a hundred columns when the terminal is not very wide at all\n\
- second point with `code`\n  - nested detail\n\n\
| Agent | Memory | Time |\n|:--|--:|--:|\n| keel | 19.5 MiB | 0.15 s |\n| other | 618 MiB | 7.2 s |\n\n\
```rust\nfn main() {\n    let answer = 42; // the answer\n    println!(\"{answer}\");\n}\n```\n\n\
> A quote that goes on for a while, with *emphasis* in it.\n\n";
    let mut text = String::new();
    while text.len() < SIZE {
        text.push_str(section);
    }
    text
}

/// One code block that never closes.
fn open_fence() -> String {
    let mut text = String::from("Here is the file:\n\n```rust\n");
    let mut n = 0u64;
    while text.len() < SIZE {
        text.push_str(&format!(
            "    let value_{n} = compute(\"input {n}\", {n}) * 2; // step {n}\n"
        ));
        n += 1;
    }
    text
}

fn deltas(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + DELTA).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

/// The renderer's work for one answer: (time of each frame, total).
fn render(text: &str, deltas_per_frame: usize) -> (Vec<Duration>, Duration) {
    let mut stream = MarkdownStream::new();
    let mut code: Option<OpenCode> = None;
    let mut shown: Vec<String> = Vec::new();
    let mut frames = Vec::new();
    let started = Instant::now();
    for frame in deltas(text).chunks(deltas_per_frame) {
        let at = Instant::now();
        for delta in frame {
            stream.push(delta);
        }
        if let Some(settled) = stream.take_settled() {
            code = None;
            for line in markdown_lines(&settled, WIDTH) {
                std::hint::black_box(line_to_ansi(&line, Colors::Ansi));
            }
            shown.clear();
        }
        if let Some(fence) = stream.open_fence() {
            let open = code.get_or_insert_with(|| OpenCode::new(fence.language.as_deref()));
            let update = open.update(&stream.open()[fence.body_start..], WIDTH);
            shown.truncate(update.keep);
            shown.extend(
                update
                    .rows
                    .iter()
                    .map(|row| line_to_ansi(row, Colors::Ansi)),
            );
        } else {
            code = None;
            shown = markdown_lines(stream.open(), WIDTH)
                .iter()
                .map(|line| line_to_ansi(line, Colors::Ansi))
                .collect();
        }
        std::hint::black_box(&shown);
        frames.push(at.elapsed());
    }
    let rest = stream.finish();
    std::hint::black_box(markdown_lines(&rest, WIDTH));
    (frames, started.elapsed())
}

/// The floor: the same deltas only made safe and copied out.
fn raw(text: &str) -> Duration {
    let started = Instant::now();
    let mut out = String::with_capacity(text.len());
    for delta in deltas(text) {
        out.push_str(&visible(delta));
    }
    std::hint::black_box(out);
    started.elapsed()
}

fn percentile(sorted: &[Duration], share: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * share) as usize]
}

fn main() {
    let answers = [
        ("1 MiB answer", mixed_answer()),
        ("1 MiB open code fence", open_fence()),
    ];
    for deltas_per_frame in [1, 100] {
        for (name, text) in &answers {
            let floor = raw(text);
            let (mut frames, total) = render(text, deltas_per_frame);
            frames.sort();
            let ms = |d: Duration| d.as_secs_f64() * 1000.0;
            println!(
                "{name:<22} {deltas_per_frame:>3} delta(s)/frame, {} frames · per frame: median \
             {:.3} ms, p99 {:.3} ms, worst {:.3} ms · total {:.0} ms vs {:.1} ms raw ({:.0}×)",
                frames.len(),
                ms(percentile(&frames, 0.5)),
                ms(percentile(&frames, 0.99)),
                ms(*frames.last().unwrap()),
                ms(total),
                ms(floor),
                total.as_secs_f64() / floor.as_secs_f64()
            );
        }
    }
}
