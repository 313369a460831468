//! The value of every `--timeout`, `--wait-time` and `--ready-timeout` flag: a Go
//! duration (`60s`, `2m0s`, `1h30m`), as operator-sdk, kubectl and helm take them, or bare
//! seconds (`60`), as opkit took them before. Parsing is opkit-apimachinery's one Go
//! duration parser (kube's own); printing is Go's `time.Duration.String`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A duration given on the command line (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DurationFlag(Duration);

impl DurationFlag {
    /// `seconds` seconds: what a flag's default is written as.
    pub const fn from_secs(seconds: u64) -> Self {
        DurationFlag(Duration::from_secs(seconds))
    }

    /// The duration.
    pub const fn get(self) -> Duration {
        self.0
    }
}

impl From<DurationFlag> for Duration {
    fn from(flag: DurationFlag) -> Duration {
        flag.0
    }
}

/// A flag value that is neither bare seconds nor a Go duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {0:?}: expected a Go duration such as 90s, 2m0s or 1h, or a number of seconds")]
pub struct DurationFlagError(String);

impl FromStr for DurationFlag {
    type Err = DurationFlagError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            return Err(DurationFlagError(s.to_string()));
        }
        if let Ok(seconds) = s.parse::<u64>() {
            return Ok(DurationFlag::from_secs(seconds));
        }
        opkit_apimachinery::duration::parse(s).map(DurationFlag).map_err(|_| DurationFlagError(s.to_string()))
    }
}

impl fmt::Display for DurationFlag {
    /// Go's form (`2m0s`), which every opkit flag reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&opkit_apimachinery::duration::format(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_and_bare_seconds_are_read() {
        let parse = |s: &str| s.parse::<DurationFlag>().map(DurationFlag::get);
        assert_eq!(parse("60"), Ok(Duration::from_secs(60)));
        assert_eq!(parse("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse("2m0s"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
    }

    #[test]
    fn other_values_are_refused_with_what_is_expected() {
        for bad in ["", "soon", "-5s", "5 minutes", "1x"] {
            let err = bad.parse::<DurationFlag>().expect_err(bad).to_string();
            assert!(err.contains("expected a Go duration such as 90s"), "{bad}: {err}");
        }
    }

    #[test]
    fn printed_as_go_prints_it_and_read_back() {
        let flag = DurationFlag::from_secs(120);
        assert_eq!(flag.to_string(), "2m0s");
        assert_eq!(flag.to_string().parse::<DurationFlag>(), Ok(flag));
    }
}
