//! The discovery GET the availability controller sends to an aggregated API server: one
//! request over TLS with a deadline, through the shared backend client (which reads the
//! CA bundle and checks the Service's DNS name).

use std::time::Duration;

use opkit_apimachinery::aggregation::Backend;

/// How long a discovery check may take, as kube-aggregator's 5 s.
const DEADLINE: Duration = Duration::from_secs(5);

/// GETs `path` from the backend; any answer other than a success is the error.
pub(super) async fn get(backend: &Backend, path: &str) -> Result<(), String> {
    let client = backend.client(Some(DEADLINE)).await.map_err(|e| e.to_string())?;
    let request = http::Request::get(path).body(Vec::new()).map_err(|e| e.to_string())?;
    match tokio::time::timeout(DEADLINE, client.request_text(request)).await {
        Err(_) => Err(format!("no answer within {DEADLINE:?}")),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(_)) => Ok(()),
    }
}
