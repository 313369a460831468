//! Table printers for workloads: pods, deployments, replicasets, statefulsets,
//! daemonsets, replicationcontrollers, jobs and cronjobs (mirroring
//! `pkg/printers/internalversion/printers.go`, always in wide mode as the server prints).

use serde_json::Value;

use super::Printer;
use super::util::{
    Col, DESC_CONTAINERS, DESC_IMAGES, age, age_col, arr, at, bool_ptr, col, containers, format_label_selector,
    format_labels, i, int, name, name_col, obj, parse_ts, s, selector_string, since, st, wide,
};

/// The pod-template columns of workload controllers.
fn tmpl() -> Vec<Col> {
    vec![wide("Containers", "string", DESC_CONTAINERS), wide("Images", "string", DESC_IMAGES)]
}

/// `a` followed by `b`.
fn with(mut a: Vec<Col>, b: Vec<Col>) -> Vec<Col> {
    a.extend(b);
    a
}

/// The printer of apps/deployments.
pub(crate) fn deployments() -> Printer {
    Printer::of((
        with(
            vec![
                name_col(),
                col("Ready", "string", "Number of the pod with ready state"),
                col(
                    "Up-to-date",
                    "string",
                    "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                ),
                col(
                    "Available",
                    "string",
                    "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                ),
                age_col(),
            ],
            with(tmpl(), vec![wide("Selector", "string", "Label selector for pods.")]),
        ),
        deployment_row,
    ))
}

/// The columns of replica sets and replication controllers.
fn replica_cols() -> Vec<Col> {
    with(
        vec![
            name_col(),
            col("Desired", "integer", "Replicas is the number of desired replicas."),
            col("Current", "integer", "Replicas is the most recently observed number of replicas."),
            col("Ready", "integer", "The number of ready replicas for this replica set."),
            age_col(),
        ],
        with(
            tmpl(),
            vec![wide(
                "Selector",
                "string",
                "Selector is a label query over pods that should match the replica count.",
            )],
        ),
    )
}

/// The printer of apps/replicasets.
pub(crate) fn replicasets() -> Printer {
    Printer::of((replica_cols(), replicaset_row))
}

/// The printer of replicationcontrollers.
pub(crate) fn replicationcontrollers() -> Printer {
    Printer::of((replica_cols(), rc_row))
}

/// The printer of apps/statefulsets.
pub(crate) fn statefulsets() -> Printer {
    Printer::of((
        with(vec![name_col(), col("Ready", "string", "Number of the pod with ready state"), age_col()], tmpl()),
        statefulset_row,
    ))
}

/// The printer of apps/daemonsets.
pub(crate) fn daemonsets() -> Printer {
    Printer::of((
        with(
            vec![
                name_col(),
                col(
                    "Desired",
                    "integer",
                    "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod).",
                ),
                col(
                    "Current",
                    "integer",
                    "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
                ),
                col(
                    "Ready",
                    "integer",
                    "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
                ),
                col("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod"),
                col(
                    "Available",
                    "integer",
                    "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
                ),
                col(
                    "Node Selector",
                    "string",
                    "NodeSelector is a selector which must be true for the pod to fit on a node.",
                ),
                age_col(),
            ],
            with(
                tmpl(),
                vec![wide("Selector", "string", "A label query over pods that are managed by the daemon set.")],
            ),
        ),
        daemonset_row,
    ))
}

/// The printer of batch/jobs.
pub(crate) fn jobs() -> Printer {
    Printer::of((
        with(
            vec![
                name_col(),
                col("Status", "string", "Status of the job."),
                col("Completions", "string", "The number of pods which reached phase Succeeded."),
                col("Duration", "string", "Time required to complete the job."),
                age_col(),
            ],
            with(tmpl(), vec![wide("Selector", "string", "A label query over pods that should match the pod count.")]),
        ),
        job_row,
    ))
}

/// The printer of batch/cronjobs.
pub(crate) fn cronjobs() -> Printer {
    Printer::of((
        with(
            vec![
                name_col(),
                col("Schedule", "string", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
                col(
                    "Timezone",
                    "string",
                    "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones.",
                ),
                col(
                    "Suspend",
                    "boolean",
                    "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.",
                ),
                col("Active", "integer", "A list of pointers to currently running jobs."),
                col(
                    "Last Schedule",
                    "string",
                    "Information when was the last time the job was successfully scheduled.",
                ),
                age_col(),
            ],
            with(tmpl(), vec![wide("Selector", "string", "A label query over pods that should match the pod count.")]),
        ),
        cronjob_row,
    ))
}

/// kube's `hasJobCondition`: the first condition of that type decides.
fn job_condition(o: &Value, ty: &str) -> bool {
    arr(o, "status.conditions").iter().find(|c| s(c, "type") == ty).is_some_and(|c| s(c, "status") == "True")
}

fn template_spec<'a>(o: &'a Value, path: &str) -> Option<&'a Value> {
    at(o, path)
}

fn deployment_row(d: &Value, now: i64) -> Vec<Value> {
    let (names, images) = containers(template_spec(d, "spec.template.spec"));
    let sel = selector_string(at(d, "spec.selector")).unwrap_or_else(|| "<invalid>".into());
    vec![
        name(d),
        st(format!("{}/{}", int(d, "status.readyReplicas", 0), int(d, "spec.replicas", 1))),
        i(int(d, "status.updatedReplicas", 0)),
        i(int(d, "status.availableReplicas", 0)),
        age(d, now),
        names,
        images,
        st(sel),
    ]
}

fn replicaset_row(r: &Value, now: i64) -> Vec<Value> {
    let (names, images) = containers(template_spec(r, "spec.template.spec"));
    vec![
        name(r),
        i(int(r, "spec.replicas", 1)),
        i(int(r, "status.replicas", 0)),
        i(int(r, "status.readyReplicas", 0)),
        age(r, now),
        names,
        images,
        st(format_label_selector(at(r, "spec.selector"))),
    ]
}

fn rc_row(r: &Value, now: i64) -> Vec<Value> {
    let (names, images) = containers(template_spec(r, "spec.template.spec"));
    vec![
        name(r),
        i(int(r, "spec.replicas", 1)),
        i(int(r, "status.replicas", 0)),
        i(int(r, "status.readyReplicas", 0)),
        age(r, now),
        names,
        images,
        st(format_labels(obj(r, "spec.selector"))),
    ]
}

fn statefulset_row(o: &Value, now: i64) -> Vec<Value> {
    let (names, images) = containers(template_spec(o, "spec.template.spec"));
    vec![
        name(o),
        st(format!("{}/{}", int(o, "status.readyReplicas", 0), int(o, "spec.replicas", 1))),
        age(o, now),
        names,
        images,
    ]
}

fn daemonset_row(o: &Value, now: i64) -> Vec<Value> {
    let (names, images) = containers(template_spec(o, "spec.template.spec"));
    vec![
        name(o),
        i(int(o, "status.desiredNumberScheduled", 0)),
        i(int(o, "status.currentNumberScheduled", 0)),
        i(int(o, "status.numberReady", 0)),
        i(int(o, "status.updatedNumberScheduled", 0)),
        i(int(o, "status.numberAvailable", 0)),
        st(format_labels(obj(o, "spec.template.spec.nodeSelector"))),
        age(o, now),
        names,
        images,
        st(format_label_selector(at(o, "spec.selector"))),
    ]
}

fn job_row(j: &Value, now: i64) -> Vec<Value> {
    let succeeded = int(j, "status.succeeded", 0);
    let completions = match at(j, "spec.completions").and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match int(j, "spec.parallelism", 0) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let duration = match (parse_ts(s(j, "status.startTime")), parse_ts(s(j, "status.completionTime"))) {
        (None, _) => String::new(),
        (Some(start), None) => super::human_duration(now - start),
        (Some(start), Some(end)) => super::human_duration(end - start),
    };
    let status = if job_condition(j, "Complete") {
        "Complete"
    } else if job_condition(j, "Failed") {
        "Failed"
    } else if at(j, "metadata.deletionTimestamp").is_some_and(|d| !d.is_null()) {
        "Terminating"
    } else if job_condition(j, "Suspended") {
        "Suspended"
    } else if job_condition(j, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (names, images) = containers(template_spec(j, "spec.template.spec"));
    vec![
        name(j),
        st(status),
        st(completions),
        st(duration),
        age(j, now),
        names,
        images,
        st(format_label_selector(at(j, "spec.selector"))),
    ]
}

fn cronjob_row(c: &Value, now: i64) -> Vec<Value> {
    let last = if at(c, "status.lastScheduleTime").is_some_and(|v| !v.is_null()) {
        since(c, "status.lastScheduleTime", now)
    } else {
        "<none>".into()
    };
    let tz = at(c, "spec.timeZone").and_then(Value::as_str).unwrap_or("<none>");
    let (names, images) = containers(template_spec(c, "spec.jobTemplate.spec.template.spec"));
    vec![
        name(c),
        st(s(c, "spec.schedule")),
        st(tz),
        bool_ptr(at(c, "spec.suspend")),
        i(arr(c, "status.active").len() as i64),
        st(last),
        age(c, now),
        names,
        images,
        st(format_label_selector(at(c, "spec.jobTemplate.spec.selector"))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: i64 = 1_800_000_000;

    fn ts(ago: i64) -> String {
        jiff::Timestamp::from_second(NOW - ago).map(|t| t.to_string()).unwrap_or_default()
    }

    #[test]
    fn deployment_and_job_rows() {
        let d = json!({"metadata": {"name": "web", "creationTimestamp": ts(4 * 3600)},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1"}, {"name": "side", "image": "busybox"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
        assert_eq!(
            deployment_row(&d, NOW),
            vec![
                json!("web"),
                json!("2/3"),
                json!(3),
                json!(2),
                json!("4h"),
                json!("nginx,side"),
                json!("nginx:1,busybox"),
                json!("app=web")
            ]
        );
        let j = json!({"metadata": {"name": "j", "creationTimestamp": ts(60)}, "spec": {"completions": 2, "template": {"spec": {}}},
            "status": {"succeeded": 2, "startTime": ts(50), "completionTime": ts(5), "conditions": [{"type": "Complete", "status": "True"}]}});
        let row = job_row(&j, NOW);
        assert_eq!(row[1..5].to_vec(), vec![json!("Complete"), json!("2/2"), json!("45s"), json!("60s")]);
        assert_eq!(row[7], json!("<none>"));
    }
}
