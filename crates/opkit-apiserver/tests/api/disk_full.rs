//! A durable server on a real full disk (a small tmpfs as the data directory): writes
//! fail with etcd's "database space exceeded" and are not applied, reads go on, `/readyz`
//! answers 500 with kube's per-check output while `/livez` stays ok, and once space
//! returns the server persists again without a restart.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use opkit_apiserver::{ApiServer, ServerConfig};

use crate::common::{client_for, config_map, create_cm, raw, status_of, within};

/// A tmpfs mounted on a fresh directory; unmounted (and the directory removed) on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (e.g. `8m`). Fails the test loudly when it cannot: the
    /// test is about a real full disk and must not pass without one.
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("running mount (this test needs root and mount(8))");
        assert!(
            out.status.success(),
            "mounting a tmpfs on {} failed (this test needs root): {}",
            dir.path().display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let out = Command::new("umount").arg("-l").arg(self.dir.path()).output();
        if !matches!(&out, Ok(o) if o.status.success()) {
            eprintln!("unmounting {} failed: {out:?}", self.dir.path().display());
        }
    }
}

/// Fills the file system holding `dir` until it reports no space left; returns the file.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).expect("create the filler");
    let chunk = vec![0x5au8; 64 * 1024];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    // Also the last partial block.
    for b in [4096usize, 512, 1] {
        while f.write(&chunk[..b]).is_ok_and(|n| n > 0) {}
    }
    path
}

const SPACE_EXCEEDED: &str = "etcdserver: mvcc: database space exceeded";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_writes_and_readyz_and_the_server_recovers_when_space_returns() {
    let disk = Tmpfs::mount("16m");
    let server =
        within("start on the tmpfs", ApiServer::start(ServerConfig::durable(disk.path()))).await.expect("start");
    let client = client_for(&server).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let kept = create_cm(&api, "before").await;
    let ready = raw(&client, "GET", "/readyz?verbose", None, vec![]).await;
    assert_eq!(ready.code, 200, "{}", ready.text);
    assert!(ready.text.contains("[+]etcd ok\n") && ready.text.ends_with("readyz check passed\n"), "{}", ready.text);

    let filler = fill(disk.path());
    // SQLite may reuse pages it already has; writes of a few hundred KiB each exhaust them.
    let big = "x".repeat(256 * 1024);
    let mut pending = None;
    for i in 0..64 {
        let name = format!("big-{i}");
        match api.create(&PostParams::default(), &config_map(&name, &[("k", &big)])).await {
            Ok(_) => continue,
            Err(e) => {
                let s = status_of(Err::<(), _>(e));
                assert_eq!((s.code, s.message.as_str()), (500, SPACE_EXCEEDED), "{s:?}");
                pending = Some(name);
                break;
            }
        }
    }
    let pending = pending.expect("a write fails once the disk is full");

    // New writes are refused at once, deletes included, and are not applied.
    let refused = api.create(&PostParams::default(), &config_map("refused", &[("k", "v")])).await;
    let s = status_of(refused);
    assert_eq!((s.code, s.reason.as_str(), s.message.as_str()), (500, "InternalError", SPACE_EXCEEDED));
    let s = status_of(api.delete("before", &Default::default()).await);
    assert_eq!((s.code, s.message.as_str()), (500, SPACE_EXCEEDED));

    // Reads go on, and show only durable state.
    assert_eq!(api.get("before").await.expect("read while full").metadata.uid, kept.metadata.uid);
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .expect("list while full")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert!(!names.contains(&"refused".to_string()) && !names.contains(&pending), "{names:?}");
    assert_eq!(api.get_opt(&pending).await.expect("get").map(|c| c.metadata.name), None, "not durable, not served");

    // Health: readyz and healthz fail with kube's output; livez stays ok.
    for path in ["/readyz", "/readyz?verbose"] {
        let r = raw(&client, "GET", path, None, vec![]).await;
        assert_eq!(r.code, 500, "{path}: {}", r.text);
        assert!(r.text.contains("[+]ping ok\n"), "{path}: {}", r.text);
        assert!(r.text.contains("[-]etcd failed: reason withheld\n"), "{path}: {}", r.text);
        assert!(r.text.ends_with("readyz check failed\n"), "{path}: {}", r.text);
    }
    let r = raw(&client, "GET", "/readyz/etcd", None, vec![]).await;
    assert_eq!((r.code, r.text.as_str()), (500, format!("internal server error: {SPACE_EXCEEDED}\n").as_str()));
    let r = raw(&client, "GET", "/healthz", None, vec![]).await;
    assert_eq!(r.code, 500, "{}", r.text);
    let r = raw(&client, "GET", "/readyz?exclude=etcd", None, vec![]).await;
    assert_eq!((r.code, r.text.as_str()), (200, "ok"));
    for path in ["/livez", "/livez?verbose", "/livez/ping"] {
        assert_eq!(raw(&client, "GET", path, None, vec![]).await.code, 200, "{path}");
    }

    // Space returns: the failed batch is retried and commits, readyz recovers, writes
    // work again; what was refused at once never appears.
    std::fs::remove_file(&filler).expect("remove the filler");
    within("readyz to recover", async {
        loop {
            if raw(&client, "GET", "/readyz/etcd", None, vec![]).await.code == 200 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    create_cm(&api, "after").await;
    assert!(api.get_opt(&pending).await.expect("get").is_some(), "the retried write committed");
    assert!(api.get_opt("refused").await.expect("get").is_none(), "a refused write was never applied");
    api.delete("before", &Default::default()).await.expect("deletes work again");
    let r = raw(&client, "GET", "/readyz?verbose", None, vec![]).await;
    assert_eq!(r.code, 200, "{}", r.text);
    server.shutdown().await;
}
