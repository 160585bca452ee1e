//! SSE framing + stream assembly throughput, against a baseline that only scans the same bytes
//! for newlines, measured in the same run. Prints the ratio at the end.
//!
//! Run: `cargo bench -p keel-llm --bench sse_assembly`
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, Throughput};
use keel_llm::assemble::sse::assemble_chunks;
use keel_types::WireProtocol;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// A DeepSeek-style stream: reasoning, text, and a tool call, in `events` chunks, one event
/// per network read (servers flush each event).
fn deepseek_stream(events: usize) -> Vec<Vec<u8>> {
    let mut chunks = Vec::with_capacity(events + 4);
    let chunk = |delta: &str| {
        format!(
            "data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"deepseek-v4-flash\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n"
        )
        .into_bytes()
    };
    chunks.push(chunk(
        r#"{"role":"assistant","content":null,"reasoning_content":""}"#,
    ));
    for i in 0..events {
        let delta = match i % 3 {
            0 => r#"{"reasoning_content":" thinking about it \u2014 step"}"#.to_string(),
            1 => r#"{"content":" the answer, with \"quotes\" and text"}"#.to_string(),
            _ => format!(
                r#"{{"tool_calls":[{{"index":{},"function":{{"arguments":"{{\"path\": \"src/lib.rs\"}}"}}}}]}}"#,
                0
            ),
        };
        if i == 2 {
            chunks.push(chunk(
                r#"{"tool_calls":[{"index":0,"id":"call_0","type":"function","function":{"name":"read_file","arguments":""}}]}"#,
            ));
        }
        chunks.push(chunk(&delta));
        if i % 50 == 0 {
            chunks.push(b": keep-alive\n\n".to_vec());
        }
    }
    chunks.push(
        b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
            .to_vec(),
    );
    chunks.push(b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":500,\"prompt_cache_hit_tokens\":900,\"prompt_cache_miss_tokens\":100}}\n\n".to_vec());
    chunks.push(b"data: [DONE]\n\n".to_vec());
    chunks
}

/// The baseline: look at every byte once for a newline, as the cheapest possible SSE reader.
fn newline_scan(chunks: &[Vec<u8>]) -> usize {
    chunks
        .iter()
        .map(|chunk| chunk.iter().filter(|byte| **byte == b'\n').count())
        .sum()
}

fn assemble(chunks: &[Vec<u8>]) -> usize {
    match assemble_chunks(WireProtocol::Chat, chunks.iter(), &mut |delta| {
        black_box(delta);
    }) {
        Ok(completion) => completion.item.parts.len(),
        Err(diagnostic) => panic!("bench stream failed: {diagnostic}"),
    }
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

/// Parse every `data:` payload as JSON and throw it away: the floor for any client that reads
/// the chunks at all.
fn json_floor(payloads: &[String]) -> usize {
    payloads
        .iter()
        .filter(|payload| serde_json::from_str::<serde::de::IgnoredAny>(payload).is_ok())
        .count()
}

fn main() {
    let chunks = deepseek_stream(3000);
    let bytes: usize = chunks.iter().map(Vec::len).sum();
    let payloads: Vec<String> = chunks
        .iter()
        .filter_map(|chunk| std::str::from_utf8(chunk).ok()?.strip_prefix("data: "))
        .map(|payload| payload.trim_end().to_string())
        .filter(|payload| payload.starts_with('{'))
        .collect();
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("sse");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("newline_scan_baseline", |b| {
        b.iter(|| newline_scan(black_box(&chunks)))
    });
    group.bench_function("frame_and_assemble", |b| {
        b.iter(|| assemble(black_box(&chunks)))
    });
    group.finish();
    criterion.final_summary();

    let runs = 60;
    let baseline = best_of(runs, || newline_scan(&chunks));
    let full = best_of(runs, || assemble(&chunks));
    let floor = best_of(runs, || json_floor(&payloads));
    let reference = best_of(runs, || reference_framer_assemble(&chunks));
    let mib = bytes as f64 / (1024.0 * 1024.0);
    let ratio = |d: Duration| d.as_secs_f64() / baseline.as_secs_f64();
    println!(
        "stream: {} chunks, {:.2} MiB (best of {runs} runs each)",
        chunks.len(),
        mib
    );
    println!(
        "baseline, newline scan:           {baseline:>10.2?}  {:>6.0} MiB/s  1.00x",
        mib / baseline.as_secs_f64()
    );
    println!(
        "keel, frame + assemble:           {full:>10.2?}  {:>6.0} MiB/s  {:.2}x",
        mib / full.as_secs_f64(),
        ratio(full)
    );
    println!(
        "  JSON skip of the payloads only: {floor:>10.2?}  {:>6.0} MiB/s  {:.2}x",
        mib / floor.as_secs_f64(),
        ratio(floor)
    );
    println!(
        "  assembly behind a bare framer:  {reference:>10.2?}  {:>6.0} MiB/s  {:.2}x",
        mib / reference.as_secs_f64(),
        ratio(reference)
    );
}

/// A minimal SSE line framer (LF/CRLF, `data:` joining, comments skipped) in front of the same
/// assembler, only to show how much of the cost is framing. keel itself frames with
/// `eventsource-stream`.
fn reference_framer_assemble(chunks: &[Vec<u8>]) -> usize {
    use keel_llm::assemble::{Assembler, Progress};
    let mut assembler = Assembler::new(WireProtocol::Chat);
    let mut pending: Vec<u8> = Vec::new();
    let mut data = String::new();
    let mut event = String::new();
    for chunk in chunks {
        pending.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(offset) = pending[start..].iter().position(|byte| *byte == b'\n') {
            let mut line = &pending[start..start + offset];
            start += offset + 1;
            if let Some(stripped) = line.strip_suffix(b"\r") {
                line = stripped;
            }
            if line.is_empty() {
                if !data.is_empty() {
                    let name = if event.is_empty() {
                        "message"
                    } else {
                        event.as_str()
                    };
                    let progress = assembler.push(name, &data, &mut |delta| {
                        black_box(delta);
                    });
                    if progress == Ok(Progress::Done) {
                        return assembler.finish().map(|c| c.item.parts.len()).unwrap_or(0);
                    }
                }
                data.clear();
                event.clear();
            } else if let Some(value) = line.strip_prefix(b"data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                let value = value.strip_prefix(b" ").unwrap_or(value);
                data.push_str(std::str::from_utf8(value).unwrap_or(""));
            } else if let Some(value) = line.strip_prefix(b"event:") {
                event = String::from_utf8_lossy(value.strip_prefix(b" ").unwrap_or(value)).into();
            }
        }
        pending.drain(..start);
    }
    0
}
