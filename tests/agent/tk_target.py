# tk_target.py: a tkinter program for matrix-run's tests (tk_program_e2e_test.cc).
# Tcl/Tk's event loop waits in pthread_cond_wait / pthread_cond_timedwait (its
# notifier thread does the select), never in poll on the main thread.
#
#   python3 tk_target.py IDLE_MS BUSY_MS LAG_MS
#
# A window sits idle IDLE_MS (a timer pending), then a callback is busy
# BUSY_MS, 500 ms later another is busy LAG_MS, 500 ms later the program
# exits. Prints "start NAME EPOCH_MS" when the idle time and each callback
# begin. Exit status 3 when tkinter is missing (python3-tk: make deps).
import sys
import time

try:
    import tkinter
except ImportError:
    print("python3-tk missing: make deps")
    sys.exit(3)

idle_ms, busy_ms, lag_ms = (int(arg) for arg in sys.argv[1:4])


def say_start(name):
    print("start %s %d" % (name, int(time.time() * 1000)), flush=True)


def spin(ms):
    end = time.monotonic() + ms / 1000.0
    while time.monotonic() < end: pass  # SPIN_LINE (one line: the ANR names it)


def lag_callback():
    say_start("lag")
    spin(lag_ms)
    root.after(500, root.destroy)


def busy_callback():
    say_start("busy")
    spin(busy_ms)
    root.after(500, lag_callback)


def idle_begins():
    say_start("idle")
    root.after(idle_ms, busy_callback)


root = tkinter.Tk()
root.title("matrix-run tk_target")
tkinter.Label(root, text="idle, then busy").pack()
root.after(0, idle_begins)
root.mainloop()
