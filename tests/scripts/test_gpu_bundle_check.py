"""scripts/gpu_bundle_check.py on crafted ELF files: the .nv_fatbin reader
finds SASS per container and per architecture, and each rule can fail."""
import contextlib
import io
import os
import shutil
import struct
import tempfile
import unittest

import gpu_bundle_check as check

PTX, SASS = 1, 2


def cubin(sm, abi_version=8):
    """The 64-byte ELF header of a cubin for `sm` (EM_CUDA = 190)."""
    ident = b"\x7fELF" + bytes([2, 1, 1, 0x41, abi_version]) + bytes(7)
    e_flags = (sm << 8 | 4) if abi_version >= 8 else sm
    return ident + struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, 0, e_flags, 64, 0, 0, 64, 0,
                               0)


def entry(kind, arch, payload=None, flags=0x11):
    payload = payload if payload is not None else (cubin(arch) if kind == SASS else b".ptx")
    payload += bytes(-len(payload) % 8)
    header = struct.pack("<HHIQIIHHIIIQQQ", kind, 0x0101, 0x40, len(payload), len(payload), 0,
                         0, 9, arch, 0, 0, flags, 0, len(payload))
    return header + payload


def container(*entries):
    body = b"".join(entries)
    return struct.pack("<IHHQ", check.FATBIN_MAGIC, 1, 16, len(body)) + body


def elf(sections):
    """A minimal ELF64 file holding `sections` {name: bytes}, plus .shstrtab."""
    names = [""] + list(sections) + [".shstrtab"]
    strtab = b"".join(n.encode() + b"\0" for n in names)
    offsets = [sum(len(n.encode()) + 1 for n in names[:i]) for i in range(len(names))]
    blobs = [b""] + list(sections.values()) + [strtab]
    data, positions = bytearray(64), []
    for b in blobs:
        positions.append(len(data))
        data += b + bytes(-len(b) % 8)
    shoff = len(data)
    for i, b in enumerate(blobs):
        data += struct.pack("<IIQQQQIIQQ", offsets[i], 1 if i else 0, 0, 0, positions[i], len(b),
                            0, 0, 8, 0)
    header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header += struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(blobs),
                          len(blobs) - 1)
    data[:64] = header
    return bytes(data)


class DeviceCodeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def problems(self, fatbin):
        path = self.write("bin", elf({".text": b"\x90" * 16, ".nv_fatbin": fatbin}))
        found = []
        with contextlib.redirect_stdout(io.StringIO()):
            check.check_device_code([path], 90, found)
        return found

    def test_reads_kinds_and_architectures(self):
        blob = container(entry(PTX, 80), entry(SASS, 80), entry(PTX, 90), entry(SASS, 90))
        path = self.write("bin", elf({".nv_fatbin": blob}))
        containers = check.device_code(path)
        self.assertEqual([[(e["kind"], e["arch"]) for e in c] for c in containers],
                         [[(PTX, 80), (SASS, 80), (PTX, 90), (SASS, 90)]])
        self.assertEqual([e["cubin_arch"] for e in containers[0]], [None, 80, None, 90])
        self.assertEqual(check.describe(containers),
                         "PTX sm_80 x1, PTX sm_90 x1, SASS sm_80 x1, SASS sm_90 x1")

    def test_every_container_needs_sm90_sass(self):
        good = container(entry(SASS, 90))
        self.assertEqual(self.problems(good + good), [])
        ptx_only = container(entry(PTX, 90), entry(SASS, 80))
        found = self.problems(good + ptx_only)
        self.assertEqual(len(found), 1)
        self.assertIn("1 of 2 fatbin containers carry no sm_90 SASS", found[0])

    def test_old_cubin_abi_is_read_too(self):
        blob = container(entry(SASS, 90, payload=cubin(90, abi_version=7)))
        path = self.write("bin", elf({".nv_fatbin": blob}))
        self.assertEqual(check.device_code(path)[0][0]["cubin_arch"], 90)

    def test_cubin_naming_another_sm_fails(self):
        found = self.problems(container(entry(SASS, 90, payload=cubin(80))))
        self.assertTrue(any("cubin names another SM" in p for p in found), found)

    def test_no_fatbin_section_is_no_device_code(self):
        self.assertIsNone(check.device_code(self.write("cpu", elf({".text": b"\xc3"}))))

    def test_corrupt_section_is_reported(self):
        found = self.problems(b"\x01\x02\x03\x04" + bytes(28))
        self.assertTrue(any("cannot read .nv_fatbin" in p for p in found), found)

    def test_empty_section_is_reported(self):
        self.assertTrue(any("holds no entries" in p for p in self.problems(b"")))

    def test_container_running_past_the_section_is_reported(self):
        blob = container(entry(SASS, 90))
        found = self.problems(blob[:-16])
        self.assertTrue(any("runs past the section" in p for p in found), found)

    def test_gpu_binary_needs_sass_itself_or_in_a_bundled_library(self):
        deps = {"/b/loomd": ["libcudart.so.13", "libloom_kernels_cuda.so"],
                "/b/gpu_ceilings": ["libcudart.so.13"], "/b/loom": ["libc.so.6"]}
        saved = check.needed
        check.needed = lambda path: deps[path]
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                ok, missing = [], []
                check.check_gpu_binaries(list(deps), {"libloom_kernels_cuda.so", "gpu_ceilings"},
                                         90, ok)
                check.check_gpu_binaries(list(deps), {"gpu_ceilings"}, 90, missing)
        finally:
            check.needed = saved
        self.assertEqual(ok, [])
        self.assertEqual(len(missing), 1)
        self.assertIn("loomd: loads the CUDA runtime", missing[0])


class VersionTest(unittest.TestCase):
    def test_newest_compares_numerically_and_by_prefix(self):
        versions = {"GLIBC_2.4", "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_PRIVATE", "GLIBCXX_3.4.30",
                    "GLIBCXX_3.4.9", "CXXABI_1.3.11"}
        self.assertEqual(check.newest(versions, "GLIBC"), "GLIBC_2.34")
        self.assertEqual(check.newest(versions, "GLIBCXX"), "GLIBCXX_3.4.30")
        self.assertIsNone(check.newest({"GCC_3.0"}, "GLIBC"))

    def test_limits_and_needed_rules_fail_on_a_real_binary(self):
        true = shutil.which("true")
        ok, strict, foreign = [], [], []
        with contextlib.redirect_stdout(io.StringIO()):
            check.check_libraries([true], [], {"GLIBC": "2.35"}, False, ok)
            check.check_libraries([true], [], {"GLIBC": "2.2"}, False, strict)
        self.assertEqual(ok, [])
        self.assertTrue(any("newer than GLIBC_2.2" in p for p in strict), strict)
        saved = check.GLIBC_LIBS
        check.GLIBC_LIBS = saved - {"libc.so.6"}
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                check.check_libraries([true], [], {"GLIBC": "2.35"}, False, foreign)
        finally:
            check.GLIBC_LIBS = saved
        self.assertTrue(any("NEEDED libc.so.6" in p for p in foreign), foreign)


if __name__ == "__main__":
    unittest.main()
