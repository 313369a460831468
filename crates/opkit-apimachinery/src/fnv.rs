//! FNV-1a, the small stable hash Go's `hash/fnv` gives kube: template hashes
//! (`pod-template-hash`, `controller-revision-hash`), cache-busting tags and names derived
//! from paths. Not a security hash.

/// 32-bit FNV-1a of `data`, as Go's `fnv.New32a`.
pub fn fnv32a(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(*b)).wrapping_mul(0x0100_0193))
}

/// 64-bit FNV-1a of `data`, as Go's `fnv.New64a`.
pub fn fnv64a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_gos_hash_fnv() {
        assert_eq!(fnv32a(b""), 0x811c_9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c_292c);
        assert_eq!(fnv64a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv64a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
