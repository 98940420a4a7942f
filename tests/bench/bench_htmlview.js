// bench_htmlview.js: opens pages in Debian's chromium (playwright-core from tests/convert/nodedeps)
// and prints one JSON line per page: load (ms to the load event), first_render (ms from the
// navigation's start to the page's first chart drawn: window.gmpFirstRender), js_heap (bytes of the
// JS heap used then, from the DevTools protocol's Performance.getMetrics), zoom_render (ms to draw
// after zooming into 1/1000 of the run around the peak, the finest level) and errors.
// memory_viz (an http URL of tests/bench/bench_memviz.py's server) is measured to its test page's
// "memviz done" title (its Active Memory Timeline drawn), without the zoom.
//   node bench_htmlview.js NODE_MODULES CHROMIUM PAGE...
'use strict';
const path = require('path');
const [modules, chromiumPath, ...pages] = process.argv.slice(2);
const { chromium } = require(path.resolve(modules, 'playwright-core'));
(async () => {
  const browser = await chromium.launch({ executablePath: chromiumPath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  for (const file of pages) {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');
    const t0 = Date.now();
    const url = /^https?:/.test(file) ? file : 'file://' + path.resolve(file);
    let load = null;
    try {
      await page.goto(url, { timeout: 600000 });
      load = Date.now() - t0;
    } catch (e) { errors.push('no load: ' + e.message); }
    let first = null;
    try {
      // our page sets gmpFirstRender; memory_viz's test page (tests/convert/memviz) sets its title
      // when its Active Memory Timeline is drawn
      await page.waitForFunction(() => window.gmpFirstRender !== undefined ||
        document.title === 'memviz done', null, { timeout: 600000 });
      first = await page.evaluate(() => window.gmpFirstRender !== undefined
        ? window.gmpFirstRender : performance.now());
    } catch (e) { errors.push('no first render: ' + e.message); }
    const m = await cdp.send('Performance.getMetrics');
    const heap = (m.metrics.find((x) => x.name === 'JSHeapUsedSize') || {}).value;
    let zoom = null;
    if (first !== null && !/^https?:/.test(file)) {
      zoom = await page.evaluate(() => {
        const meta = JSON.parse(document.getElementById('gmp-meta').textContent);
        const d = meta.devices[0];
        if (!d) return null;
        const h = Math.max(1, d.span / 2000), t = performance.now();
        gmpView.zoom(d.peak_at - h, d.peak_at + h);
        return [performance.now() - t, gmpView.level()];
      });
    }
    const m2 = await cdp.send('Performance.getMetrics');
    const heap2 = (m2.metrics.find((x) => x.name === 'JSHeapUsedSize') || {}).value;
    process.stdout.write(JSON.stringify({ file, load, first_render: first, js_heap: heap,
      zoom_render: zoom && zoom[0], zoom_level: zoom && zoom[1], js_heap_after_zoom: heap2,
      errors }) + '\n');
    await page.close();
  }
  await browser.close();
})().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(1); });
