//! How the runtime words an error in logs and messages: its text followed by the causes
//! the text does not already include, with a Kubernetes `Status` given as its message
//! (as Go's `StatusError.Error()`) instead of kube's `ApiError: … (Status { … })` dump.

use std::error::Error;

/// The concise, one-line text of `err` and its causes.
pub(crate) fn concise(err: &(dyn Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = Some(err);
    let mut outermost = true;
    while let Some(e) = cause {
        if let Some(kube::Error::Api(status)) = e.downcast_ref::<kube::Error>() {
            let message = if status.message.is_empty() { &status.reason } else { &status.message };
            text = text.replace(&format!("ApiError: {status} ({status:?})"), message);
            // Its only cause is the status itself, now worded.
            break;
        }
        if !std::mem::take(&mut outermost) {
            let own = e.to_string();
            if !own.is_empty() && !text.contains(&own) {
                text.push_str(": ");
                text.push_str(&own);
            }
        }
        cause = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("creating the Deployment: {0}")]
    struct Wrapped(#[source] kube::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("reading settings")]
    struct Outer(#[source] std::io::Error);

    fn forbidden() -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code: 403,
            reason: "Forbidden".into(),
            message: "deployments.apps \"cache\" is forbidden: User \"u\" cannot create resource".into(),
            ..Default::default()
        }))
    }

    #[test]
    fn a_status_is_its_message_without_the_debug_dump() {
        let text = concise(&Wrapped(forbidden()));
        assert_eq!(
            text,
            "creating the Deployment: deployments.apps \"cache\" is forbidden: User \"u\" cannot create resource"
        );
        assert!(!concise(&forbidden()).contains("Status {"), "{}", concise(&forbidden()));
    }

    #[test]
    fn causes_missing_from_the_text_are_appended() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        assert_eq!(concise(&Outer(io)), "reading settings: connection refused");
    }
}
