//! Go durations (`metav1.Duration`, `time.ParseDuration`): parsing delegates to kube's own
//! [`kube_core::Duration`]; printing reproduces Go's `time.Duration.String` ("1h0m0s",
//! "1m30s", "1.5s", "300ms", "2µs"), which kube's `Display` does not.

pub use kube_core::Duration as GoDuration;
pub use kube_core::duration::ParseError as DurationParseError;

/// Parses a non-negative Go duration (`"1m30s"`, `"1h"`, `"500ms"`, `"1.5s"`).
pub fn parse(s: &str) -> Result<std::time::Duration, DurationError> {
    let d: GoDuration = s.trim().parse()?;
    if d.is_negative() {
        return Err(DurationError::Negative(s.to_string()));
    }
    Ok(d.into())
}

/// A duration string that [`parse`] refuses.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not a Go duration.
    #[error("invalid duration: {0}")]
    Invalid(#[from] DurationParseError),
    /// A negative duration where only non-negative ones make sense.
    #[error("negative duration: {0}")]
    Negative(String),
}

/// Formats nanoseconds the way Go's `time.Duration.String` does: "1h0m0s", "1.5s", "300ms",
/// "2µs", "0s", "-5s".
pub fn format_nanos(ns: i64) -> String {
    let u = ns.unsigned_abs();
    if u == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    if ns < 0 {
        out.push('-');
    }
    if u < 1_000_000_000 {
        let (unit, prec) = if u < 1_000 {
            ("ns", 0)
        } else if u < 1_000_000 {
            ("µs", 3)
        } else {
            ("ms", 6)
        };
        let scale = 10u64.pow(prec);
        out.push_str(&(u / scale).to_string());
        out.push_str(&fraction(u % scale, prec));
        out.push_str(unit);
    } else {
        let secs = u / 1_000_000_000;
        let (mins, hours) = (secs / 60, secs / 3600);
        if hours > 0 {
            out.push_str(&format!("{hours}h"));
        }
        if mins > 0 {
            out.push_str(&format!("{}m", mins % 60));
        }
        out.push_str(&(secs % 60).to_string());
        out.push_str(&fraction(u % 1_000_000_000, 9));
        out.push('s');
    }
    out
}

/// Formats a duration the way Go's `time.Duration.String` does (saturating at Go's maximum
/// duration, about 292 years).
pub fn format(d: std::time::Duration) -> String {
    format_nanos(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// ".5" for (500, 3): the fractional digits without trailing zeros, or "" when zero.
fn fraction(value: u64, prec: u32) -> String {
    if value == 0 || prec == 0 {
        return String::new();
    }
    let digits = format!("{value:0width$}", width = prec as usize);
    format!(".{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse(" 2s "), Ok(Duration::from_secs(2)));
        assert_eq!(parse("1h2m3s4ms"), Ok(Duration::from_millis(3_723_004)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert!(matches!(parse("-1s"), Err(DurationError::Negative(_))));
        assert!(matches!(parse("5"), Err(DurationError::Invalid(_))));
        assert!(matches!(parse("3d"), Err(DurationError::Invalid(_))));
        assert!(matches!(parse("xs"), Err(DurationError::Invalid(_))));
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format_nanos(0), "0s");
        assert_eq!(format_nanos(1), "1ns");
        assert_eq!(format_nanos(1_500), "1.5µs");
        assert_eq!(format_nanos(300_000_000), "300ms");
        assert_eq!(format_nanos(1_500_000_000), "1.5s");
        assert_eq!(format_nanos(3_600_000_000_000), "1h0m0s");
        assert_eq!(format_nanos(90_000_000_000), "1m30s");
        assert_eq!(format_nanos(-5_000_000_000), "-5s");
        assert_eq!(format_nanos(i64::MIN), "-2562047h47m16.854775808s");
        assert_eq!(format(Duration::from_secs(80)), "1m20s");
        assert_eq!(format(Duration::from_secs(300)), "5m0s");
        assert_eq!(format(Duration::from_millis(200)), "200ms");
        assert_eq!(format(Duration::MAX), "2562047h47m16.854775807s");
    }

    #[test]
    fn round_trips() {
        for s in ["1m30s", "1h0m0s", "500ms", "1.5s", "2µs"] {
            assert_eq!(format(parse(s).unwrap()), s);
        }
    }
}
