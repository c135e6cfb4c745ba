//! The id grammar shared by source comments, test names and `docs/rules.md`.
//!
//! Two kinds of id are cited:
//! - spec rules of `tool-pipeline.md`: a prefix among `S P D F C I FS CM L` and one digit within
//!   that prefix's range (the S rules go up to 5, the F rules up to 6, ...), written upper case in
//!   comments (`S2`, `FS3`) and lower case as a leading token of a test name (`s2_`, `cm2_`);
//! - checklist lines of `conformance.md`: a group and exactly two digits, written `CAN-16` in
//!   comments and `can_16_` in test names, where further two-digit tokens add lines of the same
//!   group (`code_12_23_` cites two lines of the CODE group), as do `_and_NN` and a range
//!   `_to_NN` (`fs_60_to_63_` cites four lines).
//!
//! In a comment, a range written with `..` after an id also cites its far end (`REG-01..14`
//! cites line 01 and line 14). An id must stand alone: letters or digits glued to either side
//! make it an ordinary word (`ABS2`, `S25`, `SHA-256`).

/// Spec rule prefixes with the highest rule number each defines, in the spec's order.
pub const RULE_PREFIXES: [(&str, u8); 9] = [
    ("S", 5),
    ("P", 5),
    ("D", 5),
    ("F", 6),
    ("C", 3),
    ("I", 4),
    ("FS", 3),
    ("CM", 6),
    ("L", 5),
];

/// Checklist groups of `conformance.md`, in its order.
pub const CHECKLIST_GROUPS: [&str; 12] = [
    "REG", "APR", "GRD", "DSP", "FIN", "SCH", "CAN", "LOG", "CODE", "FS", "TMO", "LOOP",
];

/// The spec rule a token names (`S2`, `cm2`), if it is one.
fn rule_id(token: &str) -> Option<String> {
    let upper = token.to_ascii_uppercase();
    let digits_at = upper.find(|c: char| c.is_ascii_digit())?;
    let (prefix, number) = upper.split_at(digits_at);
    let (_, max) = RULE_PREFIXES.iter().find(|(p, _)| *p == prefix)?;
    let n: u8 = match number.as_bytes() {
        [d] => d - b'0',
        _ => return None,
    };
    (1..=*max).contains(&n).then_some(upper)
}

/// The checklist group a word names (`can`, `CODE`), if it is one.
fn group(word: &str) -> Option<&'static str> {
    let upper = word.to_ascii_uppercase();
    CHECKLIST_GROUPS.iter().copied().find(|g| *g == upper)
}

fn two_digits(token: &str) -> bool {
    token.len() == 2 && token.bytes().all(|b| b.is_ascii_digit())
}

/// The widest range a test name may cite with `_to_` (`fs_60_to_63_`).
const MAX_SPAN: u8 = 20;

/// The ids a test or function name cites through its leading tokens: `can_07_x` cites
/// `CAN-07`, `code_12_23_x` cites `CODE-12` and `CODE-23`, `i4_l5_x` cites `I4` and `L5`,
/// `fs_43_and_44_x` cites both lines and `fs_60_to_63_x` the four lines of the range.
/// Reading stops at the first token that is neither an id nor a further number of the current
/// checklist group, so numbers later in the name are words.
pub fn ids_in_fn_name(name: &str) -> Vec<String> {
    let tokens: Vec<&str> = name.split('_').collect();
    let mut ids = Vec::new();
    let mut current: Option<&str> = None;
    let mut i = 0;
    while let Some(token) = tokens.get(i) {
        if let Some(id) = rule_id(token) {
            ids.push(id);
            current = None;
            i += 1;
        } else if let (Some(g), Some(next)) = (group(token), tokens.get(i + 1)) {
            if !two_digits(next) {
                break;
            }
            ids.push(format!("{g}-{next}"));
            current = Some(g);
            i += 2;
        } else if let (Some(g), true) = (current, two_digits(token)) {
            ids.push(format!("{g}-{token}"));
            i += 1;
        } else if let (Some(g), Some(&"and" | &"to"), Some(next)) =
            (current, Some(token), tokens.get(i + 1))
        {
            if !two_digits(next) {
                break;
            }
            if *token == "to" {
                let from = ids
                    .last()
                    .and_then(|id| id.rsplit('-').next()?.parse::<u8>().ok());
                let to: u8 = next.parse().unwrap_or(0);
                if let Some(from) = from.filter(|f| *f < to && to - *f <= MAX_SPAN) {
                    ids.extend((from + 1..to).map(|n| format!("{g}-{n:02}")));
                }
            }
            ids.push(format!("{g}-{next}"));
            i += 2;
        } else {
            break;
        }
    }
    ids
}

/// The ids a comment's text cites, in order of appearance (a range's far end right after its
/// start).
pub fn ids_in_comment(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut ids = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let glued = i > 0 && chars[i - 1].is_ascii_alphanumeric();
        if glued || !chars[i].is_ascii_uppercase() {
            i += 1;
            continue;
        }
        let word_end = run_end(&chars, i, |c| c.is_ascii_uppercase());
        let word: String = chars[i..word_end].iter().collect();
        // A spec rule: the upper-case word and exactly one digit, then no letter or digit.
        let digit_end = run_end(&chars, word_end, |c| c.is_ascii_digit());
        if digit_end > word_end && !alnum_at(&chars, digit_end) {
            let token: String = chars[i..digit_end].iter().collect();
            if let Some(id) = rule_id(&token) {
                ids.push(id);
            }
            i = digit_end;
            continue;
        }
        // A checklist line: a group, a dash and exactly two digits.
        if let (Some(g), Some('-')) = (group(&word), chars.get(word_end)) {
            let start = word_end + 1;
            let end = run_end(&chars, start, |c| c.is_ascii_digit());
            if end - start == 2 && !alnum_at(&chars, end) {
                ids.push(format!(
                    "{g}-{}",
                    chars[start..end].iter().collect::<String>()
                ));
                // `..NN` after the id cites the range's far end too.
                if chars.get(end) == Some(&'.') && chars.get(end + 1) == Some(&'.') {
                    let far = run_end(&chars, end + 2, |c| c.is_ascii_digit());
                    if far - (end + 2) == 2 && !alnum_at(&chars, far) {
                        let n: String = chars[end + 2..far].iter().collect();
                        ids.push(format!("{g}-{n}"));
                    }
                    i = far;
                    continue;
                }
                i = end;
                continue;
            }
        }
        i = word_end;
    }
    ids
}

fn run_end(chars: &[char], from: usize, keep: impl Fn(char) -> bool) -> usize {
    let mut end = from;
    while chars.get(end).is_some_and(|c| keep(*c)) {
        end += 1;
    }
    end
}

fn alnum_at(chars: &[char], i: usize) -> bool {
    chars.get(i).is_some_and(|c| c.is_ascii_alphanumeric())
}

/// The section an id belongs to: its prefix or group, and whether it is a spec rule.
pub fn section_of(id: &str) -> (&str, bool) {
    match id.split_once('-') {
        Some((g, _)) => (g, false),
        None => (id.trim_end_matches(|c: char| c.is_ascii_digit()), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_name_cites_its_leading_checklist_line() {
        assert_eq!(ids_in_fn_name("can_07_abort_before_dispatch"), ["CAN-07"]);
    }

    #[test]
    fn further_two_digit_tokens_add_lines_of_the_same_group() {
        assert_eq!(
            ids_in_fn_name("code_12_23_sub_calls_share_the_token"),
            ["CODE-12", "CODE-23"]
        );
        assert_eq!(
            ids_in_fn_name("l2_log_04_16_shared_constructors_match"),
            ["L2", "LOG-04", "LOG-16"]
        );
    }

    #[test]
    fn and_adds_a_line_and_to_cites_a_whole_range() {
        assert_eq!(
            ids_in_fn_name("fs_43_and_44_outside_change"),
            ["FS-43", "FS-44"]
        );
        assert_eq!(
            ids_in_fn_name("fs_60_to_63_without_policy"),
            ["FS-60", "FS-61", "FS-62", "FS-63"]
        );
        assert_eq!(ids_in_fn_name("fs_60_to_the_end"), ["FS-60"]);
        assert_eq!(ids_in_fn_name("read_and_12_lines"), Vec::<String>::new());
        assert_eq!(ids_in_fn_name("fs_60_to_10"), ["FS-60", "FS-10"]);
    }

    #[test]
    fn spec_rules_chain_in_a_test_name() {
        assert_eq!(ids_in_fn_name("i4_l5_a_wide_step"), ["I4", "L5"]);
        assert_eq!(ids_in_fn_name("s2_cm2_every_outcome"), ["S2", "CM2"]);
        assert_eq!(ids_in_fn_name("fs3_a_link_out"), ["FS3"]);
        assert_eq!(ids_in_fn_name("fs_26_a_stale_read"), ["FS-26"]);
    }

    #[test]
    fn ordinary_names_and_numbers_cite_nothing() {
        for name in [
            "code_mode_messages",
            "reads_10_files",
            "kill_9_mid_call",
            "adv_10mb_arguments",
            "cc_20_pre_tool_use",
            "s25_is_not_a_rule",
            "s7_is_past_the_last_s_rule",
            "can_7_needs_two_digits",
            "can_007_needs_two_digits",
            "log",
            "sch",
            "main",
        ] {
            assert_eq!(ids_in_fn_name(name), Vec::<String>::new(), "{name}");
        }
    }

    #[test]
    fn numbers_after_the_first_plain_word_are_words() {
        assert_eq!(ids_in_fn_name("tmo_09_waits_10_ms_then_12"), ["TMO-09"]);
    }

    #[test]
    fn a_comment_cites_rules_and_lines() {
        assert_eq!(
            ids_in_comment(" S2-S5: the pool (CAN-16, REG-52); see FS3 Decision and P1..P5."),
            ["S2", "S5", "CAN-16", "REG-52", "FS3", "P1", "P5"]
        );
    }

    #[test]
    fn a_range_cites_its_far_end() {
        assert_eq!(
            ids_in_comment("checks REG-01..14 and CODE-25..30 here"),
            ["REG-01", "REG-14", "CODE-25", "CODE-30"]
        );
    }

    #[test]
    fn ordinary_words_and_numbers_in_a_comment_cite_nothing() {
        for text in [
            "UTF-8 and SHA-256, 0xF1, ABS2, S25, CAN-7, CAN-123, FOO-12",
            "I am a sentence; Code 12 of 23 lines, LOG and FS alone",
            "S7 and C4 are past the last rule of their prefix",
            "s2 in lower case is a word in prose, Fs3 too",
        ] {
            assert_eq!(ids_in_comment(text), Vec::<String>::new(), "{text}");
        }
    }

    #[test]
    fn sections_split_rules_from_lines() {
        assert_eq!(section_of("FS3"), ("FS", true));
        assert_eq!(section_of("FS-26"), ("FS", false));
        assert_eq!(section_of("CM2"), ("CM", true));
    }
}
