//! The data directory of a durable server: one server at a time (a second start on it is
//! refused while the first runs, and succeeds once it stops), a directory that held a
//! cluster is refused when its database is missing, and the directory, token and
//! database are readable by their owner only.

use opkit_apiserver::{ApiServer, ServerConfig, ServerError};

use crate::common::within;

#[tokio::test]
async fn a_data_directory_serves_one_server_and_keeps_its_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("cluster");
    let cfg = ServerConfig::durable(&data);
    let first = within("first start", ApiServer::start(cfg.clone())).await.expect("first start");

    let second = within("second start", ApiServer::start(cfg.clone())).await;
    let message = match second {
        Err(e @ ServerError::DataDir(_)) => e.to_string(),
        Err(other) => panic!("refused for the wrong reason: {other}"),
        Ok(_) => panic!("two servers on one data directory"),
    };
    assert!(message.contains("a cluster is already running from"), "{message}");
    assert!(message.contains(&format!("(pid {}, {})", std::process::id(), first.url())), "{message}");

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
        assert_eq!(mode(&data), 0o700);
        assert_eq!(mode(&data.join("token")), 0o600);
        assert_eq!(mode(&data.join("state.db")), 0o600);
        assert_eq!(mode(&data.join("apiserver.key")), 0o600);
    }

    within("shutdown", first.shutdown()).await;
    let again = within("restart", ApiServer::start(cfg.clone())).await.expect("the directory is free again");
    within("shutdown", again.shutdown()).await;

    std::fs::remove_file(data.join("state.db")).expect("remove the database");
    let lost = within("start without the database", ApiServer::start(cfg)).await;
    let message = lost.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("held a cluster but its database"), "{message}");
}
