#!/usr/bin/python
# -*- coding: utf-8 -*-
# Part of opkit's operator_sdk.util collection (Apache-2.0): the k8s_event module, with
# operator-sdk's parameters, creating a Kubernetes Event about an object.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_event
short_description: Create Kubernetes Events
description:
  - Creates a core/v1 Event about C(involvedObject). An Event of that name with the same
    C(reason) is updated instead, its C(count) going up and its C(firstTimestamp) kept.
    The involved object's uid and resourceVersion are read from the API server.
options:
  state: {type: str, choices: [present, absent], default: present}
  name: {type: str, required: true}
  namespace: {type: str, required: true}
  merge_type: {type: list, elements: str, choices: [json, merge, strategic-merge]}
  message: {type: str, required: true}
  reason: {type: str, required: true}
  reportingComponent: {type: str}
  type: {type: str, choices: [Normal, Warning]}
  source: {type: dict}
  involvedObject: {type: dict}
  appendTimestamp:
    type: bool
    description:
      - Make the name unique (C(<name>.<hex nanoseconds>), as client-go's recorder
        names events) and always create a new Event.
  kubeconfig: {type: raw}
  context: {type: str}
"""

EXAMPLES = r"""
- name: Tell the Memcached it was scaled
  operator_sdk.util.k8s_event:
    name: "{{ ansible_operator_meta.name }}-scaled"
    namespace: "{{ ansible_operator_meta.namespace }}"
    reason: Scaled
    message: "Scaled to {{ size }}"
    type: Normal
    source: {component: memcached-operator}
    involvedObject:
      apiVersion: cache.example.com/v1alpha1
      kind: Memcached
      name: "{{ ansible_operator_meta.name }}"
      namespace: "{{ ansible_operator_meta.namespace }}"
"""

import datetime
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.operator_sdk.util.plugins.module_utils.client import dynamic_client


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="present", choices=["present", "absent"]),
            name=dict(type="str", required=True),
            namespace=dict(type="str", required=True),
            merge_type=dict(type="list", elements="str", choices=["json", "merge", "strategic-merge"]),
            message=dict(type="str", required=True),
            reason=dict(type="str", required=True),
            reportingComponent=dict(type="str"),
            type=dict(type="str", choices=["Normal", "Warning"]),
            source=dict(type="dict"),
            involvedObject=dict(type="dict"),
            appendTimestamp=dict(type="bool", default=False),
            kubeconfig=dict(type="raw"),
            context=dict(type="str"),
        ),
    )
    p = module.params
    try:
        from kubernetes.dynamic.exceptions import NotFoundError
    except ImportError as e:
        module.fail_json(msg="the kubernetes Python client is required: %s" % e)
    dyn = dynamic_client(module)
    try:
        events = dyn.resources.get(api_version="v1", kind="Event")
    except Exception as e:  # the client raises many kinds
        module.fail_json(msg="Unable to reach the API server: %s" % e)

    name, namespace = p["name"], p["namespace"]
    if p["appendTimestamp"]:
        name = "%s.%x" % (name, time.time_ns())

    prior = None
    if not p["appendTimestamp"]:
        try:
            prior = events.get(name=name, namespace=namespace).to_dict()
        except NotFoundError:
            prior = None
        except Exception as e:
            module.fail_json(msg="Unable to read event %s: %s" % (name, e))

    if p["state"] == "absent":
        if prior is None:
            module.exit_json(changed=False)
        try:
            events.delete(name=name, namespace=namespace)
        except Exception as e:
            module.fail_json(msg="Unable to delete event %s: %s" % (name, e))
        module.exit_json(changed=True, result=prior)

    involved = dict(p["involvedObject"] or {})
    if involved:
        try:
            kind = dyn.resources.get(api_version=involved.get("apiVersion", "v1"), kind=involved["kind"])
            if kind.namespaced:
                involved.setdefault("namespace", namespace)
            else:
                involved.pop("namespace", None)
            live = kind.get(name=involved["name"], namespace=involved.get("namespace")).to_dict()
            involved["uid"] = live["metadata"]["uid"]
            involved["resourceVersion"] = live["metadata"]["resourceVersion"]
        except NotFoundError:
            pass
        except Exception as e:
            module.fail_json(msg="Unable to read the involved object %s: %s" % (involved.get("name"), e))

    stamp = now()
    count, first = 1, stamp
    if prior and prior.get("reason") == p["reason"]:
        count = (prior.get("count") or 1) + 1
        first = prior.get("firstTimestamp") or stamp
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "message": p["message"],
        "reason": p["reason"],
        "type": p["type"] or "Normal",
        "count": count,
        "firstTimestamp": first,
        "lastTimestamp": stamp,
        "involvedObject": involved,
    }
    if p["source"]:
        event["source"] = p["source"]
    if p["reportingComponent"]:
        event["reportingComponent"] = p["reportingComponent"]
    try:
        if prior is None:
            result = events.create(body=event, namespace=namespace).to_dict()
        else:
            result = events.patch(
                body=event, name=name, namespace=namespace, content_type="application/merge-patch+json"
            ).to_dict()
    except Exception as e:
        module.fail_json(msg="Unable to create event: %s" % e)
    module.exit_json(changed=True, result=result)


if __name__ == "__main__":
    main()
