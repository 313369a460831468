//! The build script: packs the opkit crates a scaffolded project vendors into the CLI
//! (`build/vendor.rs` says how and why).

#[path = "build/vendor.rs"]
mod vendor;

fn main() {
    vendor::write_packed_sources();
}
