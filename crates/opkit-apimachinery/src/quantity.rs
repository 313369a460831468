//! Resource quantities (`k8s.io/apimachinery/pkg/api/resource`): `"100m"`, `"1.5"`,
//! `"128Mi"`, `"1G"`, `"1e3"`, read as whole milli-units (`"100m"` cpu is 100, `"1Ki"` is
//! 1 024 000). k8s-openapi's `Quantity` only carries the string, and kube has no parser.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Parses a Kubernetes quantity (`"100m"`, `"1.5"`, `"128Mi"`, `"1G"`, `"1e3"`) into
/// milli-units, rounding up. Returns `None` when it is not a quantity.
pub fn parse_milli(q: &str) -> Option<i128> {
    let q = q.trim();
    let (sign, q) = match q.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, q.strip_prefix('+').unwrap_or(q)),
    };
    let end = q.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(q.len());
    let (num, suffix) = q.split_at(end);
    if num.is_empty() || num == "." {
        return None;
    }
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if frac_part.contains('.') {
        return None;
    }
    // The number as a fraction digits / 10^scale.
    let digits: String = format!("{int_part}{frac_part}");
    let mut value: i128 = if digits.is_empty() { 0 } else { digits.parse().ok()? };
    let mut scale: i32 = i32::try_from(frac_part.len()).ok()?;
    // Multiply by the suffix: (binary multiplier, decimal exponent).
    let (mult, exp): (i128, i32) = match suffix {
        "" => (1, 0),
        "n" => (1, -9),
        "u" => (1, -6),
        "m" => (1, -3),
        "k" => (1, 3),
        "M" => (1, 6),
        "G" => (1, 9),
        "T" => (1, 12),
        "P" => (1, 15),
        "E" => (1, 18),
        "Ki" => (1 << 10, 0),
        "Mi" => (1 << 20, 0),
        "Gi" => (1 << 30, 0),
        "Ti" => (1 << 40, 0),
        "Pi" => (1 << 50, 0),
        "Ei" => (1 << 60, 0),
        s if s.starts_with(['e', 'E']) => (1, s[1..].parse().ok()?),
        _ => return None,
    };
    value = value.checked_mul(mult)?;
    // Milli-units: one more factor of 10^3.
    scale -= exp + 3;
    if scale <= 0 {
        let factor = 10i128.checked_pow(u32::try_from(-scale).ok()?)?;
        Some(sign * value.checked_mul(factor)?)
    } else {
        let divisor = 10i128.checked_pow(u32::try_from(scale).ok()?)?;
        Some(sign * ((value + divisor - 1) / divisor))
    }
}

/// The value of a quantity in milli-units, `None` when it is not a quantity.
pub fn milli(q: &Quantity) -> Option<i128> {
    parse_milli(&q.0)
}

/// Formats milli-units as kube's `Quantity.String()` prints a canonical quantity: binary
/// suffixes (`Ki` ... `Ei`) for a `binary` whole value that is a multiple of 1024, else
/// the largest decimal suffix (`k` ... `E`) that keeps the mantissa whole, `m` for
/// fractions (`1500m`, `2`, `1M`, `128Mi`).
pub fn format_milli(milli: i128, binary: bool) -> String {
    let sign = if milli < 0 { "-" } else { "" };
    let milli = milli.unsigned_abs();
    if !milli.is_multiple_of(1000) {
        return format!("{sign}{milli}m");
    }
    let whole = milli / 1000;
    if whole == 0 {
        return "0".to_string();
    }
    if binary && whole >= 1024 {
        const BINARY: [(&str, u32); 6] = [("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)];
        if let Some((suffix, shift)) = BINARY.iter().find(|(_, shift)| whole.is_multiple_of(1u128 << shift)) {
            return format!("{sign}{}{suffix}", whole >> shift);
        }
        return format!("{sign}{whole}");
    }
    const DECIMAL: [(&str, u32); 6] = [("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3)];
    match DECIMAL.iter().find(|(_, exp)| whole.is_multiple_of(10u128.pow(*exp))) {
        Some((suffix, exp)) => format!("{sign}{}{suffix}", whole / 10u128.pow(*exp)),
        None => format!("{sign}{whole}"),
    }
}

/// A quantity as kube prints it after parsing (`"2000m"` is `"2"`, `"1024Ki"` is
/// `"1Mi"`), `None` when it is not a quantity.
pub fn canonical(q: &str) -> Option<String> {
    Some(format_milli(parse_milli(q)?, q.trim_end().ends_with('i')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_canonically() {
        assert_eq!(canonical("2000m").as_deref(), Some("2"));
        assert_eq!(canonical("1500m").as_deref(), Some("1500m"));
        assert_eq!(canonical("0.5").as_deref(), Some("500m"));
        assert_eq!(canonical("1024Ki").as_deref(), Some("1Mi"));
        assert_eq!(canonical("1536Mi").as_deref(), Some("1536Mi"));
        assert_eq!(canonical("1000000").as_deref(), Some("1M"));
        assert_eq!(canonical("0").as_deref(), Some("0"));
        assert_eq!(canonical("3").as_deref(), Some("3"));
        assert_eq!(format_milli(1_073_741_824_000, true), "1Gi");
        assert_eq!(canonical("x"), None);
    }

    #[test]
    fn parses_quantities() {
        assert_eq!(parse_milli("100m"), Some(100));
        assert_eq!(parse_milli("1"), Some(1000));
        assert_eq!(parse_milli("0.5"), Some(500));
        assert_eq!(parse_milli("1Ki"), Some(1_024_000));
        assert_eq!(parse_milli("32Gi"), Some(32 * (1i128 << 30) * 1000));
        assert_eq!(parse_milli("1G"), Some(1_000_000_000_000));
        assert_eq!(parse_milli("1e3"), Some(1_000_000));
        assert_eq!(parse_milli("1n"), Some(1), "rounds up");
        assert_eq!(parse_milli("abc"), None);
        assert_eq!(parse_milli("1Qi"), None);
        assert_eq!(parse_milli(""), None);
    }

    #[test]
    fn signs_exponents_and_typed_quantities() {
        assert_eq!(parse_milli("-1"), Some(-1000));
        assert_eq!(parse_milli("+2k"), Some(2_000_000));
        assert_eq!(parse_milli("1E-3"), Some(1));
        assert_eq!(parse_milli("1.5Gi"), Some(3 * (1i128 << 29) * 1000));
        assert_eq!(parse_milli("1.2.3"), None);
        assert_eq!(parse_milli("."), None);
        assert_eq!(milli(&Quantity("250m".into())), Some(250));
        assert_eq!(milli(&Quantity("lots".into())), None);
    }
}
