"""A seccomp filter for sandboxed processes: refuse (EPERM) the system calls untrusted Python never
needs and kernel exploits often start from. Built here as raw classic-BPF bytes; the child installs
it on itself (child.py `_seccomp`) before any untrusted code runs, at every isolation level.

Only for x86_64 (the syscall numbers are the architecture's); elsewhere `program()` is empty and the
results say `seccomp: none`. The filter also refuses the x32 ABI and any other architecture.
"""

from __future__ import annotations

import os
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
X32_BIT = 0x40000000
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
EPERM = 1
# ptrace & co. (read or write other processes), keys, bpf, perf, userfaultfd, io_uring, namespaces and
# mounts, modules, kexec, swap, reboot, handle-based opens, personality, acct, quotactl, syslog, mq_open.
DENY_X86_64 = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "pidfd_getfd": 438,
    "add_key": 248, "request_key": 249, "keyctl": 250, "bpf": 321, "perf_event_open": 298,
    "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246,
    "kexec_file_load": 320, "swapon": 167, "swapoff": 168, "reboot": 169, "open_by_handle_at": 304,
    "name_to_handle_at": 303, "personality": 135, "acct": 163, "quotactl": 179, "syslog": 103,
    "lookup_dcookie": 212, "vhangup": 153,
    # POSIX message queues outlive their processes in the slot's ipc namespace, and nothing lists them
    # for the zygote to remove (zygote.py): refused. SysV objects are listed and removed instead.
    "mq_open": 240,
}

_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program() -> bytes:
    """The filter as `struct sock_filter[]` bytes ('' where it does not apply)."""
    if os.uname().machine != "x86_64":
        return b""
    deny = sorted(set(DENY_X86_64.values()))
    n = len(deny)
    # 0: load arch; 1: arch ok? else jump to errno; 2: load nr; 3: x32? -> errno; 4..: each nr -> errno
    insns = [_insn(_LD_W_ABS, 0, 0, 4),
             _insn(_JEQ_K, 0, 2 + n + 1, AUDIT_ARCH_X86_64),
             _insn(_LD_W_ABS, 0, 0, 0),
             _insn(_JGE_K, n + 1, 0, X32_BIT)]
    for i, nr in enumerate(deny):
        insns.append(_insn(_JEQ_K, n - i, 0, nr))   # to the errno return
    insns.append(_insn(_RET_K, 0, 0, RET_ALLOW))
    insns.append(_insn(_RET_K, 0, 0, RET_ERRNO | EPERM))
    return b"".join(insns)
