"""A Ray started by report_builder (``--executor ray`` without ``--address``, and the tests' cluster):
its own local instance, on the loopback interface, with token authentication and no token file.

Ray binds its ports (GCS, raylet, object manager, runtime-env agent, workers, the driver) to the
node's address, which on Linux is the machine's network address unless Ray runs in its
single-machine mode (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``), where it is 127.0.0.1. A new local
cluster enables token authentication and writes a new token to ``~/.ray/auth_token`` (mode 0644);
given ``RAY_AUTH_TOKEN`` in the environment it writes nothing. ``address="local"`` starts a new
instance whatever ``RAY_ADDRESS`` or ``/tmp/ray/ray_current_cluster`` say (``None`` and ``auto`` would
join the cluster they name). Tested by ``tests/executors/test_ray.py`` (the listening sockets of a
Ray started by the command line, with ``RAY_ADDRESS`` pointing at another cluster).
Pitfall: the ``ray`` module is imported inside functions only.
"""
from __future__ import annotations

import os
from typing import Any

LOOPBACK = "127.0.0.1"
SINGLE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch (``0``) to its single-machine mode: the node address is the loopback address."""


def local_ray_env(token: str | None = None) -> dict[str, str | None]:
    """The environment a Ray started here runs under (its GCS, raylet, agents and workers inherit it):

    - ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``: Ray's single-machine mode, in which the node's address
      is the loopback address, and every Ray process binds its ports to 127.0.0.1 instead of all
      interfaces (Ray does so by the node address);
    - ``RAY_AUTH_MODE=token`` with a fresh random ``RAY_AUTH_TOKEN`` (256 bits) in the environment only:
      token authentication without Ray's ``~/.ray/auth_token`` file (which it writes world-readable);
    - no ``RAY_ADDRESS``: nothing started here is pointed at another cluster.
    ``None`` removes a variable. ``token``: the cluster's token (default: a new one)."""
    import secrets

    return {SINGLE_MACHINE: "0", "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": token or secrets.token_hex(32), "RAY_ADDRESS": None}


def local_init_options(num_cpus: int | None = None) -> dict[str, Any]:
    """``ray.init`` options of a Ray started here: a new local instance (``address="local"``: never a
    cluster found through ``RAY_ADDRESS`` or ``/tmp/ray/ray_current_cluster``) on the loopback
    address, without the dashboard."""
    return {"address": "local", "num_cpus": num_cpus, "include_dashboard": False, "_node_ip_address": LOOPBACK}


class LocalRayEnvironment:
    """Context: `local_ray_env` set in this process (and Ray's import-time single-machine flag, for a
    ``ray`` imported before), restored on exit. `RayExecutor` holds it from ``ray.init`` to
    ``ray.shutdown``; the tests' cluster holder for its lifetime.

    ``join=True``: only the single-machine mode, for a driver joining a cluster at a loopback
    address (a cluster started here): Ray would otherwise rewrite 127.0.0.1 to the machine's
    address, where such a cluster does not listen."""

    def __init__(self, token: str | None = None, *, join: bool = False) -> None:
        self.token, self.join = token, join
        self.saved: dict[str, str | None] = {}
        self.flag: Any = None

    def __enter__(self) -> "LocalRayEnvironment":
        env = local_ray_env(self.token)
        if self.join:  # joining a loopback cluster: its address kept, and the user's token settings
            env = {SINGLE_MACHINE: env[SINGLE_MACHINE]}
        for k, v in env.items():
            self.saved[k] = os.environ.get(k)
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        try:
            from ray._private import ray_constants  # read by services.get_node_ip_address at call time

            self.flag = ray_constants.ENABLE_RAY_CLUSTER
            ray_constants.ENABLE_RAY_CLUSTER = False
        except (ImportError, AttributeError):  # another Ray layout: the environment variable still applies
            self.flag = None
        _reload_auth()
        return self

    def __exit__(self, *exc) -> None:
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if self.flag is not None:
            from ray._private import ray_constants

            ray_constants.ENABLE_RAY_CLUSTER = self.flag
        _reload_auth()


def _reload_auth() -> None:
    """Make this process's Ray read ``RAY_AUTH_MODE``/``RAY_AUTH_TOKEN`` again: importing ``ray``
    caches its configuration, so a token set afterwards would reach the cluster's processes (which
    read the environment when they start) but not this driver, which the cluster then refuses."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()
    except (ImportError, AttributeError):  # a Ray without token authentication: nothing cached
        pass


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback interface."""
    import ipaddress

    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def loopback_only(port: int, timeout: float = 1.0) -> bool:
    """Whether what listens at ``port`` of the loopback interface listens there only: no connection
    at that port on any of this machine's other addresses (a cluster started by report_builder, not
    one that ``ray start --head`` bound to every interface)."""
    import socket

    import psutil

    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family not in (socket.AF_INET, socket.AF_INET6) or is_loopback(a.address.split("%")[0]):
                continue
            try:
                socket.create_connection((a.address.split("%")[0], port), timeout=timeout).close()
                return False
            except OSError:
                continue
    return True


def start_local(ray, num_cpus: int | None = None, token: str | None = None, **kw: Any) -> LocalRayEnvironment:
    """Start a local Ray bound to the loopback address with token authentication (`local_ray_env`,
    `local_init_options`; ``token``: the cluster's, default a new one); returns the entered
    environment, to be exited after ``ray.shutdown()``."""
    env = LocalRayEnvironment(token).__enter__()
    try:
        ray.init(**local_init_options(num_cpus), **kw)
    except BaseException:
        env.__exit__(None, None, None)
        raise
    return env
