#!/usr/bin/python
# -*- coding: utf-8 -*-
# Part of opkit's operator_sdk.util collection (Apache-2.0): the osdk_metric module, with
# operator-sdk's parameters, sending a custom Prometheus metric to the operator.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: osdk_metric
short_description: Create or update a custom Prometheus metric of the operator
description:
  - Sends the metric to the operator's metrics API, which creates it on first use and
    serves it on the operator's /metrics endpoint. Give exactly one of C(counter),
    C(gauge), C(histogram), C(summary); a metric keeps the type it was created with.
options:
  name: {type: str, required: true, description: The metric's name.}
  description: {type: str, required: true, description: Its help text.}
  address:
    type: str
    description:
      - The operator's metrics API. Default the one the running operator gives
        (C(OPKIT_ANSIBLE_METRICS_URL)), else C(http://localhost:5050/metrics).
  counter:
    type: dict
    suboptions:
      increment: {type: bool}
      add: {type: float}
  gauge:
    type: dict
    suboptions:
      set: {type: float}
      increment: {type: bool}
      decrement: {type: bool}
      add: {type: float}
      subtract: {type: float}
      set_to_current_time: {type: bool}
  histogram:
    type: dict
    suboptions:
      observe: {type: float}
  summary:
    type: dict
    suboptions:
      observe: {type: float}
"""

EXAMPLES = r"""
- name: Count reconciles
  operator_sdk.util.osdk_metric:
    name: my_reconciles_total
    description: Reconciles of my role
    counter:
      increment: yes
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError

DEFAULT_ADDRESS = "http://localhost:5050/metrics"


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            description=dict(type="str", required=True),
            address=dict(type="str"),
            counter=dict(type="dict", options=dict(increment=dict(type="bool"), add=dict(type="float"))),
            gauge=dict(
                type="dict",
                options=dict(
                    set=dict(type="float"),
                    increment=dict(type="bool"),
                    decrement=dict(type="bool"),
                    add=dict(type="float"),
                    subtract=dict(type="float"),
                    set_to_current_time=dict(type="bool"),
                ),
            ),
            histogram=dict(type="dict", options=dict(observe=dict(type="float"))),
            summary=dict(type="dict", options=dict(observe=dict(type="float"))),
        ),
    )
    p = module.params
    payload = dict(name=p["name"], description=p["description"])
    for kind in ("counter", "gauge", "histogram", "summary"):
        if p[kind] is not None:
            payload[kind] = p[kind]
    url = p["address"] or os.environ.get("OPKIT_ANSIBLE_METRICS_URL") or DEFAULT_ADDRESS
    try:
        open_url(
            url,
            data=json.dumps(payload),
            method="POST",
            headers={"Content-Type": "application/json"},
            use_proxy=False,
            timeout=30,
        )
    except HTTPError as e:
        module.fail_json(msg=e.read().decode("utf-8", "replace").strip(), status_code=e.code)
    except (URLError, OSError) as e:
        module.fail_json(msg="sending the metric to %s: %s" % (url, e))
    module.exit_json(changed=True)


if __name__ == "__main__":
    main()
