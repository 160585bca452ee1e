//! One short answer typed at a question on stderr (a picker's number, a yes/no), read key by
//! key with keel's own echo.
//!
//! Invariants:
//! - Nothing past the answer's Enter is read: keys typed ahead stay for whoever reads the
//!   terminal next (the live TUI's input), and none of them is echoed here.
//! - The terminal's settings are put back as they were found, whatever was typed.
//! - Ctrl-C, Ctrl-D and Esc mean "no answer" (`None`); other control keys and keys sent as
//!   escape sequences (arrows) are ignored, their whole sequence read.

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::termios::{
    InputFlags, LocalFlags, OutputFlags, SetArg, SpecialCharacterIndices, tcgetattr, tcsetattr,
};
use std::io::{BufRead, Write};
use std::os::fd::AsFd;

/// Read the answer from the terminal (or, when stdin is not one, a plain line).
pub(crate) fn read_answer_line() -> Option<String> {
    let stdin = std::io::stdin();
    let Ok(before) = tcgetattr(&stdin) else {
        let mut answer = String::new();
        return match stdin.lock().read_line(&mut answer) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(answer),
        };
    };
    let mut key_by_key = before.clone();
    key_by_key.local_flags &=
        !(LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::ISIG | LocalFlags::IEXTEN);
    key_by_key.input_flags &= !(InputFlags::ICRNL | InputFlags::IXON);
    key_by_key.output_flags |= OutputFlags::OPOST | OutputFlags::ONLCR;
    key_by_key.control_chars[SpecialCharacterIndices::VMIN as usize] = 1;
    key_by_key.control_chars[SpecialCharacterIndices::VTIME as usize] = 0;
    let _ = tcsetattr(&stdin, SetArg::TCSADRAIN, &key_by_key);
    let next = |wait: Wait| {
        if wait == Wait::IfSent {
            // The rest of an escape sequence arrives with its first byte.
            let mut ready = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
            if !matches!(poll(&mut ready, PollTimeout::from(30_u8)), Ok(n) if n > 0) {
                return None;
            }
        }
        let mut byte = [0_u8; 1];
        match nix::unistd::read(&stdin, &mut byte) {
            Ok(1) => Some(byte[0]),
            _ => None,
        }
    };
    let answer = edit_answer(next, &mut std::io::stderr());
    let _ = tcsetattr(&stdin, SetArg::TCSADRAIN, &before);
    answer
}

/// How long the next byte may be waited for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Wait {
    /// The next key, however long it takes.
    ForKey,
    /// Only a byte already sent (the rest of an escape sequence).
    IfSent,
}

/// What an escape sequence was.
enum Escape {
    /// Esc itself (alone, or as the keyboard protocol's `CSI 27 u`): no answer.
    Esc,
    /// Another key (an arrow, a function key): ignored.
    OtherKey,
}

/// Read the rest of an escape sequence whose ESC was just read.
fn read_escape(next: &mut impl FnMut(Wait) -> Option<u8>) -> Escape {
    match next(Wait::IfSent) {
        None => Escape::Esc,
        Some(b'O') => {
            next(Wait::IfSent);
            Escape::OtherKey
        }
        Some(b'[') => {
            let mut body = Vec::new();
            while let Some(byte) = next(Wait::IfSent) {
                if (0x40..=0x7e).contains(&byte) {
                    body.push(byte);
                    break;
                }
                body.push(byte);
            }
            // Esc, Ctrl-C and Ctrl-D as the keyboard protocol sends them.
            if [&b"27u"[..], b"99;5u", b"100;5u"].contains(&body.as_slice()) {
                Escape::Esc
            } else {
                Escape::OtherKey
            }
        }
        // Alt and a key.
        Some(_) => Escape::OtherKey,
    }
}

/// Build the answer from the keys `next` reads up to Enter, echoing it to `echo` as typed.
fn edit_answer(mut next: impl FnMut(Wait) -> Option<u8>, echo: &mut impl Write) -> Option<String> {
    const BACKSPACE: [u8; 2] = [0x7f, 0x08];
    let mut typed: Vec<u8> = Vec::new();
    let answer = loop {
        let Some(key) = next(Wait::ForKey) else {
            break None;
        };
        match key {
            b'\r' | b'\n' => break Some(String::from_utf8_lossy(&typed).into_owned()),
            0x03 | 0x04 => break None,
            0x1b => match read_escape(&mut next) {
                Escape::Esc => break None,
                Escape::OtherKey => {}
            },
            key if BACKSPACE.contains(&key) => {
                // A whole character goes, however many bytes it took.
                while let Some(last) = typed.pop() {
                    if last & 0xC0 != 0x80 {
                        break;
                    }
                }
                let _ = echo.write_all(b"\x08 \x08");
            }
            key if key < 0x20 => {}
            key => {
                typed.push(key);
                let _ = echo.write_all(&[key]);
            }
        }
        let _ = echo.flush();
    };
    let _ = echo.write_all(b"\n");
    let _ = echo.flush();
    answer
}

#[cfg(test)]
mod tests {
    use super::{Wait, edit_answer};

    /// The answer to `keys`, how many bytes were left unread, and the echo.
    fn answer(keys: &[u8]) -> (Option<String>, usize, String) {
        let mut keys = keys.iter().copied();
        let mut echo = Vec::new();
        let answer = edit_answer(|_: Wait| keys.next(), &mut echo);
        (
            answer,
            keys.count(),
            String::from_utf8_lossy(&echo).into_owned(),
        )
    }

    #[test]
    fn the_answer_ends_at_enter_and_what_follows_is_left_unread() {
        let (got, left, echo) = answer(b"2\rlook again\r");
        assert_eq!(got.as_deref(), Some("2"));
        assert_eq!(left, "look again\r".len());
        assert_eq!(echo, "2\n");
    }

    #[test]
    fn backspace_removes_a_whole_character() {
        let (got, _, _) = answer("1\u{e9}\x7f\x7f3\r".as_bytes());
        assert_eq!(got.as_deref(), Some("3"));
    }

    #[test]
    fn ctrl_c_ctrl_d_esc_and_the_end_of_input_are_no_answer() {
        assert_eq!(answer(b"12\x03").0, None);
        assert_eq!(answer(b"12\x04").0, None);
        assert_eq!(answer(b"12\x1b").0, None);
        assert_eq!(answer(b"12\x1b[27u3\r").0, None);
        assert_eq!(answer(b"12\x1b[99;5u3\r").0, None);
        assert_eq!(answer(b"12\x1b[100;5u3\r").0, None);
        assert_eq!(answer(b"12").0, None);
    }

    #[test]
    fn arrows_and_control_keys_are_not_part_of_the_answer() {
        assert_eq!(answer(b"\t1\x1b[A\x1bOB\x012\r").0.as_deref(), Some("12"));
    }
}
