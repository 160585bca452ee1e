//! Synchronous assembly of an in-memory SSE byte sequence, through the same framing
//! (`eventsource-stream`) and assemblers the network path uses.
//!
//! Invariant: the chunks are framed exactly as network reads would be, so tests and benchmarks
//! exercise the production code path, split wherever the caller splits.

use super::{Assembler, Completion, Delta, Progress};
use eventsource_stream::Eventsource;
use futures_util::{Stream, StreamExt, stream};
use keel_types::{FailureDiagnostic, FailureKind, WireProtocol};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Frame and assemble `chunks`; every delta goes to `sink`.
pub fn assemble_chunks<I, B>(
    protocol: WireProtocol,
    chunks: I,
    sink: &mut dyn FnMut(Delta<'_>),
) -> Result<Completion, FailureDiagnostic>
where
    I: IntoIterator<Item = B>,
    B: AsRef<[u8]>,
{
    let source = stream::iter(chunks.into_iter().map(Ok::<B, std::convert::Infallible>));
    let mut events = pin!(source.eventsource());
    let mut assembler = Assembler::new(protocol);
    while let Some(next) = poll_ready(&mut events) {
        let event = next.map_err(|_| {
            FailureDiagnostic::with_message(
                FailureKind::StreamCorrupt,
                None,
                "the stream is not valid server-sent events",
            )
        })?;
        if assembler.push(&event.event, &event.data, sink)? == Progress::Done {
            break;
        }
    }
    assembler.finish()
}

/// Poll a stream whose source never waits (an iterator); `None` at its end.
fn poll_ready<S: Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    let mut context = Context::from_waker(Waker::noop());
    match stream.poll_next_unpin(&mut context) {
        Poll::Ready(item) => item,
        // An iterator source is never pending; treat it as the end rather than spin.
        Poll::Pending => None,
    }
}
