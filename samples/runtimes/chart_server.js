// chart_server.js: a node program for matrix-run --perf-map
// (samples/runtimes/run.sh).
//
// 0.5 s in, a timer callback renders a chart on the event loop's thread for
// 1.5 s: an ANR at matrix-run's --anr 1000. With --perf-map, V8 names its
// compiled code, so the report's stack names renderChart (module [jit], this
// file) above node's own frames, and its key is renderChart.
'use strict';

function renderChart(ms) {
  const end = Date.now() + ms;
  let points = 0;
  while (Date.now() < end) points++;  // The slow loop: the ANR's top JavaScript frame.
  return points;
}

function onRequest() {
  return renderChart(1500);
}

setTimeout(() => {
  onRequest();
  setTimeout(() => {}, 300);  // Then exit.
}, 500);
