//! A running command's output as it arrives, for a surface to show while the command runs.
//!
//! Invariants:
//! - Only bytes that passed the command's `StreamRedactor` are handed on (the same bytes the
//!   result keeps), so a secret never reaches a live view, even split across reads.
//! - Text is handed on in whole UTF-8 characters: a character split across two reads is held
//!   until it completes; bytes that are not UTF-8 become U+FFFD.

use std::sync::Arc;

/// Where live output goes (the agent turns it into `tool/output` events).
#[derive(Clone)]
pub struct LiveOutput(pub Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for LiveOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveOutput")
    }
}

/// Redacted bytes in, whole characters out.
#[derive(Default)]
pub(crate) struct Utf8Carry {
    held: Vec<u8>,
}

impl Utf8Carry {
    /// `bytes` appended; the text complete so far (empty when only a partial character is
    /// held).
    pub(crate) fn push(&mut self, bytes: &[u8]) -> String {
        self.held.extend_from_slice(bytes);
        let complete = match std::str::from_utf8(&self.held) {
            Ok(_) => self.held.len(),
            // Ends inside a character: keep its start for the next read.
            Err(error) if error.error_len().is_none() => error.valid_up_to(),
            Err(_) => self.held.len(),
        };
        let text = String::from_utf8_lossy(&self.held[..complete]).into_owned();
        self.held.drain(..complete);
        text
    }

    /// What is left at the end of the stream.
    pub(crate) fn finish(self) -> String {
        String::from_utf8_lossy(&self.held).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_across_reads_is_handed_on_whole() {
        let mut carry = Utf8Carry::default();
        let bytes = "ab€c".as_bytes();
        assert_eq!(carry.push(&bytes[..3]), "ab");
        assert_eq!(carry.push(&bytes[3..4]), "");
        assert_eq!(carry.push(&bytes[4..]), "€c");
        assert_eq!(carry.push(b"\xff!"), "\u{fffd}!");
        assert_eq!(carry.push(&"é".as_bytes()[..1]), "");
        assert_eq!(carry.finish(), "\u{fffd}");
    }
}
