// htmlview_check.js: `convert --html-view` pages (and HTML reports, where
// the view is the default: the same view inside the report) in Debian's chromium, driven by playwright-core
// (tests/convert/nodedeps; it never downloads a browser of its own). For each page of the spec
// (JSON: [{"file", "peaks": {"device index": bytes}, "frames": [text a hover must show]}]) prints
// one JSON line of what it saw:
//   draws        the page drew its chart; painted: coloured pixels in the plot
//   peaks        per device: the bytes of the level-0 column that holds the device's peak
//   categories   per device: the bytes of the breakdown by category
//   hovers       texts of the tooltip along the peak column, bottom to top
//   zoom         the window after a mouse drag over the middle fifth, and after a wheel step
//   link         a click on the first breakdown row selects it (class "sel") and redraws
//   reserve      --whatif: the highest recorded and replayed reserve drawn (window.gmpReserve);
//                replayedPixels: pixels of the replayed line's colour
//   errors       console errors and exceptions
//   node htmlview_check.js NODE_MODULES CHROMIUM SPEC.json
'use strict';
const fs = require('fs');
const path = require('path');

const [modules, chromiumPath, specFile] = process.argv.slice(2);
const { chromium } = require(path.resolve(modules, 'playwright-core'));
const spec = JSON.parse(fs.readFileSync(specFile, 'utf8'));

(async () => {
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  for (const s of spec) {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    const errors = [];
    const requests = [];
    page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
    page.on('pageerror', (e) => errors.push('exception: ' + e.message));
    page.on('request', (r) => { if (!r.url().startsWith('file:')) requests.push(r.url()); });
    page.on('dialog', (d) => { errors.push('dialog: ' + d.message()); d.dismiss().catch(() => {}); });
    const res = { file: s.file };
    await page.goto('file://' + path.resolve(s.file));
    try {
      await page.waitForFunction(() => Number(document.body.dataset.draws) >= 1, null,
        { timeout: 20000 });
      res.draws = true;
    } catch (e) {
      res.draws = false;
    }
    if (res.draws) {
      res.devices = await page.evaluate(() => document.getElementById('device').options.length);
      // as the page opens: its device (the first OOM's), the findings it lists first, the OOMs
      // drawn on the timeline
      res.start = await page.evaluate(() => gmpView.device());
      res.oomsDrawn = await page.evaluate(() => gmpView.ooms());
      res.findings = await page.evaluate(() =>
        Array.from(document.querySelectorAll('#findings li')).map((l) => l.textContent));
      res.findingsFirst = await page.evaluate(() => {
        const f = document.getElementById('findings'), c = document.getElementById('chartwrap');
        return !!f && !!(f.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_FOLLOWING);
      });
      // --whatif: the reserve lines as first drawn (the highest value of each in the window) and
      // the replayed line's pixels (#8a2be2)
      res.reserve = await page.evaluate(() => window.gmpReserve || null);
      res.replayedPixels = await page.evaluate(() => {
        const c = document.getElementById('chart');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4)
          if (Math.abs(d[i] - 138) < 8 && Math.abs(d[i + 1] - 43) < 8 && Math.abs(d[i + 2] - 226) < 8) n++;
        return n;
      });
      res.painted = await page.evaluate(() => {
        const c = document.getElementById('chart');
        const d = c.getContext('2d').getImageData(70, 10, c.width - 90, c.height - 50).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i + 3] && (d[i] !== d[i + 1] || d[i + 1] !== d[i + 2])) n++;
        return n;
      });
      // the column of each device's peak (level 0): its bytes
      res.peaks = await page.evaluate(() => {
        const meta = JSON.parse(document.getElementById('gmp-meta').textContent);
        const out = {};
        for (const d of meta.devices) {
          const cols = d.levels[0];
          const c = Math.min(cols - 1, Math.floor(d.peak_at / d.span * cols));
          const tile = JSON.parse(document.getElementById('d' + d.index + '-l0-t' + Math.floor(c / 1024)).textContent);
          let k = c % 1024;
          while (k > 0 && tile[k] === 0) k--;
          const col = tile[k] || [];
          let sum = 0;
          for (let i = 0; i < col.length;) {
            sum += col[i + 1];
            i += col[i] >= 0 ? 2 : 3;
          }
          out[d.index] = sum;
        }
        return out;
      });
      // the breakdown by category: every byte at the peak in one category
      res.categories = await page.evaluate(() => {
        const meta = JSON.parse(document.getElementById('gmp-meta').textContent);
        const out = {};
        for (const d of meta.devices) {
          out[d.index] = {};
          for (const [k, b] of d.cats || []) out[d.index][k] = b;
        }
        return out;
      });
      if (res.devices > 0) {
        // hover along the peak column, bottom to top
        // in an HTML report (report --format html, convert --report) the chart is further down the page
        await page.locator('#chart').scrollIntoViewIfNeeded();
        const box = await page.locator('#chart').boundingBox();
        const g = await page.evaluate(() => {
          const meta = JSON.parse(document.getElementById('gmp-meta').textContent);
          const d = meta.devices[gmpView.device()];
          const w = gmpView.window();
          return { frac: (d.peak_at - w[0]) / (w[1] - w[0]) };
        });
        const plotL = 64, plotW = box.width - 64 - 12, plotT = 10, plotH = box.height - 10 - 36;
        const px = box.x + plotL + Math.min(plotW - 1, Math.max(1, g.frac * plotW + 1));
        res.hovers = [];
        for (let y = plotT + plotH - 2; y > plotT; y -= 10) {
          await page.mouse.move(px, box.y + y);
          const t = await page.evaluate(() => gmpView.hover());
          if (t && !res.hovers.includes(t)) res.hovers.push(t);
        }
        res.tipShown = await page.evaluate(() => document.getElementById('tip').style.display !== 'none' || gmpView.hover() === '');
        // zoom: drag over the middle fifth
        const w0 = await page.evaluate(() => gmpView.window());
        await page.mouse.move(box.x + plotL + plotW * 0.4, box.y + plotT + 20);
        await page.mouse.down();
        await page.mouse.move(box.x + plotL + plotW * 0.5, box.y + plotT + 20, { steps: 4 });
        await page.mouse.move(box.x + plotL + plotW * 0.6, box.y + plotT + 20, { steps: 4 });
        await page.mouse.up();
        const w1 = await page.evaluate(() => gmpView.window());
        await page.mouse.move(box.x + plotL + plotW * 0.5, box.y + plotT + 40);
        await page.mouse.wheel(0, -200);
        await page.waitForTimeout(50);
        const w2 = await page.evaluate(() => gmpView.window());
        res.zoom = { before: w0, drag: w1, wheel: w2, level: await page.evaluate(() => gmpView.level()) };
        // link: the first breakdown row
        const before = await page.evaluate(() => Number(document.body.dataset.draws));
        const row = page.locator('#by-stack tr.row').first();
        if (await row.count()) {
          await row.click();
          res.link = {
            selected: await page.evaluate(() => !!document.querySelector('#by-stack tr.row.sel')),
            redrawn: (await page.evaluate(() => Number(document.body.dataset.draws))) > before,
            detail: await page.evaluate(() => document.getElementById('detail').textContent),
            window: await page.evaluate(() => gmpView.window()),
          };
        }
      }
    }
    // a report: the view sits in its <div id="gmp-view">, after the report's own heading, and the
    // static SVG timelines are still there
    res.inReport = await page.evaluate(() => {
      const v = document.getElementById('gmp-view');
      return v ? { header: !!v.querySelector('header #chart, #chartwrap #chart'),
        svgs: document.querySelectorAll('svg').length,
        h1: (document.querySelector('body > h1') || {}).textContent || '' } : null;
    });
    res.errors = errors;
    res.requests = requests;
    process.stdout.write(JSON.stringify(res) + '\n');
    await page.close();
  }
  await browser.close();
})().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + '\n');
  process.exit(1);
});
