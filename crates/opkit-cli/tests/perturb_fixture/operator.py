"""A small operator in Python (the official kubernetes client), for `opkit test --perturb`.

It reconciles ConfigMaps labelled fixture=parent into a child ConfigMap `<name>-child`
and marks the parent `fixture/ready`. With `--bug` it marks its progress on the parent
before creating the child and skips the create once the mark is there, so a crash
between the two writes, or a failed create, leaves no child ever (a Sieve
intermediate-state bug). Without it, it creates the child first (tolerating
AlreadyExists) and then marks the parent.
"""

import sys
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

BUG = "--bug" in sys.argv


def annotate(v1, parent, values):
    v1.patch_namespaced_config_map(
        parent.metadata.name, parent.metadata.namespace, {"metadata": {"annotations": values}}
    )


def create_child(v1, parent):
    child = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=parent.metadata.name + "-child", labels={"fixture": "child"}),
        data=parent.data,
    )
    try:
        v1.create_namespaced_config_map(parent.metadata.namespace, child)
    except ApiException as e:
        if e.status != 409 or '"AlreadyExists"' not in (e.body or ""):
            raise


def reconcile(v1, parent):
    annotations = parent.metadata.annotations or {}
    if "fixture/ready" in annotations:
        return
    if BUG:
        if "fixture/child-created" not in annotations:
            annotate(v1, parent, {"fixture/child-created": "true"})
            create_child(v1, parent)
    else:
        create_child(v1, parent)
    annotate(v1, parent, {"fixture/ready": "true"})


def main():
    config.load_kube_config()
    v1 = client.CoreV1Api()
    while True:
        try:
            for event in watch.Watch().stream(
                v1.list_config_map_for_all_namespaces, label_selector="fixture=parent", timeout_seconds=60
            ):
                parent = event["object"]
                if event["type"] == "DELETED":
                    continue
                for attempt in range(20):
                    try:
                        # Always from the server: the event's copy may be older than our own write.
                        reconcile(v1, v1.read_namespaced_config_map(parent.metadata.name, parent.metadata.namespace))
                        break
                    except ApiException as e:
                        print(f"reconcile {parent.metadata.name} failed ({e.status}), retrying", flush=True)
                        time.sleep(0.2)
        except Exception as e:  # a closed watch: start again
            print(f"watch ended: {e}", flush=True)
            time.sleep(0.2)


if __name__ == "__main__":
    main()
