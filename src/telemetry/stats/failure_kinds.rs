//! Failures grouped by kind: the error text with what differs from row to row —
//! numbers, hex ids, UUIDs, quoted values — masked, so that "order 3 not found" and
//! "order 6 not found" are one kind, `order # not found`. Each kind keeps its count
//! since the process started, when it was first and last seen, its latest keys and
//! one full example; a queue keeps at most [`KINDS_KEPT`] kinds, the least recently
//! seen making room.

use serde::Serialize;

/// Kinds a queue keeps.
pub const KINDS_KEPT: usize = 20;
/// Keys a kind keeps (the latest), for the console to retry or discard them.
pub const KEYS_KEPT: usize = 100;
/// The longest example kept, in characters.
const EXAMPLE_CHARS: usize = 500;
/// What stands for a number, a hex id or a UUID.
const MASK: &str = "#";
/// What stands for a quoted value, inside its quotes.
const QUOTED: &str = "…";

/// One kind of failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailureKind {
    /// The error text, masked: what the failures of this kind have in common.
    pub kind: String,
    /// The HTTP status or exit code, when the action has one.
    pub status: Option<i64>,
    /// Failures of this kind since the process started.
    pub count: u64,
    /// Unix times, in seconds.
    pub first_at: u64,
    pub last_at: u64,
    /// Their keys, newest first, each once (at most [`KEYS_KEPT`]).
    pub keys: Vec<String>,
    /// The latest one's full error text.
    pub example: String,
}

/// A queue's failure kinds, the latest seen first.
#[derive(Debug, Default)]
pub struct FailureKinds(Vec<FailureKind>);

impl FailureKinds {
    /// Counts a failure of `key` at unix time `at`: its error, and the kind its
    /// handler gave it (else its error, masked).
    pub fn record(
        &mut self,
        key: &str,
        at: u64,
        failure: (&str, Option<&str>),
        status: Option<i64>,
    ) {
        let (error, given) = failure;
        let kind = given.map_or_else(|| mask(error), str::to_string);
        let found = self
            .0
            .iter()
            .position(|k| k.kind == kind && k.status == status);
        let mut entry = match found {
            Some(index) => self.0.remove(index),
            None => FailureKind {
                kind,
                status,
                count: 0,
                first_at: at,
                last_at: at,
                keys: Vec::new(),
                example: String::new(),
            },
        };
        entry.count += 1;
        entry.first_at = entry.first_at.min(at);
        entry.last_at = entry.last_at.max(at);
        entry.example = error.chars().take(EXAMPLE_CHARS).collect();
        entry.keys.retain(|k| k != key);
        entry.keys.insert(0, key.to_string());
        entry.keys.truncate(KEYS_KEPT);
        self.0.insert(0, entry);
        self.0.truncate(KINDS_KEPT);
    }

    /// Every kind, the latest seen first.
    pub fn all(&self) -> Vec<FailureKind> {
        self.0.clone()
    }
}

/// `error` with numbers, hex ids, UUIDs and quoted values masked: `order 3 not found
/// in ledger 0x1f` → `order # not found in ledger #`, `no user 'bob'` → `no user '…'`.
pub fn mask(error: &str) -> String {
    let chars: Vec<char> = error.chars().collect();
    let mut masked = String::with_capacity(error.len());
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        if matches!(c, '\'' | '"' | '`') {
            match chars[at + 1..].iter().position(|&close| close == c) {
                Some(length) => {
                    masked.push(c);
                    masked.push_str(QUOTED);
                    masked.push(c);
                    at += length + 2;
                }
                None => {
                    masked.push(c);
                    at += 1;
                }
            }
        } else if c.is_alphanumeric() {
            let end = word_end(&chars, at);
            masked.push_str(&mask_word(&chars[at..end]));
            at = end;
        } else {
            masked.push(c);
            at += 1;
        }
    }
    masked
}

/// Where the word at `start` ends: a UUID's hyphens belong to it; other words are
/// letters and digits.
fn word_end(chars: &[char], start: usize) -> usize {
    if is_uuid(&chars[start..]) && !chars.get(start + 36).is_some_and(|c| c.is_alphanumeric()) {
        return start + 36;
    }
    let length = chars[start..]
        .iter()
        .take_while(|c| c.is_alphanumeric())
        .count();
    start + length
}

/// Whether `chars` begins with a UUID (8-4-4-4-12 hex digits).
fn is_uuid(chars: &[char]) -> bool {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let mut at = 0;
    for (index, length) in GROUPS.iter().enumerate() {
        let group = chars.get(at..at + length);
        if !group.is_some_and(|g| g.iter().all(char::is_ascii_hexdigit)) {
            return false;
        }
        at += length;
        if index < GROUPS.len() - 1 {
            if chars.get(at) != Some(&'-') {
                return false;
            }
            at += 1;
        }
    }
    true
}

/// A whole word that is an id (a UUID, `0x…`, six or more hex digits with a digit
/// among them) is masked whole; in any other word, each run of digits is.
fn mask_word(word: &[char]) -> String {
    let text: String = word.iter().collect();
    let hex = |w: &[char]| !w.is_empty() && w.iter().all(char::is_ascii_hexdigit);
    let id = word.len() == 36 && is_uuid(word)
        || (text.starts_with("0x") || text.starts_with("0X")) && hex(&word[2..])
        || word.len() >= 6 && hex(word) && word.iter().any(char::is_ascii_digit);
    if id {
        return MASK.to_string();
    }
    let mut masked = String::with_capacity(text.len());
    let mut in_digits = false;
    for &c in word {
        if c.is_ascii_digit() {
            if !in_digits {
                masked.push_str(MASK);
            }
            in_digits = true;
        } else {
            masked.push(c);
            in_digits = false;
        }
    }
    masked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_numbers_hex_ids_uuids_and_quoted_values() {
        assert_eq!(
            mask("order 3 not found in ledger 17"),
            "order # not found in ledger #"
        );
        assert_eq!(mask("took 1.5s, retry 2/3"), "took #.#s, retry #/#");
        assert_eq!(mask("object 5f3a9c2e1b is gone"), "object # is gone");
        assert_eq!(mask("address 0x7ffe12 bad"), "address # bad");
        assert_eq!(
            mask("job 123e4567-e89b-12d3-a456-426614174000 expired"),
            "job # expired"
        );
        assert_eq!(
            mask("no user 'bob' in \"sales\" (`t1`)"),
            "no user '…' in \"…\" (`…`)"
        );
        assert_eq!(mask("it's"), "it's", "an unclosed quote stays");
        assert_eq!(mask("worker7 on host-12"), "worker# on host-#");
        // Words that merely hold hex letters are not ids.
        assert_eq!(mask("deadline exceeded"), "deadline exceeded");
        assert_eq!(mask("bad feed cafe"), "bad feed cafe");
    }

    #[test]
    fn one_kind_per_masked_text_and_status_with_counts_keys_and_an_example() {
        let mut kinds = FailureKinds::default();
        for (n, key) in [3, 6, 9, 6].iter().enumerate() {
            let error = format!("order {key} not found in ledger {}", 100 + n);
            kinds.record(&key.to_string(), 1_000 + n as u64, (&error, None), Some(1));
        }
        kinds.record("7", 2_000, ("order 7 not found in ledger 1", None), Some(2));
        kinds.record("8", 2_001, ("timeout after 30 s", None), None);
        let all = kinds.all();
        assert_eq!(all.len(), 3, "{all:#?}");
        assert_eq!(
            (all[0].kind.as_str(), all[0].count),
            ("timeout after # s", 1)
        );
        assert_eq!(all[1].status, Some(2), "another status is another kind");
        let orders = &all[2];
        assert_eq!(orders.kind, "order # not found in ledger #");
        assert_eq!(
            (orders.count, orders.first_at, orders.last_at),
            (4, 1_000, 1_003)
        );
        assert_eq!(orders.keys, ["6", "9", "3"], "newest first, each once");
        assert_eq!(orders.example, "order 6 not found in ledger 103");
    }

    #[test]
    fn a_kind_the_handler_gives_groups_failures_whatever_their_text() {
        let mut kinds = FailureKinds::default();
        let declined = Some("App\\Exceptions\\CardDeclined");
        kinds.record(
            "1",
            1,
            ("card declined: insufficient funds", declined),
            None,
        );
        kinds.record("2", 2, ("card declined: expired card", declined), None);
        let all = kinds.all();
        assert_eq!((all.len(), all[0].count), (1, 2));
        assert_eq!(all[0].kind, "App\\Exceptions\\CardDeclined");
        assert_eq!(all[0].example, "card declined: expired card");
    }

    #[test]
    fn keeps_the_latest_kinds_and_keys() {
        let mut kinds = FailureKinds::default();
        for n in 0..KINDS_KEPT as u64 + 5 {
            let error = format!("kind {}", "x".repeat(n as usize));
            kinds.record("1", n, (&error, None), None);
        }
        let all = kinds.all();
        assert_eq!(all.len(), KINDS_KEPT);
        assert_eq!(all[0].last_at, KINDS_KEPT as u64 + 4);
        let mut kinds = FailureKinds::default();
        for key in 0..KEYS_KEPT + 10 {
            kinds.record(&key.to_string(), 1, ("boom", None), None);
        }
        let all = kinds.all();
        assert_eq!(
            (all[0].count, all[0].keys.len()),
            (KEYS_KEPT as u64 + 10, KEYS_KEPT)
        );
        assert_eq!(all[0].keys[0], (KEYS_KEPT + 9).to_string());
    }
}
