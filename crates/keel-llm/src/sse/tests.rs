use super::*;

/// An event as the tests compare it.
#[derive(Debug, PartialEq, Eq)]
struct Owned {
    event: String,
    data: String,
    id: String,
    retry: Option<u64>,
}

fn frame(limit: usize, reads: &[&[u8]]) -> Result<Vec<Owned>, FrameError> {
    let mut framer = SseFramer::new(limit);
    let mut events = Vec::new();
    for read in reads {
        let _flow = framer.feed(read, &mut |event: SseEvent<'_>| {
            events.push(Owned {
                event: event.event.to_string(),
                data: event.data.to_string(),
                id: event.id.to_string(),
                retry: event.retry,
            });
            Ok::<_, FrameError>(ControlFlow::Continue(()))
        })?;
    }
    Ok(events)
}

/// Framed whole, and split at every position into two reads and into one-byte reads: the
/// events must be the same each time.
fn frame_every_way(stream: &[u8]) -> Vec<Owned> {
    let whole = frame(1 << 20, &[stream]).expect("frames");
    for split in 0..=stream.len() {
        let (a, b) = stream.split_at(split);
        assert_eq!(
            frame(1 << 20, &[a, b]).expect("frames"),
            whole,
            "split at {split}"
        );
    }
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(
        frame(1 << 20, &bytes).expect("frames"),
        whole,
        "byte by byte"
    );
    whole
}

fn message(data: &str) -> Owned {
    Owned {
        event: "message".into(),
        data: data.into(),
        id: String::new(),
        retry: None,
    }
}

#[test]
fn every_line_end_frames_the_same_events() {
    for end in ["\n", "\r", "\r\n"] {
        let stream = format!("data: one{end}{end}data: two{end}data: three{end}{end}");
        assert_eq!(
            frame_every_way(stream.as_bytes()),
            vec![message("one"), message("two\nthree")],
            "{end:?}"
        );
    }
    // Mixed, and a CR followed by CRLF is two line ends, not one.
    assert_eq!(
        frame_every_way(b"data: a\r\r\ndata: b\n\r\n"),
        vec![message("a"), message("b")]
    );
}

#[test]
fn a_leading_byte_order_mark_is_skipped_once() {
    assert_eq!(
        frame_every_way("\u{feff}data: x\n\n".as_bytes()),
        vec![message("x")]
    );
    // A second mark is part of the first field name, which is then not `data`.
    assert_eq!(
        frame_every_way("\u{feff}\u{feff}data: x\n\ndata: y\n\n".as_bytes()),
        vec![message("y")]
    );
    // Part of a mark alone is not one.
    assert_eq!(frame_every_way(b"\xEF\xBB"), vec![]);
}

#[test]
fn comments_fields_without_colon_and_spaces_follow_the_rules() {
    let stream = b": keep-alive\n\
        data\n\n\
        data:no-space\n\n\
        data:  two spaces\n\n\
        event: content_block_delta\ndata: {}\n\n\
        unknown: field\ndata: after\n\n\
        event: lonely\n\n\
        data: the event name of an empty event does not leak\n\n";
    let events = frame_every_way(stream);
    let pairs: Vec<(&str, &str)> = events
        .iter()
        .map(|event| (event.event.as_str(), event.data.as_str()))
        .collect();
    assert_eq!(
        pairs,
        vec![
            ("message", ""),
            ("message", "no-space"),
            ("message", " two spaces"),
            ("content_block_delta", "{}"),
            ("message", "after"),
            ("message", "the event name of an empty event does not leak"),
        ]
    );
}

#[test]
fn ids_persist_and_retry_needs_digits() {
    let stream = b"id: 7\nretry: 1500\ndata: a\n\n\
        data: b\n\n\
        id: bad\0id\nretry: 15x\ndata: c\n\n\
        id\nretry: 99999999999999999999999\ndata: d\n\n";
    let events = frame_every_way(stream);
    let seen: Vec<(&str, &str, Option<u64>)> = events
        .iter()
        .map(|event| (event.data.as_str(), event.id.as_str(), event.retry))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("a", "7", Some(1500)),
            // The reconnection time belongs to the stream; bad values leave it as it was.
            ("b", "7", Some(1500)),
            ("c", "7", Some(1500)),
            ("d", "", Some(1500)),
        ]
    );
}

#[test]
fn a_final_event_without_its_blank_line_is_dropped() {
    assert_eq!(
        frame_every_way(b"data: kept\n\ndata: dropped\n"),
        vec![message("kept")]
    );
    assert_eq!(frame_every_way(b"data: dropped"), vec![]);
}

#[test]
fn one_data_line_inside_a_read_is_handed_out_without_a_copy() {
    let read = b"data: {\"choices\":[]}\n\ndata: second\ndata: line\n\n";
    let mut framer = SseFramer::new(1024);
    let mut borrowed = Vec::new();
    let range = read.as_ptr_range();
    let _flow = framer
        .feed(read, &mut |event: SseEvent<'_>| {
            borrowed.push(range.contains(&event.data.as_ptr()));
            Ok::<_, FrameError>(ControlFlow::Continue(()))
        })
        .expect("frames");
    assert_eq!(borrowed, vec![true, false], "a multi-line data is joined");
}

#[test]
fn stopping_leaves_the_rest_of_the_read_unread() {
    let mut framer = SseFramer::new(1024);
    let mut seen = 0;
    let flow = framer
        .feed(b"data: 1\n\ndata: 2\n\n", &mut |_event: SseEvent<'_>| {
            seen += 1;
            Ok::<_, FrameError>(ControlFlow::Break(()))
        })
        .expect("frames");
    assert_eq!((flow, seen), (ControlFlow::Break(()), 1));
}

#[test]
fn a_handler_error_stops_the_stream() {
    let mut framer = SseFramer::new(1024);
    let result = framer.feed(b"data: 1\n\ndata: 2\n\n", &mut |event: SseEvent<'_>| {
        if event.data == "1" {
            Err(FrameError::NotUtf8)
        } else {
            Ok(ControlFlow::Continue(()))
        }
    });
    assert_eq!(result, Err(FrameError::NotUtf8));
}

#[test]
fn data_that_is_not_utf8_fails_but_a_comment_that_is_not_is_ignored() {
    assert_eq!(
        frame(1024, &[b"data: \xFF\xFE\n\n"]),
        Err(FrameError::NotUtf8)
    );
    assert_eq!(
        frame(1024, &[b"event: \xC3\ndata: x\n\n"]),
        Err(FrameError::NotUtf8)
    );
    assert_eq!(
        frame(1024, &[b"id: \xFF\ndata: x\n\n"]),
        Err(FrameError::NotUtf8)
    );
    // Nothing is decoded for an event that is never dispatched.
    assert_eq!(frame(1024, &[b"id: \xFF\nevent: \xC3\n\n"]), Ok(vec![]));
    // A character split between two reads is whole again before it is decoded.
    assert_eq!(
        frame(1024, &[b"data: \xC3", b"\xA9\n\n"]),
        Ok(vec![message("é")])
    );
    assert_eq!(
        frame(1024, &[b": \xFF\xFE\n", b"data: ok\n\n"]),
        Ok(vec![message("ok")])
    );
}

#[test]
fn long_lines_fail_wherever_the_stream_is_split() {
    let body = [b"data: ".as_slice(), &[b'x'; 40], b"\n\n"].concat();
    for split in 0..body.len() {
        let (a, b) = body.split_at(split);
        assert_eq!(
            frame(32, &[a, b]),
            Err(FrameError::LineTooLong(32)),
            "{split}"
        );
    }
    assert_eq!(frame(64, &[&body]).map(|events| events.len()), Ok(1));
}

#[test]
fn a_read_without_any_line_end_is_not_buffered_past_the_bound() {
    let mut framer = SseFramer::new(64);
    let mut fed = 0;
    let verdict = loop {
        let result = framer.feed(&[b'x'; 16], &mut |_event: SseEvent<'_>| {
            Ok::<_, FrameError>(ControlFlow::Continue(()))
        });
        fed += 16;
        if let Err(error) = result {
            break error;
        }
        assert!(fed <= 64, "still buffering after {fed} bytes");
    };
    assert_eq!(verdict, FrameError::LineTooLong(64));
    assert!(framer.carry.len() <= 64);
}

#[test]
fn many_short_lines_in_one_event_fail_as_an_event() {
    for ending in ["\n", "\r", "\r\n"] {
        let event = format!("data: 0123456789{ending}").repeat(10);
        assert_eq!(
            frame(64, &[event.as_bytes()]),
            Err(FrameError::EventTooLong(64)),
            "{ending:?}"
        );
        let separated = format!("data: 0123456789{ending}{ending}").repeat(10);
        for split in 0..separated.len() {
            let (a, b) = separated.as_bytes().split_at(split);
            assert_eq!(
                frame(64, &[a, b]).map(|events| events.len()),
                Ok(10),
                "{ending:?} at {split}"
            );
        }
    }
}

#[test]
fn the_events_before_a_broken_bound_are_the_same_for_every_split() {
    let stream = [
        b"data: first\n\n".as_slice(),
        b"data: ",
        &[b'y'; 100],
        b"\n\ndata: never\n\n",
    ]
    .concat();
    for split in 0..stream.len() {
        let (a, b) = stream.split_at(split);
        let mut framer = SseFramer::new(64);
        let mut seen = Vec::new();
        let mut verdict = Ok(ControlFlow::Continue(()));
        for read in [a, b] {
            verdict = framer.feed(read, &mut |event: SseEvent<'_>| {
                seen.push(event.data.to_string());
                Ok::<_, FrameError>(ControlFlow::Continue(()))
            });
            if verdict.is_err() {
                break;
            }
        }
        assert_eq!(verdict, Err(FrameError::LineTooLong(64)), "{split}");
        assert_eq!(seen, vec!["first"], "{split}");
    }
}

#[test]
fn a_line_too_long_is_named_so_even_when_its_event_was_already_long() {
    // Found by the fuzz target: a read ending inside the long line used to report the event.
    let stream = [b"data: 0123456789\n".as_slice(), &[b'x'; 80], b"\n\n"].concat();
    for split in 0..stream.len() {
        let (a, b) = stream.split_at(split);
        assert_eq!(
            frame(64, &[a, b]),
            Err(FrameError::LineTooLong(64)),
            "{split}"
        );
    }
}

#[test]
fn a_byte_order_mark_split_between_reads_is_still_skipped() {
    // eventsource-stream, which keel used to frame with, panics on any leading mark.
    let stream = "\u{feff}data: x\n\n".as_bytes();
    for split in 1..3 {
        let (a, b) = stream.split_at(split);
        assert_eq!(frame(1024, &[a, b]), Ok(vec![message("x")]), "{split}");
    }
}

#[test]
fn after_an_error_the_framer_holds_nothing_and_reads_no_more() {
    let mut framer = SseFramer::new(16);
    let mut seen = 0;
    let mut count = |_event: SseEvent<'_>| {
        seen += 1;
        Ok::<_, FrameError>(ControlFlow::Continue(()))
    };
    let long = [b"data: abcdefgh\n".as_slice(), &[b'x'; 20], b"\n"].concat();
    assert_eq!(
        framer.feed(&long, &mut count),
        Err(FrameError::LineTooLong(16))
    );
    // The data line's range pointed into the first read: a later read must not be sliced by it.
    assert_eq!(framer.feed(b"\n", &mut count), Ok(ControlFlow::Break(())));
    assert_eq!(
        framer.feed(b"\n0123456789abcdef\n\n", &mut count),
        Ok(ControlFlow::Break(()))
    );
    assert_eq!(seen, 0);
}

#[test]
fn a_held_mark_or_a_cut_line_never_buffers_a_long_read_whole() {
    let long = vec![b'x'; 100_000];
    for first in [b"\xEF".as_slice(), b"\xEF\xBB", b"data: x"] {
        let mut framer = SseFramer::new(64);
        let reads = [first, &long, b"\n"];
        let mut verdict = Ok(ControlFlow::Continue(()));
        for read in reads {
            verdict = framer.feed(read, &mut |_event: SseEvent<'_>| {
                Ok::<_, FrameError>(ControlFlow::Continue(()))
            });
            assert!(
                framer.carry.len() <= 64,
                "{first:?}: {}",
                framer.carry.len()
            );
            if verdict.is_err() {
                break;
            }
        }
        assert_eq!(verdict, Err(FrameError::LineTooLong(64)), "{first:?}");
    }
    // A mark completed by a read that goes on: the rest of that read still frames.
    assert_eq!(
        frame(64, &[b"\xEF\xBB", b"\xBFdata: x\n\n"]),
        Ok(vec![message("x")])
    );
}

#[test]
fn empty_reads_change_nothing() {
    assert_eq!(
        frame(
            64,
            &[b"", b"\xEF", b"", b"\xBB\xBFdata: a\r", b"", b"\n\r\n", b""]
        ),
        Ok(vec![message("a")])
    );
}

#[test]
fn an_event_too_long_is_named_so_wherever_the_stream_is_split() {
    let stream = "data: 0123456789\n".repeat(5);
    for split in 0..stream.len() {
        let (a, b) = stream.as_bytes().split_at(split);
        assert_eq!(
            frame(64, &[a, b]),
            Err(FrameError::EventTooLong(64)),
            "{split}"
        );
    }
}
