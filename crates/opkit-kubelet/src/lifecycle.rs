//! How a simulated pod's containers behave over time: start after the start delay, become
//! ready after the ready delay, and — for run-to-completion pods, or when the failure
//! injection annotations say so — exit, after which they finish or restart with
//! CrashLoopBackOff back-off. [`Track`] holds one pod's progress; [`Track::advance`] moves
//! it to the present and says what stage it is in and when it next changes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

/// Annotation: the containers start but never become ready.
pub(crate) const NEVER_READY: &str = "opkit.dev/never-ready";
/// Annotation: the containers crash at once on every start.
pub(crate) const CRASH_LOOP: &str = "opkit.dev/crash-loop";
/// Annotation: the exit code of the containers (default 0; 1 for crash loops).
pub(crate) const EXIT_CODE: &str = "opkit.dev/exit-code";
/// Annotation: how long the containers run before exiting (e.g. `"2s"`, `"500ms"`).
pub(crate) const RUN_DURATION: &str = "opkit.dev/run-duration";
/// Annotation: the initial restart back-off (default 10s, doubling up to 30 times that).
pub(crate) const RESTART_BACKOFF: &str = "opkit.dev/restart-backoff";

/// Annotation: how long the containers take to stop when the pod is deleted (default
/// immediately; never longer than the deletion grace period).
pub(crate) const TERMINATION_DURATION: &str = "opkit.dev/termination-duration";

/// kubelet's initial crash-loop back-off.
pub(crate) const DEFAULT_BACKOFF: Duration = Duration::from_secs(10);

/// Reads a duration annotation (a Go duration such as `"1m30s"`); an invalid value counts
/// as absent.
pub(crate) fn duration_annotation(annotations: &BTreeMap<String, String>, key: &str) -> Option<Duration> {
    annotations.get(key).and_then(|v| opkit_apimachinery::duration::parse(v).ok())
}

/// What the annotations and restart policy make a pod's containers do.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Behaviour {
    /// How long each container instance runs before exiting (`None`: forever).
    pub run_for: Option<Duration>,
    /// The exit code when it exits.
    pub exit_code: i32,
    /// Whether it ever becomes ready.
    pub ready: bool,
    /// The pod's restartPolicy (`Always`, `OnFailure`, `Never`).
    pub restart_policy: String,
    /// The initial restart back-off.
    pub backoff: Duration,
}

impl Behaviour {
    /// The behaviour of `pod`, with `job_run_time` for run-to-completion pods.
    pub(crate) fn of(pod: &Pod, job_run_time: Duration) -> Behaviour {
        let ann = pod.metadata.annotations.clone().unwrap_or_default();
        let flag = |k: &str| ann.get(k).is_some_and(|v| v == "true");
        let restart_policy =
            pod.spec.as_ref().and_then(|s| s.restart_policy.clone()).unwrap_or_else(|| "Always".to_string());
        let crash = flag(CRASH_LOOP);
        let run_annotation = duration_annotation(&ann, RUN_DURATION);
        let run_for = if crash {
            Some(Duration::ZERO)
        } else if restart_policy == "Always" {
            run_annotation.or(ann.get(EXIT_CODE).map(|_| job_run_time))
        } else {
            Some(run_annotation.unwrap_or(job_run_time))
        };
        let exit_code = ann.get(EXIT_CODE).and_then(|v| v.trim().parse().ok()).unwrap_or(if crash { 1 } else { 0 });
        Behaviour {
            run_for,
            exit_code,
            ready: !flag(NEVER_READY) && !crash,
            restart_policy,
            backoff: duration_annotation(&ann, RESTART_BACKOFF).unwrap_or(DEFAULT_BACKOFF),
        }
    }

    /// Whether a container exiting with `code` is restarted.
    pub(crate) fn restarts(&self, code: i32) -> bool {
        match self.restart_policy.as_str() {
            "Never" => false,
            "OnFailure" => code != 0,
            _ => true,
        }
    }

    /// The back-off before the restart following `restarts` earlier ones.
    pub(crate) fn backoff_after(&self, restarts: i32) -> Duration {
        let cap = self.backoff.saturating_mul(30);
        self.backoff.saturating_mul(1u32 << restarts.clamp(0, 16)).min(cap)
    }
}

/// Where a pod is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Stage {
    /// Bound, containers being created (phase Pending).
    Creating,
    /// Containers running (phase Running).
    Running {
        /// Whether the containers are ready.
        ready: bool,
    },
    /// Containers exited and wait to be restarted (CrashLoopBackOff).
    BackOff,
    /// Containers exited for good with this code (Succeeded if 0, else Failed).
    Finished {
        /// The exit code.
        exit_code: i32,
    },
}

/// The last exit of a pod's containers, for `lastState.terminated`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exit {
    /// The exit code.
    pub code: i32,
    /// When that instance started (wall clock, seconds).
    pub started: i64,
    /// When it exited (wall clock, seconds).
    pub finished: i64,
}

/// One pod's simulated progress.
#[derive(Debug, Clone)]
pub(crate) struct Track {
    /// The pod's uid.
    pub uid: String,
    /// When the kubelet first saw the pod bound to it.
    pub seen: Instant,
    /// When its containers first started.
    pub started: Option<Instant>,
    /// When the current container instance started.
    pub run_since: Instant,
    /// The same, on the wall clock (seconds).
    pub run_since_wall: i64,
    /// How many times the containers were restarted.
    pub restarts: i32,
    /// In back-off until then.
    pub backoff_until: Option<Instant>,
    /// The length of the current back-off.
    pub backoff_for: Duration,
    /// The last exit.
    pub last_exit: Option<Exit>,
    /// Whether the pod finished.
    pub finished: Option<i32>,
    /// The pod IP, once assigned.
    pub ip: Option<String>,
    /// What was last written, to skip identical writes.
    pub written: Option<(Stage, i32, bool, usize)>,
}

/// What [`Track::advance`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    /// The current stage.
    pub stage: Stage,
    /// When the stage next changes by itself.
    pub wake: Option<Duration>,
    /// Whether containers (re)started during this step (for events).
    pub started: bool,
}

fn wall(now: Instant, at: Instant, now_wall: i64) -> i64 {
    let back = now.saturating_duration_since(at).as_secs();
    now_wall - i64::try_from(back).unwrap_or(0)
}

impl Track {
    /// A new track for a pod first seen at `now`.
    pub(crate) fn new(uid: String, now: Instant, now_wall: i64) -> Track {
        Track {
            uid,
            seen: now,
            started: None,
            run_since: now,
            run_since_wall: now_wall,
            restarts: 0,
            backoff_until: None,
            backoff_for: Duration::ZERO,
            last_exit: None,
            finished: None,
            ip: None,

            written: None,
        }
    }

    /// Moves the pod to `now` (wall clock `now_wall`, seconds) under `b`, given the start
    /// and ready delays.
    pub(crate) fn advance(
        &mut self,
        b: &Behaviour,
        start_delay: Duration,
        ready_delay: Duration,
        now: Instant,
        now_wall: i64,
    ) -> Step {
        let mut started = false;
        if let Some(code) = self.finished {
            return Step { stage: Stage::Finished { exit_code: code }, wake: None, started };
        }
        if self.started.is_none() {
            let at = self.seen + start_delay;
            if now < at {
                return Step { stage: Stage::Creating, wake: Some(at - now), started };
            }
            self.started = Some(now);
            self.run_since = now;
            self.run_since_wall = now_wall;
            started = true;
        }
        // A few rounds at most: back-off ends, the instance runs, it exits again.
        for _ in 0..4 {
            if let Some(until) = self.backoff_until {
                if now < until {
                    return Step { stage: Stage::BackOff, wake: Some(until - now), started };
                }
                self.backoff_until = None;
                self.restarts = self.restarts.saturating_add(1);
                self.run_since = until;
                self.run_since_wall = wall(now, until, now_wall);
                started = true;
            }
            let ready_at = self.run_since + ready_delay;
            let ready = b.ready && now >= ready_at;
            let ready_wake = (b.ready && !ready).then(|| ready_at - now);
            match b.run_for {
                Some(run) if now >= self.run_since + run => {
                    let exit_at = self.run_since + run;
                    let exit = Exit {
                        code: b.exit_code,
                        started: self.run_since_wall,
                        finished: wall(now, exit_at, now_wall),
                    };
                    self.last_exit = Some(exit);
                    if b.restarts(b.exit_code) {
                        self.backoff_for = b.backoff_after(self.restarts);
                        self.backoff_until = Some(exit_at.max(now) + self.backoff_for);
                        continue;
                    }
                    self.finished = Some(b.exit_code);
                    return Step { stage: Stage::Finished { exit_code: b.exit_code }, wake: None, started };
                }
                Some(run) => {
                    let exit_wake = self.run_since + run - now;
                    let wake = ready_wake.map_or(exit_wake, |r| r.min(exit_wake));
                    return Step { stage: Stage::Running { ready }, wake: Some(wake), started };
                }
                None => return Step { stage: Stage::Running { ready }, wake: ready_wake, started },
            }
        }
        Step { stage: Stage::BackOff, wake: self.backoff_until.map(|u| u.saturating_duration_since(now)), started }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(policy: &str, ann: serde_json::Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p", "annotations": ann}, "spec": {"restartPolicy": policy, "containers": []}}),
        )
        .unwrap_or_default()
    }

    #[test]
    fn duration_annotations_are_go_durations() {
        let b = Behaviour::of(&pod("Never", json!({RUN_DURATION: "1m30s", RESTART_BACKOFF: "500ms"})), Duration::ZERO);
        assert_eq!(b.run_for, Some(Duration::from_secs(90)));
        assert_eq!(b.backoff, Duration::from_millis(500));
        let bad =
            Behaviour::of(&pod("Never", json!({RUN_DURATION: "2", RESTART_BACKOFF: "xs"})), Duration::from_secs(3));
        assert_eq!(bad.run_for, Some(Duration::from_secs(3)));
        assert_eq!(bad.backoff, DEFAULT_BACKOFF);
    }

    #[test]
    fn long_running_pod_starts_then_becomes_ready() {
        let b = Behaviour::of(&pod("Always", json!({})), Duration::from_secs(1));
        let t0 = Instant::now();
        let mut t = Track::new("u".into(), t0, 1000);
        let s = t.advance(&b, Duration::from_secs(1), Duration::from_secs(2), t0, 1000);
        assert_eq!(s.stage, Stage::Creating);
        assert_eq!(s.wake, Some(Duration::from_secs(1)));
        let s = t.advance(&b, Duration::from_secs(1), Duration::from_secs(2), t0 + Duration::from_secs(1), 1001);
        assert_eq!(s.stage, Stage::Running { ready: false });
        assert!(s.started);
        let s = t.advance(&b, Duration::from_secs(1), Duration::from_secs(2), t0 + Duration::from_secs(3), 1003);
        assert_eq!(s, Step { stage: Stage::Running { ready: true }, wake: None, started: false });
    }

    #[test]
    fn job_pods_succeed_or_fail() {
        let t0 = Instant::now();
        let b = Behaviour::of(&pod("Never", json!({RUN_DURATION: "2s"})), Duration::from_secs(1));
        let mut t = Track::new("u".into(), t0, 0);
        assert_eq!(t.advance(&b, Duration::ZERO, Duration::ZERO, t0, 0).stage, Stage::Running { ready: true });
        let s = t.advance(&b, Duration::ZERO, Duration::ZERO, t0 + Duration::from_secs(2), 2);
        assert_eq!(s.stage, Stage::Finished { exit_code: 0 });
        let b = Behaviour::of(&pod("Never", json!({EXIT_CODE: "3"})), Duration::ZERO);
        let mut t = Track::new("u".into(), t0, 0);
        assert_eq!(t.advance(&b, Duration::ZERO, Duration::ZERO, t0, 0).stage, Stage::Finished { exit_code: 3 });
    }

    #[test]
    fn crash_loop_restarts_with_backoff() {
        let t0 = Instant::now();
        let b = Behaviour::of(&pod("Always", json!({CRASH_LOOP: "true", RESTART_BACKOFF: "1s"})), Duration::ZERO);
        assert!(!b.ready);
        let mut t = Track::new("u".into(), t0, 0);
        let s = t.advance(&b, Duration::ZERO, Duration::ZERO, t0, 0);
        assert_eq!((s.stage, s.wake, t.restarts), (Stage::BackOff, Some(Duration::from_secs(1)), 0));
        let s = t.advance(&b, Duration::ZERO, Duration::ZERO, t0 + Duration::from_secs(1), 1);
        assert_eq!((s.stage, s.wake, t.restarts), (Stage::BackOff, Some(Duration::from_secs(2)), 1));
        assert_eq!(t.last_exit.map(|e| e.code), Some(1));
    }

    #[test]
    fn on_failure_restarts_only_failures() {
        let b = Behaviour::of(&pod("OnFailure", json!({EXIT_CODE: "2"})), Duration::ZERO);
        assert!(b.restarts(2) && !b.restarts(0));
        assert_eq!(b.backoff_after(0), DEFAULT_BACKOFF);
        assert_eq!(b.backoff_after(10), DEFAULT_BACKOFF * 30);
    }
}
