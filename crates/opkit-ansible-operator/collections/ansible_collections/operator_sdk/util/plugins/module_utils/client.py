# -*- coding: utf-8 -*-
# Part of opkit's operator_sdk.util collection (Apache-2.0): the Kubernetes client the
# modules share, configured as the operator's runs need it.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os


def dynamic_client(module):
    """A kubernetes DynamicClient for the module's `kubeconfig` and `context` parameters,
    else K8S_AUTH_KUBECONFIG or KUBECONFIG (the operator's API proxy during a run), else
    ~/.kube/config, else the in-cluster configuration. Fails the module when the client
    is missing or cannot be configured."""
    try:
        from kubernetes import client, config, dynamic
    except ImportError as e:
        module.fail_json(msg="the kubernetes Python client is required: %s" % e)
    p = module.params
    kubeconfig = p.get("kubeconfig") or os.environ.get("K8S_AUTH_KUBECONFIG") or os.environ.get("KUBECONFIG")
    try:
        if kubeconfig or os.path.exists(os.path.expanduser("~/.kube/config")):
            config.load_kube_config(config_file=kubeconfig, context=p.get("context"))
        else:
            config.load_incluster_config()
        return dynamic.DynamicClient(client.ApiClient())
    except Exception as e:  # the client raises many kinds
        module.fail_json(msg="Unable to reach the API server: %s" % e)
