// node_jit_e2e_test's program: after the loop started (the first
// epoll_wait), busyLoop() spins for argv[2] ms on the main thread. It is hot
// enough to be compiled (Sparkplug, Maglev, TurboFan: JIT code, named only
// by /tmp/perf-PID.map when node runs with --perf-basic-prof).
'use strict';

function busyLoop(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) {
    for (let i = 0; i < 200000; i++) x += Math.sqrt(i + x % 7);
  }
  return x;
}

setTimeout(() => { process.stdout.write(`done ${busyLoop(Number(process.argv[2]))}\n`); }, 100);
