#!/usr/bin/python
# -*- coding: utf-8 -*-
# Part of opkit's operator_sdk.util collection (Apache-2.0).
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: requeue_after
short_description: Reconcile the custom resource again after a period
description:
  - The operator reads C(period) from this task's result and requeues the resource
    after it, ending the reconcile there.
options:
  period:
    description: A Go duration, e.g. C(30s) or C(5m).
    type: str
    required: true
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(period=dict(type="str", required=True)), supports_check_mode=True)
    module.exit_json(changed=False, period=module.params["period"])


if __name__ == "__main__":
    main()
