// rlprof report viewer. Vanilla JS; every piece of input text is inserted with textContent.
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('rlprof-data').textContent);
  var R = D.report, TL = D.timeline, DETAIL = D.detail_ranks;
  var app = document.getElementById('app');
  var COLORS = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];
  var TRACK_COLOR = { step: '#90a4ae', phase: '#a1887f', role_call: '#7986cb', iteration: '#ce93d8', user: '#81c784', span: '#aed581',
    op: '#4e79a7', api: '#76b7b2', runtime: '#bab0ac', kernel: '#e15759', memcpy: '#b07aa1', comm: '#f28e2b' };

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function fmtNs(ns) {
    if (ns === null || ns === undefined) return '-';
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + ' s';
    if (a >= 1e6) return (ns / 1e6).toFixed(3) + ' ms';
    if (a >= 1e3) return (ns / 1e3).toFixed(2) + ' µs';
    return ns.toFixed(0) + ' ns';
  }
  function fmtBytes(b) {
    if (b === null || b === undefined) return '-';
    var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0, v = b;
    while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return v.toFixed(i ? 2 : 0) + ' ' + u[i];
  }
  function hashColor(s) {
    var h = 0;
    for (var i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
    return COLORS[Math.abs(h) % COLORS.length];
  }
  function section(id, title) {
    var s = el('section'); s.id = id; s.appendChild(el('h2', title)); app.appendChild(s);
    var a = el('a', title); a.href = '#' + id; document.getElementById('nav').appendChild(a);
    return s;
  }
  // A table with clickable, sortable headers. cols: [{name, key(row)->value, fmt, left}]
  function sortableTable(cols, rows, limit) {
    var t = el('table'), head = el('tr'), body = el('tbody'), state = { col: -1, dir: -1 };
    cols.forEach(function (c, i) {
      var th = el('th', c.name, c.left ? 'l' : '');
      th.addEventListener('click', function () {
        state.dir = state.col === i ? -state.dir : -1; state.col = i; draw();
      });
      head.appendChild(th);
    });
    var thead = el('thead'); thead.appendChild(head); t.appendChild(thead); t.appendChild(body);
    function draw() {
      var rs = rows.slice();
      if (state.col >= 0) {
        var k = cols[state.col].key;
        rs.sort(function (a, b) { var x = k(a), y = k(b); return (x < y ? -1 : x > y ? 1 : 0) * state.dir; });
      }
      body.textContent = '';
      rs.slice(0, limit || 500).forEach(function (r) {
        var tr = el('tr');
        cols.forEach(function (c) {
          var v = c.key(r);
          tr.appendChild(el('td', c.fmt ? c.fmt(v, r) : v, c.left ? 'l' : ''));
        });
        body.appendChild(tr);
      });
    }
    t.redraw = function (newRows) { rows = newRows; draw(); };
    draw();
    return t;
  }

  // ---- the ranks at a glance: slowest first, a heat strip in rank order ----
  function renderOverview() {
    var byRank = {};
    R.jobs.forEach(function (j) {
      j.ranks.forEach(function (k) {
        byRank[j.id + '/' + k.rank] = { job: j.id, rank: k.rank, kernel: k.device.kernel_ns, comm: k.device.comm_ns,
          idle: k.device.idle_ns, busy: 0, n: 0, free: null, stage: null };
      });
    });
    R.breakdown.forEach(function (b) {
      var o = byRank[b.job + '/' + b.rank]; if (!o) return;
      var t = b.step_ns !== null ? b.step_ns : Object.keys(b.roles).reduce(function (a, k) { return a + b.roles[k]; }, 0);
      o.busy += Math.max(0, t - (b.wait_ns || 0)); o.n += 1;
    });
    (R.cann_steps || []).forEach(function (c) {
      var o = byRank[c.job + '/' + c.rank]; if (!o) return;
      o.free = (o.free || 0) + c.free_ns; o.stage = (o.stage || 0) + c.stage_ns;
    });
    var rows = Object.keys(byRank).map(function (k) { var o = byRank[k]; o.busy = o.n ? o.busy / o.n : null; return o; });
    if (rows.length < 2) return;
    var s = section('overview', 'Ranks');
    s.appendChild(el('p', rows.length + ' ranks; slowest first (mean busy time per step: the step less its wait for peers).', 'muted'));
    if (DETAIL) {
      s.appendChild(el('p', 'Timeline and per-rank detail kept for ranks ' + DETAIL.join(', ') +
        ' (rank 0, the slowest and the fastest; `rlprof report --ranks` adds others); every rank is in the tables.', 'note'));
    }
    var vals = rows.map(function (r) { return r.busy; }).filter(function (v) { return v !== null; });
    var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
    var strip = el('div', null, 'heat');
    rows.slice().sort(function (a, b) { return a.job < b.job ? -1 : a.job > b.job ? 1 : a.rank - b.rank; }).forEach(function (r) {
      var c = el('span');
      var f = (r.busy === null || hi === lo) ? 0 : (r.busy - lo) / (hi - lo);
      c.style.background = 'hsl(' + Math.round(120 - 120 * f) + ',70%,50%)';
      c.title = r.job + ' rank ' + r.rank + ': busy ' + fmtNs(r.busy);
      strip.appendChild(c);
    });
    s.appendChild(strip);
    rows.sort(function (a, b) { return (b.busy || 0) - (a.busy || 0) || a.rank - b.rank; });
    s.appendChild(sortableTable([
      { name: 'job', key: function (r) { return r.job; }, left: true },
      { name: 'rank', key: function (r) { return r.rank; } },
      { name: 'busy / step', key: function (r) { return r.busy; }, fmt: fmtNs },
      { name: 'kernel', key: function (r) { return r.kernel; }, fmt: fmtNs },
      { name: 'comm', key: function (r) { return r.comm; }, fmt: fmtNs },
      { name: 'idle', key: function (r) { return r.idle; }, fmt: fmtNs },
      { name: 'CANN Free', key: function (r) { return r.free; }, fmt: fmtNs },
      { name: 'CANN Stage', key: function (r) { return r.stage; }, fmt: fmtNs }], rows, 2000));
  }

  function renderInputs() {
    var s = section('inputs', 'Inputs');
    var ul = el('ul');
    var holder = s;
    if (R.inputs.length > 20) {
      holder = el('details');
      holder.appendChild(el('summary', R.inputs.length + ' inputs'));
      s.appendChild(holder);
    }
    R.inputs.forEach(function (i) {
      var li = el('li');
      li.appendChild(el('b', 'rank ' + i.rank + ' · ' + i.group));
      li.appendChild(el('span', ' (' + i.format + ', ' + i.events + ' events, ' + i.memory_events + ' memory events) '));
      li.appendChild(el('code', i.path));
      var sub = el('ul');
      i.notes.forEach(function (n) { sub.appendChild(el('li', n, 'note')); });
      i.open_with.forEach(function (n) { sub.appendChild(el('li', n, 'muted')); });
      li.appendChild(sub); ul.appendChild(li);
    });
    holder.appendChild(ul);
    if (R.skipped.length) {
      s.appendChild(el('h3', 'Skipped'));
      var sk = el('ul');
      R.skipped.forEach(function (x) { var li = el('li', null, 'err'); li.appendChild(el('code', x.path)); li.appendChild(el('span', ': ' + x.reason)); sk.appendChild(li); });
      s.appendChild(sk);
    }
    R.notes.forEach(function (n) { s.appendChild(el('p', n, 'note')); });
  }

  // ---- timeline ----
  var view = null;
  function decode(p) {
    var lanes = p.lanes.map(function (l) { return { info: l, s: [], d: [], n: [], x: [], maxDur: 0 }; });
    var prevLane = -1, t = 0;
    for (var i = 0; i < p.l.length; i++) {
      var li = p.l[i];
      t = (li === prevLane ? t : 0) + p.s[i]; prevLane = li;
      var L = lanes[li];
      L.s.push(t + p.offset_ns); L.d.push(p.d[i]); L.n.push(p.n[i]); L.x.push(p.x[i]);
      if (p.d[i] > L.maxDur) L.maxDur = p.d[i];
    }
    return lanes;
  }
  var LANE_H = 16, HEAD_H = 18;
  function renderTimeline() {
    var s = section('timeline', 'Timeline');
    if (!TL.length) { s.appendChild(el('p', 'no events')); return; }
    var groups = [];
    TL.forEach(function (p) { if (groups.indexOf(p.group) < 0) groups.push(p.group); });
    var ctl = el('div', null, 'controls');
    var sel = el('select'); sel.id = 'tl-group';
    groups.forEach(function (g) { var o = el('option', g); o.value = g; sel.appendChild(o); });
    ctl.appendChild(el('span', 'collection:')); ctl.appendChild(sel);
    var fit = el('button', 'fit'), zin = el('button', '+'), zout = el('button', '−');
    [fit, zin, zout].forEach(function (b) { ctl.appendChild(b); });
    ctl.appendChild(el('span', 'wheel: zoom · drag: pan · click: details', 'muted'));
    var info = el('span', '', 'muted'); ctl.appendChild(info);
    s.appendChild(ctl);
    var wrap = el('div'); wrap.id = 'tl-wrap';
    var canvas = el('canvas'); canvas.id = 'tl-canvas'; wrap.appendChild(canvas); s.appendChild(wrap);
    var det = el('div'); det.id = 'details'; det.appendChild(el('span', 'click an event for its details', 'muted')); s.appendChild(det);

    function load(group) {
      var profs = TL.filter(function (p) { return p.group === group; });
      var rows = [], y = 0, lo = Infinity, hi = -Infinity, shown = 0, total = 0;
      profs.forEach(function (p) {
        var lanes = decode(p);
        rows.push({ head: true, y: y, text: p.label + '  (' + p.events_shown + ' of ' + p.events_total + ' events shown' +
          (p.events_shown < p.events_total ? '; the longest are kept, shaded bands show all' : '') + ')', prof: p });
        y += HEAD_H;
        lanes.forEach(function (L) {
          rows.push({ y: y, lane: L, prof: p, label: L.info.track + (L.info.depth ? ' ·' + L.info.depth : '') + ' ' + L.info.thread });
          y += LANE_H;
        });
        lo = Math.min(lo, p.start_ns + p.offset_ns); hi = Math.max(hi, p.end_ns + p.offset_ns);
        shown += p.events_shown; total += p.events_total;
      });
      if (!(hi > lo)) { lo = 0; hi = 1; }
      view = { rows: rows, height: y, lo: lo, hi: hi, t0: lo, t1: hi, selected: null };
      info.textContent = shown + ' of ' + total + ' events in this view';
      resize();
    }
    var LABEL_W = 170;
    function resize() {
      var w = Math.max(300, wrap.clientWidth), h = view.height + 2, r = window.devicePixelRatio || 1;
      canvas.width = w * r; canvas.height = h * r; canvas.style.width = w + 'px'; canvas.style.height = h + 'px';
      canvas.getContext('2d').setTransform(r, 0, 0, r, 0, 0);
      draw();
    }
    function xOf(t) { var w = canvas.clientWidth - LABEL_W; return LABEL_W + (t - view.t0) / (view.t1 - view.t0) * w; }
    function tOf(x) { var w = canvas.clientWidth - LABEL_W; return view.t0 + (x - LABEL_W) / w * (view.t1 - view.t0); }
    function firstVisible(L, t0) {
      var a = 0, b = L.s.length, from = t0 - L.maxDur;
      while (a < b) { var m = (a + b) >> 1; if (L.s[m] < from) a = m + 1; else b = m; }
      return a;
    }
    function draw() {
      var g = canvas.getContext('2d'), W = canvas.clientWidth;
      g.clearRect(0, 0, W, canvas.clientHeight);
      g.font = '11px sans-serif'; g.textBaseline = 'middle';
      view.rows.forEach(function (row) {
        if (row.head) {
          g.fillStyle = '#eceff1'; g.fillRect(0, row.y, W, HEAD_H); g.fillStyle = '#263238';
          g.fillText(row.text, 4, row.y + HEAD_H / 2); return;
        }
        var L = row.lane, y = row.y, color = TRACK_COLOR[L.info.track] || '#888';
        g.fillStyle = '#555'; g.fillText(row.label.slice(0, 28), 4, y + LANE_H / 2);
        if (L.info.busy) {
          var p = row.prof, bw = (p.end_ns - p.start_ns) / L.info.busy.length;
          g.fillStyle = color;
          for (var b = 0; b < L.info.busy.length; b++) {
            if (!L.info.busy[b]) continue;
            var bs = p.start_ns + p.offset_ns + b * bw, x0 = xOf(bs), x1 = xOf(bs + bw);
            if (x1 < LABEL_W || x0 > W) continue;
            g.globalAlpha = 0.15 + 0.35 * Math.min(1, L.info.busy[b] / bw);
            g.fillRect(Math.max(LABEL_W, x0), y + 3, Math.max(1, x1 - x0), LANE_H - 6);
          }
          g.globalAlpha = 1;
        }
        var i = firstVisible(L, view.t0), lastPx = -1, merged = 0;
        for (; i < L.s.length && L.s[i] <= view.t1; i++) {
          var x0 = xOf(L.s[i]), x1 = xOf(L.s[i] + L.d[i]);
          if (x1 < LABEL_W) continue;
          x0 = Math.max(LABEL_W, x0);
          if (x1 - x0 < 1) { // sub-pixel: merge per pixel column
            var px = Math.floor(x0);
            if (px !== lastPx) { g.fillStyle = color; g.fillRect(px, y + 1, 1, LANE_H - 2); lastPx = px; merged++; }
            continue;
          }
          var name = row.prof.strings[L.n[i]];
          g.fillStyle = view.selected && view.selected.lane === L && view.selected.i === i ? '#000' : (L.info.track === 'op' || L.info.track === 'kernel' ? hashColor(name) : color);
          g.fillRect(x0, y + 1, x1 - x0, LANE_H - 2);
          if (x1 - x0 > 30) { g.fillStyle = '#fff'; g.save(); g.beginPath(); g.rect(x0, y, x1 - x0, LANE_H); g.clip(); g.fillText(name, x0 + 2, y + LANE_H / 2); g.restore(); }
        }
      });
      g.fillStyle = '#999'; g.fillText(fmtNs(view.t0 - view.lo) + ' … ' + fmtNs(view.t1 - view.lo), LABEL_W + 4, 8);
    }
    function hit(x, y) {
      var row = null;
      view.rows.forEach(function (r) { if (!r.head && y >= r.y && y < r.y + LANE_H) row = r; });
      if (!row || x < LABEL_W) return null;
      var L = row.lane, t = tOf(x), tol = (view.t1 - view.t0) / canvas.clientWidth * 2, best = -1, bestDur = Infinity;
      for (var i = firstVisible(L, t - tol); i < L.s.length && L.s[i] <= t + tol; i++) {
        if (L.s[i] - tol <= t && L.s[i] + L.d[i] + tol >= t && L.d[i] < bestDur) { best = i; bestDur = L.d[i]; }
      }
      return best < 0 ? null : { row: row, lane: L, i: best };
    }
    function show(h) {
      det.textContent = '';
      if (!h) { det.appendChild(el('span', 'no event here', 'muted')); return; }
      var L = h.lane, p = h.row.prof, i = h.i, dl = el('dl');
      function add(k, v) { if (v === undefined || v === null || v === '') return; dl.appendChild(el('dt', k)); dl.appendChild(el('dd', v)); }
      add('name', p.strings[L.n[i]]); add('track', L.info.track); add('rank', p.rank); add('collection', p.group);
      add('thread', L.info.thread); add('start', fmtNs(L.s[i] - view.lo)); add('duration', fmtNs(L.d[i]));
      var d = L.x[i] >= 0 ? p.details[L.x[i]] : null;
      if (d) {
        add('module', d.module); add('shapes', d.shapes); add('dtypes', d.dtypes); add('stack', d.stack);
        if (d.bytes !== undefined) add('bytes', fmtBytes(d.bytes));
        if (d.flops !== undefined) add('FLOPs', d.flops);
        if (d.wait_ns !== undefined) add('wait', fmtNs(d.wait_ns));
        add('group', d.group); if (d.peer !== undefined) add('peer', d.peer); add('args', d.args);
      }
      det.appendChild(dl);
    }
    var drag = null;
    canvas.addEventListener('mousedown', function (e) { drag = { x: e.offsetX, t0: view.t0, t1: view.t1, moved: false }; });
    window.addEventListener('mouseup', function (e) {
      if (drag && !drag.moved && e.target === canvas) {
        var h = hit(e.offsetX, e.offsetY); view.selected = h; show(h); draw();
      }
      drag = null;
    });
    canvas.addEventListener('mousemove', function (e) {
      if (!drag) return;
      var dx = e.offsetX - drag.x; if (Math.abs(dx) > 2) drag.moved = true;
      var dt = dx / (canvas.clientWidth - LABEL_W) * (drag.t1 - drag.t0);
      view.t0 = drag.t0 - dt; view.t1 = drag.t1 - dt; draw();
    });
    function zoom(f, x) {
      var t = tOf(x), a = t - (t - view.t0) * f, b = t + (view.t1 - t) * f;
      if (b - a < 10) return;
      view.t0 = a; view.t1 = b; draw();
    }
    canvas.addEventListener('wheel', function (e) { e.preventDefault(); zoom(e.deltaY > 0 ? 1.25 : 0.8, e.offsetX); }, { passive: false });
    fit.addEventListener('click', function () { view.t0 = view.lo; view.t1 = view.hi; draw(); });
    zin.addEventListener('click', function () { zoom(0.5, (canvas.clientWidth + LABEL_W) / 2); });
    zout.addEventListener('click', function () { zoom(2, (canvas.clientWidth + LABEL_W) / 2); });
    sel.addEventListener('change', function () { load(sel.value); show(null); });
    window.addEventListener('resize', resize);
    load(groups[0]);
    // For automation: page coordinates of the centre of the first visible event named `name`.
    window.rlprof = {
      eventCenter: function (name) {
        var rect = canvas.getBoundingClientRect();
        for (var r = 0; r < view.rows.length; r++) {
          var row = view.rows[r]; if (row.head) continue;
          var L = row.lane;
          for (var i = 0; i < L.s.length; i++) {
            if (row.prof.strings[L.n[i]] !== name) continue;
            var x0 = Math.max(LABEL_W, xOf(L.s[i])), x1 = Math.min(canvas.clientWidth, xOf(L.s[i] + L.d[i]));
            if (x1 - x0 >= 1) return { x: rect.left + (x0 + x1) / 2, y: rect.top + row.y + LANE_H / 2 };
          }
        }
        return null;
      }
    };
  }

  // ---- per-step breakdown ----
  function renderBreakdown() {
    var s = section('breakdown', 'Per-step breakdown');
    if (!R.breakdown.length) { s.appendChild(el('p', 'no step or role-call ranges found', 'muted')); return; }
    var mode = el('select');
    ['role calls', 'phases', 'device time'].forEach(function (m) { var o = el('option', m); o.value = m; mode.appendChild(o); });
    // Foreign traces have no role calls: split their steps by device time instead.
    if (!R.breakdown.some(function (r) { return Object.keys(r.roles).length; })) mode.value = 'device time';
    var ctl = el('div', null, 'controls'); ctl.appendChild(el('span', 'split by:')); ctl.appendChild(mode); s.appendChild(ctl);
    var box = el('div'); s.appendChild(box);
    function draw() {
      box.textContent = '';
      var key = mode.value === 'phases' ? 'phases' : mode.value === 'device time' ? 'device' : 'roles', names = [], max = 1;
      R.breakdown.forEach(function (r) {
        Object.keys(r[key]).forEach(function (k) { if (names.indexOf(k) < 0) names.push(k); });
        max = Math.max(max, r.step_ns || 0, Object.keys(r[key]).reduce(function (a, k) { return a + r[key][k]; }, 0));
      });
      var leg = el('div', null, 'legend');
      names.concat(['other']).forEach(function (n, i) { var sp = el('span'); var c = el('i'); c.style.background = n === 'other' ? '#ccc' : COLORS[i % COLORS.length]; sp.appendChild(c); sp.appendChild(document.createTextNode(n)); leg.appendChild(sp); });
      box.appendChild(leg);
      R.breakdown.forEach(function (r) {
        var row = el('div', null, 'brow' + (r.slowest ? ' slow' : ''));
        row.appendChild(el('span', (r.run ? r.run + ' ' : '') + 'step ' + r.step + ' rank ' + r.rank, 'lab'));
        var bar = el('div', null, 'bar'), tot = 0, W = 700;
        names.forEach(function (n, i) {
          var v = r[key][n] || 0; if (!v) return; tot += v;
          var seg = el('div'); seg.style.width = (v / max * W) + 'px'; seg.style.background = COLORS[i % COLORS.length];
          seg.title = n + ': ' + fmtNs(v); bar.appendChild(seg);
        });
        if (r.step_ns && r.step_ns > tot) { var o = el('div'); o.style.width = ((r.step_ns - tot) / max * W) + 'px'; o.style.background = '#ccc'; o.title = 'other: ' + fmtNs(r.step_ns - tot); bar.appendChild(o); }
        row.appendChild(bar);
        row.appendChild(el('span', fmtNs(r.step_ns !== null ? r.step_ns : tot) + (r.slowest ? '  slowest rank' : '')));
        box.appendChild(row);
      });
      box.appendChild(el('h3', 'GRPO/DAPO split'));
      box.appendChild(sortableTable([
        { name: 'run', key: function (r) { return r.run; }, left: true }, { name: 'step', key: function (r) { return r.step; } },
        { name: 'rank', key: function (r) { return r.rank; } },
        { name: 'step', key: function (r) { return r.step_ns; }, fmt: fmtNs },
        { name: 'rollout', key: function (r) { return r.rollout_ns; }, fmt: fmtNs },
        { name: 'log-prob', key: function (r) { return r.log_prob_ns; }, fmt: fmtNs },
        { name: 'update', key: function (r) { return r.update_ns; }, fmt: fmtNs },
        { name: 'other', key: function (r) { return r.other_ns; }, fmt: fmtNs },
        { name: 'slowest', key: function (r) { return r.slowest ? 'yes' : ''; } }], R.breakdown));
    }
    mode.addEventListener('change', draw); draw();
  }

  // ---- top ops ----
  function renderTop() {
    var s = section('ops', 'Top ops and kernels');
    var ctl = el('div', null, 'controls');
    function select(label, values) {
      var sel = el('select'), o = el('option', 'all'); o.value = ''; sel.appendChild(o);
      values.forEach(function (v) { var x = el('option', v); x.value = String(v); sel.appendChild(x); });
      ctl.appendChild(el('span', label)); ctl.appendChild(sel); return sel;
    }
    function uniq(f) { var u = []; R.ops.forEach(function (o) { var v = f(o); if (u.indexOf(v) < 0) u.push(v); }); return u.sort(); }
    var kind = select('kind', uniq(function (o) { return o.kind; })), rank = select('rank', uniq(function (o) { return o.rank; }));
    var role = select('role', uniq(function (o) { return o.role; }));
    var filt = el('input'); filt.placeholder = 'name contains…'; filt.id = 'op-filter'; ctl.appendChild(filt);
    s.appendChild(ctl);
    var table = sortableTable([
      { name: 'kind', key: function (r) { return r.kind; } }, { name: 'count', key: function (r) { return r.count; } },
      { name: 'total', key: function (r) { return r.total; }, fmt: fmtNs }, { name: 'self', key: function (r) { return r.self; }, fmt: fmtNs },
      { name: 'mean', key: function (r) { return r.total / r.count; }, fmt: fmtNs }, { name: 'max', key: function (r) { return r.max; }, fmt: fmtNs },
      { name: 'share', key: function (r) { return r.share; }, fmt: function (v) { return (v * 100).toFixed(1) + '%'; } },
      { name: 'name', key: function (r) { return r.name; }, left: true }], [], 300);
    table.id = 'op-table'; s.appendChild(table);
    function update() {
      var m = {}, sum = {}, f = filt.value.toLowerCase();
      R.ops.forEach(function (o) {
        if (kind.value && o.kind !== kind.value) return;
        if (rank.value && String(o.rank) !== rank.value) return;
        if (role.value && o.role !== role.value) return;
        sum[o.kind] = (sum[o.kind] || 0) + o.self_ns;
        if (f && o.name.toLowerCase().indexOf(f) < 0) return;
        var k = o.kind + '\u0000' + o.name, r = m[k];
        if (!r) r = m[k] = { kind: o.kind, name: o.name, count: 0, total: 0, self: 0, max: 0 };
        r.count += o.count; r.total += o.total_ns; r.self += o.self_ns; r.max = Math.max(r.max, o.max_ns);
      });
      var rows = Object.keys(m).map(function (k) { var r = m[k]; r.share = sum[r.kind] ? r.self / sum[r.kind] : 0; return r; });
      rows.sort(function (a, b) { return b.self - a.self; });
      table.redraw(rows);
    }
    [kind, rank, role].forEach(function (x) { x.addEventListener('change', update); });
    filt.addEventListener('input', update); update();
  }

  // ---- memory ----
  function renderMemory() {
    var s = section('memory', 'Memory');
    if (!R.memory.length) {
      var torch = R.inputs.some(function (i) { return i.format === 'torch_trace'; });
      s.appendChild(el('p', 'no memory events recorded (' + (torch ? 'record them with torch.profiler.profile(profile_memory=True)' : 'enable the memory content') + ')', 'muted'));
      return;
    }
    // Many profiles (a cluster): one sortable table of the peaks, each profile's curve and
    // live-at-peak table built when its entry is opened.
    var lazy = R.memory.length > 20;
    if (lazy) {
      s.appendChild(sortableTable([{ name: 'rank', key: function (r) { return r.rank; } },
        { name: 'collection', key: function (r) { return R.inputs[r.profile].group; }, left: true },
        { name: 'kind', key: function (r) { return r.kind; }, left: true },
        { name: 'peak', key: function (r) { return r.peak_bytes; }, fmt: fmtBytes },
        { name: 'at', key: function (r) { return r.peak_since_start_ns; }, fmt: fmtNs }],
        R.memory.slice().sort(function (a, b) { return b.peak_bytes - a.peak_bytes; }), 200));
    }
    R.memory.forEach(function (m) {
      var holder = s;
      if (lazy) {
        holder = el('details', null, 'lazy-memory');
        holder.appendChild(el('summary', 'rank ' + m.rank + ' · ' + R.inputs[m.profile].group + ' · ' + m.kind + ': peak ' + fmtBytes(m.peak_bytes)));
        holder.addEventListener('toggle', function () { if (holder.open && !holder.dataset.filled) { holder.dataset.filled = '1'; memoryDetail(holder, m); } });
        s.appendChild(holder);
      } else {
        memoryDetail(holder, m);
      }
    });
  }

  function memoryDetail(s, m) {
      var inp = R.inputs[m.profile];
      s.appendChild(el('h3', 'rank ' + m.rank + ' · ' + inp.group + ' · ' + m.kind + ' memory: peak ' + fmtBytes(m.peak_bytes) + ' at ' + fmtNs(m.peak_since_start_ns) + ' into the profile' +
        ' (' + (m.baseline === 'producer_total' ? 'total allocated as reported' : 'counted from the collection start') + ')'));
      var c = el('canvas'); c.width = 700; c.height = 140; c.className = 'mem-curve'; s.appendChild(c);
      var g = c.getContext('2d'), pts = m.curve;
      if (pts.length) {
        var t0 = pts[0][0], t1 = pts[pts.length - 1][0] || t0 + 1, vmax = Math.max(1, m.peak_bytes), vmin = Math.min(0, Math.min.apply(null, pts.map(function (p) { return p[1]; })));
        var X = function (t) { return 40 + (t - t0) / Math.max(1, t1 - t0) * 650; }, Y = function (v) { return 130 - (v - vmin) / (vmax - vmin) * 120; };
        g.strokeStyle = '#4e79a7'; g.beginPath();
        pts.forEach(function (p, i) { if (i) g.lineTo(X(p[0]), Y(p[1])); else g.moveTo(X(p[0]), Y(p[1])); });
        g.stroke(); g.fillStyle = '#e15759'; g.fillRect(X(m.peak_t_ns) - 2, Y(m.peak_bytes) - 2, 5, 5);
        g.fillStyle = '#555'; g.font = '10px sans-serif'; g.fillText(fmtBytes(m.peak_bytes), 2, 12);
      }
      s.appendChild(el('p', 'live at the peak, by op:'));
      s.appendChild(sortableTable([{ name: 'op', key: function (r) { return r.op; }, left: true },
        { name: 'bytes', key: function (r) { return r.bytes; }, fmt: fmtBytes }, { name: 'allocations', key: function (r) { return r.count; } }], m.at_peak));
  }

  function renderComm() {
    var s = section('comm', 'Communication');
    if (!R.comm.length) { s.appendChild(el('p', 'no collectives recorded', 'muted')); return; }
    s.appendChild(sortableTable([
      { name: 'rank', key: function (r) { return r.rank; } }, { name: 'collection', key: function (r) { return R.inputs[r.profile].group; }, left: true },
      { name: 'op', key: function (r) { return r.name; }, left: true }, { name: 'count', key: function (r) { return r.count; } },
      { name: 'bytes', key: function (r) { return r.bytes; }, fmt: fmtBytes }, { name: 'total', key: function (r) { return r.total_ns; }, fmt: fmtNs },
      { name: 'wait', key: function (r) { return r.wait_ns; }, fmt: fmtNs },
      { name: 'GB/s', key: function (r) { return r.bandwidth_gbps; }, fmt: function (v) { return v === null ? '-' : v.toFixed(3); } }], R.comm));
  }

  function renderCompare() {
    if (!R.compare) return;
    var c = R.compare, s = section('compare', 'Compare');
    s.appendChild(el('p', 'A = ' + c.a + '   B = ' + c.b));
    var cols = function (title) {
      return [{ name: title, key: function (r) { return r.name; }, left: true }, { name: 'A', key: function (r) { return r.a_ns; }, fmt: fmtNs },
        { name: 'B', key: function (r) { return r.b_ns; }, fmt: fmtNs }, { name: 'B − A', key: function (r) { return r.delta_ns; }, fmt: fmtNs },
        { name: 'B / A', key: function (r) { return r.ratio; }, fmt: function (v) { return v === null ? '-' : '×' + v.toFixed(2); } }];
    };
    s.appendChild(el('h3', 'breakdown (mean per step and rank)')); s.appendChild(sortableTable(cols('role call'), c.breakdown));
    s.appendChild(el('h3', 'top ops (total time)')); s.appendChild(sortableTable(cols('op'), c.top));
  }

  function renderTables() {
    var any = R.inputs.some(function (i) { return i.tables.length; });
    if (!any) return;
    var s = section('foreign', 'Producer tables');
    // Many inputs (a cluster): each input's tables are built when its entry is opened, so the
    // page does not lay out thousands of tables before it shows anything.
    var lazy = R.inputs.length > 20;
    R.inputs.forEach(function (i) {
      if (!i.tables.length) return;
      var fill = function (holder) {
        i.tables.forEach(function (t) {
          holder.appendChild(el('h3', 'rank ' + i.rank + ' · ' + t.title));
          var cols = t.columns.map(function (c, k) { return { name: c, key: function (r) { return r[k]; }, left: k === 0 }; });
          holder.appendChild(sortableTable(cols, t.rows, 200));
        });
      };
      if (!lazy) { fill(s); return; }
      var d = el('details', null, 'lazy-tables');
      d.appendChild(el('summary', 'rank ' + i.rank + ' · ' + i.group + ': ' + i.tables.length + ' table(s)'));
      d.addEventListener('toggle', function () { if (d.open && !d.dataset.filled) { d.dataset.filled = '1'; fill(d); } });
      s.appendChild(d);
    });
  }

  document.getElementById('loading').remove();
  renderOverview(); renderInputs(); renderTimeline(); renderBreakdown(); renderTop(); renderMemory(); renderComm(); renderCompare(); renderTables();
})();
