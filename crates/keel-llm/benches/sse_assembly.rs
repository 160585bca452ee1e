//! SSE framing + stream assembly throughput for each protocol's stream, against a baseline that
//! only scans the same bytes for newlines and against `eventsource-stream` (the oracle keel's
//! framer is checked against) in front of the same assembler, all measured in the same run.
//!
//! The table also prints where the time goes: keel's framer alone, and the floor any serde
//! client has — the framer plus a JSON skip of each payload, with serde_json and with sonic-rs
//! (tried as the issue asked; it does not win on a portable build, so keel keeps serde_json).
//!
//! Run: `cargo bench -p keel-llm --bench sse_assembly` (`KEEL_BENCH_TABLE_ONLY=1` skips the
//! criterion part and prints only the table).
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, Throughput};
use eventsource_stream::Eventsource;
use futures_util::{StreamExt, stream};
use keel_llm::assemble::sse::assemble_chunks;
use keel_llm::assemble::{Assembler, Progress};
use keel_llm::sse::{FrameError, SseEvent, SseFramer};
use keel_mock::render::{Frame, MockUsage, Protocol, ScriptedAnswer, stream_frames};
use keel_mock::scenario::ScriptedCall;
use keel_types::WireProtocol;
use serde::de::IgnoredAny;
use std::hint::black_box;
use std::ops::ControlFlow;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// A long answer as `keel mock` streams it (the providers' own chunk shapes: reasoning, text in
/// small deltas, tool calls in fragments, keep-alives, usage), one event per network read.
fn stream_of(protocol: Protocol) -> Vec<Vec<u8>> {
    let reasoning = "Thinking about the layout of src/lib.rs \u{2014} step by step. ".repeat(400);
    let text = "The answer, with \"quotes\", a path src/main.rs and some text. ".repeat(400);
    let arguments =
        serde_json::json!({"path": "src/lib.rs", "content": "fn main() {}\n".repeat(200)});
    let answer = ScriptedAnswer {
        search: None,
        reason: Some(reasoning),
        text: Some(text),
        calls: vec![ScriptedCall {
            name: "write_file".into(),
            arguments: arguments.to_string(),
        }],
        finish_reason: None,
        usage: None,
    };
    let usage = MockUsage {
        prompt: 1000,
        completion: 500,
        reasoning: 200,
        cache_hit: 900,
    };
    stream_frames(protocol, &answer.answer(1), usage)
        .into_iter()
        .filter_map(|frame| match frame {
            Frame::Bytes(bytes) => Some(bytes.into_bytes()),
            Frame::Sleep(_) | Frame::Abort => None,
        })
        .collect()
}

/// The baseline: look at every byte once for a newline, as the cheapest possible SSE reader.
fn newline_scan(chunks: &[Vec<u8>]) -> usize {
    chunks
        .iter()
        .map(|chunk| chunk.iter().filter(|byte| **byte == b'\n').count())
        .sum()
}

fn keel(protocol: WireProtocol, chunks: &[Vec<u8>]) -> usize {
    match assemble_chunks(protocol, chunks.iter(), &mut |delta| {
        black_box(delta);
    }) {
        Ok(completion) => completion.item.parts.len(),
        Err(diagnostic) => panic!("bench stream failed: {diagnostic}"),
    }
}

/// The same assembler behind `eventsource-stream`, which keel used to frame with.
fn oracle(protocol: WireProtocol, chunks: &[Vec<u8>]) -> usize {
    let source = stream::iter(chunks.iter().map(Ok::<_, std::convert::Infallible>));
    let mut events = pin!(source.eventsource());
    let mut context = Context::from_waker(Waker::noop());
    let mut assembler = Assembler::new(protocol);
    while let Poll::Ready(Some(event)) = events.poll_next_unpin(&mut context) {
        let event = event.expect("the oracle frames the stream");
        let progress = assembler.push(&event.event, &event.data, &mut |delta| {
            black_box(delta);
        });
        if progress.expect("assembles") == Progress::Done {
            break;
        }
    }
    assembler.finish().map(|c| c.item.parts.len()).unwrap_or(0)
}

/// Frame `chunks` with keel's framer and hand each event's data to `per_event`.
fn frame_with(chunks: &[Vec<u8>], mut per_event: impl FnMut(&str) -> usize) -> usize {
    let mut framer = SseFramer::new(1 << 24);
    let mut total = 0;
    for chunk in chunks {
        let flow = framer.feed(chunk, &mut |event: SseEvent<'_>| {
            total += per_event(event.data);
            Ok::<_, FrameError>(ControlFlow::Continue(()))
        });
        assert!(flow.is_ok(), "the bench stream frames");
    }
    total
}

fn best_of(runs: usize, mut work: impl FnMut() -> usize) -> Duration {
    (0..runs)
        .map(|_| {
            let started = Instant::now();
            black_box(work());
            started.elapsed()
        })
        .min()
        .unwrap_or_default()
}

const PROTOCOLS: [(&str, Protocol, WireProtocol); 3] = [
    ("DeepSeek Chat", Protocol::Chat, WireProtocol::Chat),
    ("Anthropic", Protocol::Anthropic, WireProtocol::Anthropic),
    ("Responses", Protocol::Responses, WireProtocol::Responses),
];

fn main() {
    let streams: Vec<Vec<Vec<u8>>> = PROTOCOLS
        .iter()
        .map(|(_, protocol, _)| stream_of(*protocol))
        .collect();
    let mut criterion = Criterion::default().configure_from_args();
    if std::env::var_os("KEEL_BENCH_TABLE_ONLY").is_some() {
        criterion = criterion.with_filter("^$");
    }
    let mut group = criterion.benchmark_group("sse");
    for ((name, _, wire), chunks) in PROTOCOLS.iter().zip(&streams) {
        let bytes: usize = chunks.iter().map(Vec::len).sum();
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_function(format!("{name}: newline scan"), |b| {
            b.iter(|| newline_scan(black_box(chunks)))
        });
        group.bench_function(format!("{name}: keel frame + assemble"), |b| {
            b.iter(|| keel(*wire, black_box(chunks)))
        });
    }
    group.finish();
    criterion.final_summary();

    let runs = 100;
    println!("\nbest of {runs} runs each; ratio to the newline scan of the same bytes");
    for ((name, _, wire), chunks) in PROTOCOLS.iter().zip(&streams) {
        let bytes: usize = chunks.iter().map(Vec::len).sum();
        let mib = bytes as f64 / (1024.0 * 1024.0);
        let baseline = best_of(runs, || newline_scan(chunks));
        let ours = best_of(runs, || keel(*wire, chunks));
        let theirs = best_of(runs, || oracle(*wire, chunks));
        let line = |what: &str, took: Duration| {
            println!(
                "  {what:<50} {took:>10.2?}  {:>6.0} MiB/s  {:>5.2}x",
                mib / took.as_secs_f64(),
                took.as_secs_f64() / baseline.as_secs_f64()
            );
        };
        println!("{name}: {} reads, {mib:.2} MiB", chunks.len());
        line("newline scan (baseline)", baseline);
        line("keel: own framer + typed assembly", ours);
        line("eventsource-stream + the same assembly", theirs);
        let framing = best_of(runs, || frame_with(chunks, str::len));
        line("  of which: keel's framer alone", framing);
        let skip = best_of(runs, || {
            frame_with(chunks, |data| {
                usize::from(serde_json::from_str::<IgnoredAny>(data).is_ok())
            })
        });
        line("  floor: framer + serde_json skipping each payload", skip);
        let sonic = best_of(runs, || {
            frame_with(chunks, |data| {
                usize::from(sonic_rs::from_str::<IgnoredAny>(data).is_ok())
            })
        });
        line("  floor: framer + sonic-rs skipping each payload", sonic);
    }
}
