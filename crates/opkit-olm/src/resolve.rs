//! Resolution over a catalog, as OLM's resolver walks a channel: the bundle to install
//! first (the channel's head, or `startingCSV`), the next upgrade of an installed bundle
//! (one step: the entry that `replaces` it, `skips` it or whose `skipRange` holds its
//! version; the newest of them when several do), and the dependencies of a bundle
//! (`olm.gvk.required` and `olm.package.required`), resolved from the catalog or reported.

use std::collections::BTreeSet;

pub use crate::fbc::heads;
use crate::fbc::{Bundle, Catalog, Channel, Gvk};
use crate::semver_range::{Range, parse_version};

/// Why a subscription cannot be resolved (OLM's `ResolutionFailed` message).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResolutionError {
    /// The package is not in the catalog.
    #[error("no operators found in package {package} in the catalog referenced by subscription {subscription}")]
    NoPackage {
        /// The package.
        package: String,
        /// The subscription.
        subscription: String,
    },
    /// The channel is not in the package (or none was given and there is no default).
    #[error(
        "no operators found in channel {channel} of package {package} in the catalog referenced by subscription {subscription}"
    )]
    NoChannel {
        /// The package.
        package: String,
        /// The channel.
        channel: String,
        /// The subscription.
        subscription: String,
    },
    /// The channel has no single head.
    #[error("channel {channel} of package {package} has no single head")]
    NoHead {
        /// The package.
        package: String,
        /// The channel.
        channel: String,
    },
    /// `startingCSV` is not in the channel.
    #[error(
        "no operators found with name {csv} in channel {channel} of package {package} in the catalog referenced by subscription {subscription}"
    )]
    NoStartingCsv {
        /// The CSV.
        csv: String,
        /// The package.
        package: String,
        /// The channel.
        channel: String,
        /// The subscription.
        subscription: String,
    },
    /// A required API is provided by nothing.
    #[error("constraints not satisfiable: bundle {bundle} requires an operator providing an API with group: {}, version: {}, kind: {}, and no operator in the catalog provides it", gvk.group, gvk.version, gvk.kind)]
    MissingApi {
        /// The bundle.
        bundle: String,
        /// The API.
        gvk: Gvk,
    },
    /// A required package is provided by nothing.
    #[error(
        "constraints not satisfiable: bundle {bundle} requires an operator from package {package} with version in range {range}, and none is in the catalog"
    )]
    MissingPackage {
        /// The bundle.
        bundle: String,
        /// The package.
        package: String,
        /// The range.
        range: String,
    },
}

/// The channel a subscription follows: `channel`, else the package's default.
pub fn channel<'a>(
    catalog: &'a Catalog,
    package: &str,
    channel: Option<&str>,
    subscription: &str,
) -> Result<&'a Channel, ResolutionError> {
    let pkg = catalog
        .package(package)
        .ok_or_else(|| ResolutionError::NoPackage { package: package.into(), subscription: subscription.into() })?;
    let name = channel.or(pkg.default_channel.as_deref()).unwrap_or_default();
    catalog.channel(package, name).ok_or_else(|| ResolutionError::NoChannel {
        package: package.into(),
        channel: name.into(),
        subscription: subscription.into(),
    })
}

/// The bundle a new subscription installs: `starting_csv`, else the channel's head.
pub fn first<'a>(
    catalog: &'a Catalog,
    channel: &'a Channel,
    starting_csv: Option<&str>,
    subscription: &str,
) -> Result<&'a Bundle, ResolutionError> {
    let name = match starting_csv {
        Some(csv) => {
            if !channel.entries.iter().any(|e| e.name == csv) {
                return Err(ResolutionError::NoStartingCsv {
                    csv: csv.into(),
                    package: channel.package.clone(),
                    channel: channel.name.clone(),
                    subscription: subscription.into(),
                });
            }
            csv.to_string()
        }
        None => match heads(catalog, channel).as_slice() {
            [head] => head.name.clone(),
            _ => {
                return Err(ResolutionError::NoHead {
                    package: channel.package.clone(),
                    channel: channel.name.clone(),
                });
            }
        },
    };
    catalog.bundle(&channel.package, &name).ok_or_else(|| ResolutionError::NoStartingCsv {
        csv: name,
        package: channel.package.clone(),
        channel: channel.name.clone(),
        subscription: subscription.into(),
    })
}

/// The next bundle after `installed` in `channel`, one step along the graph; `None` when
/// it is the newest.
pub fn next<'a>(catalog: &'a Catalog, channel: &'a Channel, installed: &str) -> Option<&'a Bundle> {
    let installed_version = catalog.bundle(&channel.package, installed).and_then(Bundle::version);
    let version_of = |name: &str| {
        catalog.bundle(&channel.package, name).and_then(Bundle::version).or_else(|| parse_version("0.0.0"))
    };
    channel
        .entries
        .iter()
        .filter(|e| e.name != installed)
        .filter(|e| {
            e.replaces.as_deref() == Some(installed)
                || e.skips.iter().any(|s| s == installed)
                || e.skip_range
                    .as_deref()
                    .and_then(Range::parse)
                    .zip(installed_version.as_ref())
                    .is_some_and(|(r, v)| r.contains(v))
        })
        .max_by(|a, b| version_of(&a.name).cmp(&version_of(&b.name)))
        .and_then(|e| catalog.bundle(&channel.package, &e.name))
}

/// The bundles `bundle` needs besides itself: for each required API not in `served`, the
/// head of the default channel of a package providing it; for each required package,
/// its default channel's head when its version is in range.
pub fn dependencies<'a>(
    catalog: &'a Catalog,
    bundle: &'a Bundle,
    served: &BTreeSet<Gvk>,
) -> Result<Vec<&'a Bundle>, ResolutionError> {
    let mut needed: Vec<&Bundle> = Vec::new();
    let default_head = |package: &str| -> Option<&'a Bundle> {
        let channel = channel(catalog, package, None, "").ok()?;
        first(catalog, channel, None, "").ok()
    };
    for gvk in bundle.required_gvks() {
        if served.contains(&gvk) || bundle.provided_gvks().contains(&gvk) {
            continue;
        }
        if needed.iter().any(|b| b.provided_gvks().contains(&gvk)) {
            continue;
        }
        let provider = catalog
            .packages
            .iter()
            .filter_map(|p| default_head(&p.name))
            .find(|head| head.provided_gvks().contains(&gvk))
            .ok_or_else(|| ResolutionError::MissingApi { bundle: bundle.name.clone(), gvk: gvk.clone() })?;
        needed.push(provider);
    }
    for (package, range) in bundle.required_packages() {
        let found = default_head(&package)
            .filter(|head| Range::parse(&range).zip(head.version()).is_some_and(|(r, v)| r.contains(&v)));
        match found {
            Some(head) if !needed.iter().any(|b| b.name == head.name) => needed.push(head),
            Some(_) => {}
            None => {
                return Err(ResolutionError::MissingPackage { bundle: bundle.name.clone(), package, range });
            }
        }
    }
    Ok(needed)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::fbc::{Entry, Package, Property};

    fn bundle(name: &str, version: &str, extra: Vec<Property>) -> Bundle {
        let mut properties =
            vec![Property { type_: "olm.package".into(), value: json!({"packageName": "p", "version": version}) }];
        properties.extend(extra);
        Bundle { schema: "olm.bundle".into(), name: name.into(), package: "p".into(), image: String::new(), properties }
    }

    fn entry(name: &str, replaces: Option<&str>, skips: &[&str], skip_range: Option<&str>) -> Entry {
        Entry {
            name: name.into(),
            replaces: replaces.map(str::to_string),
            skips: skips.iter().map(|s| s.to_string()).collect(),
            skip_range: skip_range.map(str::to_string),
        }
    }

    fn catalog(entries: Vec<Entry>, bundles: Vec<Bundle>) -> Catalog {
        Catalog {
            packages: vec![Package {
                schema: "olm.package".into(),
                name: "p".into(),
                default_channel: Some("stable".into()),
                description: None,
            }],
            channels: vec![Channel {
                schema: "olm.channel".into(),
                package: "p".into(),
                name: "stable".into(),
                entries,
            }],
            bundles,
        }
    }

    #[test]
    fn one_step_along_replaces_then_the_newest_that_skips() {
        // 1.0.0 <- 1.1.0 (replaces) ; 1.2.0 replaces 1.1.0 and skips 1.0.0 ; 1.3.0 replaces 1.2.0.
        let c = catalog(
            vec![
                entry("p.v1.0.0", None, &[], None),
                entry("p.v1.1.0", Some("p.v1.0.0"), &[], None),
                entry("p.v1.2.0", Some("p.v1.1.0"), &["p.v1.0.0"], None),
                entry("p.v1.3.0", Some("p.v1.2.0"), &[], None),
            ],
            vec![
                bundle("p.v1.0.0", "1.0.0", vec![]),
                bundle("p.v1.1.0", "1.1.0", vec![]),
                bundle("p.v1.2.0", "1.2.0", vec![]),
                bundle("p.v1.3.0", "1.3.0", vec![]),
            ],
        );
        assert!(c.validate().is_empty(), "{:?}", c.validate());
        let ch = channel(&c, "p", None, "s").expect("channel");
        assert_eq!(first(&c, ch, None, "s").expect("head").name, "p.v1.3.0");
        assert_eq!(first(&c, ch, Some("p.v1.0.0"), "s").expect("start").name, "p.v1.0.0");
        assert_eq!(next(&c, ch, "p.v1.0.0").map(|b| b.name.as_str()), Some("p.v1.2.0"));
        assert_eq!(next(&c, ch, "p.v1.2.0").map(|b| b.name.as_str()), Some("p.v1.3.0"));
        assert_eq!(next(&c, ch, "p.v1.3.0"), None);
        assert!(matches!(first(&c, ch, Some("p.v9"), "s"), Err(ResolutionError::NoStartingCsv { .. })));
    }

    #[test]
    fn skip_range_is_an_edge_and_decides_the_head() {
        let c = catalog(
            vec![
                entry("p.v1.5.0", None, &[], Some(">=0.6.0 <1.5.0")),
                entry("p.v1.5.1", None, &[], Some(">=0.6.0 <1.5.1")),
                entry("p.v1.6.0", None, &[], Some(">=0.6.0 <1.6.0")),
            ],
            vec![
                bundle("p.v1.5.0", "1.5.0", vec![]),
                bundle("p.v1.5.1", "1.5.1", vec![]),
                bundle("p.v1.6.0", "1.6.0", vec![]),
            ],
        );
        assert!(c.validate().is_empty(), "{:?}", c.validate());
        let ch = channel(&c, "p", Some("stable"), "s").expect("channel");
        assert_eq!(heads(&c, ch).iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["p.v1.6.0"]);
        assert_eq!(next(&c, ch, "p.v1.5.0").map(|b| b.name.as_str()), Some("p.v1.6.0"));
    }

    #[test]
    fn dependencies_resolved_from_the_catalog_or_reported() {
        let gvk = json!({"group": "x.io", "version": "v1", "kind": "X"});
        let mut c = catalog(
            vec![entry("p.v1.0.0", None, &[], None)],
            vec![bundle("p.v1.0.0", "1.0.0", vec![Property { type_: "olm.gvk.required".into(), value: gvk.clone() }])],
        );
        let needy = c.bundles[0].clone();
        let missing = dependencies(&c, &needy, &BTreeSet::new()).expect_err("no provider");
        assert!(missing.to_string().starts_with("constraints not satisfiable"), "{missing}");
        let served = BTreeSet::from([Gvk { group: "x.io".into(), version: "v1".into(), kind: "X".into() }]);
        assert!(dependencies(&c, &needy, &served).expect("served by the cluster").is_empty());
        c.packages.push(Package {
            schema: "olm.package".into(),
            name: "x".into(),
            default_channel: Some("a".into()),
            description: None,
        });
        c.channels.push(Channel {
            schema: "olm.channel".into(),
            package: "x".into(),
            name: "a".into(),
            entries: vec![entry("x.v1", None, &[], None)],
        });
        let mut provider = bundle("x.v1", "1.0.0", vec![Property { type_: "olm.gvk".into(), value: gvk }]);
        provider.package = "x".into();
        provider.properties[0].value = json!({"packageName": "x", "version": "1.0.0"});
        c.bundles.push(provider);
        let found = dependencies(&c, &needy, &BTreeSet::new()).expect("resolved");
        assert_eq!(found.iter().map(|b| b.name.as_str()).collect::<Vec<_>>(), ["x.v1"]);
    }
}
