//! Token counts as a provider reports them. Usage is informative: a malformed number (negative,
//! fractional, absurdly large, a string, an object) is dropped as if absent, and the complete
//! answer it came with is kept — never `stream_corrupt` over a count.
//!
//! Invariants:
//! - A count is kept only when it is a whole number in `0..=MAX_TOKEN_COUNT`; anything else is
//!   `None` (for `lenient_count`) or 0 (for `lenient_count_or_zero`), whatever its JSON type.
//! - The bound keeps every sum keel makes of counts (a turn, a session) far from overflow.

use serde::Deserializer;
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// The largest count believed: 2^53 (exact in every JSON number).
pub const MAX_TOKEN_COUNT: u64 = 1 << 53;

struct CountVisitor;

impl<'de> Visitor<'de> for CountVisitor {
    type Value = Option<u64>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a token count")
    }

    fn visit_u64<E>(self, value: u64) -> Result<Self::Value, E> {
        Ok((value <= MAX_TOKEN_COUNT).then_some(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Self::Value, E> {
        Ok(u64::try_from(value).ok().filter(|v| *v <= MAX_TOKEN_COUNT))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Self::Value, E> {
        let whole = value.is_finite() && value >= 0.0 && value.fract() == 0.0;
        // Checked above: a whole number in range converts exactly.
        Ok((whole && value <= MAX_TOKEN_COUNT as f64).then_some(value as u64))
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<Self::Value, D::Error> {
        inner.deserialize_any(CountVisitor)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

/// `#[serde(default, deserialize_with = "lenient_count")]` for an optional count.
pub(super) fn lenient_count<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    deserializer.deserialize_any(CountVisitor)
}

/// `#[serde(default, deserialize_with = "lenient_count_or_zero")]` for a count that is 0 when
/// absent or malformed.
pub(super) fn lenient_count_or_zero<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<u64, D::Error> {
    Ok(lenient_count(deserializer)?.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Counts {
        #[serde(default, deserialize_with = "lenient_count")]
        a: Option<u64>,
        #[serde(default, deserialize_with = "lenient_count_or_zero")]
        b: u64,
    }

    #[test]
    fn a_malformed_count_is_dropped_never_an_error() {
        let cases = [
            (r#"{"a": 12, "b": 7}"#, Some(12), 7),
            (r#"{"a": -5, "b": -5}"#, None, 0),
            (r#"{"a": 1e30, "b": 1e30}"#, None, 0),
            (r#"{"a": 3.0, "b": 2.5}"#, Some(3), 0),
            (r#"{"a": "12", "b": "x"}"#, None, 0),
            (r#"{"a": null, "b": true}"#, None, 0),
            (r#"{"a": [1, {"x": 2}], "b": {"n": 1}}"#, None, 0),
            (r#"{"a": 18446744073709551615}"#, None, 0),
            (r#"{"a": 9007199254740992}"#, Some(MAX_TOKEN_COUNT), 0),
            (r#"{}"#, None, 0),
        ];
        for (json, a, b) in cases {
            let counts: Counts = serde_json::from_str(json).unwrap();
            assert_eq!((counts.a, counts.b), (a, b), "{json}");
        }
    }
}
