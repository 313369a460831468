//! Running real kubectl binaries (1.27 to 1.33, found next to the `kubectl` on PATH)
//! against a TestEnv: shared by the kubectl suites.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use opkit_testenv::TestEnv;

/// The versioned kubectl binaries sit next to the real `kubectl` on PATH.
pub(crate) fn kubectl_binary(version: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|d| d.join("kubectl")).find(|c| c.exists()))
        .expect("kubectl must be on PATH");
    let real = std::fs::canonicalize(&on_path).expect("resolve kubectl");
    let versioned = real.with_file_name(format!("kubectl.{version}"));
    assert!(versioned.exists(), "{} not found", versioned.display());
    versioned
}

pub(crate) struct Kubectl {
    bin: PathBuf,
    /// The kubeconfig kubectl uses.
    pub kubeconfig: PathBuf,
}

impl Kubectl {
    pub(crate) fn new(version: &str, env: &TestEnv) -> Self {
        Kubectl { bin: kubectl_binary(version), kubeconfig: env.kubeconfig_path().to_path_buf() }
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.kubeconfig.parent().unwrap_or(Path::new("/tmp")))
            .args(["--request-timeout=20s"])
            .args(args);
        c
    }

    pub(crate) fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn kubectl");
        if let Some(input) = stdin {
            child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write stdin");
        } else {
            drop(child.stdin.take());
        }
        child.wait_with_output().expect("kubectl output")
    }

    /// Runs and requires success; returns stdout.
    pub(crate) fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.run(args, stdin);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "kubectl {args:?} failed\nstdout: {stdout}\nstderr: {stderr}");
        stdout
    }

    /// Runs and requires failure; returns stderr.
    pub(crate) fn fails(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.run(args, stdin);
        assert!(
            !out.status.success(),
            "kubectl {args:?} unexpectedly succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

/// Reads lines of a long-running command on a thread so the test can wait with a timeout.
pub(crate) fn line_reader(child: &mut std::process::Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

pub(crate) fn wait_line(rx: &mpsc::Receiver<String>, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if pred(&l) => return l,
            Ok(_) => continue,
            Err(_) => panic!("timed out waiting for {what}"),
        }
    }
}

/// The FlightTicket CRD (short name `ft`, printer columns) the kubectl suites install.
pub(crate) const FLIGHT_TICKET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: flighttickets.flights.com
spec:
  group: flights.com
  scope: Namespaced
  names:
    plural: flighttickets
    singular: flightticket
    kind: FlightTicket
    shortNames: [ft]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: From, type: string, jsonPath: .spec.from}
    - {name: To, type: string, jsonPath: .spec.to}
    - {name: Number, type: integer, jsonPath: .spec.number}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              from: {type: string}
              to: {type: string}
              number: {type: integer, minimum: 1, maximum: 10}
"#;
