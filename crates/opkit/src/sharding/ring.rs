//! The consistent-hash ring that maps an object's key to one of the live shards: each
//! shard has many points on a 64-bit ring, and a key belongs to the first point at or
//! after its hash. When a shard joins or leaves, only the keys between its points and
//! their neighbours move (about 1/n of them), as in timebertt's sharding.

/// Points per shard: enough that three shards get within a few percent of a third each.
const POINTS_PER_SHARD: usize = 128;

/// A ring over a set of shard IDs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ring {
    /// (point, shard index), sorted by point.
    points: Vec<(u64, usize)>,
    shards: Vec<String>,
}

impl Ring {
    /// A ring over `shards` (order and duplicates do not matter).
    pub(crate) fn new<'a>(shards: impl IntoIterator<Item = &'a str>) -> Ring {
        let mut shards: Vec<String> = shards.into_iter().map(str::to_string).collect();
        shards.sort();
        shards.dedup();
        let mut points = Vec::with_capacity(shards.len() * POINTS_PER_SHARD);
        for (i, shard) in shards.iter().enumerate() {
            for p in 0..POINTS_PER_SHARD {
                points.push((hash(format!("{shard}#{p}").as_bytes()), i));
            }
        }
        points.sort_unstable();
        Ring { points, shards }
    }

    /// The shard `key` belongs to; `None` when the ring is empty.
    pub(crate) fn shard_for(&self, key: &str) -> Option<&str> {
        let h = hash(key.as_bytes());
        let at = self.points.partition_point(|(p, _)| *p < h);
        let (_, shard) = self.points.get(at).or_else(|| self.points.first())?;
        Some(&self.shards[*shard])
    }

    /// Whether `shard` is on the ring.
    pub(crate) fn contains(&self, shard: &str) -> bool {
        self.shards.iter().any(|s| s == shard)
    }
}

/// FNV-1a (64-bit), then a final avalanche (splitmix64's) so that similar keys spread
/// over the whole ring. Written here because a ring needs a hash that is stable across
/// processes and releases, which std's `Hasher`s do not promise.
fn hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn spread(ring: &Ring, keys: usize) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for i in 0..keys {
            *counts.entry(ring.shard_for(&format!("default/object-{i}")).unwrap().to_string()).or_default() += 1;
        }
        counts
    }

    #[test]
    fn keys_spread_evenly_and_only_a_leaving_shards_keys_move() {
        let three = Ring::new(["a", "b", "c"]);
        let counts = spread(&three, 30_000);
        for shard in ["a", "b", "c"] {
            let share = counts[shard] as f64 / 30_000.0;
            assert!((0.25..0.42).contains(&share), "{shard}: {share}");
        }
        let two = Ring::new(["b", "a"]);
        for i in 0..3_000 {
            let key = format!("default/object-{i}");
            let before = three.shard_for(&key).unwrap();
            if before != "c" {
                assert_eq!(two.shard_for(&key), Some(before), "{key} moved though its shard stayed");
            }
        }
        assert!(three.contains("c") && !two.contains("c"));
    }

    #[test]
    fn an_empty_ring_has_no_shard_and_the_hash_is_stable() {
        assert_eq!(Ring::new([]).shard_for("x"), None);
        // Fixed values: replicas of different builds and releases must agree.
        assert_eq!(hash(b"default/object-1"), 0xff65_96e5_19e8_1210);
        assert_eq!(hash(b""), 0xf52a_15e9_a9b5_e89b);
        assert_eq!(Ring::new(["b", "a", "a"]).shards, ["a", "b"]);
    }
}
