//! "Did you mean …": the known name closest to a mistyped one.
//!
//! Invariant: a suggestion is offered only when it is close enough to be a typo (an edit
//! distance of at most a third of its length, and at least 2), so an unrelated name gets none.

/// The name in `known` closest to `name`, when close enough to be a typo.
pub fn closest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .map(|candidate| (edit_distance(name, candidate), candidate))
        .filter(|(distance, candidate)| *distance <= (candidate.chars().count() / 3).max(2))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance, by characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_gets_its_name_and_an_unrelated_word_none() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(
            closest("modle", ["model", "permission_mode"]),
            Some("model")
        );
        assert_eq!(
            closest("deepseek-v4-flsh", ["deepseek-v4-flash", "deepseek-v4-pro"]),
            Some("deepseek-v4-flash")
        );
        assert_eq!(closest("colour", ["mode", "forbid_read"]), None);
    }
}
