//! Synchronous assembly of an in-memory SSE byte sequence, through the same framer and
//! assemblers the network path uses.
//!
//! Invariant: the chunks are framed exactly as network reads would be, so tests and benchmarks
//! exercise the production code path, split wherever the caller splits.

use super::{Assembler, Completion, Delta, Progress};
use crate::profile::DEFAULT_MAX_EVENT_BYTES;
use crate::sse::{SseEvent, SseFramer};
use keel_types::{FailureDiagnostic, WireProtocol};
use std::ops::ControlFlow;

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
    assemble_chunks_with(Assembler::new(protocol), chunks, sink)
}

/// `assemble_chunks` through a given assembler (one with templates off, to compare).
pub fn assemble_chunks_with<I, B>(
    mut assembler: Assembler,
    chunks: I,
    sink: &mut dyn FnMut(Delta<'_>),
) -> Result<Completion, FailureDiagnostic>
where
    I: IntoIterator<Item = B>,
    B: AsRef<[u8]>,
{
    let mut framer = SseFramer::new(DEFAULT_MAX_EVENT_BYTES);
    for chunk in chunks {
        let flow = framer.feed(chunk.as_ref(), &mut |event: SseEvent<'_>| {
            Ok::<_, FailureDiagnostic>(match assembler.push(event.event, event.data, sink)? {
                Progress::Done => ControlFlow::Break(()),
                Progress::Continue => ControlFlow::Continue(()),
            })
        })?;
        if flow.is_break() {
            break;
        }
    }
    assembler.finish()
}
