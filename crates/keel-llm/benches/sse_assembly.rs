//! SSE framing + stream assembly throughput, against a baseline that only scans the same bytes
//! for newlines, measured in the same run. Prints the ratio at the end.
//!
//! Run: `cargo bench -p keel-llm --bench sse_assembly`

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
    chunks.push(chunk(r#"{"role":"assistant","content":null,"reasoning_content":""}"#));
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
    chunks.push(b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n".to_vec());
    chunks.push(b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":500,\"prompt_cache_hit_tokens\":900,\"prompt_cache_miss_tokens\":100}}\n\n".to_vec());
    chunks.push(b"data: [DONE]\n\n".to_vec());
    chunks
}

/// The baseline: look at every byte once for a newline, as the cheapest possible SSE reader.
fn newline_scan(chunks: &[Vec<u8>]) -> usize {
    chunks.iter().map(|chunk| chunk.iter().filter(|byte| **byte == b'\n').count()).sum()
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

fn main() {
    let chunks = deepseek_stream(3000);
    let bytes: usize = chunks.iter().map(Vec::len).sum();
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("sse");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("newline_scan_baseline", |b| b.iter(|| newline_scan(black_box(&chunks))));
    group.bench_function("frame_and_assemble", |b| b.iter(|| assemble(black_box(&chunks))));
    group.finish();
    criterion.final_summary();

    let baseline = best_of(50, || newline_scan(&chunks));
    let full = best_of(50, || assemble(&chunks));
    let framing = best_of(50, || framing_only(&chunks));
    println!("framing only: {framing:?}");
    let json = best_of(50, || json_only(&chunks));
    println!("json skip only: {json:?}");
    let mib = bytes as f64 / (1024.0 * 1024.0);
    println!(
        "stream: {} events, {:.2} MiB\nbaseline (newline scan): {:?} ({:.0} MiB/s)\nframe+assemble: {:?} ({:.0} MiB/s)\nratio: {:.2}x",
        chunks.len(),
        mib,
        baseline,
        mib / baseline.as_secs_f64(),
        full,
        mib / full.as_secs_f64(),
        full.as_secs_f64() / baseline.as_secs_f64()
    );
}

#[allow(dead_code)]
pub fn framing_only(chunks: &[Vec<u8>]) -> usize {
    use eventsource_stream::Eventsource;
    use futures_util::StreamExt;
    let source = futures_util::stream::iter(chunks.iter().map(Ok::<_, std::convert::Infallible>));
    let mut events = std::pin::pin!(source.eventsource());
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    let mut count = 0;
    while let std::task::Poll::Ready(Some(Ok(event))) = events.poll_next_unpin(&mut context) {
        count += event.data.len();
    }
    count
}

#[allow(dead_code)]
pub fn json_only(chunks: &[Vec<u8>]) -> usize {
    let mut n = 0;
    for chunk in chunks {
        if let Some(data) = chunk.strip_prefix(b"data: ") {
            let data = &data[..data.len() - 2];
            if let Ok(v) = serde_json::from_slice::<serde::de::IgnoredAny>(data) {
                black_box(v);
                n += 1;
            }
        }
    }
    n
}
