#!/usr/bin/python
# -*- coding: utf-8 -*-
# Part of opkit's operator_sdk.util collection (Apache-2.0): the k8s_status module Ansible
# operator roles call, with operator-sdk's parameters.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: k8s_status
short_description: Set the status of a Kubernetes resource
description:
  - Sets fields and conditions under C(status) of the resource (the status subresource).
    Given fields are merged into the current status, conditions by their C(type), unless
    C(replace) is true.
options:
  api_version: {type: str, required: true, aliases: [version]}
  kind: {type: str, required: true}
  name: {type: str, required: true}
  namespace: {type: str}
  status: {type: dict}
  conditions: {type: list, elements: dict}
  replace: {type: bool, default: false, aliases: [force]}
  replace_lists: {type: bool, default: false}
  kubeconfig: {type: raw}
  context: {type: str}
"""

import copy
import datetime

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.operator_sdk.util.plugins.module_utils.client import dynamic_client

CONDITION_STATUSES = ("True", "False", "Unknown")


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge(current, given, replace_lists):
    """Merges dict `given` into dict `current` (a copy is returned)."""
    out = copy.deepcopy(current)
    for key, value in given.items():
        old = out.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            out[key] = merge(old, value, replace_lists)
        elif isinstance(value, list) and isinstance(old, list) and not replace_lists:
            out[key] = old + [item for item in value if item not in old]
        else:
            out[key] = value
    return out


def merge_conditions(current, given, replace):
    by_type = {} if replace else {c.get("type"): c for c in current or [] if isinstance(c, dict)}
    order = [] if replace else [c.get("type") for c in current or [] if isinstance(c, dict)]
    for condition in given:
        ctype = condition["type"]
        old = by_type.get(ctype)
        new = dict(condition)
        if "lastTransitionTime" not in new:
            if old and old.get("status") == new["status"] and old.get("lastTransitionTime"):
                new["lastTransitionTime"] = old["lastTransitionTime"]
            else:
                new["lastTransitionTime"] = now()
        by_type[ctype] = new
        if ctype not in order:
            order.append(ctype)
    return [by_type[t] for t in order]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            api_version=dict(type="str", required=True, aliases=["version"]),
            kind=dict(type="str", required=True),
            name=dict(type="str", required=True),
            namespace=dict(type="str"),
            status=dict(type="dict"),
            conditions=dict(type="list", elements="dict"),
            replace=dict(type="bool", default=False, aliases=["force"]),
            replace_lists=dict(type="bool", default=False),
            kubeconfig=dict(type="raw"),
            context=dict(type="str"),
        ),
        required_one_of=[["status", "conditions"]],
        supports_check_mode=True,
    )
    p = module.params
    for condition in p["conditions"] or []:
        if not condition.get("type"):
            module.fail_json(msg="every condition needs a type: %r" % (condition,))
        if condition.get("status") not in CONDITION_STATUSES:
            module.fail_json(msg="condition %s: status must be one of %s" % (condition.get("type"), ", ".join(CONDITION_STATUSES)))
    if p["status"] and "conditions" in p["status"] and p["conditions"]:
        module.fail_json(msg="set conditions through the conditions parameter, not under status")
    dyn = dynamic_client(module)
    try:
        resource = dyn.resources.get(api_version=p["api_version"], kind=p["kind"])
        current = resource.get(name=p["name"], namespace=p["namespace"]).to_dict()
    except Exception as e:  # the client raises many kinds
        module.fail_json(msg="Failed to get %s %s: %s" % (p["kind"], p["name"], e))
    old_status = current.get("status") or {}
    if p["replace"]:
        new_status = copy.deepcopy(p["status"] or {})
    else:
        new_status = merge(old_status, p["status"] or {}, p["replace_lists"])
    if p["conditions"]:
        new_status["conditions"] = merge_conditions(old_status.get("conditions"), p["conditions"], p["replace"])
    changed = new_status != old_status
    result = current
    if changed and not module.check_mode:
        try:
            if p["replace"]:
                body = dict(current, status=new_status)
                result = resource.status.replace(body=body, name=p["name"], namespace=p["namespace"]).to_dict()
            else:
                result = resource.status.patch(
                    body={"status": new_status},
                    name=p["name"],
                    namespace=p["namespace"],
                    content_type="application/merge-patch+json",
                ).to_dict()
        except Exception as e:
            module.fail_json(msg="Failed to update the status of %s %s: %s" % (p["kind"], p["name"], e))
    module.exit_json(changed=changed, result=result)


if __name__ == "__main__":
    main()
