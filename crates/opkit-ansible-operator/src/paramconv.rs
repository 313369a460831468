//! Snake-casing of a custom resource's spec keys into Ansible extra vars, with
//! operator-sdk's exact rules (`internal/ansible/paramconv`): `sizeK8sBuckets` is
//! `size_k8s_buckets`, a leading capital gives a leading underscore
//! (`ThisIs` → `_this_is`), and `HTTP`, `URL` and `IP` (and their plurals) are words of
//! their own (`egressIPs` → `egress_ips`).

use serde_json::{Map, Value};

/// The words kept whole, as operator-sdk's `wordMapping` (keys lower case).
const SPECIAL_WORDS: &[(&str, &str)] = &[("http", "HTTP"), ("url", "URL"), ("ip", "IP")];

/// Converts every key of `spec`, recursively (maps inside lists too), to snake case.
pub(crate) fn map_to_snake(spec: &Map<String, Value>) -> Map<String, Value> {
    spec.iter().map(|(k, v)| (to_snake(k), value_to_snake(v))).collect()
}

fn value_to_snake(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(map_to_snake(map)),
        Value::Array(items) => Value::Array(items.iter().map(value_to_snake).collect()),
        other => other.clone(),
    }
}

/// operator-sdk's `ToSnake`.
pub(crate) fn to_snake(key: &str) -> String {
    let spaced = add_word_boundaries_to_numbers(key);
    let trimmed = spaced.trim_matches(' ');
    let Some(first) = trimmed.chars().next() else { return String::new() };
    let prefix = if first.is_ascii_uppercase() { "_" } else { "" };
    let s: Vec<char> = isolate_special_words(trimmed).chars().collect();
    let mut bits: Vec<String> = Vec::new();
    let mut n = String::new();
    let mut i_real: i64 = -1;
    for (i, &v) in s.iter().enumerate() {
        i_real += 1;
        let next_case_changed = s.get(i + 1).is_some_and(|&next| {
            (v.is_ascii_uppercase() && next.is_ascii_lowercase())
                || (v.is_ascii_lowercase() && next.is_ascii_uppercase())
        });
        if i_real > 0 && n.chars().last().is_some_and(|c| c != '_') && next_case_changed {
            if v.is_ascii_uppercase() {
                bits.push(n.to_lowercase());
                n = v.to_string();
                i_real = 0;
            } else {
                n.push(v);
                bits.push(n.to_lowercase());
                n.clear();
                i_real = -1;
            }
        } else if matches!(v, ' ' | '_' | '-') {
            bits.push(n.to_lowercase());
            n.clear();
            i_real = -1;
        } else {
            n.push(v);
        }
    }
    bits.push(n.to_lowercase());
    let joined = bits.join("_");
    if SPECIAL_WORDS.iter().any(|(lower, _)| *lower == bits[0]) { joined } else { format!("{prefix}{joined}") }
}

/// The regular expression `([a-zA-Z])(\d+)([a-zA-Z](\d+))` replaced by `$1 $2 $3`:
/// `a1b2` becomes `a 1 b2`.
fn add_word_boundaries_to_numbers(s: &str) -> String {
    let c: Vec<char> = s.chars().collect();
    let digits_from = |at: usize| c[at..].iter().take_while(|ch| ch.is_ascii_digit()).count();
    let mut out = String::with_capacity(s.len() + 4);
    let mut i = 0;
    while i < c.len() {
        if c[i].is_ascii_alphabetic() {
            let d1 = digits_from(i + 1);
            let letter = i + 1 + d1;
            if d1 > 0 && letter < c.len() && c[letter].is_ascii_alphabetic() {
                let d2 = digits_from(letter + 1);
                if d2 > 0 {
                    out.push(c[i]);
                    out.push(' ');
                    out.extend(&c[i + 1..letter]);
                    out.push(' ');
                    out.extend(&c[letter..=letter + d2]);
                    i = letter + 1 + d2;
                    continue;
                }
            }
        }
        out.push(c[i]);
        i += 1;
    }
    out
}

/// operator-sdk's `preprocessWordMapping`: the first `HTTP`, `URL` or `IP` (or its
/// plural, capitalised `S`) gets underscores around it.
fn isolate_special_words(value: &str) -> String {
    let mut value = value.to_string();
    for (_, word) in SPECIAL_WORDS {
        let Some(idx) = value.find(word) else { continue };
        let end = idx + word.len();
        value = if end == value.len() {
            format!("{}_{}", &value[..idx], &value[idx..])
        } else if value.as_bytes()[end] == b's' {
            if end == value.len() - 1 {
                format!("{}_{}S", &value[..idx], &value[idx..end])
            } else if idx == 0 {
                format!("{}S_{}", &value[..end], &value[end + 1..])
            } else {
                format!("{}_{}S_{}", &value[..idx], &value[idx..end], &value[end + 1..])
            }
        } else if idx == 0 {
            format!("{}_{}", &value[..end], &value[end..])
        } else {
            format!("{}_{}_{}", &value[..idx], &value[idx..end], &value[end..])
        };
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn operator_sdk_cases() {
        for (input, want) in [
            ("var", "var"),
            ("888", "888"),
            ("k8s_var", "k8s_var"),
            ("_k8s_var", "_k8s_var"),
            ("k8s var", "k8s_var"),
            ("ThisShouldHaveUnderscores", "_this_should_have_underscores"),
            ("sizeK8sBuckets", "size_k8s_buckets"),
            ("_CanYou_Handle_mixedVars", "_can_you_handle_mixed_vars"),
            ("this_should_be_a_noop", "this_should_be_a_noop"),
            ("egressIPs", "egress_ips"),
            ("egressIPsEgress", "egress_ips_egress"),
            ("egressIPsegress", "egress_ips_egress"),
            ("IPsegress", "_ips_egress"),
            ("egressIP", "egress_ip"),
            ("egressIPEgress", "egress_ip_egress"),
            ("egressIPegress", "egress_ip_egress"),
            ("URLegressIPEgressHTTP", "url_egress_ip_egress_http"),
            ("URLsegressIPsEgressHTTPs", "_urls_egress_ips_egress_https"),
            ("size", "size"),
            ("containerPort", "container_port"),
        ] {
            assert_eq!(to_snake(input), want, "{input}");
        }
    }

    #[test]
    fn nested_maps_and_lists_are_converted() {
        let spec = json!({"sizeK8s": 1, "nestedMap": {"innerKey": [{"deepKey": "keepValueCase"}]}});
        let Value::Object(spec) = spec else { unreachable!() };
        assert_eq!(
            Value::Object(map_to_snake(&spec)),
            json!({"size_k8s": 1, "nested_map": {"inner_key": [{"deep_key": "keepValueCase"}]}})
        );
    }
}
