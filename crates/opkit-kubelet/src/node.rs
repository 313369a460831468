//! The simulated Nodes a kubelet serves: the annotation that marks them, their names and
//! their InternalIPs (the node controller registers them by the same rules).

use k8s_openapi::api::core::v1::Node;

/// The annotation marking a Node as simulated by opkit (its kubelet is opkit's, which
/// runs the pods whose images are loaded and simulates the others).
pub const SIMULATED_ANNOTATION: &str = "opkit.dev/simulated-node";

/// Whether `node` is one opkit simulates.
pub fn is_simulated(node: &Node) -> bool {
    node.metadata.annotations.as_ref().and_then(|a| a.get(SIMULATED_ANNOTATION)).is_some_and(|v| v == "true")
}

/// The name of the `index`-th simulated node.
pub fn node_name(index: usize) -> String {
    format!("opkit-worker-{index}")
}

/// The index of a node named like [`node_name`], if it is one.
pub fn node_index(name: &str) -> Option<usize> {
    name.strip_prefix("opkit-worker-")?.parse().ok()
}

/// The InternalIP of a node: `10.0.0.<index+2>` for numbered nodes, else a stable address
/// in `10.0.1.0/24` derived from the name. Only data: nothing ever contacts it.
pub fn internal_ip(name: &str) -> String {
    match node_index(name) {
        Some(i) => format!("10.0.{}.{}", i / 250, i % 250 + 2),
        None => {
            let h = name.bytes().fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
            format!("10.0.255.{}", h % 250 + 2)
        }
    }
}
