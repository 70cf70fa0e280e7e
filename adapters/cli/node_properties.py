"""`kctl node --config server.properties`: a Kafka broker's properties file taken as it is.

Honoured: `broker.id`, `broker.rack`, `listeners` (the first `PLAINTEXT://host:port`, else the
first listener), `zookeeper.connect`, and the node keys of `adapters.cli.node.KNOWN_NODE_KEYS`
(the controller's settings). Command-line flags win over the file. Any other key a Kafka
`server.properties` may hold (`num.network.threads`, `log.retention.hours`, ...) is ignored,
and all of them are named in one warning line, so that the file of a real broker can be pointed
at unchanged. `--set` keys are still checked strictly (a typo there is refused).
"""
from __future__ import annotations

import re

IDENTITY_KEYS = ("broker.id", "broker.rack", "listeners", "zookeeper.connect")

_LISTENER = re.compile(r"(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[0-9a-fA-F:.]+\]|[^:\s]*):(?P<port>[0-9]+)")


class PropertiesError(ValueError):
    """A value in the file that cannot be used (the message names the key)."""


def split_file_settings(file_settings: dict[str, str], known: set[str]) -> tuple[dict, dict[str, str], list[str]]:
    """(identity values, node settings, ignored keys) of a properties file's key=value pairs."""
    identity: dict = {}
    settings: dict[str, str] = {}
    ignored: list[str] = []
    for key, value in file_settings.items():
        if key == "broker.id":
            if not re.fullmatch(r"[0-9]{1,10}", value) or int(value) > 2**31 - 1:
                raise PropertiesError(f"broker.id must be a non-negative 32-bit integer, got {value!r}")
            identity["broker_id"] = int(value)
        elif key == "broker.rack":
            if not value:
                raise PropertiesError("broker.rack must not be empty")
            identity["rack"] = value
        elif key == "listeners":
            identity["listen"] = listen_address(value)
        elif key == "zookeeper.connect":
            if not value:
                raise PropertiesError("zookeeper.connect must not be empty")
            identity["zookeeper"] = value
        elif key in known:
            settings[key] = value
        else:
            ignored.append(key)
    return identity, settings, ignored


def listen_address(listeners: str) -> str:
    """`PLAINTEXT://host:port,...` as this node's HOST:PORT (an empty host: every interface)."""
    found = []
    for item in (s.strip() for s in listeners.split(",")):
        if not item:
            continue
        m = _LISTENER.fullmatch(item)
        if m is None:
            raise PropertiesError(f"listeners: {item!r} is not NAME://HOST:PORT")
        found.append(m)
    if not found:
        raise PropertiesError("listeners is empty")
    chosen = next((m for m in found if m["name"].upper() == "PLAINTEXT"), found[0])
    host = chosen["host"].strip("[]") or "0.0.0.0"
    return f"{host}:{chosen['port']}"
