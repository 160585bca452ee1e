//! Tool output shaping: caps and middle truncation.
//!
//! Invariant: whatever is cut is announced with how much was cut, so the model never mistakes
//! a truncated output for the whole.

/// Longest text a tool result carries, in bytes.
pub const OUTPUT_CAP: usize = 30_000;

/// Keep the head and the tail of `text` within `cap` bytes, saying how much was cut.
pub fn truncate_middle(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_string();
    }
    let half = cap / 2;
    let head_end = floor_char_boundary(text, half);
    let tail_start = ceil_char_boundary(text, text.len() - half);
    let cut = tail_start - head_end;
    format!(
        "{}\n[… {cut} bytes cut from the middle of {} …]\n{}",
        &text[..head_end],
        text.len(),
        &text[tail_start..]
    )
}

fn floor_char_boundary(text: &str, mut index: usize) -> usize {
    while index > 0 && !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

fn ceil_char_boundary(text: &str, mut index: usize) -> usize {
    while index < text.len() && !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

/// Whether bytes look binary (a NUL byte in the first 8 KiB, or mostly invalid UTF-8).
pub fn looks_binary(bytes: &[u8]) -> bool {
    let sample = &bytes[..bytes.len().min(8192)];
    if sample.contains(&0) {
        return true;
    }
    let lossy = String::from_utf8_lossy(sample);
    let replaced = lossy.matches('\u{FFFD}').count();
    replaced * 10 > sample.len().max(1) && replaced > 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn middle_truncation_keeps_both_ends_and_says_what_was_cut() {
        let text = format!("{}{}{}", "a".repeat(100), "b".repeat(1000), "c".repeat(100));
        let cut = truncate_middle(&text, 200);
        assert!(cut.starts_with(&"a".repeat(100)));
        assert!(cut.ends_with(&"c".repeat(100)));
        assert!(
            cut.contains("[… 1000 bytes cut from the middle of 1200 …]"),
            "{cut}"
        );
        assert_eq!(truncate_middle("short", 200), "short");
        let unicode = "é".repeat(500);
        let cut = truncate_middle(&unicode, 101);
        assert!(cut.contains("bytes cut"));
    }

    #[test]
    fn binary_detection() {
        assert!(looks_binary(b"ELF\0\x01\x02"));
        assert!(!looks_binary("plain ünïcode text\n".as_bytes()));
        assert!(looks_binary(&[0xff; 100]));
    }
}
