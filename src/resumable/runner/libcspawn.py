"""Starting a program without holding Python's lock: the C library's ``posix_spawn`` through ctypes.

``os.posix_spawn`` keeps the GIL for the whole call, and glibc's ``posix_spawn`` (a clone with
``CLONE_VFORK``) returns only once the child has replaced itself with its program: a few tenths of
a millisecond per start during which no other thread of the runner (the one flushing the journal,
the one starting the other slot's step) can run a line of Python. A foreign function called through
``ctypes.CDLL`` releases the GIL for the call, so a start here stalls only the thread that asked
for it.

It speaks glibc's ABI (the flag values of ``<spawn.h>``, ``POSIX_SPAWN_SETSID`` since 2.26), so it
is used only where ``os.confstr`` names glibc; elsewhere ``available()`` is False and the caller
keeps ``os.posix_spawn``. The opaque C structures are given buffers far larger than glibc's (80
and 336 bytes on x86-64): their size is not part of any header Python can read.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterable
from typing import Any

_SETSIGDEF = 0x04  # glibc <spawn.h>
_SETSID = 0x80
_OPAQUE = 1024  # bytes for posix_spawnattr_t, posix_spawn_file_actions_t and sigset_t

_lock = threading.Lock()
# The signals to reset -> (the C library, the attributes every start with them shares), or None
# when this C library is not one this module speaks to.
_loaded: dict[tuple[int, ...], tuple[Any, Any] | None] = {}


def _glibc() -> bool:
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        return False
    name, _, number = version.partition(" ")
    try:
        major, minor = (int(x) for x in number.split(".")[:2])
    except ValueError:
        return False
    return name == "glibc" and (major, minor) >= (2, 26)


def _load(default_signals: Iterable[int]) -> tuple[Any, Any] | None:
    """The C library and the attributes every start shares (a new session, the given signals at
    their default), built once; None when this C library is not one this module speaks to."""
    key = tuple(default_signals)
    try:
        return _loaded[key]
    except KeyError:
        pass
    with _lock:
        if key not in _loaded:
            _loaded[key] = _build(key)
        return _loaded[key]


def _build(default_signals: tuple[int, ...]) -> tuple[Any, Any] | None:
    if not _glibc():
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        attr = ctypes.create_string_buffer(_OPAQUE)
        sigs = ctypes.create_string_buffer(_OPAQUE)
        if libc.posix_spawnattr_init(attr) != 0 or libc.sigemptyset(sigs) != 0:
            return None
        for sig in default_signals:
            if libc.sigaddset(sigs, sig) != 0:
                return None
        if libc.posix_spawnattr_setsigdefault(attr, sigs) != 0:
            return None
        if libc.posix_spawnattr_setflags(attr, ctypes.c_short(_SETSID | _SETSIGDEF)) != 0:
            return None
        libc.posix_spawn.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_void_p,
                                     ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    except (OSError, AttributeError):
        return None
    return libc, attr


def available(default_signals: Iterable[int] = ()) -> bool:
    return _load(default_signals) is not None


def env_entry(name: str, value: str) -> bytes:
    """``NAME=value`` as a C environment holds it. ValueError for what C cannot carry (a NUL, an
    empty name or one with ``=``), as ``os.posix_spawn`` refuses it."""
    key = os.fsencode(name)
    if not key or b"=" in key:
        raise ValueError("illegal environment variable name")
    entry = key + b"=" + os.fsencode(value)
    if b"\0" in entry:
        raise ValueError("embedded null byte")
    return entry


def spawn(program: str, argv: list[str], env: list[bytes], dups: Iterable[tuple[int, int]],
          default_signals: Iterable[int] = ()) -> int:
    """The pid of ``program`` started with ``argv`` and the environment ``env`` (entries of ``env_entry``) in
    a new session, with the signals ``default_signals`` at their default and each ``(fd, target)``
    of ``dups`` duplicated onto ``target``. OSError as posix_spawn reports it; ValueError for an
    argument C cannot carry."""
    loaded = _load(default_signals)
    if loaded is None:
        raise OSError(0, "posix_spawn through the C library is not available here")
    libc, attr = loaded
    path = os.fsencode(program)
    encoded = [os.fsencode(a) for a in argv]
    if b"\0" in path or b"\0" in b"".join(encoded):
        raise ValueError("embedded null byte")
    # NULL-terminated char *[]: a NUL inside an entry would cut it short silently, hence the checks.
    args = (ctypes.c_char_p * (len(encoded) + 1))(*encoded, None)
    envp = (ctypes.c_char_p * (len(env) + 1))(*env, None)
    actions = ctypes.create_string_buffer(_OPAQUE)
    if libc.posix_spawn_file_actions_init(actions) != 0:
        raise OSError(ctypes.get_errno(), "posix_spawn_file_actions_init failed")
    try:
        for fd, target in dups:
            rc = libc.posix_spawn_file_actions_adddup2(actions, fd, target)
            if rc != 0:
                raise OSError(rc, os.strerror(rc))
        pid = ctypes.c_int(0)
        rc = libc.posix_spawn(ctypes.byref(pid), path, actions, attr, args, envp)  # the GIL is released
        if rc != 0:
            raise OSError(rc, os.strerror(rc), program)
        return pid.value
    finally:
        libc.posix_spawn_file_actions_destroy(actions)
