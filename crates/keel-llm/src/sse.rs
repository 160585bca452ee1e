//! keel's server-sent-events framer: bytes in, events out, by the WHATWG event-stream rules.
//!
//! Invariants:
//! - Line ends are LF, CR and CRLF (a CRLF split between two reads still counts once); a
//!   leading byte-order mark is skipped; lines starting with `:` are comments; a field without a
//!   colon has an empty value; one space after the colon is dropped; `data` lines are joined
//!   with LF; `event` names the event (`message` when absent); `id` sets the last event id
//!   (ignored when it holds NUL) and persists across events; `retry` sets the stream's
//!   reconnection time only when it is all ASCII digits; an event with no `data` line is not
//!   dispatched; a final event without the blank line that ends it is dropped.
//! - The events do not depend on how the bytes are split into reads: checked against
//!   `eventsource-stream` (the oracle, a dev-dependency) by a property test and a fuzz target.
//! - No line and no event longer than the bound is ever buffered: past it the framer fails with
//!   the same verdict wherever the reads split the bytes, before any later event is dispatched
//!   (a cut line is held to the line bound; the event bound is checked when the line is whole).
//!   Every line since the last blank one counts toward the event, comments included.
//! - After a `Break` or an error the framer is finished and holds nothing of any read.
//! - Zero-copy where the bytes allow: an event whose single `data` line lies inside one read is
//!   handed out as a slice of that read. Only a line cut by a read boundary, or a multi-line
//!   `data`, is copied (once, into a buffer reused for the whole stream).
//! - A dispatched event whose data, name or id is not UTF-8 fails the stream; nothing is decoded
//!   before an event is dispatched (comments, ignored fields and events without data never are).

use std::ops::{ControlFlow, Range};

/// Why the bytes are not an acceptable event stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("an event-stream line is longer than {0} bytes")]
    LineTooLong(usize),
    #[error("an event-stream event is longer than {0} bytes")]
    EventTooLong(usize),
    #[error("an event-stream field is not valid UTF-8")]
    NotUtf8,
}

/// One dispatched event, borrowed from the framer (or the read) for the callback's duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event` field, `message` when the event had none.
    pub event: &'a str,
    pub data: &'a str,
    /// The last event id seen so far in the stream (ids persist across events).
    pub id: &'a str,
    /// The reconnection time the stream has set so far (`retry`), in milliseconds.
    pub retry: Option<u64>,
}

/// Where the data of the event being built lives.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Data {
    /// No `data` line yet.
    None,
    /// One `data` line, still inside the current read.
    InRead(Range<usize>),
    /// In `data_buffer` (several lines, or one that outlived its read).
    Buffered,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The framer's state between reads.
#[derive(Debug)]
pub struct SseFramer {
    limit: usize,
    /// The start of a line that a read boundary cut.
    carry: Vec<u8>,
    /// Whether the byte-order mark question is settled (only the stream's first bytes count).
    bom_settled: bool,
    /// The previous read ended with CR: an LF first in this read belongs to that line end.
    after_cr: bool,
    /// Bytes of the current event's completed lines (the size bound).
    event_len: usize,
    data: Data,
    data_buffer: Vec<u8>,
    /// Raw bytes, decoded only when an event is dispatched.
    event_name: Vec<u8>,
    last_id: Vec<u8>,
    retry: Option<u64>,
    /// A `Break` or an error ended the stream.
    finished: bool,
}

impl SseFramer {
    /// A framer that fails past `limit` bytes in one line or one event.
    pub fn new(limit: usize) -> SseFramer {
        SseFramer {
            limit,
            carry: Vec::new(),
            bom_settled: false,
            after_cr: false,
            event_len: 0,
            data: Data::None,
            data_buffer: Vec::new(),
            event_name: Vec::new(),
            last_id: Vec::new(),
            retry: None,
            finished: false,
        }
    }

    /// Frame one read; `on_event` gets each event it completes, in order, and may stop the
    /// stream (`Break`), after which the rest of the read is not looked at. After a `Break` or
    /// an error the framer is finished: later reads are not looked at either (`Break`).
    pub fn feed<E: From<FrameError>>(
        &mut self,
        read: &[u8],
        on_event: &mut dyn FnMut(SseEvent<'_>) -> Result<ControlFlow<()>, E>,
    ) -> Result<ControlFlow<()>, E> {
        if self.finished {
            return Ok(ControlFlow::Break(()));
        }
        let flow = self.feed_unfinished(read, on_event);
        if !matches!(flow, Ok(ControlFlow::Continue(()))) {
            self.finished = true;
            // Nothing may keep pointing into the read, even if the caller feeds again.
            self.data = Data::None;
        }
        flow
    }

    fn feed_unfinished<E: From<FrameError>>(
        &mut self,
        read: &[u8],
        on_event: &mut dyn FnMut(SseEvent<'_>) -> Result<ControlFlow<()>, E>,
    ) -> Result<ControlFlow<()>, E> {
        if self.bom_settled {
            return self.feed_settled(read, on_event);
        }
        if self.carry.is_empty() && read.len() >= BOM.len() {
            self.bom_settled = true;
            return self.feed_settled(read.strip_prefix(BOM).unwrap_or(read), on_event);
        }
        // The mark may itself be split between reads: hold at most its three bytes until it is
        // clear, then go on with the rest of the read.
        let taken = (BOM.len() - self.carry.len()).min(read.len());
        self.carry.extend_from_slice(&read[..taken]);
        let rest = &read[taken..];
        if self.carry[..] == BOM[..self.carry.len()] {
            if self.carry.len() < BOM.len() {
                return Ok(ControlFlow::Continue(()));
            }
            self.bom_settled = true;
            self.carry.clear();
            return self.feed_settled(rest, on_event);
        }
        self.bom_settled = true;
        let held = std::mem::take(&mut self.carry);
        let flow = self.feed_settled(&held, on_event)?;
        if flow.is_break() {
            return Ok(flow);
        }
        self.feed_settled(rest, on_event)
    }

    fn feed_settled<E: From<FrameError>>(
        &mut self,
        read: &[u8],
        on_event: &mut dyn FnMut(SseEvent<'_>) -> Result<ControlFlow<()>, E>,
    ) -> Result<ControlFlow<()>, E> {
        let mut start = 0;
        for end in memchr::memchr2_iter(b'\n', b'\r', read) {
            let after_cr = std::mem::replace(&mut self.after_cr, read[end] == b'\r');
            if end == start && after_cr && read[end] == b'\n' {
                // The LF of a CRLF (its CR may have ended the previous read).
                start = end + 1;
                continue;
            }
            let flow = if self.carry.is_empty() {
                self.line(read, start..end, true, on_event)?
            } else {
                self.hold(&read[start..end])?;
                let carried = std::mem::take(&mut self.carry);
                let flow = self.line(&carried, 0..carried.len(), false, on_event);
                self.carry = carried;
                self.carry.clear();
                flow?
            };
            if flow.is_break() {
                return Ok(flow);
            }
            start = end + 1;
        }
        // The read ends: nothing may keep pointing into it.
        if let Data::InRead(range) = &self.data {
            self.data_buffer.clear();
            self.data_buffer.extend_from_slice(&read[range.clone()]);
            self.data = Data::Buffered;
        }
        let rest = &read[start..];
        if !rest.is_empty() {
            self.after_cr = false;
            self.hold(rest)?;
        }
        Ok(ControlFlow::Continue(()))
    }

    /// Add `bytes` to the line a read boundary cut. Only the line bound here: whether the event
    /// is too long is decided when the line is whole, so the verdict does not depend on where
    /// the read ended.
    fn hold(&mut self, bytes: &[u8]) -> Result<(), FrameError> {
        if self.carry.len() + bytes.len() > self.limit {
            return Err(FrameError::LineTooLong(self.limit));
        }
        self.carry.extend_from_slice(bytes);
        Ok(())
    }

    /// A whole line of `length` bytes would break the bound.
    fn check_line(&self, length: usize) -> Result<(), FrameError> {
        if length > self.limit {
            return Err(FrameError::LineTooLong(self.limit));
        }
        if self.event_len + length > self.limit {
            return Err(FrameError::EventTooLong(self.limit));
        }
        Ok(())
    }

    /// One complete line, `bytes[range]`, without its line end; `in_read` when `bytes` is the
    /// read itself (not the buffer of a line a read boundary cut).
    fn line<E: From<FrameError>>(
        &mut self,
        bytes: &[u8],
        range: Range<usize>,
        in_read: bool,
        on_event: &mut dyn FnMut(SseEvent<'_>) -> Result<ControlFlow<()>, E>,
    ) -> Result<ControlFlow<()>, E> {
        let line = &bytes[range.clone()];
        if line.is_empty() {
            return self.dispatch(bytes, on_event);
        }
        self.check_line(line.len())?;
        self.event_len += line.len();
        let (name, value_start) = match memchr::memchr(b':', line) {
            Some(0) => return Ok(ControlFlow::Continue(())),
            Some(colon) => {
                let after = colon + 1;
                let skip = usize::from(line.get(after) == Some(&b' '));
                (&line[..colon], after + skip)
            }
            None => (line, line.len()),
        };
        let value = range.start + value_start..range.end;
        match name {
            b"data" => self.add_data(bytes, value, in_read),
            b"event" => {
                self.event_name.clear();
                self.event_name.extend_from_slice(&bytes[value]);
            }
            b"id" => {
                let id = &bytes[value];
                if memchr::memchr(0, id).is_none() {
                    self.last_id.clear();
                    self.last_id.extend_from_slice(id);
                }
            }
            b"retry" => {
                let digits = &bytes[value];
                if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
                    // All digits, so the only failure is overflow: ignored like any bad value.
                    let parsed = std::str::from_utf8(digits)
                        .ok()
                        .and_then(|d| d.parse().ok());
                    self.retry = parsed.or(self.retry);
                }
            }
            _ => {}
        }
        Ok(ControlFlow::Continue(()))
    }

    fn add_data(&mut self, bytes: &[u8], value: Range<usize>, in_read: bool) {
        match std::mem::replace(&mut self.data, Data::Buffered) {
            Data::None if in_read => self.data = Data::InRead(value),
            Data::None => {
                self.data_buffer.clear();
                self.data_buffer.extend_from_slice(&bytes[value]);
            }
            Data::InRead(first) => {
                self.data_buffer.clear();
                self.data_buffer.extend_from_slice(&bytes[first]);
                self.data_buffer.push(b'\n');
                self.data_buffer.extend_from_slice(&bytes[value]);
            }
            Data::Buffered => {
                self.data_buffer.push(b'\n');
                self.data_buffer.extend_from_slice(&bytes[value]);
            }
        }
    }

    /// A blank line: hand out the event (when it has data) and start the next one.
    fn dispatch<E: From<FrameError>>(
        &mut self,
        bytes: &[u8],
        on_event: &mut dyn FnMut(SseEvent<'_>) -> Result<ControlFlow<()>, E>,
    ) -> Result<ControlFlow<()>, E> {
        self.event_len = 0;
        let data = match std::mem::replace(&mut self.data, Data::None) {
            Data::None => {
                self.event_name.clear();
                return Ok(ControlFlow::Continue(()));
            }
            Data::InRead(range) => &bytes[range],
            Data::Buffered => self.data_buffer.as_slice(),
        };
        let event_name = std::mem::take(&mut self.event_name);
        let event = SseEvent {
            event: if event_name.is_empty() {
                "message"
            } else {
                utf8(&event_name)?
            },
            data: utf8(data)?,
            id: utf8(&self.last_id)?,
            retry: self.retry,
        };
        let flow = on_event(event);
        // Keep the allocation for the next event's name.
        self.event_name = event_name;
        self.event_name.clear();
        flow
    }
}

fn utf8(bytes: &[u8]) -> Result<&str, FrameError> {
    std::str::from_utf8(bytes).map_err(|_| FrameError::NotUtf8)
}

#[cfg(test)]
mod tests;
