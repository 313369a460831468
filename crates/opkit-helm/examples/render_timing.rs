//! Times `helm template` rendering of one chart in process, for profiling the engine:
//! `cargo run --release -p opkit-helm --example render_timing -- CHART [REPEATS] [VALUES_FILE...]`
//! prints the median, fastest and slowest of REPEATS renders (default 20), in milliseconds.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(chart) = args.first() else {
        eprintln!("usage: render_timing CHART [REPEATS] [VALUES_FILE...]");
        return ExitCode::from(2);
    };
    let repeats: usize = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(20).max(1);
    let mut options = opkit_helm::TemplateOptions {
        release_name: "rel".into(),
        namespace: "ns1".into(),
        kube_version: Some("1.33.0".into()),
        api_versions: vec!["monitoring.coreos.com/v1".into()],
        ..Default::default()
    };
    for file in args.iter().skip(2) {
        match std::fs::read_to_string(file) {
            Ok(text) => options.values_files.push(text),
            Err(e) => {
                eprintln!("{file}: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let mut samples: Vec<Duration> = Vec::with_capacity(repeats);
    let mut bytes = 0;
    for _ in 0..repeats {
        let start = Instant::now();
        let out = match opkit_helm::template(Path::new(chart), &options) {
            Ok(out) => out,
            Err(e) => format!("Error: {e}\n"),
        };
        samples.push(start.elapsed());
        bytes = out.len();
    }
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{chart}: {bytes} bytes, median {:.2} ms, min {:.2} ms, max {:.2} ms over {repeats} renders",
        ms(samples[repeats / 2]),
        ms(samples[0]),
        ms(samples[repeats - 1])
    );
    ExitCode::SUCCESS
}
