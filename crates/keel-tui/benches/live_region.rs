//! What the live region costs while an answer streams (`cargo bench -p keel-tui --bench
//! live_region`): a 1 MiB markdown answer and a 1 MiB open code fence, each arriving in 16-byte
//! deltas, with a frame every 16 deltas (at 60 frames a second, 15 KiB/s: a fast model) — each
//! frame applies its deltas to the view, composes the region and draws it (cell diff, crossterm
//! backend) into `/dev/null`. Reported: time per frame (median, p99, worst), the total against only
//! copying the same bytes out raw (same run), and keystroke-to-screen with the stream running
//! (a key into the input, the frame composed and its changed cells written).
//! Targets: ≤ 2 ms per frame; keystroke-to-screen well under a frame.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_render::Colors;
use keel_tui::{InlineSurface, LiveView, Status};
use keel_types::{Event, EventBody, WireProtocol};
use std::io::Write;
use std::time::{Duration, Instant};

const DELTA: usize = 16;
const DELTAS_PER_FRAME: usize = 16;
const SIZE: usize = 1 << 20;
const SCREEN: (u16, u16) = (100, 40);

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

/// Where both the region and the raw copy are written: `/dev/null`, a write per frame as to a
/// terminal, without a terminal's own cost.
fn null() -> std::fs::File {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .unwrap()
}

fn event(body: EventBody) -> Event {
    Event {
        id: None,
        session_id: "bench".into(),
        turn: Some(1),
        body,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// Stream `text` through a view drawn on a sink; returns the frame times, the total and the
/// keystroke-to-screen times.
fn stream(text: &str) -> (Vec<Duration>, Duration, Vec<Duration>) {
    let mut view = LiveView::new(
        Status {
            model: "deepseek/deepseek-v4-flash".into(),
            mode: "ask".into(),
            ..Status::default()
        },
        Vec::new(),
        usize::from(SCREEN.0),
        usize::from(SCREEN.1),
    );
    let mut surface = InlineSurface::new(null(), SCREEN, 0, Colors::Ansi);
    let now = Instant::now();
    view.set_busy(true);
    view.apply(
        &event(EventBody::LlmRequest {
            attempt: 1,
            protocol: WireProtocol::Chat,
            model: "m".into(),
            message_count: 1,
            prefix_hash: "h".into(),
            account: "default".into(),
        }),
        now,
    );
    let pieces = deltas(text);
    let mut frames = Vec::new();
    let mut keys = Vec::new();
    let started = Instant::now();
    for (index, chunk) in pieces.chunks(DELTAS_PER_FRAME).enumerate() {
        let frame_started = Instant::now();
        for delta in chunk {
            view.apply(
                &event(EventBody::LlmText {
                    delta: (*delta).to_string(),
                }),
                now,
            );
        }
        let commits = view.take_commits();
        let frame = view.frame(now);
        surface.draw(&commits, &frame).unwrap();
        frames.push(frame_started.elapsed());
        // Every 64th frame a key is typed into the input while the stream runs.
        if index % 64 == 0 {
            let key_started = Instant::now();
            view.editor.insert('x');
            let frame = view.frame(now);
            surface.draw(&[], &frame).unwrap();
            keys.push(key_started.elapsed());
        }
    }
    let total = started.elapsed();
    (frames, total, keys)
}

/// Only copying the same bytes out, in the same frames.
fn raw(text: &str) -> Duration {
    let pieces = deltas(text);
    let mut sink = null();
    let started = Instant::now();
    for chunk in pieces.chunks(DELTAS_PER_FRAME) {
        for delta in chunk {
            sink.write_all(delta.as_bytes()).unwrap();
        }
        sink.flush().unwrap();
    }
    started.elapsed()
}

fn report(name: &str, text: &str) {
    let (mut frames, total, mut keys) = stream(text);
    let baseline = raw(text);
    frames.sort();
    keys.sort();
    println!(
        "{name}: {} frames of {DELTAS_PER_FRAME} deltas · per frame median {:.3} ms, p99 {:.3} ms, \
         worst {:.3} ms · total {:.0} ms (raw copy {:.2} ms, {:.0}×) · keystroke to screen median \
         {:.3} ms, worst {:.3} ms",
        frames.len(),
        ms(percentile(&frames, 0.5)),
        ms(percentile(&frames, 0.99)),
        ms(*frames.last().unwrap()),
        ms(total),
        ms(baseline),
        total.as_secs_f64() / baseline.as_secs_f64().max(1e-9),
        ms(percentile(&keys, 0.5)),
        ms(*keys.last().unwrap()),
    );
}

fn main() {
    report("1 MiB mixed markdown", &mixed_answer());
    report("1 MiB open code fence", &open_fence());
}
