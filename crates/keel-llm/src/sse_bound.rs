//! A bound on the size of one SSE line and one SSE event, checked on the raw bytes before they
//! reach the event-stream parser, so a body without line ends cannot be buffered whole.
//!
//! Invariants:
//! - Line ends are LF, CR and CRLF (a CRLF counts once), as the event-stream rules say; an
//!   event ends at an empty line.
//! - The verdict does not depend on how the bytes are split into chunks (tested).
//! - Checking costs one `memchr2` scan per chunk; no byte is copied.

/// The stream broke a size bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BoundExceeded {
    #[error("an event-stream line is longer than {0} bytes")]
    Line(usize),
    #[error("an event-stream event is longer than {0} bytes")]
    Event(usize),
}

/// Tracks the current line and event lengths across chunks.
#[derive(Clone, Debug)]
pub struct SseBound {
    limit: usize,
    line: usize,
    event: usize,
    after_cr: bool,
}

impl SseBound {
    pub fn new(limit: usize) -> SseBound {
        SseBound {
            limit,
            line: 0,
            event: 0,
            after_cr: false,
        }
    }

    /// Account for `bytes`; an error once a line or an event grows past the limit.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), BoundExceeded> {
        let mut start = 0;
        for end in memchr::memchr2_iter(b'\n', b'\r', bytes) {
            let run = end - start;
            let crlf_tail = run == 0 && self.after_cr && bytes[end] == b'\n';
            if !crlf_tail {
                self.grow(run)?;
                if self.line == 0 {
                    self.event = 0;
                }
                self.line = 0;
            }
            self.after_cr = bytes[end] == b'\r';
            start = end + 1;
        }
        let rest = bytes.len() - start;
        if rest > 0 {
            self.after_cr = false;
            self.grow(rest)?;
        }
        Ok(())
    }

    fn grow(&mut self, run: usize) -> Result<(), BoundExceeded> {
        self.line += run;
        self.event += run;
        if self.line > self.limit {
            return Err(BoundExceeded::Line(self.limit));
        }
        if self.event > self.limit {
            return Err(BoundExceeded::Event(self.limit));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(limit: usize, chunks: &[&[u8]]) -> Result<(), BoundExceeded> {
        let mut bound = SseBound::new(limit);
        chunks.iter().try_for_each(|chunk| bound.feed(chunk))
    }

    #[test]
    fn long_lines_fail_wherever_the_stream_is_split() {
        let body = [b"data: ".as_slice(), &[b'x'; 40]].concat();
        for split in 0..body.len() {
            let (a, b) = body.split_at(split);
            assert_eq!(
                verdict(32, &[a, b]),
                Err(BoundExceeded::Line(32)),
                "{split}"
            );
        }
        assert_eq!(verdict(64, &[&body]), Ok(()));
    }

    #[test]
    fn many_short_lines_in_one_event_fail_as_an_event() {
        for ending in ["\n", "\r", "\r\n"] {
            let event = format!("data: 0123456789{ending}").repeat(10);
            assert_eq!(
                verdict(64, &[event.as_bytes()]),
                Err(BoundExceeded::Event(64)),
                "{ending:?}"
            );
            let separated = format!("data: 0123456789{ending}{ending}").repeat(10);
            for split in 0..separated.len() {
                let (a, b) = separated.as_bytes().split_at(split);
                assert_eq!(verdict(64, &[a, b]), Ok(()), "{ending:?} at {split}");
            }
        }
    }
}
