//! Reliability testing in `cargo test` (issue 32): an operator runs a workload on a
//! fresh control plane, once fault-free to learn what it does, then once per test plan
//! with one fault at one precise point, and each run is judged against the fault-free
//! one. This finds the bugs Sieve finds: an operator that crashes between two writes and
//! never repairs, one that duplicates a create it was told failed, one that gives up on
//! a 409 or a 500, one that writes forever.
//!
//! The operator runs on a runtime of its own, as ServiceAccount
//! `opkit-perturb:operator` (bound to `cluster-admin`): faults touch only its
//! requests, and killing it drops every task it started and every connection and cache
//! it held, as SIGKILL would.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit_testenv::perturb::{PlanClass, Perturber};
//!
//! # async fn f() -> Result<(), opkit_testenv::perturb::PerturbError> {
//! let perturber = Perturber::new(
//!     |client: kube::Client| async move { /* build and run the operator's manager */ let _ = client; },
//!     |client: kube::Client| async move { /* apply a resource, wait for its outcome */ let _ = client; Ok(()) },
//! )
//! .compare::<ConfigMap>()
//! .classes(&[PlanClass::IntermediateState]);
//! let report = perturber.run().await?;
//! assert!(report.findings.is_empty(), "{}", report.render());
//! # Ok(())
//! # }
//! ```

mod operator;
mod oracle;
mod plan;

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::ApiResource;
use kube::{Client, Config, Resource};
use serde::Serialize;

pub use operator::OperatorUnderTest;
use operator::RunningOperator;
pub use oracle::{Convergence, EndState, Lifecycle};
pub use plan::{Plan, PlanClass, plans};

use crate::{Fault, FaultAction, TestEnv, TestEnvError, TracedRequest};

/// The namespace of the operator's ServiceAccount.
pub const OPERATOR_NAMESPACE: &str = "opkit-perturb";
/// The operator's ServiceAccount.
pub const OPERATOR_ACCOUNT: &str = "operator";

/// The user name the operator's requests carry.
pub fn operator_user() -> String {
    format!("system:serviceaccount:{OPERATOR_NAMESPACE}:{OPERATOR_ACCOUNT}")
}

/// Errors that stop a perturbation run (a finding is not one: see [`Finding`]).
#[derive(Debug, thiserror::Error)]
pub enum PerturbError {
    /// The control plane could not be set up.
    #[error(transparent)]
    Env(#[from] TestEnvError),
    /// The operator's runtime could not be built.
    #[error("starting the operator's runtime: {0}")]
    Runtime(#[from] std::io::Error),
    /// The fault-free run did not pass its workload: nothing to compare against.
    #[error("the fault-free run failed: {0}")]
    Learning(String),
    /// The operator could not be started.
    #[error("{0}")]
    Operator(String),
    /// Reading the end state failed.
    #[error("reading the end state: {0}")]
    Kube(#[from] kube::Error),
}

/// What an oracle found wrong in a perturbed run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Oracle {
    /// The workload's own checks failed (its asserts, as a kuttl suite's).
    Workload,
    /// The objects at the end differ from the fault-free run's.
    EndState,
    /// An object was created or deleted a different number of times.
    Lifecycle,
    /// The operator kept writing after the workload.
    Convergence,
}

/// One finding: the plan that caused it (none for the learning run), the oracle that
/// caught it, and what differs.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// The plan; `None` for a finding of the fault-free run itself (a hot loop).
    pub plan: Option<Plan>,
    /// The oracle.
    pub oracle: Oracle,
    /// What differs, one line each.
    pub diff: Vec<String>,
    /// The last lines the operator printed in that run (a process operator's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub operator_log: Vec<String>,
}

/// A whole run: the plans made and run, and the findings.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PerturbReport {
    /// The operator's writes in the learning run.
    pub learned_writes: usize,
    /// Writes of the learning run that changed nothing (pruned from the plans).
    pub pruned_writes: usize,
    /// What differed between the two fault-free runs, left out of every comparison.
    pub masked: Vec<String>,
    /// The plans run.
    pub plans: Vec<Plan>,
    /// What was found.
    pub findings: Vec<Finding>,
}

impl PerturbReport {
    /// The findings' classes, deduplicated: what a test asserts on.
    pub fn found(&self) -> BTreeSet<(Option<PlanClass>, Oracle)> {
        self.findings.iter().map(|f| (f.plan.as_ref().map(|p| p.class), f.oracle)).collect()
    }

    /// A report for people.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{} plans from {} writes ({} pruned as changing nothing; {} fields masked as differing between fault-free runs): {} findings\n",
            self.plans.len(),
            self.learned_writes,
            self.pruned_writes,
            self.masked.len(),
            self.findings.len()
        );
        for f in &self.findings {
            let plan = f.plan.as_ref().map_or_else(|| "the fault-free run".to_string(), Plan::describe);
            out.push_str(&format!("{:?} after {plan}:\n", f.oracle));
            for line in &f.diff {
                out.push_str(&format!("    {line}\n"));
            }
        }
        out
    }
}

type WorkloadFn = Arc<dyn Fn(WorkloadTarget) -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// What a workload runs against: the fresh control plane of one run.
#[derive(Clone)]
pub struct WorkloadTarget {
    /// A client acting as the cluster admin.
    pub client: Client,
    /// A kubeconfig for the admin, for processes (kubectl, a kuttl suite).
    pub kubeconfig: std::path::PathBuf,
}

/// What the fault-free runs established.
#[derive(Debug, Clone)]
pub struct Learning {
    /// The operator's requests in the first run.
    pub trace: Vec<TracedRequest>,
    /// Its end state.
    pub end_state: EndState,
    /// Its create/delete summary.
    pub lifecycle: Lifecycle,
    /// What differed between the two fault-free runs: left out of every comparison.
    pub masks: BTreeSet<String>,
    /// Whether it converged (a finding if not).
    pub convergence: Convergence,
}

/// Runs an operator under perturbations (see the module's text).
#[derive(Clone)]
pub struct Perturber {
    operator: OperatorUnderTest,
    workload: WorkloadFn,
    crds: Vec<CustomResourceDefinition>,
    kinds: Vec<ApiResource>,
    namespace: String,
    classes: Vec<PlanClass>,
    workload_timeout: Duration,
    settle: Duration,
    settle_limit: Duration,
}

impl Perturber {
    /// A perturber of an in-process `operator` (given a client acting as the operator's
    /// identity; it runs until killed) under `workload` (given an admin client: it
    /// applies what a user would and returns once its checks pass, or an error saying
    /// which failed).
    pub fn new<O, OF, W, WF>(operator: O, workload: W) -> Perturber
    where
        O: Fn(Client) -> OF + Send + Sync + 'static,
        OF: Future<Output = ()> + Send + 'static,
        W: Fn(Client) -> WF + Send + Sync + 'static,
        WF: Future<Output = Result<(), String>> + Send + 'static,
    {
        let workload = Arc::new(workload);
        Perturber::of(OperatorUnderTest::in_process(operator), move |target: WorkloadTarget| workload(target.client))
    }

    /// A perturber of any operator (an in-process one, or a process) under `workload`
    /// (given the run's control plane).
    pub fn of<W, WF>(operator: OperatorUnderTest, workload: W) -> Perturber
    where
        W: Fn(WorkloadTarget) -> WF + Send + Sync + 'static,
        WF: Future<Output = Result<(), String>> + Send + 'static,
    {
        Perturber {
            operator,
            workload: Arc::new(move |t| Box::pin(workload(t))),
            crds: Vec::new(),
            kinds: Vec::new(),
            namespace: "default".into(),
            classes: PlanClass::ALL.to_vec(),
            workload_timeout: Duration::from_secs(30),
            settle: Duration::from_millis(500),
            settle_limit: Duration::from_secs(5),
        }
    }

    /// Installs `crd` before the operator starts.
    #[must_use]
    pub fn crd(mut self, crd: CustomResourceDefinition) -> Perturber {
        self.crds.push(crd);
        self
    }

    /// Compares the objects of kind `K` at the end of each run (with none named, every
    /// namespaced kind but Events is compared).
    #[must_use]
    pub fn compare<K: Resource<DynamicType = ()>>(self) -> Perturber {
        self.compare_resource(ApiResource::erase::<K>(&()))
    }

    /// Compares the objects of `resource` at the end of each run.
    #[must_use]
    pub fn compare_resource(mut self, resource: ApiResource) -> Perturber {
        self.kinds.push(resource);
        self
    }

    /// The namespace whose objects are compared (default `default`).
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Perturber {
        self.namespace = namespace.into();
        self
    }

    /// The classes of plans to make (default all).
    #[must_use]
    pub fn classes(mut self, classes: &[PlanClass]) -> Perturber {
        self.classes = classes.to_vec();
        self
    }

    /// How long the workload may take (default 30 s).
    #[must_use]
    pub fn workload_timeout(mut self, limit: Duration) -> Perturber {
        self.workload_timeout = limit;
        self
    }

    /// The operator has converged once it makes no write for `window` (default 500
    /// ms); it fails to if it still writes after `limit` (default 5 s).
    #[must_use]
    pub fn settle(mut self, window: Duration, limit: Duration) -> Perturber {
        self.settle = window;
        self.settle_limit = limit;
        self
    }

    /// The learning run, twice, to find what differs between fault-free runs.
    pub async fn learn(&self) -> Result<Learning, PerturbError> {
        let first = self.run_once(None).await?;
        first.workload.clone().map_err(PerturbError::Learning)?;
        let second = self.run_once(None).await?;
        second.workload.clone().map_err(PerturbError::Learning)?;
        let mut masks = first.end_state.nondeterministic(&second.end_state);
        let (a, b) = (Lifecycle::of(&first.trace), Lifecycle::of(&second.trace));
        masks.extend(a.diff(&b, &BTreeSet::new()).into_iter().filter_map(|l| l.split(':').next().map(String::from)));
        Ok(Learning {
            lifecycle: a,
            trace: first.trace,
            end_state: first.end_state,
            masks,
            convergence: first.convergence,
        })
    }

    /// Runs one plan and judges it against `learning`.
    pub async fn run_plan(&self, learning: &Learning, plan: &Plan) -> Result<Vec<Finding>, PerturbError> {
        let run = self.run_once(Some(plan.fault.clone())).await?;
        let mut findings = Vec::new();
        let mut found = |oracle, diff: Vec<String>| {
            if !diff.is_empty() {
                findings.push(Finding {
                    plan: Some(plan.clone()),
                    oracle,
                    diff,
                    operator_log: run.operator_log.clone(),
                });
            }
        };
        found(Oracle::Workload, run.workload.err().into_iter().collect());
        found(Oracle::EndState, run.end_state.diff(&learning.end_state, &learning.masks));
        found(Oracle::Lifecycle, Lifecycle::of(&run.trace).diff(&learning.lifecycle, &learning.masks));
        if learning.convergence.settled && !run.convergence.settled {
            found(Oracle::Convergence, convergence_lines(&run.convergence));
        }
        Ok(findings)
    }

    /// Learns, then runs only `plan` (a finding's plan file), and reports what was found.
    pub async fn replay(&self, plan: &Plan) -> Result<PerturbReport, PerturbError> {
        let learning = self.learn().await?;
        let findings = self.run_plan(&learning, plan).await?;
        let writes: Vec<&TracedRequest> = learning.trace.iter().filter(|r| r.is_write()).collect();
        Ok(PerturbReport {
            masked: learning.masks.iter().cloned().collect(),
            learned_writes: writes.len(),
            pruned_writes: writes.iter().filter(|w| !w.changed).count(),
            plans: vec![plan.clone()],
            findings,
        })
    }

    /// Learns, makes the plans, runs each, and reports what was found.
    pub async fn run(&self) -> Result<PerturbReport, PerturbError> {
        let learning = self.learn().await?;
        let mut findings = Vec::new();
        if !learning.convergence.settled {
            findings.push(Finding {
                plan: None,
                oracle: Oracle::Convergence,
                diff: convergence_lines(&learning.convergence),
                operator_log: Vec::new(),
            });
        }
        let user = operator_user();
        let writes: Vec<&TracedRequest> = learning.trace.iter().filter(|r| r.is_write()).collect();
        let plans =
            if learning.convergence.settled { plans(&user, &learning.trace, &self.classes) } else { Vec::new() };
        for plan in &plans {
            findings.extend(self.run_plan(&learning, plan).await?);
        }
        Ok(PerturbReport {
            masked: learning.masks.iter().cloned().collect(),
            learned_writes: writes.len(),
            pruned_writes: writes.iter().filter(|w| !w.changed).count(),
            plans,
            findings,
        })
    }

    /// One run on a fresh control plane, with `fault` armed if given.
    async fn run_once(&self, fault: Option<Fault>) -> Result<Run, PerturbError> {
        // The CA publisher writes `kube-root-ca.crt` into every namespace at a time of its
        // own: a race with the end state that no operator causes.
        let env = TestEnv::builder().disable_controller("root-ca-cert-publisher").start().await?;
        env.install_crds(self.crds.clone()).await?;
        let config = operator_config(&env).await?;
        let trace = env.trace_requests(&operator_user());
        let crashes = fault
            .as_ref()
            .is_some_and(|f| matches!(f.action, FaultAction::CrashAfterCommit | FaultAction::CrashWithStaleRestart));
        let injected = fault.map(|f| env.inject_fault(f));
        let mut operator = RunningOperator::start(&self.operator, &config, env.kubeconfig_path())?;
        let target = WorkloadTarget { client: env.client(), kubeconfig: env.kubeconfig_path().to_path_buf() };
        let workload = tokio::time::timeout(self.workload_timeout, (self.workload)(target));
        tokio::pin!(workload);
        let mut restarted = false;
        let workload = loop {
            tokio::select! {
                result = &mut workload => break result.unwrap_or_else(|_| {
                    Err(format!("the workload did not finish within {:?}", self.workload_timeout))
                }),
                () = crash_point(injected.as_ref(), crashes && !restarted) => {
                    operator.kill().await;
                    operator = RunningOperator::start(&self.operator, &config, env.kubeconfig_path())?;
                    restarted = true;
                }
            }
        };
        let mut convergence = Convergence::wait(&trace, self.settle, self.settle_limit).await;
        let kinds = match self.kinds.is_empty() {
            true => EndState::discover_kinds(&env.client()).await?,
            false => self.kinds.clone(),
        };
        if !convergence.settled {
            // Which fields keep changing: the state before and after its next writes.
            let before = EndState::read(&env.client(), &kinds, &self.namespace).await?;
            let writes = oracle::count_writes(&trace);
            let _ = tokio::time::timeout(self.settle, async {
                while oracle::count_writes(&trace) < writes + 2 {
                    trace.next_request().await;
                }
            })
            .await;
            let after = EndState::read(&env.client(), &kinds, &self.namespace).await?;
            convergence.changing = after.diff(&before, &BTreeSet::new());
        }
        let operator_log = operator.kill().await;
        let end_state = EndState::read(&env.client(), &kinds, &self.namespace).await?;
        Ok(Run { workload, end_state, trace: trace.requests(), convergence, operator_log })
    }
}

fn convergence_lines(c: &Convergence) -> Vec<String> {
    let mut lines: Vec<String> = c
        .last_writes
        .iter()
        .map(|(write, (n, no_op))| format!("{write}: {n} writes in the last window, {no_op} of them changing nothing"))
        .collect();
    if lines.is_empty() {
        lines.push("the operator kept writing after the workload".into());
    }
    lines.extend(c.changing.iter().map(|change| format!("keeps changing: {change}")));
    lines
}

/// Resolves when the armed crash fault fires; never if there is none (or it was used).
async fn crash_point(fault: Option<&crate::InjectedFault>, armed: bool) {
    match fault {
        Some(fault) if armed => fault.wait_fired().await,
        _ => std::future::pending().await,
    }
}

/// One run's observations.
struct Run {
    workload: Result<(), String>,
    end_state: EndState,
    trace: Vec<TracedRequest>,
    convergence: Convergence,
    /// The last lines a process operator printed (none for an in-process one).
    operator_log: Vec<String>,
}

/// The operator's client configuration: its ServiceAccount, bound to `cluster-admin`.
async fn operator_config(env: &TestEnv) -> Result<Config, TestEnvError> {
    env.cluster_admin_service_account_config(OPERATOR_NAMESPACE, OPERATOR_ACCOUNT).await
}
