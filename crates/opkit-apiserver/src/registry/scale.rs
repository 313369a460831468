//! The scale subresource: an `autoscaling/v1` Scale view of an object's replicas, read
//! and written through the paths the resource declares.

use serde_json::{Value, json};

use super::{Outcome, PatchType, Registry, Subresource, Target, WriteOptions};
use crate::catalog::ScaleInfo;
use crate::error::{ApiError, ApiResult};
use crate::patch;

fn path_parts(p: &str) -> Vec<&str> {
    p.trim_start_matches('.').split('.').filter(|s| !s.is_empty()).collect()
}

fn read_path<'a>(v: &'a Value, p: &str) -> &'a Value {
    path_parts(p).into_iter().fold(v, |cur, k| &cur[k])
}

fn write_path(v: &mut Value, p: &str, value: Value) {
    let parts = path_parts(p);
    let mut cur = v;
    for (i, k) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        if i + 1 == parts.len() {
            cur[*k] = value;
            return;
        }
        cur = &mut cur[*k];
    }
}

impl Registry {
    fn scale_info(&self, target: &Target) -> ApiResult<ScaleInfo> {
        target.version_info()?.scale.clone().ok_or_else(ApiError::no_route)
    }

    fn to_scale(&self, target: &Target, obj: &Value, s: &ScaleInfo) -> Value {
        let selector = match &s.label_selector_path {
            Some(p) => {
                let v = read_path(obj, p);
                match v.as_str() {
                    Some(x) => json!(x),
                    None => match crate::selector::LabelSelector::from_label_selector_json(&obj["spec"]["selector"]) {
                        Ok(sel) if target.info.builtin => json!(sel.to_string()),
                        _ => Value::Null,
                    },
                }
            }
            None => Value::Null,
        };
        let m = &obj["metadata"];
        let mut status = json!({"replicas": read_path(obj, &s.status_replicas_path).as_i64().unwrap_or(0)});
        if !selector.is_null() {
            status["selector"] = selector;
        }
        json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": m["name"], "namespace": m["namespace"], "uid": m["uid"],
                "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"],
            },
            "spec": {"replicas": read_path(obj, &s.spec_replicas_path).as_i64().unwrap_or(0)},
            "status": status,
        })
    }

    /// GET .../scale
    pub async fn get_scale(&self, target: &Target, name: &str) -> ApiResult<Value> {
        let s = self.scale_info(target)?;
        let obj = self.get(target, name).await?;
        Ok(self.to_scale(target, &obj, &s))
    }

    /// PUT or PATCH .../scale: `change` turns the current Scale into the desired one.
    pub async fn update_scale(
        &self,
        target: &Target,
        name: &str,
        change: ScaleChange,
        opts: &WriteOptions,
    ) -> ApiResult<Outcome> {
        let s = self.scale_info(target)?;
        loop {
            let (old, entry) = self.current(target, name).await?;
            let old_at = self.at_requested_version(target, old.clone()).await?;
            let scale = self.to_scale(target, &old_at, &s);
            let desired = match &change {
                ScaleChange::Replace(v) => v.clone(),
                ScaleChange::Patch(kind, p) => match kind {
                    PatchType::Json => patch::json_patch(&scale, p),
                    _ => patch::merge_patch(&scale, p),
                }
                .map_err(|e| ApiError::bad_request(e.to_string()))?,
            };
            if let Some(rv) = desired["metadata"]["resourceVersion"].as_str()
                && !rv.is_empty()
                && rv != entry.rev.to_string()
            {
                return Err(ApiError::conflict(&target.info.group, &target.info.resource, name));
            }
            let replicas = desired["spec"]["replicas"].as_i64().unwrap_or(0);
            if replicas < 0 {
                return Err(ApiError::invalid(
                    "autoscaling",
                    "Scale",
                    name,
                    &[crate::schema::FieldError {
                        field: "spec.replicas".into(),
                        reason: crate::schema::FieldErrorReason::Invalid,
                        message: format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                    }],
                ));
            }
            let mut body = old_at.clone();
            write_path(&mut body, &s.spec_replicas_path, json!(replicas));
            match self.commit(target, name, (old, entry.rev), body, Subresource::Main, opts).await {
                Ok(mut o) => {
                    o.object = self.to_scale(target, &o.object, &s);
                    return Ok(o);
                }
                Err(super::commit::CommitError::Retry) => continue,
                Err(super::commit::CommitError::Api(e)) => return Err(e),
            }
        }
    }
}

/// How a scale write changes the Scale.
pub enum ScaleChange {
    /// PUT with a whole Scale.
    Replace(Value),
    /// PATCH.
    Patch(PatchType, Value),
}
