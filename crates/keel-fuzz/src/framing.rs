//! Targets for the bytes a provider streams: keel's SSE framer against the oracle, and each
//! protocol's assembler under arbitrary splits.

use crate::reads;
use eventsource_stream::Eventsource;
use futures_util::{StreamExt, stream};
use keel_llm::Delta;
use keel_llm::assemble::Assembler;
use keel_llm::assemble::sse::assemble_chunks_with;
use keel_llm::sse::{FrameError, SseEvent, SseFramer};
use keel_types::WireProtocol;
use std::ops::ControlFlow;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// An event as both framers can describe it (keel never reconnects, so `retry` is not compared:
/// the oracle also takes `+5`, the rules take only digits).
pub type Event = (String, String, String);

/// What keel's framer makes of `reads` with a bound of `limit` bytes, its handler stopping it
/// after `stop_after` events: the events it dispatched and the error that stopped it, if any.
/// Reads after a stop are still fed, and must give nothing.
pub fn keel_events(
    reads: &[&[u8]],
    limit: usize,
    stop_after: usize,
) -> (Vec<Event>, Option<FrameError>) {
    let mut framer = SseFramer::new(limit);
    let mut events = Vec::new();
    for read in reads {
        let fed = framer.feed(read, &mut |event: SseEvent<'_>| {
            events.push((
                event.event.to_string(),
                event.data.to_string(),
                event.id.to_string(),
            ));
            Ok::<_, FrameError>(if events.len() >= stop_after {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        });
        if let Err(error) = fed {
            return (events, Some(error));
        }
    }
    (events, None)
}

/// What `eventsource-stream` makes of `stream` split into `reads` (UTF-8 streams only: it
/// stalls on anything else). Two of its faults are worked around without changing what the
/// stream means:
/// - it panics on a leading byte-order mark (it slices one byte off a three-byte character):
///   it gets the stream without the mark and with a blank line in front, which dispatches
///   nothing and keeps a second mark from being taken for the first;
/// - it waits for a byte after a final CR to tell CR from CRLF, where the rules end the line at
///   once: an LF after a final CR gives it that byte.
pub fn oracle_events(stream: &[u8], reads: &[&[u8]]) -> Vec<Event> {
    let bom = stream.starts_with(b"\xEF\xBB\xBF");
    let mut pieces: Vec<Vec<u8>> = vec![b"\n".to_vec()];
    let mut skip = if bom { 3 } else { 0 };
    for read in reads {
        let cut = skip.min(read.len());
        skip -= cut;
        pieces.push(read[cut..].to_vec());
    }
    if stream.last() == Some(&b'\r') {
        pieces.push(b"\n".to_vec());
    }
    let source = stream::iter(pieces.into_iter().map(Ok::<_, std::convert::Infallible>));
    let mut parsed = pin!(source.eventsource());
    let mut context = Context::from_waker(Waker::noop());
    let mut events = Vec::new();
    while let Poll::Ready(Some(event)) = parsed.poll_next_unpin(&mut context) {
        let event = event.expect("the oracle frames any UTF-8 stream");
        events.push((event.event, event.data, event.id));
    }
    events
}

/// The framer: the same events and verdict however the stream is split (with a bound that
/// never trips and with a small one), and the oracle's events for any UTF-8 stream.
pub fn sse_framer(data: &[u8]) {
    let Some(([first, second], stream)) = data.split_first_chunk::<2>() else {
        return;
    };
    let split = reads(stream, *first, *second);
    let whole = keel_events(&[stream], usize::MAX, usize::MAX);
    assert_eq!(
        keel_events(&split, usize::MAX, usize::MAX),
        whole,
        "split changed the events"
    );
    let small = usize::from(*first) + 1;
    assert_eq!(
        keel_events(&split, small, usize::MAX),
        keel_events(&[stream], small, usize::MAX),
        "split changed the events or the verdict under a bound of {small}"
    );
    // Stopping after a few events gives exactly the first of them, and nothing after.
    let stop_after = usize::from(*second % 8) + 1;
    let (stopped, _) = keel_events(&split, usize::MAX, stop_after);
    assert_eq!(
        stopped[..],
        whole.0[..stop_after.min(whole.0.len())],
        "a Break after {stop_after} events"
    );
    if std::str::from_utf8(stream).is_ok() {
        assert_eq!(whole.1, None, "a UTF-8 stream frames without error");
        assert_eq!(
            whole.0,
            oracle_events(stream, &split),
            "keel and the oracle disagree"
        );
    }
}

/// Everything an assembly shows: each delta as it streamed (reasoning or not, its text) and the
/// outcome.
type Assembled = (Vec<(bool, String)>, Result<keel_llm::Completion, String>);

fn assemble(protocol: WireProtocol, templates: bool, reads: &[&[u8]]) -> Assembled {
    let mut deltas = Vec::new();
    let assembler = Assembler::with_templates(protocol, templates);
    let outcome = assemble_chunks_with(assembler, reads, &mut |delta| {
        deltas.push(match delta {
            Delta::Text(piece) => (false, piece.to_owned()),
            Delta::Reasoning(piece) => (true, piece.to_owned()),
        })
    });
    (deltas, outcome.map_err(|failure| failure.to_string()))
}

/// Each protocol's assembler: never a panic, the same deltas and outcome however the stream is
/// split, and the same with the repeated-envelope fast path as with every event parsed in full.
pub fn assembler(data: &[u8]) {
    let Some(([choice, first, second], stream)) = data.split_first_chunk::<3>() else {
        return;
    };
    let protocol = match choice % 3 {
        0 => WireProtocol::Chat,
        1 => WireProtocol::Anthropic,
        _ => WireProtocol::Responses,
    };
    let whole = assemble(protocol, true, &[stream]);
    let split = assemble(protocol, true, &reads(stream, *first, *second));
    assert_eq!(split, whole, "{protocol:?}: split changed the assembly");
    let full = assemble(protocol, false, &[stream]);
    assert_eq!(
        whole, full,
        "{protocol:?}: the fast path changed the assembly"
    );
}
