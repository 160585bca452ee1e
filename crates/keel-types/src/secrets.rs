//! keel's own secrets (provider keys, tokens): which environment variables hold them, and
//! redaction of their values from text that tools produce.
//!
//! Invariants:
//! - `Secrets` never prints a value: its `Debug` shows the variable names and a count only.
//! - `redact` replaces every occurrence of every known value, longest first (so a value that
//!   contains another is replaced whole), with `[redacted $NAME]`; text without a value is
//!   returned as is, without copying.
//! - Values shorter than `MIN_REDACTED_LEN` are not redacted (they would mangle ordinary
//!   text); their variables are still removed from tool environments.
//! - Redaction happens before any cut, and only whole occurrences are replaced: what is shown
//!   of a cut output never depends on whether the bytes at the cut are part of a secret (no
//!   oracle a model could probe one character at a time). `StreamRedactor` holds back (longest
//!   value − 1) bytes whatever they are (a live view's redactor, never the model's, holds only
//!   an end that could begin a value), and releases held bytes unchanged when no value
//!   completes.

use std::borrow::Cow;

/// A run of this many bytes shared with a secret makes a text an echo of the secret: a trace
/// id, or a provider's message, that does is dropped.
pub const ECHO_RUN: usize = 8;

/// The shortest secret value that is redacted from text.
pub const MIN_REDACTED_LEN: usize = 6;

/// The environment variables that hold keel's secrets, and their values.
#[derive(Clone, Default)]
pub struct Secrets {
    names: Vec<String>,
    /// (value, variable name), longest value first.
    values: Vec<(String, String)>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("names", &self.names)
            .field("values", &self.values.len())
            .finish()
    }
}

impl Secrets {
    /// Secrets from variable names and a lookup of their values (the environment, in
    /// production).
    pub fn from_names<I, F>(names: I, lookup: F) -> Secrets
    where
        I: IntoIterator<Item = String>,
        F: Fn(&str) -> Option<String>,
    {
        let mut secrets = Secrets::default();
        for name in names {
            if secrets.names.contains(&name) {
                continue;
            }
            if let Some(value) = lookup(&name) {
                for candidate in [value.clone(), value.trim().to_string()] {
                    if candidate.len() >= MIN_REDACTED_LEN
                        && !secrets.values.iter().any(|(known, _)| *known == candidate)
                    {
                        secrets.values.push((candidate, name.clone()));
                    }
                }
            }
            secrets.names.push(name);
        }
        secrets
            .values
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        secrets
    }

    /// These secrets and `value` (held for `name`) too, whatever the lookup gave for `name`:
    /// a key keel stores behind a variable that is set is still one of its secrets.
    pub fn with_value(mut self, name: &str, value: &str) -> Secrets {
        for candidate in [value.to_string(), value.trim().to_string()] {
            if candidate.len() >= MIN_REDACTED_LEN
                && !self.values.iter().any(|(known, _)| *known == candidate)
            {
                self.values.push((candidate, name.to_string()));
            }
        }
        if !self.names.iter().any(|known| known == name) {
            self.names.push(name.to_string());
        }
        self.values
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        self
    }

    /// The variables a tool's environment must not have.
    pub fn env_names(&self) -> &[String] {
        &self.names
    }

    /// `text` with every secret value replaced by `[redacted $NAME]`.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut result = Cow::Borrowed(text);
        for (value, name) in &self.values {
            if result.contains(value.as_str()) {
                result = Cow::Owned(result.replace(value.as_str(), &format!("[redacted ${name}]")));
            }
        }
        result
    }

    /// A redactor for output that arrives in pieces (a command's stream): feed it every byte
    /// before anything is kept or cut.
    pub fn stream(&self) -> StreamRedactor {
        StreamRedactor {
            secrets: self.clone(),
            held: Vec::new(),
            hold: self.hold(),
            minimal: false,
        }
    }

    /// A redactor for a live view of a stream (a person watching a command run): it holds
    /// back only an end that could begin a value, so output shows at once. Never for what the
    /// model is given: what it holds depends on the bytes, and a stream cut short would tell
    /// whether its end begins a secret.
    pub fn live_stream(&self) -> StreamRedactor {
        StreamRedactor {
            minimal: true,
            ..self.stream()
        }
    }

    /// How many bytes at the end of a text cut short may be the start of a secret value
    /// (the longest value's length − 1).
    pub fn hold(&self) -> usize {
        self.values
            .first()
            .map_or(0, |(value, _)| value.len().saturating_sub(1))
    }

    /// Whether `text` shares a run of `run` or more bytes with any secret value (a trace id
    /// that does is not a trace id but an echo of a key).
    pub fn shares_run(&self, text: &str, run: usize) -> bool {
        self.values
            .iter()
            .any(|(value, _)| shares_run(text, value, run))
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Whether the file at `path` holds a secret value anywhere in its bytes (read in pieces
    /// that overlap by `hold`, so a value across two is found). A file that cannot be read
    /// holds none that keel could copy.
    pub fn held_in_file(&self, path: &std::path::Path) -> bool {
        use std::io::Read;
        if self.values.is_empty() {
            return false;
        }
        use std::os::unix::fs::OpenOptionsExt;
        let flags = nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits();
        let Ok(file) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(flags)
            .open(path)
        else {
            return false;
        };
        // A regular file only (a FIFO or device put in its place is not read), and no more of
        // it than it held when opened.
        let Ok(meta) = file.metadata() else {
            return false;
        };
        if !meta.is_file() {
            return false;
        }
        let mut file = file.take(meta.len());
        let keep = self.hold();
        let mut window: Vec<u8> = Vec::with_capacity(PIECE + keep);
        let mut piece = vec![0u8; PIECE];
        loop {
            let read = match file.read(&mut piece) {
                Ok(0) | Err(_) => return false,
                Ok(read) => read,
            };
            window.extend_from_slice(&piece[..read]);
            if self.held_in(&window) {
                return true;
            }
            let cut = window.len().saturating_sub(keep);
            window.drain(..cut);
        }
    }

    /// Whether `bytes` hold a secret value.
    pub fn held_in(&self, bytes: &[u8]) -> bool {
        self.values
            .iter()
            .any(|(value, _)| memchr::memmem::find(bytes, value.as_bytes()).is_some())
    }
}

/// How much of a file is looked at at once for a secret.
const PIECE: usize = 1 << 20;

/// Whether `a` and `b` share a run of at least `run` bytes.
pub fn shares_run(a: &str, b: &str, run: usize) -> bool {
    if run == 0 {
        return true;
    }
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short.len() >= run
        && (0..=short.len() - run).any(|start| {
            short
                .as_bytes()
                .get(start..start + run)
                .is_some_and(|piece| memchr::memmem::find(long.as_bytes(), piece).is_some())
        })
}

/// Redacts a stream of bytes: whole occurrences of secret values are replaced, everything
/// else passes through unchanged, in order. Between `push`es (longest value − 1) bytes are
/// held back (`live_stream`: only an end that could begin a value), so a value split across
/// reads is still found.
pub struct StreamRedactor {
    secrets: Secrets,
    held: Vec<u8>,
    hold: usize,
    /// Hold back only an end that could begin a value (`live_stream`), not a fixed length.
    minimal: bool,
}

impl StreamRedactor {
    /// Take `bytes`; append to `out` what is now known to be safe to keep.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        if self.secrets.values.is_empty() {
            out.extend_from_slice(bytes);
            return;
        }
        self.held.extend_from_slice(bytes);
        let rest = self.replace_whole(out);
        // What remains may end in the start of a value: keep back (longest − 1) bytes, or for a
        // live view only an end that could begin a value, so it shows at once.
        let kept = if self.minimal {
            self.unfinished_value_start(&rest)
        } else {
            self.hold.min(rest.len())
        };
        let release = rest.len() - kept;
        out.extend_from_slice(&rest[..release]);
        self.held = rest[release..].to_vec();
    }

    /// The length of the longest end of `rest` that is the start (not the whole) of a value.
    fn unfinished_value_start(&self, rest: &[u8]) -> usize {
        (1..=self.hold.min(rest.len()))
            .rev()
            .find(|&len| {
                let end = &rest[rest.len() - len..];
                self.secrets
                    .values
                    .iter()
                    .any(|(value, _)| value.len() > len && value.as_bytes().starts_with(end))
            })
            .unwrap_or(0)
    }

    /// How many bytes are held back now (with `stream`, a length that depends only on how
    /// much was pushed, never on what it says).
    pub fn holding(&self) -> usize {
        self.held.len()
    }

    /// The end of the stream: whatever is held is released (it completes no value).
    pub fn finish(mut self, out: &mut Vec<u8>) {
        let rest = self.replace_whole(out);
        out.extend_from_slice(&rest);
    }

    /// Replace every whole occurrence in `held`, writing up to the last one to `out`; return
    /// what follows it.
    fn replace_whole(&mut self, out: &mut Vec<u8>) -> Vec<u8> {
        let mut rest: &[u8] = &self.held;
        loop {
            // The leftmost occurrence of any value; the longest where several start there.
            let found = self
                .secrets
                .values
                .iter()
                .filter_map(|(value, name)| {
                    memchr::memmem::find(rest, value.as_bytes()).map(|at| (at, value.len(), name))
                })
                .min_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
            let Some((at, len, name)) = found else {
                return rest.to_vec();
            };
            out.extend_from_slice(&rest[..at]);
            out.extend_from_slice(format!("[redacted ${name}]").as_bytes());
            rest = &rest[at + len..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(pairs: &[(&str, &str)]) -> Secrets {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        Secrets::from_names(owned.iter().map(|(n, _)| n.clone()), |name| {
            owned
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn a_value_is_found_in_a_file_also_across_two_pieces() {
        let s = secrets(&[("K1", "sk-canary-123")]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let mut bytes = vec![b'x'; PIECE - 5];
        bytes.extend_from_slice(b"sk-canary-123");
        bytes.extend_from_slice(&[0xff; 100]);
        std::fs::write(&path, &bytes).unwrap();
        assert!(s.held_in_file(&path));
        std::fs::write(&path, &bytes[..PIECE]).unwrap();
        assert!(!s.held_in_file(&path), "a part of it is no value");
        assert!(!s.held_in_file(&dir.path().join("absent")));
    }

    #[test]
    fn values_are_replaced_and_named() {
        let s = secrets(&[("K1", "sk-canary-123"), ("K2", "abc")]);
        assert_eq!(
            s.redact("key=sk-canary-123;sk-canary-123"),
            "key=[redacted $K1];[redacted $K1]"
        );
        assert_eq!(s.redact("abc stays"), "abc stays", "too short to redact");
        assert!(matches!(s.redact("nothing here"), Cow::Borrowed(_)));
        assert_eq!(s.env_names(), ["K1", "K2"]);
    }

    #[test]
    fn a_value_containing_another_is_replaced_whole() {
        let s = secrets(&[("SHORT", "secret1"), ("LONG", "xx-secret1-yy")]);
        assert_eq!(
            s.redact("xx-secret1-yy secret1"),
            "[redacted $LONG] [redacted $SHORT]"
        );
    }

    #[test]
    fn a_stream_is_redacted_whatever_the_read_boundaries() {
        let s = secrets(&[("K1", "sk-canary-123456"), ("K2", "tok-777777")]);
        let text =
            b"a sk-canary-123456 b tok-777777sk-canary-12 sk-canary-123456 sk-sk-canary-123456";
        for split in 0..text.len() {
            for second in split..text.len() {
                let mut redactor = s.stream();
                let mut out = Vec::new();
                redactor.push(&text[..split], &mut out);
                redactor.push(&text[split..second], &mut out);
                redactor.push(&text[second..], &mut out);
                redactor.finish(&mut out);
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    "a [redacted $K1] b [redacted $K2]sk-canary-12 [redacted $K1] sk-[redacted $K1]",
                    "split at {split}, {second}"
                );
            }
        }
    }

    #[test]
    fn only_an_end_that_could_begin_a_value_is_held_back() {
        let s = secrets(&[("K1", "sk-canary-123456")]);
        let mut redactor = s.live_stream();
        let mut out = Vec::new();
        redactor.push(b"line one\n", &mut out);
        assert_eq!(out, b"line one\n");
        redactor.push(b"next sk-can", &mut out);
        assert_eq!(out, b"line one\nnext ");
        redactor.push(b"dy\n", &mut out);
        assert_eq!(out, b"line one\nnext sk-candy\n");
    }

    #[test]
    fn what_the_model_gets_never_depends_on_whether_an_end_begins_a_value() {
        let s = secrets(&[("K1", "sk-canary-123456")]);
        // The same length held back after a guess that begins the key and one that does not.
        for guess in [&b"output sk-can"[..], &b"output xx-can"[..]] {
            let mut redactor = s.stream();
            let mut out = Vec::new();
            redactor.push(guess, &mut out);
            assert_eq!(out.len(), guess.len().saturating_sub(s.hold()), "{guess:?}");
        }
    }

    #[test]
    fn a_run_shared_with_a_secret_is_found() {
        let s = secrets(&[("K1", "sk-canary-123456")]);
        assert!(s.shares_run("req-canary-1-x", 8));
        assert!(!s.shares_run("req-4f9a1c2e-77", 8));
        assert!(shares_run("abc", "abc", 3));
        assert!(!shares_run("ab", "abc", 3));
    }

    #[test]
    fn debug_never_shows_a_value() {
        let s = secrets(&[("K1", "sk-canary-123")]);
        let shown = format!("{s:?}");
        assert!(!shown.contains("canary"), "{shown}");
        assert!(shown.contains("K1"));
    }

    #[test]
    fn padded_values_are_redacted_trimmed_too() {
        let s = secrets(&[("K1", " sk-canary-123\n")]);
        assert_eq!(s.redact("got sk-canary-123"), "got [redacted $K1]");
    }
}
