//! Cron schedules as CronJobs use them (robfig/cron's standard parser): five fields
//! (minute, hour, day of month, month, day of week) with `*`, `?`, lists, ranges, steps
//! and month/day names, or a descriptor (`@yearly`, `@monthly`, `@weekly`, `@daily`,
//! `@hourly`, ...), evaluated in a time zone.

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan, Zoned};

/// Why a schedule could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ScheduleError {
    /// Not five fields.
    #[error("expected exactly 5 fields, found {0}: {1}")]
    FieldCount(usize, String),
    /// A field is malformed or out of range.
    #[error("invalid field {0:?}")]
    Field(String),
    /// An unknown descriptor.
    #[error("unrecognized descriptor: {0}")]
    Descriptor(String),
}

/// A parsed schedule: the allowed values of each field as bit sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Schedule {
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
    /// Whether day-of-month or day-of-week was `*`/`?` (then both must match, else either).
    dom_star: bool,
    dow_star: bool,
}

const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

fn value(s: &str, names: &[&str], offset: u32) -> Option<u32> {
    if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
        return u32::try_from(i).ok().map(|i| i + offset);
    }
    s.parse().ok()
}

/// Parses one field into a bit set over `min..=max`; returns also whether it was a star.
fn field(spec: &str, min: u32, max: u32, names: &[&str], offset: u32) -> Result<(u64, bool), ScheduleError> {
    let bad = || ScheduleError::Field(spec.to_string());
    let mut bits = 0u64;
    let mut star = false;
    for part in spec.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (r, Some(s.parse::<u32>().map_err(|_| bad())?)),
            None => (part, None),
        };
        let (lo, hi) = if range == "*" || range == "?" {
            star = step.is_none();
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a, names, offset).ok_or_else(bad)?, value(b, names, offset).ok_or_else(bad)?)
        } else {
            let v = value(range, names, offset).ok_or_else(bad)?;
            (v, if step.is_some() { max } else { v })
        };
        let step = step.unwrap_or(1);
        if lo < min || hi > max || lo > hi || step == 0 {
            return Err(bad());
        }
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, star))
}

impl Schedule {
    /// Parses a schedule.
    pub(crate) fn parse(spec: &str) -> Result<Schedule, ScheduleError> {
        let spec = spec.trim();
        let expanded = match spec {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            s if s.starts_with('@') => return Err(ScheduleError::Descriptor(s.to_string())),
            s => s,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(ScheduleError::FieldCount(fields.len(), spec.to_string()));
        }
        let (minute, _) = field(fields[0], 0, 59, &[], 0)?;
        let (hour, _) = field(fields[1], 0, 23, &[], 0)?;
        let (dom, dom_star) = field(fields[2], 1, 31, &[], 0)?;
        let (month, _) = field(fields[3], 1, 12, &MONTHS, 1)?;
        let (mut dow, dow_star) = field(fields[4], 0, 7, &DAYS, 0)?;
        if dow & (1 << 7) != 0 {
            dow |= 1;
        }
        Ok(Schedule { minute, hour, dom, month, dow, dom_star, dow_star })
    }

    fn day_matches(&self, t: &DateTime) -> bool {
        let dom = self.dom & (1 << t.day()) != 0;
        let dow = self.dow & (1 << t.weekday().to_sunday_zero_offset()) != 0;
        if self.dom_star || self.dow_star { dom && dow } else { dom || dow }
    }

    /// The first activation strictly after `after`, in `tz`; `None` if there is none
    /// within five years.
    pub(crate) fn next(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let start = after.to_zoned(tz.clone()).datetime();
        let mut t = start.with().second(0).subsec_nanosecond(0).build().ok()?.checked_add(1.minute()).ok()?;
        let limit = start.year() + 5;
        while t.year() <= limit {
            if self.month & (1 << t.month()) == 0 {
                t = t.first_of_month().checked_add(1.month()).ok()?.with().hour(0).minute(0).build().ok()?;
                continue;
            }
            if !self.day_matches(&t) {
                t = t.checked_add(1.day()).ok()?.with().hour(0).minute(0).build().ok()?;
                continue;
            }
            if self.hour & (1 << t.hour()) == 0 {
                t = t.checked_add(1.hour()).ok()?.with().minute(0).build().ok()?;
                continue;
            }
            if self.minute & (1 << t.minute()) == 0 {
                t = t.checked_add(1.minute()).ok()?;
                continue;
            }
            let z: Zoned = t.to_zoned(tz.clone()).ok()?;
            let ts = z.timestamp();
            if ts > after {
                return Some(ts);
            }
            t = t.checked_add(1.minute()).ok()?;
        }
        None
    }

    /// The most recent activation in `(earliest, now]` and how many there were (counting
    /// stops at 101), as kube's `mostRecentScheduleTime`.
    pub(crate) fn most_recent(&self, earliest: Timestamp, now: Timestamp, tz: &TimeZone) -> (Option<Timestamp>, u32) {
        let mut last = None;
        let mut n = 0;
        let mut t = earliest;
        while let Some(next) = self.next(t, tz) {
            if next > now {
                break;
            }
            last = Some(next);
            n += 1;
            if n > 100 {
                // Too many missed runs: find the latest one in ever wider windows before now.
                for hours in [1i64, 24, 24 * 32, 24 * 366, 24 * 366 * 5] {
                    let mut probe = now.checked_sub(jiff::SignedDuration::from_hours(hours)).unwrap_or(next).max(next);
                    let mut found = false;
                    while let Some(x) = self.next(probe, tz).filter(|x| *x <= now) {
                        last = Some(x);
                        probe = x;
                        found = true;
                    }
                    if found {
                        break;
                    }
                }
                break;
            }
            t = next;
        }
        (last, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn every_minute_and_descriptors() {
        let s = Schedule::parse("* * * * *")
            .unwrap_or_else(|_| Schedule::parse("0 0 1 1 *").unwrap_or_else(|_| unreachable!()));
        assert_eq!(s.next(ts("2024-05-01T10:00:30Z"), &TimeZone::UTC), Some(ts("2024-05-01T10:01:00Z")));
        assert_eq!(s.next(ts("2024-05-01T10:01:00Z"), &TimeZone::UTC), Some(ts("2024-05-01T10:02:00Z")));
        let h = Schedule::parse("@hourly").ok();
        assert_eq!(
            h.and_then(|h| h.next(ts("2024-05-01T10:00:00Z"), &TimeZone::UTC)),
            Some(ts("2024-05-01T11:00:00Z"))
        );
        assert!(Schedule::parse("@every 5m").is_err());
        assert!(Schedule::parse("* * *").is_err());
        assert!(Schedule::parse("61 * * * *").is_err());
    }

    #[test]
    fn fields_lists_ranges_steps_names() {
        let s = Schedule::parse("*/15 9-17 * JAN-MAR mon-fri").ok();
        // 2024-01-06 is a Saturday: next is Monday 09:00.
        assert_eq!(
            s.as_ref().and_then(|s| s.next(ts("2024-01-06T12:00:00Z"), &TimeZone::UTC)),
            Some(ts("2024-01-08T09:00:00Z"))
        );
        assert_eq!(
            s.as_ref().and_then(|s| s.next(ts("2024-01-08T09:00:00Z"), &TimeZone::UTC)),
            Some(ts("2024-01-08T09:15:00Z"))
        );
        assert_eq!(
            s.and_then(|s| s.next(ts("2024-03-29T17:45:00Z"), &TimeZone::UTC)),
            Some(ts("2025-01-01T09:00:00Z"))
        );
        // Both day fields restricted: either matches (the 13th or any Friday).
        let f = Schedule::parse("0 0 13 * 5").ok();
        assert_eq!(
            f.and_then(|f| f.next(ts("2024-09-01T00:00:00Z"), &TimeZone::UTC)),
            Some(ts("2024-09-06T00:00:00Z"))
        );
        let sunday7 = Schedule::parse("0 0 * * 7").ok();
        assert_eq!(
            sunday7.and_then(|s| s.next(ts("2024-09-01T00:00:00Z"), &TimeZone::UTC)),
            Some(ts("2024-09-08T00:00:00Z"))
        );
    }

    #[test]
    fn time_zones_and_missed_runs() {
        let tz = TimeZone::get("America/New_York").unwrap_or(TimeZone::UTC);
        let s = Schedule::parse("0 9 * * *").ok();
        let next = s.as_ref().and_then(|s| s.next(ts("2024-07-01T00:00:00Z"), &tz));
        if tz != TimeZone::UTC {
            assert_eq!(next, Some(ts("2024-07-01T13:00:00Z")));
        }
        let m = Schedule::parse("*/5 * * * *").ok();
        let (last, n) = m
            .map(|m| m.most_recent(ts("2024-01-01T00:00:00Z"), ts("2024-01-01T00:27:00Z"), &TimeZone::UTC))
            .unwrap_or((None, 0));
        assert_eq!(last, Some(ts("2024-01-01T00:25:00Z")));
        assert_eq!(n, 5);
        let e = Schedule::parse("* * * * *").ok();
        let (last, n) = e
            .map(|e| e.most_recent(ts("2024-01-01T00:00:00Z"), ts("2024-01-02T00:00:30Z"), &TimeZone::UTC))
            .unwrap_or((None, 0));
        assert_eq!(last, Some(ts("2024-01-02T00:00:00Z")));
        assert!(n > 100);
    }
}
