//! Formatting helpers reproducing Go's JSON output for the special Kubernetes types:
//! `metav1.Time` / `metav1.MicroTime` (RFC 3339 in UTC), plus JSON numbers from protobuf
//! doubles. (`metav1.Duration` is printed by `opkit_apimachinery::duration`.)

use serde_json::{Number, Value};

/// Seconds between 0001-01-01T00:00:00Z (Go's zero time) and the Unix epoch, negated.
pub(super) const GO_ZERO_TIME_UNIX: i64 = -62_135_596_800;

/// Formats a Unix time as RFC 3339 in UTC: whole seconds ("2026-01-02T03:04:05Z") like
/// `metav1.Time`, or with six fractional digits ("2026-01-02T03:04:05.123456Z") like
/// `metav1.MicroTime`. Returns `None` when the year is outside 0..=9999, which Go's
/// `Time.MarshalJSON` refuses as well.
pub(super) fn rfc3339(seconds: i64, nanos: i64, micros: bool) -> Option<String> {
    let seconds = seconds.checked_add(nanos.div_euclid(1_000_000_000))?;
    let nanos = nanos.rem_euclid(1_000_000_000);
    let days = seconds.div_euclid(86_400);
    let secs_of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return None;
    }
    let (h, m, s) = (secs_of_day / 3600, (secs_of_day % 3600) / 60, secs_of_day % 60);
    let mut out = format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}");
    if micros {
        out.push_str(&format!(".{:06}", nanos / 1000));
    }
    out.push('Z');
    Some(out)
}

/// Converts days since 1970-01-01 to a proleptic Gregorian (year, month, day).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    // Howard Hinnant's days-to-civil algorithm (eras of 400 years).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A JSON number for a protobuf double, written as an integer when it has no fractional part
/// (Go prints `5`, not `5.0`). `None` for NaN and infinities, which JSON cannot represent.
pub(super) fn float_number(value: f64) -> Option<Value> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if value.fract() == 0.0 && value.abs() <= EXACT {
        return Some(Value::Number(Number::from(value as i64)));
    }
    Number::from_f64(value).map(Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_format_like_go() {
        assert_eq!(rfc3339(0, 0, false).unwrap(), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_767_323_045, 999_999_999, false).unwrap(), "2026-01-02T03:04:05Z");
        assert_eq!(rfc3339(1_767_323_045, 123_456_789, true).unwrap(), "2026-01-02T03:04:05.123456Z");
        assert_eq!(rfc3339(951_782_400, 0, false).unwrap(), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(-1, 0, true).unwrap(), "1969-12-31T23:59:59.000000Z");
        assert_eq!(rfc3339(GO_ZERO_TIME_UNIX, 0, false).unwrap(), "0001-01-01T00:00:00Z");
        assert_eq!(rfc3339(253_402_300_800, 0, false), None); // year 10000
        assert_eq!(rfc3339(i64::MAX, 1_000_000_000, false), None);
        assert_eq!(rfc3339(i64::MIN, -1, false), None);
    }

    #[test]
    fn floats_become_json_numbers() {
        assert_eq!(float_number(5.0), Some(serde_json::json!(5)));
        assert_eq!(float_number(-0.5), Some(serde_json::json!(-0.5)));
        assert_eq!(float_number(f64::NAN), None);
        assert_eq!(float_number(f64::INFINITY), None);
    }
}
