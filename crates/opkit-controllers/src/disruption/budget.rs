//! kube's disruption-budget arithmetic (the disruption controller's `getExpectedPodCount`
//! and `updatePdbStatus`): with an integer `minAvailable` the pods themselves are the
//! expected count; with a percentage, or with `maxUnavailable`, the expected count is the
//! scale of the pods' controllers, and percentages round up.

use k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// What a budget asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Budget {
    /// `minAvailable`.
    MinAvailable(IntOrString),
    /// `maxUnavailable`.
    MaxUnavailable(IntOrString),
}

/// What the selected pods look like.
#[derive(Debug, Clone)]
pub(crate) struct Health {
    /// Pods the budget selects.
    pub(crate) pods: usize,
    /// Of those, Ready and not being deleted.
    pub(crate) healthy: usize,
    /// The summed scale of their controllers, or why it cannot be known (a pod with no
    /// controller).
    pub(crate) controllers_scale: Result<i32, String>,
}

/// The computed status counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) current_healthy: i32,
    pub(crate) desired_healthy: i32,
    pub(crate) expected_pods: i32,
    pub(crate) disruptions_allowed: i32,
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// `value` of `total` (an integer, or a percentage rounded up, as
/// `GetScaledValueFromIntOrPercent(.., true)`).
fn scaled(value: &IntOrString, total: i32) -> Result<i32, String> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let percent: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}"))?;
            let value = (percent * i64::from(total) + 99) / 100;
            Ok(i32::try_from(value).unwrap_or(i32::MAX))
        }
    }
}

impl Budget {
    /// The budget of a spec (an empty spec allows no disruption: `maxUnavailable: 0`).
    pub(crate) fn from_spec(spec: &PodDisruptionBudgetSpec) -> Budget {
        match (&spec.min_available, &spec.max_unavailable) {
            (Some(min), _) => Budget::MinAvailable(min.clone()),
            (None, Some(max)) => Budget::MaxUnavailable(max.clone()),
            (None, None) => Budget::MaxUnavailable(IntOrString::Int(0)),
        }
    }

    /// The status counts for `health`, or why they cannot be computed.
    pub(crate) fn evaluate(&self, health: &Health) -> Result<Counts, String> {
        let (expected, desired) = match self {
            Budget::MinAvailable(IntOrString::Int(n)) => (count(health.pods), *n),
            Budget::MinAvailable(percent) => {
                let expected = health.controllers_scale.clone()?;
                (expected, scaled(percent, expected)?)
            }
            Budget::MaxUnavailable(max) => {
                let expected = health.controllers_scale.clone()?;
                (expected, (expected - scaled(max, expected)?).max(0))
            }
        };
        let current = count(health.healthy);
        Ok(Counts {
            current_healthy: current,
            desired_healthy: desired,
            expected_pods: expected,
            disruptions_allowed: (current - desired).max(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health(pods: usize, healthy: usize, scale: i32) -> Health {
        Health { pods, healthy, controllers_scale: Ok(scale) }
    }

    #[test]
    fn kubes_arithmetic() {
        let min2 = Budget::MinAvailable(IntOrString::Int(2));
        assert_eq!(
            min2.evaluate(&health(3, 3, 3)).map(|c| (c.desired_healthy, c.expected_pods, c.disruptions_allowed)),
            Ok((2, 3, 1))
        );
        assert_eq!(min2.evaluate(&health(3, 2, 3)).map(|c| c.disruptions_allowed), Ok(0));
        let half = Budget::MaxUnavailable(IntOrString::String("50%".into()));
        assert_eq!(
            half.evaluate(&health(3, 3, 3)).map(|c| (c.desired_healthy, c.disruptions_allowed)),
            Ok((1, 2)),
            "50% of 3 rounds up to 2"
        );
        let min_pct = Budget::MinAvailable(IntOrString::String("50%".into()));
        assert_eq!(min_pct.evaluate(&health(4, 4, 4)).map(|c| c.desired_healthy), Ok(2));
        let unmanaged =
            Health { pods: 1, healthy: 1, controllers_scale: Err("found no controllers for pod \"x\"".into()) };
        assert!(half.evaluate(&unmanaged).is_err());
        assert!(min2.evaluate(&unmanaged).is_ok(), "an integer minAvailable needs no controller");
    }
}
