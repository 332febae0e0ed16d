"""A round trip of the global index (``cluster_backend``) as one script call per node: ``Ops``.

A check's reads and writes are a few dozen commands over the nodes (a bucket a table, a record, a directory
slot, an append a table...).  Sent one by one, each costs the worker its packing and routing and the node its
command overhead (``redis_cluster_scale.py``: 29 Redis calls a check, 8 workers on 3 nodes).  ``Ops`` sends the
commands of one round trip that fall on one node as one ``EVALSHA`` of ``BATCH_LUA``: the commands' names and
arguments go as the script's arguments, the replies come back as one array, in order.

The script declares no key (``#!lua flags=allow-cross-slot-keys``: a Redis Cluster node refuses a call whose
declared keys lie in several slots, but lets a script so flagged touch any key of the slots it serves).  Before
it runs any command, it reads every key it was given (``EXISTS``, under ``pcall``): a key the node does not
serve (a slot moved or moving: resharding, failover) fails that read, and the script returns ``-1`` having
written nothing.  The worker then reads the slot map again and sends that node's commands one by one
(``node_link``: ``MOVED`` and ``ASK`` answered per key), as before ``Ops`` existed: the same replies.

Atomicity: each node's commands of a round trip now run at once (a script is atomic on its node), in the order
added; across nodes nothing changed (the backend's docstring).
"""

from __future__ import annotations

import hashlib
from typing import Any

from .cluster_layout import ROOM_MIN, ROOM_SHARE

__all__ = ["Ops", "APPEND_LUA", "REMOVE_LUA", "UNSET_EXACT_LUA", "DIRECTORY_LUA", "BATCH_LUA", "SCRIPTS", "sha_of"]

#: Appends an entry to a table bucket and returns the bytes of its entries now.  In place (SETRANGE of the entry
#: and of the header) while the bucket has spare room; when it is full, the string is made again at its entries'
#: size plus ``cluster_layout.room`` (SETRANGE or APPEND alone would let Redis keep up to as much again spare).
#: Measured by redis_append_cost.py: 4-7 µs of Redis CPU an append to buckets of 1.4-14 KB, against 6-39 µs for a
#: script that copied the whole bucket each time (layout 2).
_APPEND_FN = """
local function append(key, entry)
  local used = 0
  local head = redis.call('GETRANGE', key, 0, 3)
  if #head == 4 then used = struct.unpack('>I4', head) end
  local now = used + #entry
  if 4 + now > redis.call('STRLEN', key) then
    local keep = redis.call('GETRANGE', key, 0, used + 3)
    if #keep < 4 then keep = '\\0\\0\\0\\0' end
    redis.call('SET', key, keep .. string.rep('\\0', #entry + math.floor(now / %d) + %d))
  end
  redis.call('SETRANGE', key, used + 4, entry)
  redis.call('SETRANGE', key, 0, struct.pack('>I4', now))
  return now
end
""" % (ROOM_SHARE, ROOM_MIN)
#: Removes the entry of a seq (4 bytes) from a table bucket; returns 1 if found.  The entries after it move up, the
#: string keeps its length (its spare room grows by an entry).
_REMOVE_FN = """
local function remove(key, seq)
  local data = redis.call('GET', key)
  if not data then return 0 end
  local used = struct.unpack('>I4', data)
  for i = 5, used - 3, 8 do
    if string.sub(data, i + 4, i + 7) == seq then
      redis.call('SET', key, struct.pack('>I4', used - 8) .. string.sub(data, 5, i - 1) .. string.sub(data, i + 8)
        .. string.rep('\\0', 8))
      return 1
    end
  end
  return 0
end
"""
#: Deletes a short page's digest (hash field) if it still names the seq given.
_UNSET_FN = """
local function unset(key, digest, seq)
  if redis.call('HGET', key, digest) == seq then return redis.call('HDEL', key, digest) end
  return 0
end
"""
#: Writes a directory slot: SETRANGE at an offset, on a string made at its full size when the key is new: SETRANGE
#: alone grows a string to up to twice what it needs (measured at 1M pages: 14 bytes of directory per page, 12 at
#: full size, 11 a seq number; redis_cluster_scale.py).
_DIRECTORY_FN = """
local function directory(key, offset, slot, size)
  if redis.call('EXISTS', key) == 0 then redis.call('SET', key, string.rep('\\0', tonumber(size))) end
  return redis.call('SETRANGE', key, offset, slot)
end
"""
APPEND_LUA = _APPEND_FN + "return append(KEYS[1], ARGV[1])\n"
REMOVE_LUA = _REMOVE_FN + "return remove(KEYS[1], ARGV[1])\n"
UNSET_EXACT_LUA = _UNSET_FN + "return unset(KEYS[1], ARGV[1], ARGV[2])\n"
DIRECTORY_LUA = _DIRECTORY_FN + "return directory(KEYS[1], ARGV[1], ARGV[2], ARGV[3])\n"

#: The commands ``Ops`` knows: code -> (the arguments after the key, the command sent alone).
_PLAIN: dict[str, tuple[int, tuple[str, ...]]] = {
    "g": (0, ("GET",)),
    "f": (1, ("HGET",)),
    "n": (2, ("HINCRBY",)),
    "s": (2, ("GETRANGE",)),
    "h": (2, ("HSET",)),
    "x": (2, ("HSETNX",)),
    "a": (1, ("EVALSHA", "append")),
    "r": (1, ("EVALSHA", "remove")),
    "u": (2, ("EVALSHA", "unset")),
    "d": (3, ("EVALSHA", "directory")),
}
#: ARGV: commands, each its code (``_PLAIN``), its key, its arguments; returns every command's reply in order
#: (nil as false), or -1 having run none when a key is not this node's.
BATCH_LUA = (
    "#!lua flags=allow-cross-slot-keys\n" + _APPEND_FN + _REMOVE_FN + _UNSET_FN + _DIRECTORY_FN + """
local sizes = {%s}
local n = #ARGV
local i = 1
while i <= n do
  local found = redis.pcall('EXISTS', ARGV[i + 1])
  if type(found) == 'table' and found.err then return -1 end
  i = i + 2 + sizes[ARGV[i]]
end
local out = {}
i = 1
while i <= n do
  local op, key = ARGV[i], ARGV[i + 1]
  local reply
  if op == 'g' then reply = redis.call('GET', key)
  elseif op == 'f' then reply = redis.call('HGET', key, ARGV[i + 2])
  elseif op == 'n' then reply = redis.call('HINCRBY', key, ARGV[i + 2], ARGV[i + 3])
  elseif op == 's' then reply = redis.call('GETRANGE', key, ARGV[i + 2], ARGV[i + 3])
  elseif op == 'h' then reply = redis.call('HSET', key, ARGV[i + 2], ARGV[i + 3])
  elseif op == 'x' then reply = redis.call('HSETNX', key, ARGV[i + 2], ARGV[i + 3])
  elseif op == 'a' then reply = append(key, ARGV[i + 2])
  elseif op == 'r' then reply = remove(key, ARGV[i + 2])
  elseif op == 'u' then reply = unset(key, ARGV[i + 2], ARGV[i + 3])
  elseif op == 'd' then reply = directory(key, ARGV[i + 2], ARGV[i + 3], ARGV[i + 4])
  else return redis.error_reply('simhash: unknown command ' .. op) end
  out[#out + 1] = reply
  i = i + 2 + sizes[op]
end
return out
""" % ", ".join(f"{code}={size}" for code, (size, _) in _PLAIN.items())
)


def sha_of(body: str) -> str:
    return hashlib.sha1(body.encode()).hexdigest()


#: name -> body of every script of the global index (loaded on every primary at open; ``node_link`` sends a body
#: as ``EVAL`` to a node that answers ``NOSCRIPT``)
SCRIPTS = {"append": APPEND_LUA, "remove": REMOVE_LUA, "unset": UNSET_EXACT_LUA, "directory": DIRECTORY_LUA,
           "batch": BATCH_LUA}
_SHA = {name: sha_of(body) for name, body in SCRIPTS.items()}


class Ops:
    """The commands of one round trip, one ``BATCH_LUA`` call per node; ``execute`` returns the replies in the order
    added (the same as each command sent alone: ``plain``)."""

    def __init__(self, link: Any) -> None:
        self.link = link
        self.ops: list[tuple[str, str, tuple[Any, ...]]] = []  # (code, key, arguments)

    def __len__(self) -> int:
        return len(self.ops)

    def add(self, code: str, key: str, *args: Any) -> None:
        self.ops.append((code, key, args))

    async def execute(self) -> list[Any]:
        node_of = self.link.node_of
        groups: dict[int, tuple[str, list[int], list[Any]]] = {}  # node -> (a key of it, op numbers, ARGV)
        for i, (code, key, args) in enumerate(self.ops):
            node = node_of(key)
            group = groups.get(id(node))
            if group is None:
                group = groups[id(node)] = (key, [], [])
            group[1].append(i)
            group[2].extend((code, key, *args))
        pipe = self.link.batch()
        for key, _, argv in groups.values():
            pipe.call(key, "EVALSHA", _SHA["batch"], 0, *argv)
        replies: list[Any] = [None] * len(self.ops)
        stale: list[int] = []
        for (_, indexes, _), answer in zip(groups.values(), await pipe.execute() if groups else []):
            if not isinstance(answer, list):  # -1: a key not on that node (a slot moved): none ran
                stale += indexes
                continue
            for i, reply in zip(indexes, answer):
                replies[i] = reply
        if stale:
            await self.link.refresh()
            pipe = self.link.batch()
            for i in stale:
                code, key, args = self.ops[i]
                pipe.call(key, *plain(code, key, args))
            for i, reply in zip(stale, await pipe.execute()):
                replies[i] = reply
        return replies


def plain(code: str, key: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The command ``code`` on its own, with its key declared (``node_link`` routes it, answers ``MOVED``)."""
    name = _PLAIN[code][1]
    if len(name) == 2:
        return ("EVALSHA", _SHA[name[1]], 1, key, *args)
    return (name[0], key, *args)
