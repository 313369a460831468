//! Times `helm template` rendering of one chart in process, for profiling the engine:
//!
//! ```sh
//! cargo run --release -p opkit-helm --example render_timing -- CHART [-r REPEATS] [-f VALUES]... \
//!     [--include-crds] [--skip-tests] [--print]
//! ```
//!
//! renders as `helm template rel CHART --namespace ns1 --kube-version 1.33.0 --api-versions
//! monitoring.coreos.com/v1` (the corpus's command) REPEATS times (default 20) and prints the
//! median, fastest and slowest render in milliseconds; `--print` prints the output (or
//! `Error: ...`) on standard output and the timing on standard error.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut chart = None;
    let mut repeats = 20usize;
    let mut print = false;
    let mut options = opkit_helm::TemplateOptions {
        release_name: "rel".into(),
        namespace: "ns1".into(),
        kube_version: Some("1.33.0".into()),
        api_versions: vec!["monitoring.coreos.com/v1".into()],
        ..Default::default()
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-r" => repeats = args.next().and_then(|r| r.parse().ok()).unwrap_or(repeats).max(1),
            "-f" => {
                let file = args.next().unwrap_or_default();
                match std::fs::read_to_string(&file) {
                    Ok(text) => options.values_files.push(text),
                    Err(e) => {
                        eprintln!("{file}: {e}");
                        return ExitCode::from(2);
                    }
                }
            }
            "--include-crds" => options.include_crds = true,
            "--skip-tests" => options.skip_tests = true,
            "--print" => print = true,
            _ => chart = Some(arg),
        }
    }
    let Some(chart) = chart else {
        eprintln!("usage: render_timing CHART [-r REPEATS] [-f VALUES]... [--include-crds] [--skip-tests] [--print]");
        return ExitCode::from(2);
    };
    let mut samples: Vec<Duration> = Vec::with_capacity(repeats);
    let mut out = String::new();
    for _ in 0..repeats {
        let start = Instant::now();
        out = match opkit_helm::template(Path::new(&chart), &options) {
            Ok(out) => out,
            Err(e) => format!("Error: {e}\n"),
        };
        samples.push(start.elapsed());
    }
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let timing = format!(
        "{chart}: {} bytes, median {:.2} ms, min {:.2} ms, max {:.2} ms over {repeats} renders",
        out.len(),
        ms(samples[repeats / 2]),
        ms(samples[0]),
        ms(samples[repeats - 1])
    );
    if print {
        print!("{out}");
        eprintln!("{timing}");
    } else {
        println!("{timing}");
    }
    ExitCode::SUCCESS
}
