#!/usr/bin/env python3
"""test_deploy_configs.py - deploy/cluster/ agrees with itself and the wire.

docker-compose.yml cannot run here (no Docker engine), so what it runs is
checked instead:

- HAProxy validates haproxy.cfg (`haproxy -c`);
- its tcp-check sends exactly the frame of Request{id 1, ping{nonce 1}},
  and its expect pattern matches the Pong of SERVING and of DRAINING_STATE
  and not NOT_SERVING (encoded here by protobuf, as pathd encodes them);
- every `server replicaN` line has a replicaN.json whose listen and
  agent_check ports it names, and a compose service of that name mounting
  that file; every replica's log is the compose service `redis` on the
  port redis.conf gives;
- redis.conf keeps what is acknowledged: appendonly yes, appendfsync
  always, maxmemory-policy noeviction;
- a replica config is one pathd accepts (`pathd --check-config` is not run:
  the scenes' paths are the image's; test_cluster.py starts them).

    test_deploy_configs.py SOURCE_DIR       (pathd_pb2 on PYTHONPATH)
"""
import json
import os
import re
import struct
import subprocess
import sys

import pathd_pb2 as pb

root = sys.argv[1]
deploy = os.path.join(root, "deploy", "cluster")


def read(name):
    with open(os.path.join(deploy, name)) as f:
        return f.read()


def directive(text, key):
    """Values of the non-comment lines starting with key."""
    return [line.split(None, len(key.split()))[-1] for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#") and line.split()[:len(key.split())] == key.split()]


haproxy = read("haproxy.cfg")
r = subprocess.run(["haproxy", "-c", "-q", "-f", os.path.join(deploy, "haproxy.cfg")],
                   capture_output=True, text=True)
assert r.returncode == 0, f"haproxy -c: {r.stdout}{r.stderr}"

# The health check's bytes.
body = pb.Request(id=1, ping=pb.Ping(nonce=1)).SerializeToString()
frame = struct.pack(">I", len(body)) + body
[send] = directive(haproxy, "tcp-check send-binary")
assert bytes.fromhex(send) == frame, (send, frame.hex())
[expect] = directive(haproxy, "tcp-check expect rbinary")


def pong_hex(state):
    resp = pb.Response(id=1, final=True, pong=pb.Pong(nonce=1, serving=state), server_us=35)
    return struct.pack(">I", resp.ByteSize()).hex() + resp.SerializeToString().hex()


# HAProxy matches rbinary against the hex of what it read.
for state, passes in ((pb.SERVING, True), (pb.DRAINING_STATE, True), (pb.NOT_SERVING, False),
                      (pb.SERVING_UNKNOWN, False)):
    hit = re.search(expect, pong_hex(state), re.IGNORECASE) is not None
    assert hit == passes, (pb.ServingState.Name(state), expect, pong_hex(state))
assert "720408011001" in pong_hex(pb.SERVING)
for opt in ("on-marked-down shutdown-sessions", "agent-check", "check"):
    assert any(opt in line for line in directive(haproxy, "default-server")), opt
assert directive(haproxy, "mode") == ["tcp"]

# Replicas: haproxy's server lines, the configs, compose's services.
compose = read("docker-compose.yml")
redis_conf = read("redis.conf")
[redis_port] = directive(redis_conf, "port")
servers = re.findall(r"^\s*server (replica\d+) (\S+):(\d+) agent-port (\d+)", haproxy, re.M)
assert len(servers) >= 2, servers
for name, host, port, agent in servers:
    conf = json.loads(read(f"{name}.json"))
    assert host == name, (name, host)
    assert conf["listen"].rsplit(":", 1)[1] == port, (name, conf["listen"], port)
    assert conf["agent_check"].rsplit(":", 1)[1] == agent, (name, conf["agent_check"], agent)
    assert conf["log"]["redis"] == f"redis:{redis_port}", conf["log"]
    assert re.search(rf"^  {name}:\n(    .*\n)*?    volumes: \[\"./{name}.json:", compose, re.M), name
    assert f'"--config", "/etc/pathd-cluster/{name}.json"' in compose, name
    for scene in conf["scenes"]:
        # The image's copy of config/ (Dockerfile: COPY config/ /etc/pathd/).
        assert scene["map"].startswith("/etc/pathd/scenes/"), scene["map"]
        assert os.path.exists(os.path.join(root, "config", "scenes", os.path.basename(scene["map"]))), scene
services = re.findall(r"^  (\w+):$", compose.split("\nservices:\n", 1)[1].split("\nvolumes:\n", 1)[0], re.M)
assert sorted(services) == sorted(["redis", "haproxy"] + [s[0] for s in servers]), services
[front] = directive(haproxy, "bind")
assert f'"{front.lstrip(":")}:{front.lstrip(":")}"' in compose, front

assert directive(redis_conf, "appendonly") == ["yes"]
assert directive(redis_conf, "appendfsync") == ["always"]
assert directive(redis_conf, "maxmemory-policy") == ["noeviction"]
print(f"deploy/cluster: {len(servers)} replicas, HAProxy ping {send}, expect {expect}: consistent")
