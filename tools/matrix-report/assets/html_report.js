// matrix-report html: builds the page's plots from the JSON data element
// #matrix-data (inlined; no network). Strings from issues are
// only ever set with textContent. On success the body gets data-render-ok
// set to true;
// script errors are listed in #render-errors (the browser test reads both).
(function () {
  'use strict';
  var SVG_NS = 'http://www.w3.org/2000/svg';
  var errors = [];

  function reportError(message) {
    errors.push(String(message));
    var list = document.getElementById('render-errors');
    if (list) {
      var li = document.createElement('li');
      li.className = 'render-error';
      li.textContent = 'script error: ' + message;
      list.appendChild(li);
    }
    document.body.setAttribute('data-render-ok', 'false');
    document.body.setAttribute('data-render-errors', String(errors.length));
  }
  window.addEventListener('error', function (e) { reportError(e.message || e); });

  function el(tag, attrs, parent) {
    var node = document.createElementNS(SVG_NS, tag);
    for (var k in attrs) {
      if (Object.prototype.hasOwnProperty.call(attrs, k)) node.setAttribute(k, attrs[k]);
    }
    if (parent) parent.appendChild(node);
    return node;
  }
  function html(tag, className, parent, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }
  function svgText(parent, x, y, text, attrs) {
    var t = el('text', attrs || {}, parent);
    t.setAttribute('x', x);
    t.setAttribute('y', y);
    t.textContent = text;
    return t;
  }
  function tooltip(node, text) { el('title', {}, node).textContent = text; }
  function pad2(n) { return (n < 10 ? '0' : '') + n; }
  function round(v, digits) { var p = Math.pow(10, digits); return Math.round(v * p) / p; }

  var data = JSON.parse(document.getElementById('matrix-data').textContent);

  // Times in the report's zone (its offset at the first issue).
  function clock(ms) {
    var d = new Date(ms + data.zone_offset_ms);
    return pad2(d.getUTCHours()) + ':' + pad2(d.getUTCMinutes()) + ':' + pad2(d.getUTCSeconds());
  }
  function clockMs(ms) {
    var d = new Date(ms + data.zone_offset_ms);
    var m = d.getUTCMilliseconds();
    return clock(ms) + '.' + (m < 10 ? '00' : m < 100 ? '0' : '') + m;
  }
  // About `count` round tick values over [lo, hi].
  // `minStep`: the smallest step (1000 for clock times shown in seconds).
  function ticks(lo, hi, count, minStep) {
    var span = hi - lo;
    if (!(span > 0)) return [lo];
    var step = Math.pow(10, Math.floor(Math.log(span / count) / Math.LN10));
    var err = span / count / step;
    if (err >= 7.5) step *= 10; else if (err >= 3.5) step *= 5; else if (err >= 1.5) step *= 2;
    if (minStep && step < minStep) step = minStep;
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(v);
    return out;
  }
  function durationText(us) {
    var ms = us / 1000;
    if (Math.abs(ms) < 1) return round(us, 1) + ' us';
    if (Math.abs(ms) < 1000) return round(ms, 1) + ' ms';
    return round(ms / 1000, 2) + ' s';
  }

  // ---- FPS and dropped frames over report time, per scene. ----
  function fpsPlot(scene, parent) {
    var W = 640, H = 236, L = 44, R = 48, T = 22, B = 30;
    var svg = el('svg', { 'class': 'fps-plot', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H,
                          role: 'img', 'data-scene': scene.name }, parent);
    var reports = scene.reports;
    var t0 = reports[0].t, t1 = reports[reports.length - 1].t;
    if (t1 - t0 < 2000) { t0 -= 1000; t1 += 1000; }
    var margin = (t1 - t0) * 0.05;
    t0 -= margin; t1 += margin;
    var maxFps = 0, maxDrop = 0;
    // Reports too short to measure a rate (fps null) have bars, no point.
    var rated = reports.filter(function (r) { return r.fps !== null; });
    reports.forEach(function (r) {
      maxFps = Math.max(maxFps, r.fps === null ? 0 : r.fps, r.refresh);
      maxDrop = Math.max(maxDrop, r.dropped);
    });
    maxFps = Math.max(10, maxFps * 1.1);
    maxDrop = Math.max(1, maxDrop * 1.1);
    function x(t) { return L + (t - t0) / (t1 - t0) * (W - L - R); }
    function y(f) { return T + (1 - f / maxFps) * (H - T - B); }
    function yd(d) { return T + (1 - d / maxDrop) * (H - T - B); }
    ticks(0, maxFps, 5).forEach(function (v) {
      el('line', { 'class': 'grid-line', x1: L, x2: W - R, y1: y(v), y2: y(v) }, svg);
      svgText(svg, L - 6, y(v) + 4, String(round(v, 1)), { 'text-anchor': 'end' });
    });
    ticks(0, maxDrop, 4).forEach(function (v) {
      if (v !== Math.round(v)) return;
      svgText(svg, W - R + 6, yd(v) + 4, String(v), { 'text-anchor': 'start' });
    });
    ticks(t0, t1, 6, 1000).forEach(function (t) {
      el('line', { 'class': 'axis', x1: x(t), x2: x(t), y1: H - B, y2: H - B + 4 }, svg);
      svgText(svg, x(t), H - B + 16, clock(t), { 'text-anchor': 'middle' });
    });
    el('line', { 'class': 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B }, svg);
    el('line', { 'class': 'axis', x1: L, x2: L, y1: T, y2: H - B }, svg);
    svgText(svg, 4, 11, 'fps', { 'text-anchor': 'start' });
    svgText(svg, W - 4, 11, 'dropped', { 'text-anchor': 'end' });
    svgText(svg, W - R, H - 2, 'report time (' + data.zone + ')', { 'text-anchor': 'end' });
    var refresh = scene.refresh;
    if (refresh > 0) {
      el('line', { 'class': 'refresh-line', x1: L, x2: W - R, y1: y(refresh), y2: y(refresh) }, svg);
    }
    var barW = Math.max(4, Math.min(18, (W - L - R) / reports.length / 3));
    reports.forEach(function (r) {
      var bar = el('rect', { 'class': 'drop-bar', x: x(r.t) - barW / 2, y: yd(r.dropped), width: barW,
                             height: Math.max(0, H - B - yd(r.dropped)) }, svg);
      tooltip(bar, r.dropped + ' dropped frames of ' + r.frames + ' (report at ' + clockMs(r.t) + ')');
    });
    var path = '';
    rated.forEach(function (r, i) { path += (i ? 'L' : 'M') + x(r.t) + ' ' + y(r.fps); });
    if (path) el('path', { 'class': 'fps-line', d: path }, svg);
    rated.forEach(function (r) {
      var dot = el('circle', { 'class': 'fps-point', cx: x(r.t), cy: y(r.fps), r: 4 }, svg);
      tooltip(dot, clockMs(r.t) + ': ' + round(r.fps, 1) + ' fps, ' + r.frames + ' frames, ' +
              r.dropped + ' dropped, over ' + round(r.window_ms, 1) + ' ms at ' + round(r.refresh, 1) + ' Hz');
    });
    return svg;
  }

  // Frames per drop level; a frame that dropped d vsyncs took d + 1 intervals.
  var LEVELS = [
    { name: 'BEST', lo: 1, hi: 3 }, { name: 'NORMAL', lo: 4, hi: 9 },
    { name: 'MIDDLE', lo: 10, hi: 24 }, { name: 'HIGH', lo: 25, hi: 42 },
    { name: 'FROZEN', lo: 43, hi: null }
  ];
  function histogram(scene, parent) {
    var W = 420, H = 230, L = 12, R = 12, T = 18, B = 44;
    var svg = el('svg', { 'class': 'histogram', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H,
                          role: 'img', 'data-scene': scene.name }, parent);
    var max = 0;
    scene.levels.forEach(function (n) { max = Math.max(max, n); });
    var interval = scene.refresh > 0 ? 1000 / scene.refresh : 0;
    var slot = (W - L - R) / LEVELS.length;
    var scale = Math.log(1 + Math.max(max, 1));
    LEVELS.forEach(function (level, i) {
      var n = scene.levels[i];
      var h = n > 0 ? Math.max(2, Math.log(1 + n) / scale * (H - T - B)) : 0;
      var bx = L + i * slot + slot * 0.15;
      var bar = el('rect', { 'class': 'hist-bar level-' + i, x: bx, y: H - B - h, width: slot * 0.7,
                             height: h, 'data-level': level.name, 'data-frames': n }, svg);
      var range = level.hi === null ? '>= ' + level.lo : level.lo + '-' + level.hi;
      var ms = interval > 0 ? (level.hi === null ? '>= ' + Math.round(level.lo * interval) + ' ms'
                                                  : Math.round(level.lo * interval) + '-' +
                                                    Math.round(level.hi * interval) + ' ms') : '';
      tooltip(bar, level.name + ': ' + n + ' frames of ' + range + ' vsync intervals' +
              (ms ? ' (' + ms + ')' : '') + ', ' + scene.drops[i] + ' dropped frames in all');
      svgText(svg, bx + slot * 0.35, H - B - h - 4, String(n), { 'text-anchor': 'middle' });
      svgText(svg, bx + slot * 0.35, H - B + 14, level.name, { 'text-anchor': 'middle' });
      svgText(svg, bx + slot * 0.35, H - B + 27, ms || range, { 'text-anchor': 'middle' });
    });
    el('line', { 'class': 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B }, svg);
    svgText(svg, W / 2, H - 4, 'frames per frame time (log scale)', { 'text-anchor': 'middle' });
    return svg;
  }

  function renderFrames() {
    var host = document.getElementById('fps-plots');
    if (!data.scenes.length) {
      html('p', 'note', host, 'No FPS reports.');
      return 0;
    }
    data.scenes.forEach(function (scene) {
      var total = 0;
      scene.reports.forEach(function (r) { total += r.frames; });
      html('h3', 'plot-title', host, (scene.name || '(no scene)') + ' \u2014 ' + scene.reports.length +
           (scene.reports.length === 1 ? ' report, ' : ' reports, ') + total + ' frames');
      var row = html('div', 'plots', host);
      fpsPlot(scene, row);
      histogram(scene, row);
    });
    return data.scenes.length;
  }

  // ---- Chrome trace events of one issue, one lane per thread. ----
  var COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#b07aa1', '#76b7b2', '#edc948', '#9c755f', '#e15759'];
  function colorFor(name) {
    var h = 0;
    for (var i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    return COLORS[h % COLORS.length];
  }
  // B/E pairs (per thread, properly nested) become X events.
  function pairBeginEnd(events) {
    var begun = {};
    return events.map(function (e) {
      if (e.ph === 'B') {
        var key = e.pid + ':' + e.tid;
        (begun[key] = begun[key] || []).push(e);
        return null;
      }
      if (e.ph === 'E') {
        var stack = begun[e.pid + ':' + e.tid];
        var b = stack && stack.pop();
        if (!b) return null;
        return { ph: 'X', name: b.name, cat: b.cat, pid: b.pid, tid: b.tid, ts: b.ts,
                 dur: e.ts - b.ts, args: b.args };
      }
      return e;
    }).filter(function (e) { return e !== null; });
  }
  // The events by thread (lanes, in order of appearance), the time they span
  // (lo, hi) and how many have a phase that is not drawn.
  function traceLanes(events) {
    var t = { lanes: {}, order: [], lo: Infinity, hi: -Infinity, skipped: 0 };
    function lane(e) {
      var id = e.pid + ':' + e.tid;
      if (!t.lanes[id]) {
        t.lanes[id] = { id: id, name: 'pid ' + e.pid + ' tid ' + e.tid, spans: [], instants: [],
                        depth: 0 };
        t.order.push(id);
      }
      return t.lanes[id];
    }
    events.forEach(function (e) {
      if (e.ph === 'M') {
        if (e.name === 'thread_name' && e.args) lane(e).name = String(e.args.name);
      } else if (e.ph === 'X') {
        lane(e).spans.push(e);
        t.lo = Math.min(t.lo, e.ts); t.hi = Math.max(t.hi, e.ts + (e.dur || 0));
      } else if (e.ph === 'i' || e.ph === 'I' || e.ph === 'R' || e.ph === 'n') {
        lane(e).instants.push(e);
        t.lo = Math.min(t.lo, e.ts); t.hi = Math.max(t.hi, e.ts);
      } else {
        t.skipped++;
      }
    });
    return t;
  }
  // Gives each span its nesting depth and each lane its y and height, from
  // `top` down; returns the bottom.
  function layoutLanes(t, top, row) {
    var y = top;
    t.order.forEach(function (id) {
      var ln = t.lanes[id];
      ln.spans.sort(function (a, b) { return a.ts - b.ts || (b.dur || 0) - (a.dur || 0); });
      var open = [];
      ln.spans.forEach(function (e) {
        var end = e.ts + (e.dur || 0);
        while (open.length && open[open.length - 1] <= e.ts) open.pop();
        e._depth = open.length;
        ln.depth = Math.max(ln.depth, open.length + 1);
        open.push(end);
      });
      ln.y = y;
      ln.h = Math.max(1, ln.depth) * row + (ln.instants.length ? 16 : 0) + 8;
      y += ln.h;
    });
    return y;
  }
  // A clicked event shows its label and arguments in `detail`.
  function showOnClick(node, label, e, detail) {
    tooltip(node, label);
    node.addEventListener('click', function () {
      detail.textContent = label + '\n' + JSON.stringify(e.args || {}, null, 2);
    });
  }
  // One lane's label, spans and instants; returns how many events it drew.
  function drawLane(svg, ln, view, detail) {
    var x = view.x, ROW = view.row;
    var g = el('g', { 'class': 'trace-lane', 'data-lane': ln.name }, svg);
    el('rect', { 'class': 'lane-bg', x: 0, y: ln.y + 2, width: view.width, height: ln.h - 4 }, g);
    svgText(g, 6, ln.y + 16, ln.name.length > 24 ? ln.name.slice(0, 23) + '\u2026' : ln.name,
            { 'class': 'lane-label' });
    ln.spans.forEach(function (e) {
      var x0 = x(e.ts), w = Math.max(1, x(e.ts + (e.dur || 0)) - x0);
      var ry = ln.y + 4 + e._depth * ROW;
      var r = el('rect', { 'class': 'trace-event', x: x0, y: ry, width: w, height: ROW - 3,
                           fill: colorFor(String(e.name)), rx: 2 }, g);
      showOnClick(r, String(e.name) + ' \u2014 ' + durationText(e.dur || 0), e, detail);
      var chars = Math.floor((w - 6) / 6.2);
      if (chars >= 4) {
        var s = String(e.name);
        svgText(g, x0 + 3, ry + 13, s.length > chars ? s.slice(0, chars - 1) + '\u2026' : s,
                { 'class': 'event-label' });
      }
    });
    var iy = ln.y + 4 + Math.max(1, ln.depth) * ROW + 6;
    ln.instants.forEach(function (e) {
      var cx = x(e.ts);
      var m = el('path', { 'class': 'trace-instant',
                           d: 'M' + cx + ' ' + (iy - 6) + 'l6 6l-6 6l-6 -6z' }, g);
      showOnClick(m, String(e.name) + ' at +' + durationText(e.ts - view.lo), e, detail);
    });
    return ln.spans.length + ln.instants.length;
  }
  function drawTrace(trace, host, detail) {
    while (host.firstChild) host.removeChild(host.firstChild);
    detail.textContent = '';
    var events = pairBeginEnd(Array.isArray(trace) ? trace : (trace.traceEvents || []));
    var t = traceLanes(events), lo = t.lo, hi = t.hi;
    if (!(hi >= lo)) {
      html('p', 'note', host, 'This issue has no events in time.');
      return 0;
    }
    if (hi === lo) hi = lo + 1000;
    var W = Math.max(700, Math.min(1400, host.clientWidth || 1180)), L = 170, R = 16, ROW = 22;
    var AXIS = 26, drawn = 0;
    var H = layoutLanes(t, AXIS, ROW) + 4;
    var svg = el('svg', { 'class': 'trace-view', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H,
                          role: 'img' }, host);
    function x(ts) { return L + (ts - lo) / (hi - lo) * (W - L - R); }
    ticks(0, hi - lo, 8).forEach(function (tick) {
      el('line', { 'class': 'grid-line', x1: x(lo + tick), x2: x(lo + tick), y1: AXIS - 6, y2: H },
         svg);
      svgText(svg, x(lo + tick), AXIS - 10, '+' + durationText(tick), { 'text-anchor': 'middle' });
    });
    // Wall-clock timestamps (us since the epoch, after 2001) get a clock time;
    // others (a monotonic clock) only offsets.
    if (lo > 1e15) svgText(svg, 4, AXIS - 10, clockMs(lo / 1000), { 'text-anchor': 'start' });
    var view = { x: x, lo: lo, width: W, row: ROW };
    t.order.forEach(function (id) { drawn += drawLane(svg, t.lanes[id], view, detail); });
    if (t.skipped) html('p', 'note', host, t.skipped + ' events of other phases not drawn.');
    return drawn;
  }

  function renderTimeline() {
    var select = document.getElementById('timeline-issue');
    var host = document.getElementById('timeline-view');
    var detail = document.getElementById('timeline-detail');
    if (!data.traces.length) {
      html('p', 'note', host, 'No issue of this report can be placed on a timeline.');
      return 0;
    }
    var byIssue = {};
    data.traces.forEach(function (t) {
      byIssue[t.issue] = t;
      var option = html('option', '', select, t.label);
      option.value = String(t.issue);
    });
    function show(issue) {
      var t = byIssue[issue];
      if (!t) return 0;
      select.value = String(issue);
      return drawTrace(t.trace, host, detail);
    }
    select.addEventListener('change', function () { show(select.value); });
    Array.prototype.forEach.call(document.querySelectorAll('button.show-timeline'), function (b) {
      b.addEventListener('click', function () {
        show(b.getAttribute('data-issue'));
        document.getElementById('timeline').scrollIntoView();
      });
    });
    var first = data.default_issue !== null ? data.default_issue : data.traces[0].issue;
    return show(first);
  }

  try {
    var plots = renderFrames();
    var events = renderTimeline();
    if (!errors.length) {
      document.getElementById('render-status').textContent =
          'Drawn: ' + plots + (plots === 1 ? ' scene' : ' scenes') + ' of frame plots, ' +
          events + ' timeline events of ' + data.traces.length +
          (data.traces.length === 1 ? ' issue' : ' issues') + ' with a timeline.';
      document.body.setAttribute('data-render-ok', 'true');
    }
  } catch (e) {
    reportError(e && e.stack ? e.stack : e);
  }
})();
