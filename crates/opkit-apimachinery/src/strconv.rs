//! Go's `strconv.Quote`, written once: kube-apiserver's messages quote values with `%q`
//! (the API server's validation errors), and so do Helm's templates (`printf "%q"`,
//! `quote`-like Sprig functions in opkit-helm).

use std::fmt::Write;

/// Go's `strconv.Quote` (and `%q` of a string): double quotes, Go's escapes, printable
/// Unicode kept, other control characters and the byte-order mark as `\uXXXX`/`\UXXXXXXXX`.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() || c == '\u{feff}' => {
                if (c as u32) < 0x10000 {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08x}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn quotes_as_go_does() {
        assert_eq!(quote("a\"b\n"), "\"a\\\"b\\n\"");
        assert_eq!(quote("tab\there\u{7f}"), "\"tab\\there\\x7f\"");
        assert_eq!(quote("\u{85}\u{feff}é"), "\"\\u0085\\ufeffé\"");
    }
}
