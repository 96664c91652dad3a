#!/usr/bin/env python3
"""Reads ThreadSanitizer log files and fails on every report Loom must answer for.

The tsan build links Debian's gRPC, protobuf and Abseil, which are not built
with -fsanitize=thread: TSan cannot see the synchronization inside them, so it
reports races between two accesses that both belong to those libraries (their
.so files, or their headers inlined into our binaries). Only such reports are
ignored: a report with at least one racing access in Loom's own code, and
every report of another kind, fails. An access belongs to the frame nearest to
it that is neither TSan's interceptors nor the C++ standard library.

One narrow exception concerns a callback reactor's lifetime. gRPC binds a
reactor, runs its callbacks and calls its OnDone on different threads, ordered
by locks inside libgrpc. Loom's reactors make that order visible for their own
accesses (server/reactor_sink.h: ReactorRelease before handing the reactor to
gRPC, ReactorAcquire in OnDone), but gRPC's inline reactor code in
grpcpp/*.h (InternalBindCall, StartWrite, Finish, CallOnDone) also touches the
reactor after the last point Loom's code can release and before OnDone can
acquire. So does its receive op (CallOpRecvMessage in grpcpp/impl/call_op_set.h):
a bidi reactor hands StartRead a message it owns, and gRPC parses the next
request into it on a poller thread before the reactor's OnReadDone, which is
where Loom's code can first acquire (TSan may show the parse in libprotobuf or
in the generated message code it calls, such as the Clear before the parse).
A race between such an access and the construction (the service's handler, the
reactor's constructor) or the deletion (OnDone, the destructor) of a Loom
reactor is therefore ignored too, when the access reaches gRPC's reactor code
through library or generated frames only; any other access of Loom's code to a
reactor still fails.

Debian's GoogleTest, prebuilt without TSan (its frames show no source file),
counts as one of those libraries too.

Memory handed to a library: a block that Loom's code allocated (a string it
passed to gRPC) and that the library later frees on one of its threads races,
for TSan, between the allocation and the free, because the hand-over went
through the library's own synchronization. A race whose one access is an
allocation and whose other is a deallocation inside those libraries is
ignored; a Loom free, read or write racing the library still fails.

A string the library builds: gRPC's core builds std::strings (a call's
status message) through libstdc++.so on whichever thread polls the completion
queue, and hands them to the thread that owns the call, which reads them in
grpcpp's inline code. TSan sees neither the library frames that called
libstdc++.so nor the hand-over, so it blames the nearest instrumented frame, a
Loom call into gRPC. A race whose one access is owned by the libraries and
whose other access and allocation both entered the standard library's .so
straight from a Loom frame (no inline std::string frame between, so the call
came from code TSan cannot see) is ignored; a Loom write through std::string's
inline API, or any Loom access outside the standard library, still fails.

A string the library frees: the same hand-over the other way round. gRPC
builds a std::string on a Loom thread (TSan shows libstdc++.so entered
straight from the Loom frame that called into gRPC) and frees it on one of its
own threads. That free races, for TSan, with the write that filled the
string; TSan names no allocation, since the free is the racing access. A race
between a deallocation inside the libraries and such a hidden-code write is
ignored; a Loom write through std::string's inline API still fails.

A message the library received: ZeroMQ's I/O thread reads a message from its
socket into a buffer that libzmq allocated, and hands the message to the
thread that calls zmq_msg_recv through its own lock-free queues. Loom then
reads the buffer (zmq_msg_data). A race between the library's write and a Loom
read of a block the library allocated is ignored; a Loom write to it, or a
race on a block Loom allocated, still fails.

Usage: tsan_reports.py LOG_DIR   (logs written with TSAN_OPTIONS=log_path=LOG_DIR/tsan)
"""
import os
import re
import sys

# Debian library code Loom does not own: shared objects, and headers whose
# inline code runs under the libraries' own (invisible) locks.
FOREIGN_MODULE = re.compile(r"\((lib(grpc|grpc\+\+|gpr|upb|address_sorting|protobuf|absl_|re2|cares|ssl|crypto|z|zmq)[^)+]*)\+")
FOREIGN_SOURCE = re.compile(r" /usr/include/(grpc|grpcpp|grpc\+\+|absl|google/protobuf)/")
# Debian's GoogleTest is a static library built without TSan or debug info:
# its frames show no source file.
FOREIGN_GTEST = re.compile(r" testing::\S.* <null> \(")
# Frames that act for their caller: TSan's interceptors, libc, the C++ standard
# library, and protoc's generated message code (run by gRPC's handlers).
NEUTRAL = re.compile(r"libtsan\.so|/usr/include/c\+\+/|/src/libsanitizer/|\(libc\.so|\(libstdc\+\+\.so|"
                     r"\.pb\.(cc|h):")
ACCESS = re.compile(r"^  (Previous )?(atomic )?(Read|Write|read|write) of size|^  (Previous )?[Aa]tomic ")
FRAME = re.compile(r"^    #\d+ ")


def split_reports(text):
    return [r for r in text.split("==================\n") if "WARNING: ThreadSanitizer:" in r]


def access_stacks(report):
    stacks, current = [], None
    for line in report.splitlines():
        if ACCESS.match(line):
            current = []
            stacks.append(current)
        elif current is not None and FRAME.match(line):
            current.append(line)
        elif current is not None and not line.strip():
            current = None
    return stacks


def is_foreign_frame(frame):
    return bool(FOREIGN_MODULE.search(frame) or FOREIGN_SOURCE.search(frame) or
                FOREIGN_GTEST.search(frame))


def owner_is_foreign(stack):
    for frame in stack:
        if NEUTRAL.search(frame):
            continue
        return is_foreign_frame(frame)
    return True  # only allocator or libc frames: nothing of Loom's raced


# gRPC's inline reactor plumbing (including its receive op, which parses a
# message into the buffer a reactor's StartRead named), and a Loom reactor's
# construction or deletion.
GRPC_REACTOR_CODE = re.compile(r" /usr/include/grpcpp/(support|impl/codegen)/server_callback|"
                               r" grpc::internal::CallOpRecvMessage<.* /usr/include/grpcpp/impl/call_op_set\.h:")
# A reactor class is FooReactor or the templated GenerateReactorBase<...> that
# holds the shared construction, OnDone and destruction.
REACTOR_CLASS = r"\w+Reactor(Base<.*>)?"
REACTOR_LIFETIME = re.compile(
    r" loom::(\w+::)?(" + REACTOR_CLASS + r"::(~?\w+Reactor(Base)?|OnDone)|GenerationService::Generate\w*)\(|"
    r" (~?\w+Reactor(Base)?|ServerReflectionInfo|OnDone) \.\./\.\./server/")


def owner(stack):
    return next((frame for frame in stack if not NEUTRAL.search(frame)), "")


def runs_in_grpc_reactor_code(stack):
    """The access is gRPC's: from the top, only library or neutral frames (the
    generated message code, libprotobuf's parser) until gRPC's reactor code."""
    for frame in stack:
        if GRPC_REACTOR_CODE.search(frame):
            return True
        if not (NEUTRAL.search(frame) or is_foreign_frame(frame)):
            return False  # a Loom frame between: Loom's own access
    return False


def is_reactor_lifetime_race(stacks):
    for grpc_side, loom_side in ((stacks[0], stacks[1]), (stacks[1], stacks[0])):
        if runs_in_grpc_reactor_code(grpc_side) and any(
                REACTOR_LIFETIME.search(frame) for frame in loom_side[:12]):
            return True
    return False


ALLOCATION = re.compile(r"^    #0 (malloc|calloc|realloc|operator new)")
DEALLOCATION = re.compile(r"^    #0 (free|operator delete)")


def is_handed_over_block(stacks):
    """One side allocates, the other frees inside a Debian library."""
    for a, b in ((stacks[0], stacks[1]), (stacks[1], stacks[0])):
        if (a and ALLOCATION.match(a[0]) and b and DEALLOCATION.match(b[0]) and
                owner_is_foreign(b)):
            return True
    return False


STDLIB_SO = re.compile(r"\(libstdc\+\+\.so")
HEAP_BLOCK = re.compile(r"^  Location is heap block .* allocated by ")


def allocation_stack(report):
    stack = None
    for line in report.splitlines():
        if HEAP_BLOCK.match(line):
            stack = []
        elif stack is not None and FRAME.match(line):
            stack.append(line)
        elif stack is not None and not line.strip():
            break
    return stack or []


def entered_from_hidden_code(stack):
    """The stack enters libstdc++.so straight from a non-neutral frame.

    Loom's own std::string calls go through inline wrappers in
    /usr/include/c++ (resize, append, assign), which the symbolizer shows as
    frames of their own; a jump from a Loom frame straight into libstdc++.so
    is what a call from uninstrumented library code, whose frames TSan cannot
    show, looks like.
    """
    previous = ""
    for frame in stack:
        if not NEUTRAL.search(frame):
            return bool(STDLIB_SO.search(previous))
        previous = frame
    return False


def is_library_string(report, stacks):
    for library_side, other in ((stacks[0], stacks[1]), (stacks[1], stacks[0])):
        if (owner_is_foreign(library_side) and entered_from_hidden_code(other) and
                entered_from_hidden_code(allocation_stack(report))):
            return True
    return False


def is_library_freed_string(stacks):
    """The libraries free what their own hidden code wrote through libstdc++.so."""
    for freed, written in ((stacks[0], stacks[1]), (stacks[1], stacks[0])):
        if (freed and DEALLOCATION.match(freed[0]) and owner_is_foreign(freed) and
                entered_from_hidden_code(written)):
            return True
    return False


ACCESS_HEADER = re.compile(r"^  (Previous )?(atomic )?(Read|Write|read|write) of size")


def access_kinds(report):
    """'read' or 'write' for each access, in the order of access_stacks."""
    return [m.group(3).lower() for m in map(ACCESS_HEADER.match, report.splitlines()) if m]


def is_received_library_buffer(report, stacks):
    """Loom reads what a Debian library wrote into a block it allocated."""
    allocation = owner(allocation_stack(report))
    if not FOREIGN_MODULE.search(allocation):
        return False
    kinds = access_kinds(report)
    if len(kinds) != len(stacks):
        return False
    for library_side, other in ((0, 1), (1, 0)):
        if owner_is_foreign(stacks[library_side]) and kinds[other] == "read":
            return True
    return False


def is_foreign_race(report):
    if "WARNING: ThreadSanitizer: data race" not in report:
        return False
    stacks = access_stacks(report)
    if len(stacks) < 2:
        return False
    return (all(owner_is_foreign(s) for s in stacks) or is_reactor_lifetime_race(stacks) or
            is_handed_over_block(stacks) or is_library_string(report, stacks) or
            is_library_freed_string(stacks) or is_received_library_buffer(report, stacks))


def main():
    log_dir = sys.argv[1]
    ignored, ours = 0, []
    for name in sorted(os.listdir(log_dir)):
        with open(os.path.join(log_dir, name), errors="replace") as f:
            for report in split_reports(f.read()):
                if is_foreign_race(report):
                    ignored += 1
                else:
                    ours.append((name, report))
    for name, report in ours[:20]:
        print(f"--- {name}\n{report}")
    print(f"tsan_reports: {len(ours)} reports in Loom's code, {ignored} between two accesses "
          f"inside uninstrumented Debian libraries (ignored)")
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main())
