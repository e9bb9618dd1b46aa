#!/usr/bin/env python3
"""Fails unless every socket a process (and its descendants) listens on is on loopback.

    infra/loopback_only.py PID [WHAT]

An AWS emulator answers anyone, unauthenticated: while the suite runs, it must not be reachable
from other hosts. LocalStack's default (twisted) gateway listens on 0.0.0.0 whatever
GATEWAY_LISTEN says, so infra/localstack.sh runs it on hypercorn, which binds the host it is
given, and checks with this script: what `ss -ltunp` shows (listening TCP, bound UDP: a DNS
server too), read from /proc, so it needs no iproute2. Prints each address; exits 1 naming any
beyond loopback, or when the process listens nowhere.
"""
import os, sys, socket, struct

def descendants(root):
    kids = {}
    for p in os.listdir('/proc'):
        if not p.isdigit():
            continue
        try:
            with open(f'/proc/{p}/stat') as f:
                ppid = int(f.read().rsplit(')', 1)[1].split()[1])
        except OSError:
            continue
        kids.setdefault(ppid, []).append(int(p))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out

def inodes(pids):
    found = set()
    for p in pids:
        try:
            for fd in os.listdir(f'/proc/{p}/fd'):
                try:
                    link = os.readlink(f'/proc/{p}/fd/{fd}')
                except OSError:
                    continue
                if link.startswith('socket:['):
                    found.add(link[8:-1])
        except OSError:
            pass
    return found

def listening():
    """(inode, proto, ip, port) of every listening TCP socket and every bound UDP socket."""
    tables = (
        ('tcp', socket.AF_INET, '0A'),
        ('tcp6', socket.AF_INET6, '0A'),
        ('udp', socket.AF_INET, '07'),
        ('udp6', socket.AF_INET6, '07'),
    )
    for name, fam, state in tables:
        try:
            lines = open(f'/proc/net/{name}').read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] != state:
                continue
            ip_hex, port_hex = f[1].split(':')
            raw = bytes.fromhex(ip_hex)
            if fam == socket.AF_INET:
                ip = socket.inet_ntop(fam, raw[::-1])
            else:
                ip = socket.inet_ntop(fam, b''.join(raw[i:i+4][::-1] for i in range(0, 16, 4)))
            yield f[9], name.rstrip('6'), ip, int(port_hex, 16)

root = int(sys.argv[1])
what = sys.argv[2] if len(sys.argv) > 2 else f"process {root}"
mine = inodes(descendants(root))
bad, seen = [], 0
for inode, proto, ip, port in listening():
    if inode in mine:
        seen += proto == 'tcp'
        ok = ip in ('127.0.0.1', '::1', '::ffff:127.0.0.1')
        print(f"{what} listens on {proto} {ip}:{port}" + ("" if ok else ": beyond loopback"))
        if not ok:
            bad.append(f'{proto} {ip}:{port}')
if not seen:
    sys.exit(f"{what} listens nowhere (is process {root} running?)")
if bad:
    sys.exit(f"{what} listens beyond loopback ({', '.join(bad)}): stopping")
