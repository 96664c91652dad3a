"""tsan_reports.py keeps the reports Loom must answer for and drops only library races."""
import os
import unittest

import tsan_reports

TESTDATA = os.path.join(os.path.dirname(__file__), "testdata")


def read(name):
    with open(os.path.join(TESTDATA, name)) as f:
        return f.read()


def only_report(text):
    reports = tsan_reports.split_reports(text)
    assert len(reports) == 1, len(reports)
    return reports[0]


def replace_through_blank_line(report, start, replacement):
    """The report with the text from `start` up to its next blank line replaced."""
    head, _, rest = report.partition(start)
    _, blank, tail = rest.partition("\n\n")
    return head + replacement + blank + tail


# The inline frame Loom's own `s.resize(n, c)` shows between the Loom frame and
# libstdc++.so's out-of-line _M_replace_aux.
INLINE_RESIZE = ("    #3 std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> "
                 ">::resize(unsigned long, char) /usr/include/c++/12/bits/basic_string.h:1077 "
                 "(loomd_faults_test+0x2ce80)\n")


def through_inline_resize(report):
    """The same race, with Loom's own frame writing the string through std::string's API."""
    lines = report.splitlines(keepends=True)
    out = []
    for line in lines:
        if "stream_call.cc:81" in line and out and "libstdc++.so" in out[-1]:
            out.append(INLINE_RESIZE)
        out.append(line)
    return "".join(out)


def loom_write(report):
    """The same race, with the write done in a Loom frame (no standard library between)."""
    head, sep, tail = report.partition("  Previous write of size 1")
    frames, blank, rest = tail.partition("\n\n")
    loom_frames = ("  Previous write of size 1 at 0x7b1400002c50 by thread T8:\n"
                   "    #0 loom::testing::HealthWatch::Poke() ../../tests/integration/stream_call.cc:90 "
                   "(loomd_faults_test+0x3ce00)\n")
    return head + loom_frames + blank + rest


class TsanReportsTest(unittest.TestCase):
    def test_grpc_status_string_built_by_the_library_is_ignored(self):
        report = only_report(read("grpc_status_string.txt"))
        self.assertTrue(tsan_reports.is_foreign_race(report))

    def test_the_same_string_written_through_loom_inline_code_fails(self):
        report = through_inline_resize(only_report(read("grpc_status_string.txt")))
        self.assertIn("::resize(", report)
        self.assertFalse(tsan_reports.is_foreign_race(report))

    def test_a_loom_write_racing_grpc_fails(self):
        report = loom_write(only_report(read("grpc_status_string.txt")))
        self.assertIn("HealthWatch::Poke", report)
        self.assertFalse(tsan_reports.is_foreign_race(report))

    def test_a_string_the_library_wrote_and_frees_is_ignored(self):
        report = only_report(read("grpc_freed_string.txt"))
        self.assertIn("operator delete", report)
        self.assertTrue(tsan_reports.is_foreign_race(report))

    def test_a_freed_string_loom_wrote_through_inline_code_fails(self):
        report = only_report(read("grpc_freed_string.txt")).replace(
            "    #3 SetUp ../../tests/integration/loomd_integration_test.cc:66",
            INLINE_RESIZE + "    #4 SetUp ../../tests/integration/loomd_integration_test.cc:66", 1)
        self.assertIn("::resize(", report)
        self.assertFalse(tsan_reports.is_foreign_race(report))

    def test_allocation_stack_is_the_heap_block_frames(self):
        stack = tsan_reports.allocation_stack(only_report(read("grpc_status_string.txt")))
        self.assertTrue(stack[0].lstrip().startswith("#0 operator new"))
        self.assertIn("stream_call.cc:81", stack[7])

    def test_reactor_lifetime_frames_include_the_shared_base(self):
        frames = [
            "    #3 loom::GenerateStreamReactor::OnWriteDone(bool) ../../server/generate_stream_reactor.cc:40 (loomd+0x1)",
            "    #3 loom::GenerateReactorBase<loom::GenerateStreamReactor, grpc::ServerWriteReactor<"
            "loom::v1::GenerateStreamResponse> >::OnDone() ../../server/generate_reactor_base.h:48 (loomd+0x1)",
            "    #1 loom::GenerateReactorBase<loom::GenerateUnaryReactor, grpc::ServerUnaryReactor>::"
            "~GenerateReactorBase() ../../server/generate_reactor_base.h:33 (loomd+0x1)",
            "    #1 ~GenerateReactorBase ../../server/generate_reactor_base.h:33 (loomd+0x1)",
            "    #2 loom::GenerateUnaryReactor::GenerateUnaryReactor(int) ../../server/generate_unary_reactor.cc:9 (loomd+0x1)",
        ]
        matched = [bool(tsan_reports.REACTOR_LIFETIME.search(f)) for f in frames]
        self.assertEqual(matched, [False, True, True, True, True])

class ReceivedRequestTest(unittest.TestCase):
    """gRPC parses a bidi request into the message a new reactor handed StartRead.

    From a CI log of the tsan stage (python_client_test, server reflection);
    the read's frames #1 to #5, cut from that log, are filled in.
    """

    def setUp(self):
        self.report = only_report(read("grpc_received_request.txt"))

    def test_the_parse_racing_the_reactor_allocation_is_ignored(self):
        self.assertTrue(tsan_reports.is_foreign_race(self.report))

    def test_the_parse_racing_a_loom_callback_fails(self):
        report = self.report.replace(
            "    #1 ServerReflectionInfo ../../server/reflection_service.cc:164",
            "    #1 loom::ReflectionReactor::OnReadDone(bool) ../../server/reflection_service.cc:127", 1)
        self.assertNotEqual(report, self.report)
        self.assertFalse(tsan_reports.is_foreign_race(report))

    def test_a_parse_outside_the_receive_op_fails(self):
        report = "\n".join(line for line in self.report.splitlines()
                           if "call_op_set.h" not in line and "callback_common.h" not in line)
        self.assertFalse(tsan_reports.is_foreign_race(report))


class ReceivedOneofRequestTest(unittest.TestCase):
    """The same receive op, with the race seen in the generated message code.

    From a CI log of the tsan stage: libprotobuf's parser clears the oneof of
    a v1 request before parsing into it. The read's frames #0 to #2, cut from
    that log, are filled in from the generated reflection.pb.cc.
    """

    def setUp(self):
        self.report = only_report(read("grpc_received_oneof_request.txt"))

    def test_the_clear_before_the_parse_is_ignored(self):
        self.assertTrue(tsan_reports.is_foreign_race(self.report))

    def test_a_loom_frame_above_the_receive_op_fails(self):
        lines = self.report.splitlines(keepends=True)
        at = next(i for i, line in enumerate(lines) if "ParseFromZeroCopyStream" in line)
        lines.insert(at, "    #2 loom::Answer(loom::ReflectionIndex const&) "
                         "../../server/reflection_service.cc:90 (loomd+0xd8000)\n")
        self.assertFalse(tsan_reports.is_foreign_race("".join(lines)))

    def test_the_read_in_on_read_done_fails(self):
        on_read_done = ("    #3 loom::ReflectionReactor::OnReadDone(bool) "
                        "../../server/reflection_service.cc:127 (loomd+0xd8c00)\n"
                        "    #4 grpc::internal::ServerBidiReactor::OnReadDone "
                        "/usr/include/grpcpp/support/server_callback.h:420 (loomd+0xd8d00)")
        report = replace_through_blank_line(
            self.report, "    #3 google::protobuf::MessageLite::ParseFrom", on_read_done)
        self.assertFalse(tsan_reports.is_foreign_race(report))


class ReceivedLibraryBufferTest(unittest.TestCase):
    """ZeroMQ's I/O thread fills a buffer libzmq allocated; Loom reads it."""

    def setUp(self):
        self.report = only_report(read("zmq_received_message.txt"))

    def test_a_loom_read_of_the_received_message_is_ignored(self):
        self.assertTrue(tsan_reports.is_foreign_race(self.report))

    def test_a_loom_write_to_that_buffer_fails(self):
        report = self.report.replace("Previous read of size", "Previous write of size")
        self.assertNotEqual(report, self.report)
        self.assertFalse(tsan_reports.is_foreign_race(report))

    def test_a_block_loom_allocated_fails(self):
        loom_alloc = ("  Location is heap block of size 18160 at 0x7ba40001e000 allocated by thread T5:\n"
                      "    #0 malloc ../../../../src/libsanitizer/tsan/tsan_interceptors_posix.cpp:647 "
                      "(libtsan.so.2+0x3ebb8)\n"
                      "    #1 loom::KvEventPublisher::Send(std::span<loom::KvEvent const, "
                      "18446744073709551615ul>) ../../server/kv_event_publisher.cc:300 "
                      "(kv_event_publisher_test+0x1000)")
        report = replace_through_blank_line(self.report, "  Location is heap block", loom_alloc)
        self.assertFalse(tsan_reports.is_foreign_race(report))


if __name__ == "__main__":
    unittest.main()
