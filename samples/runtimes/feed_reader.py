# feed_reader.py: a Python program for matrix-run (samples/runtimes/run.sh).
#
# An asyncio event loop on the main thread; 0.5 s in, the "feed arrived"
# callback parses a feed on the loop's thread for 1.5 s: an ANR at
# matrix-run's --anr 1000. The report's stack names parse_feed (module
# [python], this file, the line of its loop) above the interpreter's frames,
# and its key is parse_feed: the program's own code, not asyncio's.
import asyncio
import time


def parse_feed(seconds):
    end = time.monotonic() + seconds
    entries = 0
    while time.monotonic() < end:  # The slow line: the ANR's top Python frame.
        entries += 1
    return entries


class FeedReader:
    def refresh(self):
        return parse_feed(1.5)


def on_feed_arrived(loop):
    FeedReader().refresh()
    loop.call_later(0.3, loop.stop)


loop = asyncio.new_event_loop()
loop.call_later(0.5, on_feed_arrived, loop)
loop.run_forever()
loop.close()
