"""Which Ray cluster a stage may use: ``RAY_ADDRESS`` from the environment, and the rule that
keeps an unauthenticated cluster off the network.

A Ray cluster runs whatever code a client sends it, so a client that reaches a cluster
across the network without Ray's token authentication (``RAY_AUTH_MODE=token``) runs
code as anyone on that network could. ragvet refuses such an address unless the
retriever says the cluster is trusted (``trusted_cluster: true``, for a network that is
yours alone). The address is read from the environment only, never from params, and no
message here contains it: it can carry a host name that is itself sensitive.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from ragvet.errors import InputError, Problem

WHERE = "environment: RAY_ADDRESS"
LOCAL_NAMES = {"localhost", "auto", "local"}  # auto/local: the cluster this machine started


def address_host(address: str) -> str:
    """The host of a Ray address: ``ray://host:port``, ``host:port``, ``[v6]:port`` or ``auto``."""
    rest = address.split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1]
    if rest.startswith("["):
        return rest[1:].split("]", 1)[0]
    return rest.rsplit(":", 1)[0] if rest.count(":") == 1 else rest


def is_loopback(host: str) -> bool:
    """True for ``localhost``, ``auto``/``local`` and any loopback IP (127.0.0.0/8, ::1)."""
    if host.lower() in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cluster_address(environ: Mapping[str, str], trusted: bool) -> str:
    """``RAY_ADDRESS``, checked: set, and on loopback, or with token authentication, or trusted.

    The refusals name the variable and the fix, never its value.
    """
    address = environ.get("RAY_ADDRESS", "").strip()
    if not address:
        raise InputError(
            [
                Problem(
                    WHERE,
                    "engine: ray needs the address of a running Ray cluster, and RAY_ADDRESS is not set",
                    "export RAY_ADDRESS=<head host>:6379 (or ray://<head host>:10001), or use engine: local",
                )
            ]
        )
    if is_loopback(address_host(address)) or trusted or environ.get("RAY_AUTH_MODE", "").lower() == "token":
        return address
    raise InputError(
        [
            Problem(
                WHERE,
                "the Ray cluster is on another host and Ray's token authentication is off: anyone who reaches "
                "it can run code on it",
                "start the cluster with RAY_AUTH_MODE=token and export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN "
                "here; or, if the network is yours alone, set trusted_cluster: true in the retriever",
            )
        ]
    )
