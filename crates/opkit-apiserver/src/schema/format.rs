//! String `format` checks of the kube-openapi `strfmt` default registry that kube-apiserver uses
//! for custom resources (unknown formats are ignored, as kube does).

use std::sync::LazyLock;

use base64::Engine;
use regex::Regex;

fn re(p: &str) -> Option<Regex> {
    Regex::new(p).ok()
}

static DATE_TIME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?$")
});
static DATE: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"^(\d{4})-(\d{2})-(\d{2})$"));
static UUID: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"));
static EMAIL: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"^[^@\s<>()\[\],;:]+@[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?$"));
static HOSTNAME_LABEL: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"^[A-Za-z0-9\p{L}](?:[A-Za-z0-9\p{L}_-]{0,61}[A-Za-z0-9\p{L}])?$"));
static MAC: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r"(?i)^(?:[0-9a-f]{2}(?:[:-][0-9a-f]{2}){5}|[0-9a-f]{2}(?:[:-][0-9a-f]{2}){7}|[0-9a-f]{4}(?:\.[0-9a-f]{4}){2})$")
});
static HEXCOLOR: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGBCOLOR: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"^rgb\(\s*(\d{1,3})\s*,\s*(\d{1,3})\s*,\s*(\d{1,3})\s*\)$"));
static SSN: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"));
static DURATION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r"^[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h|d|w))+$|^\d+\s*(?:ns|us|ms|s|m|h|d|w|sec|secs|second|seconds|min|mins|minute|minutes|hr|hrs|hour|hours|day|days|wk|wks|week|weeks)$",
    )
});
static BSON: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"^[0-9a-fA-F]{24}$"));
static URI: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*$"));

fn matches(r: &LazyLock<Option<Regex>>, s: &str) -> bool {
    r.as_ref().is_none_or(|r| r.is_match(s))
}

fn valid_ymd(y: &str, m: &str, d: &str) -> bool {
    let (Ok(y), Ok(m), Ok(d)) = (y.parse::<i32>(), m.parse::<u32>(), d.parse::<u32>()) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

fn is_date_time(s: &str) -> bool {
    let Some(r) = DATE_TIME.as_ref() else {
        return true;
    };
    let Some(c) = r.captures(s) else { return false };
    let g = |i: usize| c.get(i).map_or("0", |m| m.as_str());
    valid_ymd(g(1), g(2), g(3))
        && g(4).parse::<u32>().is_ok_and(|h| h < 24)
        && g(5).parse::<u32>().is_ok_and(|m| m < 60)
        && g(6).parse::<u32>().is_ok_and(|s| s < 61)
}

fn is_date(s: &str) -> bool {
    let Some(r) = DATE.as_ref() else { return true };
    r.captures(s).is_some_and(|c| {
        let g = |i: usize| c.get(i).map_or("", |m| m.as_str());
        valid_ymd(g(1), g(2), g(3))
    })
}

fn is_hostname(s: &str) -> bool {
    if s.is_empty() || s.len() > 255 {
        return false;
    }
    let s = s.strip_suffix('.').unwrap_or(s);
    s.split('.').all(|l| matches(&HOSTNAME_LABEL, l))
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => bits <= 32,
        Ok(std::net::IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

fn is_uuid_version(s: &str, version: char) -> bool {
    matches(&UUID, s) && s.len() == 36 && s.chars().nth(14).is_some_and(|c| c == version)
}

fn is_isbn10(s: &str) -> bool {
    let d: Vec<char> = s.chars().filter(|c| *c != '-' && *c != ' ').collect();
    if d.len() != 10 {
        return false;
    }
    let mut sum = 0u32;
    for (i, c) in d.iter().enumerate() {
        let v = match c {
            'X' | 'x' if i == 9 => 10,
            c => match c.to_digit(10) {
                Some(v) => v,
                None => return false,
            },
        };
        sum += v * (10 - i as u32);
    }
    sum.is_multiple_of(11)
}

fn is_isbn13(s: &str) -> bool {
    let d: Vec<u32> = s.chars().filter(|c| *c != '-' && *c != ' ').filter_map(|c| c.to_digit(10)).collect();
    let raw = s.chars().filter(|c| *c != '-' && *c != ' ').count();
    if d.len() != 13 || raw != 13 {
        return false;
    }
    let sum: u32 = d.iter().enumerate().map(|(i, v)| if i % 2 == 0 { *v } else { v * 3 }).sum();
    sum.is_multiple_of(10)
}

fn is_credit_card(s: &str) -> bool {
    let d: Vec<u32> = s.chars().filter(|c| *c != '-' && *c != ' ').filter_map(|c| c.to_digit(10)).collect();
    if d.len() < 12 || d.len() > 19 {
        return false;
    }
    let sum: u32 = d
        .iter()
        .rev()
        .enumerate()
        .map(|(i, v)| {
            if i % 2 == 1 {
                let x = v * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                *v
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// Whether `s` is valid for `format`. Unknown formats (and number formats) always pass.
pub(crate) fn check_string_format(format: &str, s: &str) -> bool {
    match format {
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "date" => is_date(s),
        "date-time" | "datetime" => is_date_time(s),
        "duration" => matches(&DURATION, s),
        "uuid" => matches(&UUID, s),
        "uuid3" => is_uuid_version(s, '3'),
        "uuid4" => is_uuid_version(s, '4'),
        "uuid5" => is_uuid_version(s, '5'),
        "email" => matches(&EMAIL, s),
        "hostname" => is_hostname(s),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(s),
        "mac" => matches(&MAC, s),
        "hexcolor" => matches(&HEXCOLOR, s),
        "rgbcolor" => RGBCOLOR.as_ref().is_none_or(|r| {
            r.captures(s).is_some_and(|c| {
                (1..=3).all(|i| c.get(i).and_then(|m| m.as_str().parse::<u32>().ok()).is_some_and(|v| v <= 255))
            })
        }),
        "ssn" => matches(&SSN, s),
        "uri" => matches(&URI, s),
        "isbn" => is_isbn10(s) || is_isbn13(s),
        "isbn10" => is_isbn10(s),
        "isbn13" => is_isbn13(s),
        "creditcard" => is_credit_card(s),
        "bsonobjectid" => matches(&BSON, s),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::check_string_format as f;

    #[test]
    fn formats() {
        assert!(f("date-time", "2024-01-02T03:04:05Z"));
        assert!(f("date-time", "2024-01-02T03:04:05.123+02:00"));
        assert!(!f("date-time", "2024-13-02T03:04:05Z"));
        assert!(!f("date-time", "yesterday"));
        assert!(f("date", "2024-02-29"));
        assert!(!f("date", "2023-02-29"));
        assert!(f("uuid", "123e4567-e89b-12d3-a456-426614174000"));
        assert!(!f("uuid", "nope"));
        assert!(f("byte", "aGVsbG8="));
        assert!(!f("byte", "!!"));
        assert!(f("ipv4", "10.0.0.1"));
        assert!(!f("ipv4", "10.0.0.256"));
        assert!(f("email", "a@b.com"));
        assert!(!f("email", "a.b.com"));
        assert!(f("hostname", "example.com"));
        assert!(!f("hostname", "-bad-.com"));
        assert!(f("duration", "1h30m"));
        assert!(f("whatever-unknown", "anything"));
    }
}
