//! Percent-decoding (`%2D` → `-`), for the viewer's query parameters and the keys of a store
//! URL's query: one decoder for both.

/// `text` with its `%XX` escapes decoded (a bad escape is kept as it is), and `+` read as a
/// space when `plus_is_space` (an HTML form's query; a PostgreSQL URL keeps it).
pub fn decoded(text: &str, plus_is_space: bool) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    // Two hex digits: at most 255.
                    out.push(u8::try_from(h * 16 + l).unwrap_or(b'%'));
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus_is_space => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::decoded;

    #[test]
    fn escapes_are_decoded_and_bad_ones_kept() {
        assert_eq!(decoded("s1%2D2", false), "s1-2");
        assert_eq!(decoded("passw%6Frd", false), "password");
        assert_eq!(decoded("100%", false), "100%");
        assert_eq!(decoded("%zz%4", false), "%zz%4");
        assert_eq!(decoded("a+b", true), "a b");
        assert_eq!(decoded("a+b", false), "a+b");
    }
}
