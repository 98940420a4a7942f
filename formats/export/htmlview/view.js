// The HTML view's script (embedded in every page by embed.cmake; no network, no library).
// Data: #gmp-meta (devices, sites) and one <script type="application/json" id="dD-lL-tT"> per tile
// of 1024 columns of level L of device D, parsed when first shown. A column is the live set at
// the moment of the column's highest allocated memory: numbers "ref,bytes" for an allocation
// (ref: index in the device's bands [t0, t1 or -1, size, site]), "-(site+2),bytes,count" for the
// small allocations of one site, "-1,bytes,count" for the small ones of all other sites; 0 for a
// column equal to the one before. See formats/export/gmp_out_htmlview.c.
(function () {
  'use strict';
  const meta = JSON.parse(document.getElementById('gmp-meta').textContent);
  // the page's body, or the report's <div id="gmp-view"> when the view is part of an HTML report
  const root = document.getElementById('gmp-view') || document.body;
  const devs = meta.devices;
  const sites = meta.sites;
  const TILE = 1024;
  const M = { l: 64, r: 12, t: 10, b: 36 };
  const cache = new Map();
  let di = 0;
  let win = null;
  let level = 0;
  let sel = null; // {site} or {range}
  let drag = null;
  let hoverText = '';
  let draws = 0;
  let oomsDrawn = 0;

  const el = (tag, attrs, text) => {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  // sizes and times written as the report writes them (formats/base/gmp_units.c, gmp_doc_fmt):
  // "629.25 MiB", "512 B"; a moment "+0.007515 s" from the start of the trace
  const fmtB = (b) => {
    const u = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
    if (b < 1024) return String(b) + ' B';
    let i = -1;
    while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
    return b.toFixed(2) + ' ' + u[i];
  };
  const fmtT = (ns) => {
    const a = Math.abs(Math.round(ns));
    return (ns < 0 ? '-' : '+') + Math.floor(a / 1e9) + '.' +
      String(Math.floor(a % 1e9 / 1e3)).padStart(6, '0') + ' s';
  };
  const hue = (s) => ((s * 2654435761) >>> 0) % 360;
  const color = (s, dim) => s < 0 ? (dim ? 'rgba(160,160,160,.25)' : '#a0a0a0')
    : `hsla(${hue(s)},62%,${52 + (s % 3) * 8}%,${dim ? 0.18 : 1})`;

  // ---- the page ----
  const header = el('header');
  header.appendChild(el('h1', {}, meta.title));
  const devSel = el('select', { id: 'device' });
  devs.forEach((d, i) => devSel.appendChild(el('option', { value: i }, d.name)));
  header.appendChild(devSel);
  const bAll = el('button', { id: 'whole' }, 'Whole run');
  const bPeak = el('button', { id: 'peak' }, 'Zoom to the peak');
  const bOut = el('button', { id: 'zoomout' }, 'Zoom out');
  const bClear = el('button', { id: 'clear' }, 'Clear selection');
  [bAll, bPeak, bOut, bClear].forEach((b) => header.appendChild(b));
  const winLabel = el('span', { id: 'win' });
  header.appendChild(winLabel);
  root.appendChild(header);
  // the findings first (a whole page: what the report says first; each opens its device and, for
  // an OOM, zooms to it)
  const finds = meta.findings || [];
  if (finds.length) {
    const box = el('div', { id: 'findings' });
    box.appendChild(el('h2', {}, 'Findings'));
    const ul = el('ul');
    finds.forEach((f) => {
      const li = el('li', { class: f.severity }, f.text);
      if (f.device >= 0) {
        li.classList.add('go');
        li.onclick = () => {
          showDevice(f.device);
          if (f.t !== null) {
            const h = Math.max(devs[di].span / 200, 1);
            zoom(f.t - h, f.t + h);
          }
        };
      }
      ul.appendChild(li);
    });
    box.appendChild(ul);
    root.appendChild(box);
  }
  root.appendChild(el('div', { id: 'help' },
    'Active memory timeline: each band is an allocation live at that time, stacked in allocation ' +
    'order; allocations under a pixel are merged per stack (grey: other stacks). Hover for ' +
    'details, drag to zoom into a time window, wheel to zoom, click to select a stack.'));
  const wrap = el('div', { id: 'chartwrap' });
  const canvas = el('canvas', { id: 'chart' });
  const tip = el('div', { id: 'tip' });
  wrap.appendChild(canvas);
  wrap.appendChild(tip);
  root.appendChild(wrap);
  const detail = el('div', { id: 'detail' });
  root.appendChild(detail);
  const sec = el('section', { id: 'breakdown' });
  root.appendChild(sec);
  const ctx = canvas.getContext('2d');

  // ---- data ----
  function tile(d, l, t) {
    const key = 'd' + d.index + '-l' + l + '-t' + t;
    if (cache.has(key)) return cache.get(key);
    const e = document.getElementById(key);
    let cols = null;
    if (e) {
      cols = JSON.parse(e.textContent);
      for (let i = 1; i < cols.length; i++) if (cols[i] === 0) cols[i] = cols[i - 1];
    }
    cache.set(key, cols);
    return cols;
  }
  function column(d, l, c) {
    const t = tile(d, l, Math.floor(c / TILE));
    return t ? t[c % TILE] || [] : [];
  }
  // segments of a column: [{kind: 'band'|'site'|'other', ref, bytes, count, site}]
  function* segments(col) {
    for (let i = 0; i < col.length;) {
      const ref = col[i];
      if (ref >= 0) {
        yield { kind: 'band', ref, bytes: col[i + 1], site: devs[di].bands[ref][3] };
        i += 2;
      } else if (ref === -1) {
        yield { kind: 'other', bytes: col[i + 1], count: col[i + 2], site: -1 };
        i += 3;
      } else {
        yield { kind: 'site', bytes: col[i + 1], count: col[i + 2], site: -ref - 2 };
        i += 3;
      }
    }
  }
  function selected(site) {
    if (!sel) return true;
    if (site < 0) return false;
    if (sel.site !== undefined) return site === sel.site;
    if (sel.cat !== undefined) return sites[site] && sites[site].c === sel.cat;
    return sites[site] && sites[site].r === sel.range;
  }

  // ---- drawing ----
  function size() {
    const r = canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(200, Math.floor(r.width)), h = Math.floor(r.height) || 460;
    if (canvas.width !== w * dpr || canvas.height !== h * dpr) {
      canvas.width = w * dpr;
      canvas.height = h * dpr;
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return { w, h, pw: w - M.l - M.r, ph: h - M.t - M.b };
  }
  // the y axis: the device's peak allocated, or higher when a reserve is drawn (--whatif)
  function yTop(d) {
    const w = d.whatif || {};
    return Math.max(d.peak || 1, w.replayed ? w.replayed.peak : 0, w.recorded ? w.recorded.peak : 0);
  }
  // a reserve over time ({pts: [[t, bytes]...], end}) as a step line; returns its highest value
  // in the window
  function reserveLine(s, X, Y, colour, dash) {
    let most = 0;
    ctx.strokeStyle = colour;
    ctx.lineWidth = 2;
    ctx.setLineDash(dash);
    ctx.beginPath();
    for (let k = 0; k < s.pts.length; k++) {
      const t = s.pts[k][0], t1 = k + 1 < s.pts.length ? s.pts[k + 1][0] : s.end;
      if (t1 >= win[0] && t <= win[1]) most = Math.max(most, s.pts[k][1]);
      const y = Y(s.pts[k][1]);
      if (k === 0) ctx.moveTo(X(t), y); else ctx.lineTo(X(t), y);
      ctx.lineTo(X(t1), y);
    }
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.lineWidth = 1;
    return most;
  }
  function pickLevel(d, pw) {
    const frac = (win[1] - win[0]) / d.span;
    for (let l = 0; l < d.levels.length; l++) if (d.levels[l] * frac >= pw) return l;
    return d.levels.length - 1;
  }
  function draw() {
    const d = devs[di];
    const g = size();
    ctx.clearRect(0, 0, g.w, g.h);
    if (!d) {
      ctx.fillStyle = '#333';
      ctx.font = '14px system-ui, sans-serif';
      ctx.fillText('No device memory was allocated in this recording.', 20, 30);
      winLabel.textContent = '';
      draws++;
      document.body.dataset.draws = String(draws);
      if (draws === 1) window.gmpFirstRender = performance.now();
      return;
    }
    level = pickLevel(d, g.pw);
    const cols = d.levels[level];
    const span = d.span, top = yTop(d);
    const X = (t) => M.l + (t - win[0]) / (win[1] - win[0]) * g.pw;
    const c0 = Math.max(0, Math.floor(win[0] / span * cols));
    const c1 = Math.min(cols - 1, Math.floor(win[1] / span * cols));
    ctx.save();
    ctx.beginPath();
    ctx.rect(M.l, M.t, g.pw, g.ph);
    ctx.clip();
    for (let c = c0; c <= c1; c++) {
      const x0 = X(c * span / cols), x1 = X((c + 1) * span / cols);
      const w = Math.max(1, x1 - x0 + 0.5);
      let y = M.t + g.ph;
      for (const s of segments(column(d, level, c))) {
        const h = s.bytes / top * g.ph;
        ctx.fillStyle = color(s.site, !selected(s.site));
        ctx.fillRect(x0, y - h, w, Math.max(h, 0.5));
        y -= h;
      }
    }
    // the peak
    const xp = X(d.peak_at);
    ctx.strokeStyle = '#d00';
    ctx.setLineDash([4, 3]);
    ctx.beginPath();
    ctx.moveTo(xp, M.t);
    ctx.lineTo(xp, M.t + g.ph);
    ctx.stroke();
    ctx.setLineDash([]);
    // the OOMs: a solid red line each, labelled
    oomsDrawn = 0;
    ctx.strokeStyle = '#c00';
    ctx.fillStyle = '#c00';
    ctx.lineWidth = 2;
    ctx.font = 'bold 11px system-ui, sans-serif';
    for (const [t, req] of d.ooms || []) {
      if (t < win[0] || t > win[1]) continue;
      const xo = X(t);
      ctx.beginPath();
      ctx.moveTo(xo, M.t);
      ctx.lineTo(xo, M.t + g.ph);
      ctx.stroke();
      ctx.fillText('OOM ' + fmtB(req), Math.max(M.l + 2, Math.min(xo + 3, M.l + g.pw - 110)),
        M.t + 12);
      oomsDrawn++;
    }
    ctx.lineWidth = 1;
    // --whatif: the recorded reserve and the one the setting's model replays, with a legend
    const w = d.whatif;
    window.gmpReserve = null;
    if (w) {
      const Y = (b) => M.t + g.ph - b / top * g.ph;
      const shown = { name: w.name, recorded: null, replayed: null };
      // the recorded one drawn last (dashed): both show where they coincide
      if (w.replayed) shown.replayed = reserveLine(w.replayed, X, Y, '#8a2be2', []);
      if (w.recorded) shown.recorded = reserveLine(w.recorded, X, Y, '#222', [5, 5]);
      ctx.font = '11px system-ui, sans-serif';
      ctx.fillStyle = '#222';
      ctx.fillText('- - reserved (recorded)', M.l + 8, M.t + 28);
      ctx.fillStyle = '#8a2be2';
      ctx.fillText(w.replayed ? '—— reserved under ' + w.name + ' (replayed)'
        : w.name + ': no tensor of PyTorch\'s allocator to replay', M.l + 8, M.t + 42);
      window.gmpReserve = shown;
    }
    if (drag && Math.abs(drag.x1 - drag.x0) > 2) {
      ctx.fillStyle = 'rgba(60,110,255,.18)';
      ctx.fillRect(Math.min(drag.x0, drag.x1), M.t, Math.abs(drag.x1 - drag.x0), g.ph);
    }
    ctx.restore();
    // axes
    ctx.fillStyle = '#333';
    ctx.strokeStyle = '#999';
    ctx.font = '11px system-ui, sans-serif';
    ctx.beginPath();
    ctx.moveTo(M.l, M.t);
    ctx.lineTo(M.l, M.t + g.ph);
    ctx.lineTo(M.l + g.pw, M.t + g.ph);
    ctx.stroke();
    for (let i = 0; i <= 4; i++) {
      const b = top * i / 4, y = M.t + g.ph - g.ph * i / 4;
      ctx.fillText(fmtB(Math.round(b)), 2, y + 4);
      const t = win[0] + (win[1] - win[0]) * i / 4;
      const x = M.l + g.pw * i / 4;
      ctx.fillText(fmtT(Math.round(t + d.t0)), Math.min(x, M.l + g.pw - 70), M.t + g.ph + 16);
    }
    winLabel.textContent = 'window ' + fmtT(Math.round(win[0] + d.t0)) + ' – ' +
      fmtT(Math.round(win[1] + d.t0)) + ' · level ' + level + ' (' + cols + ' columns)';
    draws++;
    document.body.dataset.draws = String(draws);
    if (draws === 1) window.gmpFirstRender = performance.now();
  }

  // ---- details ----
  function siteText(s) {
    const x = sites[s];
    if (!x) return '';
    const lines = ['kind: ' + x.k + (x.a ? '   API: ' + x.a : '') +
      (x.c ? '   category: ' + x.c : ''), 'range: ' + (x.r || '(none)')];
    lines.push('stack:' + (x.s.length ? '' : ' (none recorded)'));
    for (const f of x.s) lines.push('  ' + f);
    return lines.join('\n');
  }
  function segText(s) {
    const d = devs[di];
    if (s.kind === 'band') {
      const b = d.bands[s.ref];
      return 'allocation of ' + fmtB(b[2]) + ' (' + b[2] + ' bytes)\nallocated at ' +
        fmtT(b[0] + d.t0) + ', ' + (b[1] < 0 ? 'never freed' : 'freed at ' + fmtT(b[1] + d.t0)) +
        '\n' + siteText(b[3]);
    }
    if (s.kind === 'site')
      return s.count + ' allocation' + (s.count === 1 ? '' : 's') + ' under a pixel each, ' +
        fmtB(s.bytes) + ' together, from one stack\n' + siteText(s.site);
    return s.count + ' small allocations of other stacks, ' + fmtB(s.bytes) + ' together';
  }
  function hit(px, py) {
    const d = devs[di];
    if (!d) return null;
    const g = size();
    if (px < M.l || px > M.l + g.pw || py < M.t || py > M.t + g.ph) return null;
    const t = win[0] + (px - M.l) / g.pw * (win[1] - win[0]);
    const cols = d.levels[level];
    const c = Math.min(cols - 1, Math.max(0, Math.floor(t / d.span * cols)));
    let y = M.t + g.ph;
    for (const s of segments(column(d, level, c))) {
      const h = s.bytes / yTop(d) * g.ph;
      if (py <= y && py >= y - Math.max(h, 1)) return s;
      y -= h;
    }
    return null;
  }
  function pos(e) {
    const r = canvas.getBoundingClientRect();
    return [e.clientX - r.left, e.clientY - r.top];
  }
  function timeAt(px) {
    const g = size();
    return win[0] + Math.min(1, Math.max(0, (px - M.l) / g.pw)) * (win[1] - win[0]);
  }
  function zoom(a, b) {
    const d = devs[di];
    a = Math.max(0, Math.min(a, d.span));
    b = Math.max(0, Math.min(b, d.span));
    if (b - a < 1) b = a + 1;
    win = [a, b];
    draw();
  }
  canvas.addEventListener('mousemove', (e) => {
    const [x, y] = pos(e);
    if (drag) {
      drag.x1 = x;
      draw();
      return;
    }
    const s = hit(x, y);
    if (!s) {
      tip.style.display = 'none';
      hoverText = '';
      return;
    }
    hoverText = segText(s);
    tip.textContent = hoverText;
    tip.style.display = 'block';
    tip.style.left = Math.min(x + 14, canvas.clientWidth - 300) + 'px';
    tip.style.top = (y + 14) + 'px';
  });
  canvas.addEventListener('mouseleave', () => { tip.style.display = 'none'; hoverText = ''; });
  canvas.addEventListener('mousedown', (e) => {
    const [x] = pos(e);
    drag = { x0: x, x1: x };
  });
  window.addEventListener('mouseup', (e) => {
    if (!drag) return;
    const [x, y] = pos(e);
    const d0 = drag;
    drag = null;
    if (Math.abs(x - d0.x0) > 3) {
      const a = timeAt(Math.min(x, d0.x0)), b = timeAt(Math.max(x, d0.x0));
      zoom(a, b);
      return;
    }
    const s = hit(x, y);
    if (s && s.site >= 0) select({ site: s.site }, true);
    if (s) detail.textContent = segText(s);
    draw();
  });
  canvas.addEventListener('wheel', (e) => {
    e.preventDefault();
    const [x] = pos(e);
    const t = timeAt(x), f = e.deltaY > 0 ? 1.25 : 0.8;
    zoom(t - (t - win[0]) * f, t + (win[1] - t) * f);
  }, { passive: false });
  canvas.addEventListener('dblclick', () => {
    const c = (win[0] + win[1]) / 2, h = win[1] - win[0];
    zoom(c - h, c + h);
  });
  bAll.onclick = () => zoom(0, devs[di].span);
  bOut.onclick = () => {
    const c = (win[0] + win[1]) / 2, h = win[1] - win[0];
    zoom(c - h, c + h);
  };
  bPeak.onclick = () => {
    const d = devs[di];
    const h = Math.max(d.span / 200, 1);
    zoom(d.peak_at - h, d.peak_at + h);
  };
  bClear.onclick = () => { select(null); draw(); };

  // ---- the breakdown of the peak, linked with the timeline ----
  function select(s, fromChart) {
    sel = s;
    for (const r of sec.querySelectorAll('tr.row')) {
      const on = s && ((s.site !== undefined && r.dataset.site === String(s.site)) ||
        (s.range !== undefined && r.dataset.range === s.range) ||
        (s.cat !== undefined && r.dataset.cat === s.cat));
      r.classList.toggle('sel', !!on);
      if (on && fromChart) r.scrollIntoView({ block: 'nearest' });
    }
    if (s && s.site !== undefined) detail.textContent = siteText(s.site);
    else if (s && s.cat !== undefined) detail.textContent = 'category ' + s.cat;
    else if (s) detail.textContent = 'range ' + (s.range || '(none)');
  }
  function breakdown() {
    const d = devs[di];
    sec.textContent = '';
    if (!d) return;
    sec.appendChild(el('h2', {}, 'At the peak: ' + fmtB(d.peak) + ' allocated at ' +
      fmtT(d.peak_at + d.t0) + ' — by category'));
    const t0 = el('table', { id: 'by-category' });
    t0.appendChild(el('tr')).append(el('th', {}, 'category'), el('th', { class: 'n' }, 'bytes'),
      el('th', { class: 'n' }, 'share'), el('th', { class: 'n' }, 'allocations'));
    for (const [k, b, c] of d.cats || []) {
      const tr = el('tr', { class: 'row', 'data-cat': k });
      tr.append(el('td', {}, k), el('td', { class: 'n' }, fmtB(b)),
        el('td', { class: 'n' }, (100 * b / (d.peak || 1)).toFixed(1) + '%'),
        el('td', { class: 'n' }, String(c)));
      tr.onclick = () => { select({ cat: k }); bPeak.onclick(); };
      t0.appendChild(tr);
    }
    sec.appendChild(t0);
    sec.appendChild(el('h2', {}, 'By range'));
    const byRange = new Map();
    for (const [r, b, c] of d.ranges) {
      const x = byRange.get(r) || [0, 0];
      x[0] += b;
      x[1] += c;
      byRange.set(r, x);
    }
    const t1 = el('table', { id: 'by-range' });
    t1.appendChild(el('tr')).append(el('th', {}, 'range'), el('th', { class: 'n' }, 'bytes'),
      el('th', { class: 'n' }, 'share'), el('th', { class: 'n' }, 'allocations'));
    [...byRange.entries()].sort((a, b) => b[1][0] - a[1][0]).forEach(([r, [b, c]]) => {
      const tr = el('tr', { class: 'row', 'data-range': r });
      tr.append(el('td', {}, r || '(no range)'), el('td', { class: 'n' }, fmtB(b)),
        el('td', { class: 'n' }, (100 * b / (d.peak || 1)).toFixed(1) + '%'),
        el('td', { class: 'n' }, String(c)));
      tr.onclick = () => { select({ range: r }); bPeak.onclick(); };
      t1.appendChild(tr);
    });
    sec.appendChild(t1);
    sec.appendChild(el('h2', {}, 'By stack'));
    const t2 = el('table', { id: 'by-stack' });
    t2.appendChild(el('tr')).append(el('th', {}, 'stack (innermost first)'),
      el('th', { class: 'n' }, 'bytes'), el('th', { class: 'n' }, 'share'),
      el('th', { class: 'n' }, 'allocations'), el('th', {}, 'kind'), el('th', {}, 'range'));
    for (const [s, b, c] of d.sites) {
      const x = sites[s] || { s: [], k: '', r: '' };
      const tr = el('tr', { class: 'row', 'data-site': s, id: 'site-' + s });
      const td = el('td', { class: 'stack' });
      const sw = el('span', { class: 'sw' });
      sw.style.background = color(s, false);
      td.append(sw, document.createTextNode(x.s.length ? x.s.slice(0, 3).join(' ← ') +
        (x.s.length > 3 ? ' ← …' : '') : '(no stack)'));
      tr.append(td, el('td', { class: 'n' }, fmtB(b)),
        el('td', { class: 'n' }, (100 * b / (d.peak || 1)).toFixed(1) + '%'),
        el('td', { class: 'n' }, String(c)), el('td', {}, x.k), el('td', {}, x.r || ''));
      tr.onclick = () => { select({ site: s }); bPeak.onclick(); };
      t2.appendChild(tr);
    }
    if (d.rest[2]) {
      t2.appendChild(el('tr')).append(el('td', {}, d.rest[2] + ' more stacks'),
        el('td', { class: 'n' }, fmtB(d.rest[0])), el('td'), el('td', { class: 'n' },
          String(d.rest[1])));
    }
    sec.appendChild(t2);
  }
  function showDevice(i) {
    di = i;
    devSel.value = String(i);
    sel = null;
    win = devs[di] ? [0, devs[di].span] : [0, 1];
    breakdown();
    draw();
  }
  devSel.onchange = () => showDevice(Number(devSel.value));
  window.addEventListener('resize', draw);

  // for tests and benchmarks
  window.gmpView = {
    window: () => win.slice(),
    level: () => level,
    device: () => di,
    hover: () => hoverText,
    zoom,
    showDevice,
    columns: () => devs[di] ? devs[di].levels[level] : 0,
    ooms: () => oomsDrawn,
  };
  // the page opens on the device of the first OOM (meta.start; 0 without one)
  showDevice(meta.start >= 0 && meta.start < devs.length ? meta.start : 0);
})();
