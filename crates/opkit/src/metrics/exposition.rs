//! The Prometheus text format 0.0.4 written from prometheus-client's OpenMetrics output:
//! what `/metrics` serves to a scraper that does not ask for OpenMetrics.

/// Rewrites OpenMetrics text as Prometheus text format 0.0.4: counter families are
/// named with their `_total` suffix, `info` becomes a gauge named `<name>_info`,
/// `unknown` becomes `untyped`, and `# UNIT`, `# EOF` and exemplars are dropped.
pub fn openmetrics_to_prometheus(om: &str) -> String {
    // First pass: the declared type of every family.
    let mut types: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for line in om.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ")
            && let Some((name, ty)) = rest.split_once(' ')
        {
            types.insert(name, ty);
        }
    }
    let mut out = String::with_capacity(om.len());
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some((kind, rest)) = line
            .strip_prefix("# HELP ")
            .map(|r| ("HELP", r))
            .or_else(|| line.strip_prefix("# TYPE ").map(|r| ("TYPE", r)))
        {
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            let ty = types.get(name).copied().unwrap_or("");
            let (name, suffix) = match ty {
                "counter" if !name.ends_with("_total") => (name, "_total"),
                "info" => (name, "_info"),
                _ => (name, ""),
            };
            let tail = match kind {
                "TYPE" => match tail {
                    "info" => "gauge",
                    "unknown" => "untyped",
                    t => t,
                },
                // prometheus-client appends a period to every help text; drop it again.
                _ => tail.strip_suffix('.').unwrap_or(tail),
            };
            out.push_str("# ");
            out.push_str(kind);
            out.push(' ');
            out.push_str(name);
            out.push_str(suffix);
            out.push(' ');
            out.push_str(tail);
            out.push('\n');
            continue;
        }
        if line.starts_with('#') {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        push_sample(&mut out, strip_exemplar(line));
    }
    out
}

/// Appends a sample line, moving a histogram bucket's leading `le` label to the end
/// of its label set, where client_golang puts it.
fn push_sample(out: &mut String, line: &str) {
    if let Some((name, rest)) = line.split_once("{le=\"")
        && name.ends_with("_bucket")
        && let Some((le, rest)) = rest.split_once('"')
        && let Some(rest) = rest.strip_prefix(',')
    {
        // `rest` is `<other labels>} <value>`; label values of buckets never hold `}`
        // before the closing brace of the set when written by prometheus-client, but be
        // safe and only rewrite when the set closes with `"} `.
        if let Some((others, value)) = rest.split_once("\"} ") {
            out.push_str(name);
            out.push('{');
            out.push_str(others);
            out.push_str("\",le=\"");
            out.push_str(le);
            out.push_str("\"} ");
            out.push_str(value);
            out.push('\n');
            return;
        }
    }
    out.push_str(line);
    out.push('\n');
}

/// A sample line without its trailing ` # {...} value` exemplar.
fn strip_exemplar(line: &str) -> &str {
    // Skip the label set (label values may contain '#', quotes are backslash-escaped).
    let bytes = line.as_bytes();
    let mut i = 0;
    let mut in_labels = false;
    let mut in_quotes = false;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if in_quotes => i += 1,
            b'"' if in_labels => in_quotes = !in_quotes,
            b'{' if !in_quotes => in_labels = true,
            b'}' if !in_quotes => in_labels = false,
            b'#' if !in_labels => return line[..i].trim_end(),
            _ => {}
        }
        i += 1;
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_handles_exemplars_info_and_units() {
        let om = "# HELP a_seconds A.\n# TYPE a_seconds counter\n# UNIT a_seconds seconds\n\
                  a_seconds_total{x=\"#}\\\"\"} 1 # {trace=\"1\"} 1.0\n\
                  # HELP v Version.\n# TYPE v info\nv_info{version=\"1\"} 1\n\
                  # TYPE u unknown\nu 3\n\
                  # TYPE h histogram\nh_bucket{le=\"1.0\",a=\"x\"} 2\nh_count{a=\"x\"} 2\n# EOF\n";
        let got = openmetrics_to_prometheus(om);
        assert_eq!(
            got,
            "# HELP a_seconds_total A\n# TYPE a_seconds_total counter\n\
             a_seconds_total{x=\"#}\\\"\"} 1\n\
             # HELP v_info Version\n# TYPE v_info gauge\nv_info{version=\"1\"} 1\n\
             # TYPE u untyped\nu 3\n\
             # TYPE h histogram\nh_bucket{a=\"x\",le=\"1.0\"} 2\nh_count{a=\"x\"} 2\n"
        );
    }
}
