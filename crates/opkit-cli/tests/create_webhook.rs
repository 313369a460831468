//! `opkit create webhook` as a user runs it: the files it writes and edits (sources with
//! markers, main.rs and lib.rs wiring, config/webhook, config/certmanager, the config/default
//! and CRD conversion patches, PROJECT), that the scaffold renders with kustomize as `opkit
//! deploy` does, and every refusal operator-sdk makes, each leaving the directory as it was.

use crate::support::scaffold as support;

use support::*;

const SHIP: [&str; 6] = ["--group", "ship", "--version", "v1", "--kind", "Frigate"];

/// A project `fleet` with ship/v1 Frigate and ship/v2 Frigate (a type only).
fn project() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    ok(dir, &["init", "--domain", "example.com", "--repo", "github.com/example/fleet", "--project-name", "fleet"]);
    ok(dir, &["create", "api", "--group", "ship", "--version", "v1", "--kind", "Frigate"]);
    ok(dir, &["create", "api", "--group", "ship", "--version", "v2", "--kind", "Frigate", "--controller=false"]);
    tmp
}

fn with(extra: &[&'static str]) -> Vec<&'static str> {
    let mut args = vec!["create", "webhook"];
    args.extend(SHIP);
    args.extend(extra);
    args
}

#[test]
fn refusals_write_nothing() {
    let tmp = project();
    let dir = tmp.path();
    refused(dir, &with(&[]), "requires at least one of --defaulting, --programmatic-validation and --conversion");
    refused(dir, &with(&["--conversion"]), "--conversion requires at least one --spoke");
    refused(dir, &with(&["--defaulting", "--spoke", "v2"]), "--spoke is only used with --conversion");
    refused(dir, &with(&["--conversion", "--spoke", "v1"]), "--spoke v1 is the hub version itself");
    refused(
        dir,
        &with(&["--conversion", "--spoke", "v3"]),
        "spoke version v3 of ship.example.com, Kind=Frigate does not exist",
    );
    refused(
        dir,
        &["create", "webhook", "--group", "ship", "--version", "v1", "--kind", "Sloop", "--defaulting"],
        "requires a previously created API: ship.example.com/v1, Kind=Sloop is not in PROJECT",
    );
    refused(
        dir,
        &["create", "webhook", "--group", "ship", "--version", "V1", "--kind", "Frigate", "--defaulting"],
        "invalid version \"V1\": must look like v1",
    );
    ok(dir, &with(&["--defaulting"]));
    refused(
        dir,
        &with(&["--programmatic-validation"]),
        "webhook resource already exists for ship.example.com/v1, Kind=Frigate",
    );
    let empty = tempfile::tempdir().expect("tempdir");
    refused(empty.path(), &with(&["--defaulting"]), "not an opkit project");
}

#[test]
fn all_three_webhooks_are_scaffolded_and_wired() {
    let tmp = project();
    let dir = tmp.path();
    let before_makefile = read(dir, "Makefile");
    assert!(before_makefile.contains("ENABLE_WEBHOOKS ?= false"));
    let out = ok(dir, &with(&["--defaulting", "--programmatic-validation", "--conversion", "--spoke", "v2"]));
    assert!(
        out.contains("Created defaulting, validating, conversion webhook(s) for ship.example.com/v1, Kind=Frigate"),
        "{out}"
    );

    let source = read(dir, "src/webhook/ship_v1_frigate.rs");
    for want in [
        "// +kubebuilder:webhook:path=/mutate-ship-example-com-v1-frigate,mutating=true,failurePolicy=fail,sideEffects=None,groups=ship.example.com,resources=frigates,verbs=create;update,versions=v1,name=mfrigate-v1.kb.io,admissionReviewVersions=v1",
        "// +kubebuilder:webhook:path=/validate-ship-example-com-v1-frigate,mutating=false,failurePolicy=fail,sideEffects=None,groups=ship.example.com,resources=frigates,verbs=create;update,versions=v1,name=vfrigate-v1.kb.io,admissionReviewVersions=v1",
        "impl CustomDefaulter<Frigate> for FrigateCustomDefaulter",
        "impl CustomValidator<Frigate> for FrigateCustomValidator",
        "impl Hub for Frigate {}",
        "impl Convertible<Frigate> for crate::api::ship_v2::Frigate",
        ".with_spoke::<crate::api::ship_v2::Frigate>()",
        "async fn defaults_are_set()",
        "async fn invalid_objects_are_denied()",
        "fn ship_v2_round_trips_through_the_hub()",
    ] {
        assert!(source.contains(want), "src/webhook/ship_v1_frigate.rs lacks {want}:\n{source}");
    }
    let module = read(dir, "src/webhook/mod.rs");
    assert!(
        module.contains("pub mod ship_v1_frigate;")
            && module.contains("let server = ship_v1_frigate::setup(mgr, server);")
    );
    assert!(read(dir, "src/lib.rs").contains("pub mod webhook;"));
    let main = read(dir, "src/main.rs");
    assert!(main.contains("    #[command(flatten)]\n    webhooks: opkit::webhook::WebhookArgs,\n"), "{main}");
    assert!(main.contains("    if let Some(server) = args.webhooks.server()? {\n        mgr.add_webhook_server(fleet::webhook::setup(&mgr, server))?;\n    }\n    // +opkit:scaffold:builder"), "{main}");
    assert!(read(dir, "Makefile").contains("ENABLE_WEBHOOKS ?= true"));

    let project = read(dir, "PROJECT");
    assert!(
        project.contains("  webhooks:\n    conversion: true\n    defaulting: true\n    spoke:\n    - v2\n    validation: true\n    webhookVersion: v1\n"),
        "{project}"
    );
    let crd_kustomization = read(dir, "config/crd/kustomization.yaml");
    assert!(crd_kustomization.ends_with("patches:\n- path: patches/webhook_in_frigates.yaml\n"), "{crd_kustomization}");
    let patch = read(dir, "config/crd/patches/webhook_in_frigates.yaml");
    assert!(patch.contains("name: frigates.ship.example.com") && patch.contains("path: /convert"), "{patch}");
    let default = read(dir, "config/default/kustomization.yaml");
    for want in [
        "- ../webhook\n- ../certmanager\n",
        "- path: manager_webhook_patch.yaml",
        "- path: webhookcainjection_patch.yaml",
    ] {
        assert!(default.contains(want), "config/default/kustomization.yaml lacks {want}:\n{default}");
    }
    for f in
        ["config/webhook/service.yaml", "config/webhook/kustomizeconfig.yaml", "config/certmanager/certificate.yaml"]
    {
        assert!(dir.join(f).is_file(), "{f}");
    }

    // A second API's webhook reuses the wiring.
    ok(dir, &["create", "api", "--group", "ship", "--version", "v1", "--kind", "Sloop"]);
    ok(
        dir,
        &["create", "webhook", "--group", "ship", "--version", "v1", "--kind", "Sloop", "--programmatic-validation"],
    );
    let module = read(dir, "src/webhook/mod.rs");
    assert!(
        module.contains(
            "let server = ship_v1_frigate::setup(mgr, server);\n    let server = ship_v1_sloop::setup(mgr, server);"
        ),
        "{module}"
    );
    let main = read(dir, "src/main.rs");
    assert_eq!(main.matches("webhook::setup").count(), 1, "{main}");
    let sloop = read(dir, "src/webhook/ship_v1_sloop.rs");
    assert!(!sloop.contains("CustomDefaulter") && !sloop.contains("Hub"), "{sloop}");
}

#[test]
fn conversion_alone_renders_without_admission_configurations() {
    let tmp = project();
    let dir = tmp.path();
    ok(dir, &with(&["--conversion", "--spoke", "v2"]));
    let webhook = read(dir, "config/webhook/kustomization.yaml");
    assert!(!webhook.contains("- manifests.yaml"), "{webhook}");
    let default = read(dir, "config/default/kustomization.yaml");
    assert!(
        default.contains("- path: manager_webhook_patch.yaml") && !default.contains("webhookcainjection"),
        "{default}"
    );
    let objs = opkit_cli::kustomize::build(&dir.join("config/webhook")).expect("config/webhook renders");
    assert_eq!(objs.len(), 1, "the Service only: {objs:?}");
    // A validating webhook for another kind brings the configurations in.
    ok(dir, &["create", "api", "--group", "ship", "--version", "v1", "--kind", "Sloop", "--controller=false"]);
    ok(
        dir,
        &["create", "webhook", "--group", "ship", "--version", "v1", "--kind", "Sloop", "--programmatic-validation"],
    );
    assert!(read(dir, "config/webhook/kustomization.yaml").contains("- manifests.yaml"));
    let default = read(dir, "config/default/kustomization.yaml");
    assert!(default.contains("- path: webhookcainjection_patch.yaml"), "{default}");
    let injection = read(dir, "config/default/webhookcainjection_patch.yaml");
    assert!(
        injection.contains("kind: ValidatingWebhookConfiguration") && !injection.contains("Mutating"),
        "{injection}"
    );
}

/// OLM makes and mounts the webhook server's certificate itself: the bundle's Deployment of a
/// project with webhooks keeps no cert-manager `cert` volume (its pod would wait for the
/// Secret `webhook-server-cert` forever), as operator-sdk's [WEBHOOK] patch does.
#[test]
fn the_bundle_leaves_the_webhook_certificate_to_olm() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    ok(dir, &["init", "--domain", "example.com", "--repo", "github.com/example/fleet", "--project-name", "fleet"]);
    ok(dir, &["create", "api", "--group", "ship", "--version", "v1", "--kind", "Frigate"]);
    ok(dir, &with(&["--defaulting"]));
    let manifests = read(dir, "config/manifests/kustomization.yaml");
    assert!(manifests.contains("[WEBHOOK]"), "{manifests}");
    // Stand-ins for what `make manifests` generates (it builds the project: minutes).
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: frigates.ship.example.com\n\
               spec:\n  group: ship.example.com\n  names:\n    kind: Frigate\n    listKind: FrigateList\n    plural: frigates\n    \
               singular: frigate\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    \
               schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n";
    std::fs::create_dir_all(dir.join("config/crd/bases")).expect("bases");
    std::fs::write(dir.join("config/crd/bases/ship.example.com_frigates.yaml"), crd).expect("crd");
    let webhook = "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata:\n  \
                   name: mutating-webhook-configuration\nwebhooks:\n- admissionReviewVersions: [v1]\n  clientConfig:\n    \
                   service:\n      name: webhook-service\n      namespace: system\n      path: /mutate-ship-example-com-v1-frigate\n  \
                   failurePolicy: Fail\n  name: mfrigate-v1.kb.io\n  rules:\n  - apiGroups: [ship.example.com]\n    \
                   apiVersions: [v1]\n    operations: [CREATE, UPDATE]\n    resources: [frigates]\n  sideEffects: None\n";
    std::fs::write(dir.join("config/webhook/manifests.yaml"), webhook).expect("webhook manifests");
    ok(dir, &["generate", "kustomize", "manifests", "--interactive=false", "-q"]);
    ok(dir, &["generate", "bundle", "--version", "0.0.1", "-q"]);
    let text = read(dir, "bundle/manifests/fleet.clusterserviceversion.yaml");
    let csv = opkit_olm_bundle::yaml::first_document(&text).expect("yaml").expect("a CSV");
    assert_eq!(csv["spec"]["webhookdefinitions"][0]["generateName"], "mfrigate-v1.kb.io", "{csv:#}");
    let pod = &csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"];
    assert!(!text.contains("webhook-server-cert"), "the cert-manager volume is left in:\n{pod:#}");
    let mounts = pod["containers"][0]["volumeMounts"].as_array().cloned().unwrap_or_default();
    assert!(mounts.iter().all(|m| m["name"] != "cert"), "{pod:#}");
    assert_eq!(pod["containers"][0]["ports"][0]["containerPort"], 9443, "the webhook port stays: {pod:#}");
}

/// kubebuilder's `--plural` (the API's own plural, else refused) and `--force` (the webhooks
/// of an API that has some scaffolded again, as now asked for).
#[test]
fn plural_and_force_behave_as_kubebuilders() {
    let tmp = project();
    let dir = tmp.path();
    refused(
        dir,
        &with(&["--defaulting", "--plural", "frigatez"]),
        "--plural frigatez: ship.example.com/v1, Kind=Frigate is served as frigates",
    );
    ok(dir, &with(&["--defaulting", "--plural", "frigates"]));
    refused(dir, &with(&["--programmatic-validation"]), "--force scaffolds its webhooks again");
    ok(dir, &with(&["--programmatic-validation", "--force"]));
    let source = read(dir, "src/webhook/ship_v1_frigate.rs");
    assert!(
        source.contains("impl CustomValidator<Frigate>") && !source.contains("CustomDefaulter<Frigate> for"),
        "{source}"
    );
    let project = read(dir, "PROJECT");
    assert!(!project.contains("defaulting: true") && project.contains("    validation: true\n"), "{project}");
    assert_eq!(project.matches("kind: Frigate\n").count(), 2, "one entry per version: {project}");
    let module = read(dir, "src/webhook/mod.rs");
    assert_eq!(module.matches("pub mod ship_v1_frigate;").count(), 1, "{module}");
}
