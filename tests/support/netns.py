"""Network namespaces for partition tests: a server process cut off from PostgreSQL.

PostgreSQL runs in the machine's own namespace. Each server process runs in a namespace
of its own, joined to the machine's by two veth pairs: one carries its database
connections, the other its clients. ``cut`` drops every packet of the database link in
both directions (a ``blackhole`` qdisc on both ends: no reset, no error, as a real
partition), ``heal`` lets them through again; the client link is never cut, so a client
stays connected to the process that is cut off.

Needs root and iproute2 (``ip``, ``tc``). ``Topology.create`` raises
``NetnsUnavailable`` saying why when they are missing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO


class NetnsUnavailable(RuntimeError):
    """Namespaces cannot be made here (not root, no iproute2, no kernel support)."""


def _run(*cmd: str) -> None:
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr.strip()}")


@dataclass
class Node:
    """One namespace: its name, and the addresses on each side of its two links."""

    ns: str
    db_dev: str  # the database link's end in the machine's namespace
    db_peer: str  # its end in the node's namespace
    db_host: str  # PostgreSQL's address as the node reaches it
    client_dev: str  # the client link's end in the machine's namespace
    client_addr: str  # the node's address for clients
    cut_off: bool = False

    @property
    def prefix(self) -> list[str]:
        """What runs a command inside the namespace."""
        return ["ip", "netns", "exec", self.ns]


@dataclass
class Topology:
    """Namespaces for ``count`` server processes, under one slot of the machine."""

    slot: int
    nodes: list[Node] = field(default_factory=list)
    _lock: IO[str] | None = None

    @classmethod
    def create(cls, count: int = 2) -> Topology:
        """Make the namespaces and links (a free slot: parallel test workers each get
        their own names and subnets)."""
        if os.geteuid() != 0:
            raise NetnsUnavailable("partition tests make network namespaces, which needs root")
        for tool in ("ip", "tc"):
            if shutil.which(tool) is None:
                raise NetnsUnavailable(f"partition tests need iproute2 ({tool!r} is missing)")
        slot, lock = _free_slot()
        topo = cls(slot, _lock=lock)
        try:
            for i in range(1, count + 1):
                topo.nodes.append(topo._node(i))
        except BaseException as exc:
            topo.destroy()
            if isinstance(exc, RuntimeError):
                raise NetnsUnavailable(str(exc)) from exc
            raise
        return topo

    def _node(self, i: int) -> Node:
        k = self.slot
        ns = f"outlast-p{k}-{i}"
        db, client = f"op{k}d{i}", f"op{k}c{i}"
        node = Node(ns, db, f"{db}n", f"10.{k}.{i}.1", client, f"10.{k}.{i + 100}.2")
        with contextlib.suppress(RuntimeError):  # a leftover of a killed run
            _run("ip", "netns", "del", ns)
        _run("ip", "netns", "add", ns)
        for dev, net in ((db, f"10.{k}.{i}"), (client, f"10.{k}.{i + 100}")):
            with contextlib.suppress(RuntimeError):
                _run("ip", "link", "del", dev)
            _run("ip", "link", "add", dev, "type", "veth", "peer", "name", f"{dev}n")
            _run("ip", "link", "set", f"{dev}n", "netns", ns)
            _run("ip", "addr", "add", f"{net}.1/24", "dev", dev)
            _run("ip", "link", "set", dev, "up")
            _run(*node.prefix, "ip", "addr", "add", f"{net}.2/24", "dev", f"{dev}n")
            _run(*node.prefix, "ip", "link", "set", f"{dev}n", "up")
        _run(*node.prefix, "ip", "link", "set", "lo", "up")
        return node

    @property
    def db_hosts(self) -> tuple[str, ...]:
        """The addresses PostgreSQL must listen on for the nodes to reach it."""
        return tuple(n.db_host for n in self.nodes)

    def cut(self, node: Node) -> None:
        """Drop every packet between the node and PostgreSQL, both ways, silently."""
        _run("tc", "qdisc", "add", "dev", node.db_dev, "root", "blackhole")
        _run(*node.prefix, "tc", "qdisc", "add", "dev", node.db_peer, "root", "blackhole")
        node.cut_off = True

    def heal(self, node: Node) -> None:
        """Let the node's database traffic through again."""
        with contextlib.suppress(RuntimeError):
            _run("tc", "qdisc", "del", "dev", node.db_dev, "root")
        with contextlib.suppress(RuntimeError):
            _run(*node.prefix, "tc", "qdisc", "del", "dev", node.db_peer, "root")
        node.cut_off = False

    def destroy(self) -> None:
        for node in self.nodes:
            for dev in (node.db_dev, node.client_dev):
                with contextlib.suppress(RuntimeError):
                    _run("ip", "link", "del", dev)
            with contextlib.suppress(RuntimeError):
                _run("ip", "netns", "del", node.ns)
        self.nodes = []
        if self._lock is not None:
            self._lock.close()  # releases the slot
            self._lock = None


def _free_slot() -> tuple[int, IO[str]]:
    """A slot number (the second octet of the subnets, part of every name) no other
    test worker holds, and the lock that holds it until closed."""
    where = Path("/run") if Path("/run").is_dir() else Path("/tmp")
    for k in range(40, 250):
        f = open(where / f"outlast-netns-{k}.lock", "w", encoding="utf-8")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        return k, f
    raise NetnsUnavailable("no free namespace slot")
