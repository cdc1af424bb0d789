# python_target.py: a Python program without a GUI for matrix-run's tests
# (python_program_e2e_test.cc): an asyncio event loop (it waits in
# epoll_wait, a dispatch boundary for the agent) on the main thread.
#
#   python3.11 python_target.py IDLE_MS BUSY_MS [sleep]
#
# The loop idles IDLE_MS, then one callback calls Worker.handle, which
# calls hang_here, busy BUSY_MS on one line (HANG_LINE below), or with
# `sleep` sleep_here, in time.sleep for BUSY_MS (SLEEP_LINE); 300 ms
# later the loop stops. Prints "start busy EPOCH_MS" when the callback
# begins.
import asyncio
import sys
import time

idle_ms, busy_ms = (int(arg) for arg in sys.argv[1:3])
sleep = sys.argv[3:] == ["sleep"]


def hang_here(ms):
    end = time.monotonic() + ms / 1000.0
    while time.monotonic() < end: pass  # HANG_LINE


def sleep_here(ms):
    time.sleep(ms / 1000.0)  # SLEEP_LINE


class Worker:
    def handle(self, ms):
        if sleep:
            sleep_here(ms)
        else:
            hang_here(ms)


def busy_callback(loop):
    print("start busy %d" % int(time.time() * 1000), flush=True)
    Worker().handle(busy_ms)
    loop.call_later(0.3, loop.stop)


loop = asyncio.new_event_loop()
loop.call_later(idle_ms / 1000.0, busy_callback, loop)
loop.run_forever()
loop.close()
