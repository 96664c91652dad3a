#!/usr/bin/env python3
"""Static checks of the GPU machine's bundle (.bundle/, made by scripts/gpu_bundle).

  scripts/gpu_bundle_check.py BUNDLE_DIR [--repo DIR]

For every file under BUNDLE/bin and BUNDLE/lib:
  - device code: the ELF section .nv_fatbin is read here (no cuobjdump needed).
    It is a run of fatbin containers (magic 0xBA55ED50), one per CUDA
    translation unit; each holds entries whose header names the kind (1 = PTX,
    2 = ELF, that is SASS), the virtual or real architecture and the flags
    (64-bit, compressed). Every container must hold SASS for --arch (sm_90).
  - readelf -d: NEEDED lists only glibc, libstdc++/libgcc_s, the three CUDA
    libraries (libcudart.so.13, libcublas.so.13, libcublasLt.so.13) and files
    in BUNDLE/lib. A GPU binary without libcudart in NEEDED has cudart linked
    statically: reported.
  - readelf -V: the newest GLIBC_ and GLIBCXX_ versions required are at most
    --max_glibc (2.35) and --max_glibcxx (3.4.30).
Sizes: the bundle plus what travels with the working tree (tracked files and
untracked files git does not ignore) must stay under --max_mib (60 MiB).
Prints a readable report; exits 1 when any check fails.
"""
import argparse
import os
import re
import struct
import subprocess
import sys

FATBIN_MAGIC = 0xBA55ED50
KIND_NAMES = {1: "PTX", 2: "SASS"}
GLIBC_LIBS = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
              "ld-linux-x86-64.so.2", "libresolv.so.2", "libutil.so.1"}
CXX_LIBS = {"libstdc++.so.6", "libgcc_s.so.1"}
CUDA_LIBS = {"libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13"}


def elf_sections(data):
    """Name -> (offset, size) of an ELF64 little-endian file's sections."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = []
    for i in range(shnum):
        name, _type, _flags, _addr, off, size = struct.unpack_from(
            "<IIQQQQ", data, shoff + i * shentsize)
        headers.append((name, off, size))
    str_off, str_size = headers[shstrndx][1], headers[shstrndx][2]
    strtab = data[str_off:str_off + str_size]
    sections = {}
    for name, off, size in headers:
        end = strtab.find(b"\0", name)
        sections[strtab[name:end].decode()] = (off, size)
    return sections


def cubin_arch(payload):
    """The SM of an uncompressed cubin (EM_CUDA ELF), or None: ELF ABI version
    8 keeps it in e_flags bits 8-15, older versions in bits 0-7."""
    if payload[:4] != b"\x7fELF" or len(payload) < 52:
        return None
    machine, = struct.unpack_from("<H", payload, 18)
    e_flags, = struct.unpack_from("<I", payload, 48)
    if machine != 190:
        return None
    return (e_flags >> 8) & 0xFF if payload[8] >= 8 else e_flags & 0xFF


def fatbin_containers(blob):
    """Parses a .nv_fatbin section: a list of containers, each a list of
    entries {kind, arch, flags, size}."""
    containers, pos = [], 0
    while pos + 16 <= len(blob):
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", blob, pos)
        if magic != FATBIN_MAGIC:
            if any(blob[pos:]):
                raise ValueError(f"no fatbin magic at offset {pos:#x}")
            break  # zero padding after the last container
        entries, epos, end = [], pos + header_size, pos + header_size + fat_size
        if end > len(blob):
            raise ValueError(f"container at {pos:#x} runs past the section")
        while epos + 0x40 <= end:
            kind, _ver, ehdr, payload = struct.unpack_from("<HHIQ", blob, epos)
            if ehdr < 0x40 or payload == 0 and ehdr == 0:
                raise ValueError(f"bad fatbin entry header at {epos:#x}")
            arch, = struct.unpack_from("<I", blob, epos + 0x1C)
            flags, = struct.unpack_from("<Q", blob, epos + 0x28)
            entries.append({"kind": kind, "arch": arch, "flags": flags, "size": payload,
                            "cubin_arch": cubin_arch(blob[epos + ehdr:epos + ehdr + payload])})
            epos += ehdr + payload
        containers.append(entries)
        pos = end
    return containers


def device_code(path):
    """None when the file has no .nv_fatbin, else its containers."""
    with open(path, "rb") as f:
        data = f.read()
    sections = elf_sections(data)
    if ".nv_fatbin" not in sections:
        return None
    off, size = sections[".nv_fatbin"]
    return fatbin_containers(data[off:off + size])


def readelf(args, path):
    return subprocess.run(["readelf", *args, path], check=True, capture_output=True,
                          text=True).stdout


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf(["-d", "-W"], path))


def version_needs(path):
    """Version names this file requires from others (the .gnu.version_r section)."""
    text = readelf(["-V", "-W"], path)
    part = text.split(".gnu.version_r", 1)
    return set(re.findall(r"Name: (\S+)", part[1])) if len(part) == 2 else set()


def newest(versions, prefix):
    found = [v for v in versions if re.fullmatch(prefix + r"_[0-9.]+", v)]
    key = lambda v: tuple(int(x) for x in v.split("_")[-1].split("."))
    return max(found, key=key) if found else None


def as_tuple(version):
    return tuple(int(x) for x in version.split("."))


def git_bytes(repo, args):
    out = subprocess.run(["git", "-C", repo, "ls-files", "-z", *args], check=True,
                         capture_output=True).stdout
    total = 0
    for name in filter(None, out.split(b"\0")):
        p = os.path.join(repo, os.fsdecode(name))
        if os.path.isfile(p) and not os.path.islink(p):
            total += os.path.getsize(p)
    return total


def tree_bytes(root):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(root)
               for f in files if not os.path.islink(os.path.join(d, f)))


def describe(containers):
    kinds = {}
    for entries in containers:
        for e in entries:
            name = f"{KIND_NAMES.get(e['kind'], 'kind%d' % e['kind'])} sm_{e['arch']}"
            kinds[name] = kinds.get(name, 0) + 1
    return ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items()))


def check_device_code(files, arch, problems, quiet_without=()):
    """Checks every file's fatbin containers; returns the names of the files
    whose device code all carries sm_<arch> SASS. Files in quiet_without print
    nothing when they hold no device code."""
    print(f"Device code (.nv_fatbin; every container must carry SASS sm_{arch}):")
    good = set()
    for path in files:
        try:
            containers = device_code(path)
        except ValueError as e:
            problems.append(f"{path}: cannot read .nv_fatbin: {e}")
            continue
        name = os.path.basename(path)
        if containers is None:
            if path not in quiet_without:
                print(f"  {name:28} no device code")
            continue
        lacking = [i for i, entries in enumerate(containers)
                   if entries and not any(e["kind"] == 2 and e["arch"] == arch for e in entries)]
        sass = [e for c in containers for e in c if e["kind"] == 2]
        disagree = [e for e in sass if e["cubin_arch"] not in (None, e["arch"])]
        verified = sum(1 for e in sass if e["cubin_arch"] == e["arch"])
        compressed = sum(1 for c in containers for e in c if e["flags"] & 0xA000)
        print(f"  {name:28} {len(containers)} containers: {describe(containers)}"
              f"; {compressed} compressed, {verified} of {len(sass)} SASS confirmed by the cubin's"
              f" ELF header")
        if disagree:
            problems.append(f"{name}: {len(disagree)} SASS entries whose cubin names another SM")
        if not any(containers):
            problems.append(f"{name}: .nv_fatbin holds no entries")
        if lacking:
            problems.append(f"{name}: {len(lacking)} of {len(containers)} fatbin containers "
                            f"carry no sm_{arch} SASS")
        elif any(containers) and not disagree:
            good.add(name)
    return good


def check_gpu_binaries(bins, with_sass, arch, problems):
    """A binary that loads the CUDA runtime must carry sm_<arch> SASS itself or
    load a bundled library that does (the op library, libloom_kernels_cuda.so)."""
    for path in bins:
        name, deps = os.path.basename(path), needed(path)
        if not any(d.startswith("libcudart") for d in deps) and name not in with_sass:
            continue
        carriers = [d for d in deps if d in with_sass] + ([name] if name in with_sass else [])
        if carriers:
            print(f"  {name:28} GPU binary; sm_{arch} SASS in {', '.join(carriers)}")
        else:
            problems.append(f"{name}: loads the CUDA runtime but neither it nor a bundled library "
                            f"it needs carries sm_{arch} SASS")


def version_key(v):
    return as_tuple(v.split("_", 1)[1])


def names(files, limit=4):
    more = f" +{len(files) - limit} more" if len(files) > limit else ""
    return ", ".join(files[:limit]) + more


def check_libraries(files, bundled, limits, verbose, problems):
    print("Shared libraries and symbol versions (newest required of each):")
    print(f"  {'file':28} {'GLIBC':12} {'GLIBCXX':15} {'CXXABI':14} NEEDED beyond glibc/C++")
    allowed = GLIBC_LIBS | CXX_LIBS | CUDA_LIBS | set(bundled)
    rows = {}
    for path in files:
        name = os.path.basename(path)
        libs = needed(path)
        versions = version_needs(path)
        rows[name] = {p: newest(versions, p) for p in ("GLIBC", "GLIBCXX", "CXXABI")}
        for lib in libs:
            if lib not in allowed:
                problems.append(f"{name}: NEEDED {lib} is neither system, CUDA nor bundled")
        if name in bundled and not verbose:
            continue
        extra = [lib for lib in libs if lib not in GLIBC_LIBS | CXX_LIBS]
        cuda = [lib for lib in extra if lib in CUDA_LIBS]
        row = rows[name]
        static = ("cudart static; " if "/bin/" in path and "libcudart.so.13" not in libs and
                  device_code(path) is not None else "")
        print(f"  {name:28} {row['GLIBC'] or '-':12} {row['GLIBCXX'] or '-':15} "
              f"{row['CXXABI'] or '-':14} {static}{', '.join(cuda) or '-'}"
              f"{f' + {len(extra) - len(cuda)} bundled' if len(extra) > len(cuda) else ''}")
    for prefix, limit in limits.items():
        found = {n: r[prefix] for n, r in rows.items() if r[prefix]}
        if not found:
            print(f"  newest {prefix} required: none, limit {prefix}_{limit}")
            continue
        top = max(found.values(), key=version_key)
        who = sorted(n for n, v in found.items() if v == top)
        libs_top = max((v for n, v in found.items() if n in bundled), key=version_key,
                       default=None)
        print(f"  newest {prefix} required: {top} by {names(who)} (limit {prefix}_{limit}); "
              f"by the {len(bundled)} bundled libraries: {libs_top or 'none'}")
        for n, v in sorted(found.items()):
            if version_key(v) > as_tuple(limit):
                problems.append(f"{n} requires {v}, newer than {prefix}_{limit}")


def check_sizes(bundle, repo, max_mib, problems):
    mib = 1 << 20
    b, tracked = tree_bytes(bundle), git_bytes(repo, [])
    untracked = git_bytes(repo, ["--others", "--exclude-standard"])
    total = b + tracked + untracked
    print(f"Sizes: bundle {b / mib:.1f} MiB (bin {tree_bytes(os.path.join(bundle, 'bin')) / mib:.1f},"
          f" lib {tree_bytes(os.path.join(bundle, 'lib')) / mib:.1f}) + tracked tree "
          f"{tracked / mib:.1f} MiB + untracked {untracked / mib:.1f} MiB = {total / mib:.1f} MiB "
          f"(limit {max_mib} MiB)")
    if total >= max_mib * mib:
        problems.append(f"bundle plus tree is {total / mib:.1f} MiB, at or over {max_mib} MiB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle")
    ap.add_argument("--repo", default=".")
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--max_glibc", default="2.35")
    ap.add_argument("--max_glibcxx", default="3.4.30")
    ap.add_argument("--max_mib", type=float, default=60)
    ap.add_argument("--verbose", action="store_true", help="a row for every bundled library too")
    args = ap.parse_args()
    bins = sorted(os.path.join(args.bundle, "bin", f)
                  for f in os.listdir(os.path.join(args.bundle, "bin")))
    lib_dir = os.path.join(args.bundle, "lib")
    bundled = sorted(os.listdir(lib_dir)) if os.path.isdir(lib_dir) else []
    problems = []
    if not bins:
        problems.append(f"{args.bundle}/bin is empty")
    libs = [os.path.join(lib_dir, f) for f in bundled]
    with_sass = check_device_code(bins + libs, args.arch, problems, quiet_without=libs)
    check_gpu_binaries(bins, with_sass, args.arch, problems)
    check_libraries(bins + libs, bundled,
                    {"GLIBC": args.max_glibc, "GLIBCXX": args.max_glibcxx}, args.verbose, problems)
    check_sizes(args.bundle, args.repo, args.max_mib, problems)
    for p in problems:
        print(f"FAIL {p}")
    print("bundle checks:", "FAILED" if problems else "passed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
