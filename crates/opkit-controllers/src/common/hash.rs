//! Template hashes as kube computes them: 32-bit FNV-1a rendered with apimachinery's
//! `rand.SafeEncodeString` (the `pod-template-hash` and `controller-revision-hash` labels).

pub(crate) use opkit_apimachinery::fnv::fnv32a;

/// Renders a hash like apimachinery's `rand.SafeEncodeString` of its decimal form (no
/// vowels, no confusable characters).
pub(crate) fn safe_encode(hash: u32) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    hash.to_string().bytes().map(|b| char::from(ALPHANUMS[usize::from(b) % ALPHANUMS.len()])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_stable_and_safe() {
        let s = safe_encode(fnv32a(b"template"));
        assert!(s.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
        assert_eq!(s, safe_encode(fnv32a(b"template")));
    }
}
